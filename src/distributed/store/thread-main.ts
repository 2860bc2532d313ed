// The store's thread (src/distributed/store/thread.ts): serves the store with the options it was given,
// says where, and closes it when told.
import { parentPort, workerData } from "node:worker_threads";
import { SymmkitError } from "../../errors.js";
import { StoreServer, type StoreServerOptions } from "./server.js";
import type { ThreadMessage } from "./thread.js";

const port = parentPort!;
const say = (m: ThreadMessage): void => port.postMessage(m);
try {
  const server = await StoreServer.start(workerData as StoreServerOptions);
  port.on("message", (m: unknown) => {
    if (m !== "close") return;
    void server.close().then(() => {
      say({ kind: "closed" });
      port.close();
    });
  });
  say({ kind: "started", port: server.port, host: server.host });
} catch (e) {
  const err = e as NodeJS.ErrnoException;
  say({
    kind: "failed",
    message: err.message,
    ...(e instanceof SymmkitError ? { symmkitCode: e.code } : {}),
    ...(typeof err.code === "string" && !(e instanceof SymmkitError) ? { errno: err.code } : {}),
  });
}

// A rendezvous store in a process of its own, for ranks not started by symmkit run: rank 0 starts it
// (it must not serve the store from its own event loop, which blocking CUDA and NCCL calls stall). It
// prints "ready <port>" and exits when its parent closes its stdin.
import { readEnvVar } from "../../settings.js";
import { StoreServer } from "./server.js";

const server = await StoreServer.start({
  token: readEnvVar("SYMMKIT_JOB_TOKEN") ?? "",
  port: Number(process.env.MASTER_PORT ?? 0),
  host: readEnvVar("SYMMKIT_STORE_HOST"),
});
process.stdout.write(`ready ${server.port}\n`);
process.stdin.on("end", () => void server.close().then(() => process.exit(0)));
process.stdin.resume();

// The launcher's store, served from a thread of its own. Every connection costs the server JavaScript
// objects and a read buffer; a flood of strangers' connections grows a heap's young generation to its
// default ceiling (tens of MiB), which V8 gives back only once the process has idled a while, and leaves
// the allocator's pages scattered among the launcher's own, where they stay (measured in the launcher's
// thread: 50 MiB more at the height of a flood, 30 MiB for good). In a thread whose young generation is kept
// small, with an allocator arena of its own, a flood costs under 20 MiB and it comes back. The store's work
// also never waits behind the launcher's (rank output, teardown), nor the launcher's behind the store's.
import { Worker } from "node:worker_threads";
import { InvalidArgumentError, SymmkitError, type ErrorCode } from "../../errors.js";
import type { StoreServerOptions } from "./server.js";

/** The young generation of the store's thread: enough for its requests, too little to hoard garbage. */
const YOUNG_GENERATION_MB = 1;

/** What the thread answers to "start" or "close". */
export type ThreadMessage =
  | { readonly kind: "started"; readonly port: number; readonly host: string }
  | { readonly kind: "closed" }
  | {
      readonly kind: "failed";
      readonly message: string;
      /** A SymmkitError's code, else undefined. */
      readonly symmkitCode?: ErrorCode;
      /** A system error's code (EADDRINUSE...), else undefined. */
      readonly errno?: string;
    };

export interface StoreThread {
  readonly port: number;
  readonly host: string;
  /** Stops listening, drops every connection and ends the thread. */
  close(): Promise<void>;
}

/** An error the thread reported, as the caller would have seen it from StoreServer.start. */
function rebuilt(m: Extract<ThreadMessage, { kind: "failed" }>): Error {
  if (m.symmkitCode === "SYMMKIT_INVALID_ARGUMENT") return new InvalidArgumentError(m.message);
  if (m.symmkitCode) return new SymmkitError(m.symmkitCode, m.message);
  return Object.assign(new Error(m.message), { code: m.errno });
}

/**
 * Starts a StoreServer in a thread of its own. `onLost` is told if the thread ends before close() (it
 * cannot serve the job any more).
 */
export async function startStoreThread(
  options: StoreServerOptions,
  onLost: (why: string) => void,
): Promise<StoreThread> {
  const worker = new Worker(new URL("./thread-main.js", import.meta.url), {
    workerData: options,
    resourceLimits: { maxYoungGenerationSizeMb: YOUNG_GENERATION_MB },
  });
  // The launcher's own handles (the ranks, their pipes) keep the process alive while the job runs.
  worker.unref();
  let closing = false;
  const next = (): Promise<ThreadMessage> =>
    new Promise((resolve, reject) => {
      const onExit = (code: number): void => reject(new Error(`the store's thread exited with code ${code}`));
      worker.once("error", reject);
      worker.once("exit", onExit);
      worker.once("message", (m: ThreadMessage) => {
        worker.off("error", reject);
        worker.off("exit", onExit);
        resolve(m);
      });
    });
  const first = await next();
  if (first.kind === "failed") {
    await worker.terminate();
    throw rebuilt(first);
  }
  if (first.kind !== "started") throw new Error(`the store's thread said ${first.kind}`);
  worker.on("error", (e) => {
    if (!closing) onLost(e.message);
  });
  const exited = new Promise<void>((done) =>
    worker.on("exit", (code) => {
      if (!closing) onLost(`its thread exited with code ${code}`);
      done();
    }),
  );
  return {
    port: first.port,
    host: first.host,
    close: async () => {
      if (closing) return exited;
      closing = true;
      worker.postMessage("close");
      // Closed (its connections dropped), or gone already: either way, then ended.
      await Promise.race([next().catch(() => undefined), exited]);
      await worker.terminate();
      await exited;
    },
  };
}

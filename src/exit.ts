// Exiting without losing output. A process whose stdout or stderr is a pipe or socket (the launcher piped
// into another program or under a test, a rank that `symmkit run` started as a command) is written
// asynchronously by Node, and process.exit() drops whatever is still queued: its last lines would be lost.
// (A script `symmkit run` starts with Node has them written blocking: src/distributed/rank-stdio.ts.)
// This waits until both streams have handed everything to the OS (bounded, in case no one reads them),
// then exits.

/** Milliseconds exitFlushed waits for the streams before exiting anyway. */
export const EXIT_FLUSH_MS = 5000;

function flushed(stream: NodeJS.WriteStream): Promise<void> {
  return new Promise((done) => {
    // The callback of an empty write runs once every earlier write was handed to the OS (or failed).
    if (!stream.write("", () => done())) stream.once("drain", () => done());
  });
}

/** Exits with `code` once stdout and stderr are flushed, or after EXIT_FLUSH_MS. */
export async function exitFlushed(code: number): Promise<never> {
  await Promise.race([
    Promise.all([flushed(process.stdout), flushed(process.stderr)]),
    new Promise((done) => setTimeout(done, EXIT_FLUSH_MS).unref()),
  ]);
  process.exit(code);
}

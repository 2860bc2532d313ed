// Loaded first into every rank that `symmkit run` starts with Node (node --import): makes the rank's
// stdout and stderr blocking. They are sockets to the launcher, which Node writes asynchronously: what a
// socket does not take at once waits in the rank's memory, and process.exit() drops it, so a rank that
// printed much and then exited lost its last lines. Written blocking, every line is in the socket when
// write() returns, as with C or Python; the launcher reads the socket to its end.

/** What Node's pipe and socket handles offer (a TTY's is blocking already; a file's has no handle). */
interface StdioHandle {
  setBlocking?: (blocking: boolean) => number;
}

for (const stream of [process.stdout, process.stderr]) {
  (stream as unknown as { _handle?: StdioHandle })._handle?.setBlocking?.(true);
}

export {};

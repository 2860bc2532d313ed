// A blocking sleep for the host's polling loops: the thread gives its core away for `ms` (fractions of a
// millisecond too), where ranks or workers may outnumber the cores.
const sleeper = new Int32Array(new SharedArrayBuffer(4));

export function sleepSync(ms: number): void {
  Atomics.wait(sleeper, 0, 0, ms);
}

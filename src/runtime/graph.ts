// CUDA graphs by stream capture: record a sequence of launches once, replay it with one call. Libraries
// that enqueue into a capture (symmkit's collectives, its NCCL communicators) attach to it through its
// CaptureScope: what must happen at each replay (the NCCL watchdog's completion event) and who must be
// told when the graph goes (a process group releases, at its destroy, the graphs that captured its work).
import { DisposedError } from "../errors.js";
import {
  check,
  CU_STREAM_CAPTURE_MODE_RELAXED,
  CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
  CU_STREAM_CAPTURE_STATUS_ACTIVE,
} from "../cuda/driver.js";
import { ptrOrZero, type Ptr } from "../cuda/native.js";
import { driver } from "./device.js";
import { countCapture, type Stream } from "./stream.js";

/** A capture in progress, and then the graph it made. */
export class CaptureScope {
  readonly #launchHooks: ((stream: Stream) => void)[] = [];
  #graph: Graph | undefined;
  #released: string | undefined;

  /** Runs `f` after every replay is enqueued, with the stream it went on. */
  onLaunch(f: (stream: Stream) => void): void {
    this.#launchHooks.push(f);
  }

  /** The graph, once made; undefined while capturing, or when the capture failed. */
  get graph(): Graph | undefined {
    return this.#graph;
  }

  /** Disposes the graph (if it was made and is alive), so that it is never replayed again: `why` is
   * what a later launch reports. */
  release(why: string): void {
    this.#released ??= why;
    this.#graph?.dispose();
  }

  /** @internal Graph's side. */
  attach(graph: Graph): void {
    this.#graph = graph;
  }

  /** @internal */
  launched(stream: Stream): void {
    for (const f of this.#launchHooks) f(stream);
  }

  /** @internal Why the graph was released, if it was. */
  get releasedBecause(): string | undefined {
    return this.#released;
  }
}

export class Graph implements Disposable {
  readonly stream: Stream;
  readonly scope: CaptureScope;
  #graph: Ptr;
  #exec: Ptr;
  /** Captures in progress on this thread, innermost last. */
  static readonly #capturing: CaptureScope[] = [];

  private constructor(stream: Stream, graph: Ptr, exec: Ptr, scope: CaptureScope) {
    this.stream = stream;
    this.#graph = graph;
    this.#exec = exec;
    this.scope = scope;
    scope.attach(this);
  }

  /** The capture `stream` is recording into, if any (no driver call when nothing is being captured). */
  static activeCapture(stream: Stream): CaptureScope | undefined {
    const top = Graph.#capturing.at(-1);
    if (top === undefined) return undefined;
    const status: [number] = [0];
    check(driver().cuStreamIsCapturing(stream.handle, status), "cuStreamIsCapturing");
    return status[0] === CU_STREAM_CAPTURE_STATUS_ACTIVE ? top : undefined;
  }

  /**
   * Runs `allocate` with this thread's capture mode relaxed, so that memory a call keeps for itself
   * (cuMemAlloc: no stream operation, and it outlives any graph) may be allocated while a stream is being
   * captured, which thread-local capture otherwise refuses as unsafe. What `allocate` enqueues on a captured
   * stream is still captured.
   */
  static relaxed<T>(allocate: () => T): T {
    if (Graph.#capturing.length === 0) return allocate();
    const d = driver();
    const mode: [number] = [CU_STREAM_CAPTURE_MODE_RELAXED];
    check(d.cuThreadExchangeStreamCaptureMode(mode), "cuThreadExchangeStreamCaptureMode");
    try {
      return allocate();
    } finally {
      check(d.cuThreadExchangeStreamCaptureMode(mode), "cuThreadExchangeStreamCaptureMode");
    }
  }

  get disposed(): boolean {
    return this.#exec === 0n;
  }

  /**
   * Captures everything `record` enqueues on `stream` and instantiates it. Capture is thread-local, so
   * other host threads' CUDA calls are not disturbed. If `record` throws, the capture is ended and
   * discarded and the error rethrown.
   */
  static capture(stream: Stream, record: () => void): Graph {
    stream.device.makeCurrent();
    const d = driver();
    check(
      d.cuStreamBeginCapture_v2(stream.handle, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
      "cuStreamBeginCapture_v2",
    );
    const g: [Ptr | null] = [null];
    const scope = new CaptureScope();
    Graph.#capturing.push(scope);
    countCapture(1);
    try {
      record();
    } catch (e) {
      if (d.cuStreamEndCapture(stream.handle, g) === 0 && g[0]) d.cuGraphDestroy(g[0]);
      throw e;
    } finally {
      Graph.#capturing.pop();
      countCapture(-1);
    }
    check(d.cuStreamEndCapture(stream.handle, g), "cuStreamEndCapture");
    const graph = ptrOrZero(g[0]);
    const exec: [Ptr | null] = [null];
    try {
      check(d.cuGraphInstantiateWithFlags(exec, graph, 0), "cuGraphInstantiateWithFlags");
    } catch (e) {
      d.cuGraphDestroy(graph);
      throw e;
    }
    return new Graph(stream, graph, ptrOrZero(exec[0]), scope);
  }

  /** Enqueues one replay on `stream` (the capture stream by default). */
  launch(stream: Stream = this.stream): void {
    if (this.#exec === 0n) {
      const why = this.scope.releasedBecause;
      throw new DisposedError(why ? `Graph (${why})` : "Graph");
    }
    check(driver().cuGraphLaunch(this.#exec, stream.handle), "cuGraphLaunch");
    this.scope.launched(stream);
  }

  dispose(): void {
    if (this.#exec === 0n) return;
    const d = driver();
    check(d.cuGraphExecDestroy(this.#exec), "cuGraphExecDestroy");
    check(d.cuGraphDestroy(this.#graph), "cuGraphDestroy");
    this.#exec = 0n;
    this.#graph = 0n;
  }

  [Symbol.dispose](): void {
    this.dispose();
  }
}

// CUDA graphs by stream capture: record a sequence of launches once, replay it with one call.
import { DisposedError } from "../errors.js";
import { check, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL } from "../cuda/driver.js";
import { ptrOrZero, type Ptr } from "../cuda/native.js";
import { driver } from "./device.js";
import type { Stream } from "./stream.js";

export class Graph implements Disposable {
  readonly stream: Stream;
  #graph: Ptr;
  #exec: Ptr;

  private constructor(stream: Stream, graph: Ptr, exec: Ptr) {
    this.stream = stream;
    this.#graph = graph;
    this.#exec = exec;
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
    try {
      record();
    } catch (e) {
      if (d.cuStreamEndCapture(stream.handle, g) === 0 && g[0]) d.cuGraphDestroy(g[0]);
      throw e;
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
    return new Graph(stream, graph, ptrOrZero(exec[0]));
  }

  /** Enqueues one replay on `stream` (the capture stream by default). */
  launch(stream: Stream = this.stream): void {
    if (this.#exec === 0n) throw new DisposedError("Graph");
    check(driver().cuGraphLaunch(this.#exec, stream.handle), "cuGraphLaunch");
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

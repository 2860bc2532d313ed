// `symmkit bench launch`: what one kernel launch costs. Host time per launch through the Kernel API
// (argument packing plus cuLaunchKernel), against the plain koffi pattern of building a fresh argument
// array for every call; and GPU time per launch when launches are replayed from a CUDA graph.
import { koffi, type Ptr } from "../cuda/native.js";
import { driverLibraryPath } from "../cuda/driver.js";
import { Device } from "../runtime/device.js";
import { Event } from "../runtime/event.js";
import { Graph } from "../runtime/graph.js";
import { Stream } from "../runtime/stream.js";
import { Tensor } from "../runtime/tensor.js";
import { Module } from "../runtime/module.js";
import type { ProgramSpec } from "../runtime/module.js";
import { benchEnvironment, median, table, type BenchEnvironment } from "./report.js";

/** A kernel with a typical argument list (pointer, sizes, scalars) that does nothing. */
const LAUNCH_PROGRAM: ProgramSpec = {
  name: "symmkit/bench/launch",
  source: `#include "symmkit/core/types.cuh"
__global__ void args_kernel(float* p, unsigned long long n, int a, float b) {
  if (n == ~0ull) p[a] = b;  // never taken: keeps the arguments live
}
`,
  nameExpressions: ["args_kernel"],
};

export interface LaunchBenchResult {
  readonly environment: BenchEnvironment;
  /** Host microseconds per launch, median over rounds. */
  readonly hostUsPerLaunch: { readonly kernelApi: number; readonly rawKoffiFreshArgs: number };
  /** GPU microseconds per launch: back-to-back launches replayed from a graph, median over replays. */
  readonly gpuUsPerLaunchInGraph: number;
  readonly launchesPerRound: number;
  readonly rounds: number;
}

/** The bare launch this benchmark times, on `stream`: the floor of any eager op. Disposed with its result. */
export function bareLaunch(
  stream: Stream,
): Disposable & { launch: () => void; readonly function: Ptr; readonly buffer: Ptr } {
  const module = Module.compile(LAUNCH_PROGRAM, stream.device);
  const kernel = module.kernel("args_kernel", ["ptr", "u64", "i32", "f32"] as const);
  const buf = Tensor.empty([16], "f32", { device: stream.device });
  const cfg = { grid: 1, block: 32, stream };
  return {
    launch: () => kernel.launch(cfg, buf, 16, 0, 1.5),
    function: kernel.handle,
    buffer: buf.ptr,
    [Symbol.dispose]: () => {
      buf.dispose();
      module.dispose();
    },
  };
}

export function benchLaunch(
  options: { launches?: number; rounds?: number; device?: Device } = {},
): LaunchBenchResult {
  const launches = options.launches ?? 10000;
  const rounds = options.rounds ?? 15;
  const device = options.device ?? Device.get(0);
  const stream = Stream.create(device);
  const bare = bareLaunch(stream);
  const timeHost = (launchOnce: () => void): number => {
    const per: number[] = [];
    for (let r = 0; r < rounds + 2; r++) {
      const t0 = process.hrtime.bigint();
      for (let i = 0; i < launches; i++) launchOnce();
      const t1 = process.hrtime.bigint();
      stream.synchronize();
      if (r >= 2) per.push(Number(t1 - t0) / 1000 / launches);
    }
    return median(per);
  };

  const api = timeHost(bare.launch);

  // The naive pattern: koffi marshals a fresh JS array of argument buffers into void** on every call.
  const lib = koffi.load(driverLibraryPath());
  const rawLaunch = lib.func(
    "int cuLaunchKernel(void *f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared, void *stream, void **params, void **extra)",
  );
  const raw = timeHost(() => {
    const p = Buffer.alloc(8);
    p.writeBigUInt64LE(bare.buffer);
    const n = Buffer.alloc(8);
    n.writeBigUInt64LE(16n);
    const a = Buffer.alloc(4);
    const b = Buffer.alloc(4);
    b.writeFloatLE(1.5);
    rawLaunch(bare.function, 1, 1, 1, 32, 1, 1, 0, stream.handle, [p, n, a, b], null);
  });

  const perGraph = 1000;
  const graph = Graph.capture(stream, () => {
    for (let i = 0; i < perGraph; i++) bare.launch();
  });
  const start = Event.create(device);
  const end = Event.create(device);
  const gpu: number[] = [];
  for (let r = 0; r < rounds + 3; r++) {
    start.record(stream);
    graph.launch(stream);
    end.record(stream);
    end.synchronize();
    if (r >= 3) gpu.push((end.elapsedMsSince(start) * 1000) / perGraph);
  }
  graph.dispose();
  start.dispose();
  end.dispose();
  bare[Symbol.dispose]();
  stream.dispose();
  return {
    environment: benchEnvironment(device, 1, 1),
    hostUsPerLaunch: { kernelApi: api, rawKoffiFreshArgs: raw },
    gpuUsPerLaunchInGraph: median(gpu),
    launchesPerRound: launches,
    rounds,
  };
}

export function formatLaunch(r: LaunchBenchResult): string {
  return [
    `device: ${r.environment.device}`,
    table(
      ["measure", "us/launch"],
      [
        ["host, Kernel.launch (packed args)", r.hostUsPerLaunch.kernelApi.toFixed(2)],
        ["host, raw koffi with fresh args", r.hostUsPerLaunch.rawKoffiFreshArgs.toFixed(2)],
        ["GPU, inside a CUDA graph", r.gpuUsPerLaunchInGraph.toFixed(2)],
      ],
    ),
  ].join("\n");
}

// `symmkit run -n N -- symmkit bench launch`: what a collective call costs without a CUDA graph, as an
// eager framework pays it on every layer. Per algorithm of every collective (the registry's, NCCL through
// symmkit among them), on a plain 4 KiB input: host time per call (bursts short enough that the launch
// queue never fills, so the GPU's pace does not leak in), and wall time per call of 3000 back-to-back
// calls until the stream drained. Beside them, the floor: one bare kernel launch (bench/launch.ts).
import { ProcessGroup } from "../distributed/process-group.js";
import { GpuCollectives } from "../ops/gpu-collectives.js";
import { DEFAULT_MAILBOX_SLOT_BYTES } from "../ops/gpu-group.js";
import { TUNABLE_ALGORITHMS, type CollectiveName } from "../ops/coll/registry.js";
import { deviceCount } from "../runtime/device.js";
import { Stream } from "../runtime/stream.js";
import { Tensor } from "../runtime/tensor.js";
import { benchLaunch, type LaunchBenchResult } from "./launch.js";
import { benchEnvironment, median, table, type BenchEnvironment } from "./report.js";

export interface EagerRow {
  readonly collective: CollectiveName;
  readonly algorithm: string;
  /** Host microseconds per call (median over bursts). */
  readonly hostUs: number;
  /** Wall microseconds per call of `calls` back-to-back calls, until the stream drained (median of
   * rounds). */
  readonly wallUs: number;
}

export interface EagerBenchResult {
  readonly environment: BenchEnvironment;
  readonly bytes: number;
  readonly calls: number;
  readonly launch: LaunchBenchResult;
  readonly rows: readonly EagerRow[];
}

/** Calls per host-timed burst: well under the driver's queue of pending launches. */
const BURST = 200;

export async function benchEager(
  options: { bytes?: number; calls?: number; rounds?: number } = {},
): Promise<EagerBenchResult | undefined> {
  const bytes = options.bytes ?? 4096;
  const calls = options.calls ?? 3000;
  const rounds = options.rounds ?? 7;
  const group = await ProcessGroup.world<GpuCollectives>({}, (g) =>
    GpuCollectives.create(g, 1 << 20, { mailboxSlotBytes: DEFAULT_MAILBOX_SLOT_BYTES }),
  );
  const { device, rank, worldSize: world } = group;
  const c = group.collectives;
  const stream = Stream.create(device);
  const count = bytes / 2;
  const x = Tensor.rand([count * world], "bf16", { seed: 1n, offset: rank, device, stream });
  const part = x.slice(0, count);
  const full = Tensor.empty([count * world], "bf16", { device });
  const out = Tensor.empty([count], "bf16", { device });
  const calls1: Record<CollectiveName, (algorithm: string) => () => void> = {
    "all-reduce": (a) => () => void c.allReduce(part, { algorithm: a as "auto", output: out, stream }),
    "all-gather": (a) => () => void c.allGather(part, full, { algorithm: a as "auto", stream }),
    "reduce-scatter": (a) => () => void c.reduceScatter(x, out, { algorithm: a as "auto", stream }),
  };
  const drain = (): void => {
    group.synchronize(stream);
    stream.synchronize();
  };
  const rows: EagerRow[] = [];
  for (const collective of ["all-reduce", "all-gather", "reduce-scatter"] as const) {
    // all-reduce and all-gather count input bytes per rank, reduce-scatter output bytes.
    for (const algorithm of TUNABLE_ALGORITHMS[collective]) {
      const staged = collective === "reduce-scatter" ? bytes * world : bytes;
      if (!c.canRun(collective, algorithm, bytes, staged)) continue;
      const call = calls1[collective](algorithm);
      for (let i = 0; i < 500; i++) call();
      drain();
      const host: number[] = [];
      const wall: number[] = [];
      for (let r = 0; r < rounds; r++) {
        await group.barrier();
        let t0 = process.hrtime.bigint();
        for (let i = 0; i < BURST; i++) call();
        host.push(Number(process.hrtime.bigint() - t0) / 1000 / BURST);
        drain();
        await group.barrier();
        t0 = process.hrtime.bigint();
        for (let i = 0; i < calls; i++) call();
        drain();
        wall.push(Number(process.hrtime.bigint() - t0) / 1000 / calls);
      }
      rows.push({ collective, algorithm, hostUs: median(host), wallUs: median(wall) });
    }
  }
  for (const t of [x, full, out]) t.dispose();
  stream.dispose();
  const launch = benchLaunch({ device });
  const result =
    rank === 0
      ? { environment: benchEnvironment(device, world, deviceCount()), bytes, calls, launch, rows }
      : undefined;
  await group.destroy();
  return result;
}

export function formatEager(r: EagerBenchResult): string {
  return [
    `eager collectives, ${r.bytes} bytes per rank (bf16, plain tensors), ${r.environment.worldSize} x ${r.environment.device}`,
    `floor: one bare kernel launch costs ${r.launch.hostUsPerLaunch.kernelApi.toFixed(2)} us of host time`,
    table(
      ["collective", "algorithm", "host us/call", `wall us/call (${r.calls} back to back)`],
      r.rows.map((row) => [row.collective, row.algorithm, row.hostUs.toFixed(2), row.wallUs.toFixed(2)]),
    ),
  ].join("\n");
}

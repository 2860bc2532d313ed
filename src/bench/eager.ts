// `symmkit run -n N -- symmkit bench launch`: what a collective call costs without a CUDA graph, as an
// eager framework pays it on every layer. Per algorithm of every collective (the registry's, NCCL through
// symmkit among them), on a plain 4 KiB input: host time per call (bursts short enough that the launch
// queue never fills, so the GPU's pace does not leak in), and wall time per call of 3000 back-to-back
// calls until the stream drained. Beside them, the floor: one bare kernel launch (bench/launch.ts); and
// the ways a user calls all-reduce (`ways`): auto or an algorithm named, the stream given or not, the
// output given or fresh, a plain or a pooled input, the first call of the process and the next ones, NCCL through symmkit
// and NCCL called directly.
import { ProcessGroup } from "../distributed/process-group.js";
import { GpuCollectives } from "../ops/gpu-collectives.js";
import { DEFAULT_MAILBOX_SLOT_BYTES } from "../ops/gpu-group.js";
import { TUNABLE_ALGORITHMS, type CollectiveName } from "../ops/coll/registry.js";
import { deviceCount } from "../runtime/device.js";
import { defaultStream, Stream } from "../runtime/stream.js";
import { Tensor } from "../runtime/tensor.js";
import { bareLaunch, benchLaunch, type LaunchBenchResult } from "./launch.js";
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

/** One way of calling all-reduce, timed as the rows are (the first calls: one burst, no warm-up). */
export interface EagerWay {
  readonly way: string;
  readonly hostUs: number;
  readonly wallUs: number | undefined;
}

export interface EagerBenchResult {
  readonly environment: BenchEnvironment;
  readonly bytes: number;
  readonly calls: number;
  readonly launch: LaunchBenchResult;
  readonly rows: readonly EagerRow[];
  readonly ways: readonly EagerWay[];
}

/** The way that launches an empty kernel: the floor every other way is held to. */
export const BARE_LAUNCH = "bare kernel launch (the floor, timed in the same rounds)";

/** Calls per host-timed burst: well under the driver's queue of pending launches. */
const BURST = 200;

export async function benchEager(
  options: { bytes?: number; calls?: number; rounds?: number } = {},
): Promise<EagerBenchResult | undefined> {
  const bytes = options.bytes ?? 4096;
  const calls = options.calls ?? 3000;
  const rounds = options.rounds ?? 25; // the host's pace drifts: 7 rounds left ratios ±0.2 apart run to run
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
  // Some ways call on the default stream: drained too, so that no call of one way runs beside the next
  // way's on the other stream (two streams' collectives unordered are out of step, and caught so).
  const drain = (): void => {
    for (const st of [stream, defaultStream(device)]) {
      group.synchronize(st);
      st.synchronize();
    }
  };
  /** Host µs per call (median of bursts) and wall µs per call of `calls` back to back, after 500
   * warm-up calls each; the calls take turns round by round, so that a drift of the host's pace over the
   * run moves them all alike. */
  const time = async (each: readonly (() => void)[]): Promise<{ hostUs: number; wallUs: number }[]> => {
    for (const call of each) {
      for (let i = 0; i < 500; i++) call();
      drain();
    }
    const host = each.map((): number[] => []);
    const wall = each.map((): number[] => []);
    for (let r = 0; r < rounds; r++)
      for (const [k, call] of each.entries()) {
        await group.barrier();
        let t0 = process.hrtime.bigint();
        for (let i = 0; i < BURST; i++) call();
        host[k]!.push(Number(process.hrtime.bigint() - t0) / 1000 / BURST);
        drain();
        await group.barrier();
        t0 = process.hrtime.bigint();
        for (let i = 0; i < calls; i++) call();
        drain();
        wall[k]!.push(Number(process.hrtime.bigint() - t0) / 1000 / calls);
      }
    return each.map((_, k) => ({ hostUs: median(host[k]!), wallUs: median(wall[k]!) }));
  };
  // As README writes it: a plain input made from host data, no stream, a fresh output each call. Its
  // first burst runs before any other call of the process.
  const plain = Tensor.fromHost(part.toHost(), "bf16", { device });
  const readmeWay = (): void => c.allReduce(plain).dispose();
  await group.barrier();
  const t0 = process.hrtime.bigint();
  readmeWay();
  const t1 = process.hrtime.bigint();
  for (let i = 1; i < BURST; i++) readmeWay();
  const t2 = process.hrtime.bigint();
  drain();
  // The first call in another dtype: the same code, warm, but its kernel's module loaded anew.
  const other = Tensor.fromHost(new Float32Array(count), "f16", { device });
  await group.barrier();
  const t3 = process.hrtime.bigint();
  c.allReduce(other).dispose();
  const t4 = process.hrtime.bigint();
  drain();
  other.dispose();
  const comm = await group.nccl();
  const ways: EagerWay[] = [
    {
      way: "the first call of the process (README's way)",
      hostUs: Number(t1 - t0) / 1000,
      wallUs: undefined,
    },
    {
      way: `calls 2 to ${BURST} of the process (README's way)`,
      hostUs: Number(t2 - t1) / 1000 / (BURST - 1),
      wallUs: undefined,
    },
    { way: "the first call in f16, after the bf16 ones", hostUs: Number(t4 - t3) / 1000, wallUs: undefined },
  ];
  using bare = bareLaunch(stream);
  const wayCalls: readonly (readonly [string, () => void])[] = [
    [BARE_LAUNCH, bare.launch],
    ["auto, output and stream given", () => void c.allReduce(part, { output: out, stream })],
    ["auto, output given, default stream", () => void c.allReduce(part, { output: out })],
    ["auto, fresh output, stream given", () => c.allReduce(part, { stream }).dispose()],
    ["auto, fresh output, default stream, plain input (README's way)", readmeWay],
    [
      "lamport named, output and stream given",
      () => void c.allReduce(part, { algorithm: "lamport", output: out, stream }),
    ],
    [
      "nccl through symmkit, output and stream given",
      () => void c.allReduce(part, { algorithm: "nccl", output: out, stream }),
    ],
    ["NCCL called directly (NcclComm.allReduce)", () => comm.allReduce(part, out, "sum", stream)],
  ];
  const wayTimes = await time(wayCalls.map(([, call]) => call));
  for (const [k, [way]] of wayCalls.entries()) ways.push({ way, ...wayTimes[k]! });
  // all-reduce and all-gather count input bytes per rank, reduce-scatter output bytes.
  const runs = (["all-reduce", "all-gather", "reduce-scatter"] as const).flatMap((collective) =>
    TUNABLE_ALGORITHMS[collective]
      .filter((algorithm) =>
        c.canRun(collective, algorithm, bytes, collective === "reduce-scatter" ? bytes * world : bytes),
      )
      .map((algorithm) => ({ collective, algorithm })),
  );
  const rowTimes = await time(runs.map((r) => calls1[r.collective](r.algorithm)));
  const rows: EagerRow[] = runs.map((r, k) => ({ ...r, ...rowTimes[k]! }));
  for (const t of [x, full, out, plain]) t.dispose();
  stream.dispose();
  const launch = benchLaunch({ device });
  const result =
    rank === 0
      ? { environment: benchEnvironment(device, world, deviceCount()), bytes, calls, launch, rows, ways }
      : undefined;
  await group.destroy();
  return result;
}

export function formatEager(r: EagerBenchResult): string {
  // Results from before the floor was timed in the ways' rounds hold bench launch's figure alone.
  const floor = r.ways.find((w) => w.way === BARE_LAUNCH)?.hostUs ?? r.launch.hostUsPerLaunch.kernelApi;
  return [
    `eager collectives, ${r.bytes} bytes per rank (bf16, plain tensors), ${r.environment.worldSize} x ${r.environment.device}`,
    `floor: one bare kernel launch costs ${floor.toFixed(2)} us of host time in the ways' rounds (${r.launch.hostUsPerLaunch.kernelApi.toFixed(2)} in 10000 back to back)`,
    table(
      ["collective", "algorithm", "host us/call", `wall us/call (${r.calls} back to back)`],
      r.rows.map((row) => [row.collective, row.algorithm, row.hostUs.toFixed(2), row.wallUs.toFixed(2)]),
    ),
    `all-reduce as users call it`,
    table(
      ["way", "host us/call", "x bare launch", "wall us/call"],
      r.ways.map((w) => [
        w.way,
        w.hostUs.toFixed(2),
        (w.hostUs / floor).toFixed(2),
        w.wallUs?.toFixed(2) ?? "-",
      ]),
    ),
  ].join("\n");
}

// `symmkit run -n N -- symmkit bench all-reduce|all-gather|reduce-scatter`: symmkit's algorithms against
// NCCL in the same run, GPU time from CUDA-graph replays of back-to-back operations (median of many
// replays), each implementation validated first. Reductions: the rank-order algorithms bit for bit with
// each other and, up to 4 MiB, with the host reference (f32 accumulation in rank order); NCCL, which sums
// in its own order, within its rounding; all-gather exactly. Inputs are symmetric tensors (zero-copy, as a
// user reaches peak speed); all-reduce also runs on plain tensors, which the kernel copies into the
// staging buffer itself ("_plain"). The NCCL row is NCCL as its users get it (the group's communicator
// called directly), without the fingerprint barrier symmkit's `nccl` algorithm adds.
import type { NcclComm } from "../distributed/nccl-comm.js";
import { SymmkitError } from "../errors.js";
import { ProcessGroup } from "../distributed/process-group.js";
import { reduceInto } from "../ops/coll/reduce.js";
import { GpuCollectives } from "../ops/gpu-collectives.js";
import { DEFAULT_MAILBOX_SLOT_BYTES } from "../ops/gpu-group.js";
import {
  algorithmRecord,
  COLLECTIVE_ALGORITHMS,
  mailboxBytesPerPeer,
  type CollectiveAlgorithm,
  type CollectiveName,
  type GpuAlgorithm,
} from "../ops/coll/registry.js";
import { deviceCount } from "../runtime/device.js";
import { decodeToF32, dtypeInfo, encode, type DType } from "../runtime/dtype.js";
import { hostUniform } from "../runtime/random.js";
import { Stream } from "../runtime/stream.js";
import { freshSeed, Tensor } from "../runtime/tensor.js";
import { startProgress } from "./progress.js";
import { benchEnvironment, graphTimeManyUs, graphTimeUs, table, type BenchEnvironment } from "./report.js";

export interface CollectiveRow {
  readonly bytes: number;
  readonly count: number;
  readonly dtype: DType;
  /** Microseconds per operation, by implementation. */
  readonly us: Readonly<Record<string, number>>;
}

export interface CollectiveBenchResult {
  readonly environment: BenchEnvironment;
  readonly collective: Collective;
  readonly implementations: readonly string[];
  readonly rows: readonly CollectiveRow[];
}

export type Collective = CollectiveName;

interface Implementation<A extends string> {
  readonly name: string;
  readonly algorithm: A;
  /** Input a plain tensor (the kernel copies it in) instead of a symmetric one. */
  readonly plain: boolean;
}

const impl = <A extends string>(algorithm: A, plain = false): Implementation<A> => ({
  name: plain ? `${algorithm}_plain` : algorithm,
  algorithm,
  plain,
});

const implementations = <C extends Collective>(c: C): Implementation<GpuAlgorithm<C>>[] =>
  Object.entries(COLLECTIVE_ALGORITHMS[c]).flatMap(([name, r]: [string, CollectiveAlgorithm]) => {
    const a = name as GpuAlgorithm<C>;
    return r.benchPlain ? [impl(a), impl(a, true)] : [impl(a)];
  });

/** Every implementation each benchmark knows (the registry's algorithms), on a symmetric input
 * (zero-copy) unless "_plain". */
export const BENCH_IMPLEMENTATIONS = {
  "all-reduce": implementations("all-reduce"),
  "all-gather": implementations("all-gather"),
  "reduce-scatter": implementations("reduce-scatter"),
} as const;

/** The mailbox slot the chosen implementations need for the largest size (world 2 needs the most). */
function mailboxNeed(
  c: Collective,
  chosen: readonly Implementation<string>[],
  sizes: readonly number[],
): number {
  return Math.max(0, ...chosen.flatMap((i) => sizes.map((b) => mailboxBytesPerPeer(c, i.algorithm, b, 2))));
}

/** What the chosen implementations need of the staging buffer at `world` for the largest of `sizes`, by
 * their records (a plain input staged whole): at least 1 MiB. */
function stagingNeed(
  c: Collective,
  chosen: readonly Implementation<string>[],
  sizes: readonly number[],
): (world: number) => number {
  return (world) =>
    Math.max(
      1 << 20,
      ...chosen.flatMap((i) =>
        sizes.map((b) => algorithmRecord(c, i.algorithm).stagingBytes?.(b, b, world) ?? 0),
      ),
    );
}

/** The implementations named in `names` (all when undefined), NCCL always among them. */
function choose<A extends string>(
  collective: Collective,
  all: readonly Implementation<A>[],
  names: readonly string[] | undefined,
): Implementation<A>[] {
  if (!names) return [...all];
  const known = all.map((i) => i.name);
  for (const n of names)
    if (!known.includes(n))
      throw new SymmkitError(
        "SYMMKIT_INVALID_ARGUMENT",
        `bench ${collective}: no implementation ${n}; available: ${known.join(", ")}`,
      );
  return all.filter((i) => i.name === "nccl" || names.includes(i.name));
}

/** "4K:64M" -> 4 KiB, 16 KiB, ..., 64 MiB (powers of 4). */
export function parseSizes(spec: string): number[] {
  const unit = (s: string): number => {
    const m = /^(\d+)([KMG]?)$/i.exec(s);
    if (!m) throw new SymmkitError("SYMMKIT_INVALID_ARGUMENT", `size ${s}: expected e.g. 4K, 1M, 1G`);
    return (
      Number(m[1]) *
      { "": 1, K: 1024, M: 1024 ** 2, G: 1024 ** 3 }[m[2]!.toUpperCase() as "" | "K" | "M" | "G"]
    );
  };
  const [a, b] = spec.split(":");
  const lo = unit(a!);
  const hi = b === undefined ? lo : unit(b);
  const out: number[] = [];
  for (let s = lo; s <= hi; s *= 4) out.push(s);
  return out;
}

export type BenchGroup = ProcessGroup<GpuCollectives>;

/**
 * Before each timed replay every rank enqueues a GPU barrier that then holds this long, and only then
 * the start event and the graph: the ranks' graphs start within about one barrier latency of each
 * other, and neither the host's launch latency nor the skew between the ranks' hosts is timed.
 */
const HOLD_NS = 200_000;

/** beforeReplay for graphTimeUs on several ranks (see HOLD_NS). */
export async function startTogether(group: BenchGroup, stream: Stream): Promise<void> {
  await group.barrier();
  group.collectives.barrier({ stream, holdNs: HOLD_NS });
}

/** Calls per timed graph for a call that moves `bytes`: about 2 ms of work, 2 to 50 calls. */
export const perGraphFor = (bytes: number): number =>
  Math.max(2, Math.min(50, Math.ceil(2e-3 / (bytes / 200e9 + 5e-6))));

/**
 * GPU us per call of each of `runs` (validated before) on every rank: the ranks meet, then graphs of
 * `perGraph` calls are replayed in turn, every rank starting each replay together; medians.
 */
export async function timeTogether(
  group: BenchGroup,
  stream: Stream,
  runs: readonly (() => void)[],
  o: { perGraph: number; replays?: number },
): Promise<number[]> {
  await group.barrier();
  return graphTimeManyUs(stream, runs, {
    perGraph: o.perGraph,
    replays: o.replays ?? 15,
    beforeReplay: () => startTogether(group, stream),
    sync: () => group.synchronize(stream),
  });
}

/** One size of a collective benchmark: its inputs and outputs, made by the benchmark. */
interface SizeCase {
  readonly row: Omit<CollectiveRow, "us">;
  /** Enqueues implementation i on the stream. */
  readonly run: (i: number) => void;
  /** Checks the outputs of one run of every implementation, once they completed. */
  readonly validate: () => void;
  readonly dispose: () => Promise<void>;
}

export interface CollectiveBenchOptions {
  readonly sizes: readonly number[];
  readonly dtype: DType;
  /** Implementation names (NCCL always runs); all when undefined. */
  readonly implementations?: readonly string[] | undefined;
  /** Run in this group (its staging and mailbox large enough for the sizes) instead of a new one. */
  readonly group?: BenchGroup;
}

/**
 * The frame every collective benchmark shares: the world group (staging for the largest size, mailbox
 * slots of at least `mailboxBytes`), a stream, the run's seed, then per size one validated run of every
 * implementation and graph timing of each; the result on rank 0.
 */
async function benchCollective<A extends string>(
  collective: Collective,
  chosen: readonly Implementation<A>[],
  o: CollectiveBenchOptions,
  mailboxBytes: number,
  prepare: (
    group: BenchGroup,
    stream: Stream,
    bytes: number,
    seed: bigint,
    nccl: NcclComm,
  ) => Promise<SizeCase>,
): Promise<CollectiveBenchResult | undefined> {
  const implementations = chosen.map((i) => i.name);
  const group = o.group ?? (await benchGroup(mailboxBytes, stagingNeed(collective, chosen, o.sizes)));
  const { device, rank, worldSize: world } = group;
  const comm = await group.nccl();
  const stream = Stream.create(device);
  if (rank === 0) await group.store.set(`bench/${collective}/seed`, String(freshSeed()));
  const seed = BigInt((await group.store.get(`bench/${collective}/seed`)).toString());
  using progress = startProgress({ title: collective, total: o.sizes.length, rank });
  progress.log(`seed ${seed}`);
  const rows: CollectiveRow[] = [];
  for (const bytes of o.sizes) {
    progress.step(`${collective} ${bytes} bytes: validating and timing ${implementations.join(", ")} ...`);
    const c = await prepare(group, stream, bytes, seed, comm);
    implementations.forEach((_, i) => c.run(i));
    group.synchronize(stream);
    comm.synchronize(stream);
    c.validate();
    await group.barrier();
    const us: Record<string, number> = {};
    for (const [i, name] of implementations.entries()) {
      us[name] = await graphTimeUs(stream, () => c.run(i), {
        perGraph: bytes <= 1 << 20 ? 20 : 5,
        beforeReplay: () => startTogether(group, stream),
        sync: () => group.synchronize(stream),
      });
    }
    rows.push({ ...c.row, us });
    await c.dispose();
  }
  stream.dispose();
  const result =
    rank === 0
      ? { environment: benchEnvironment(device, world, deviceCount()), collective, implementations, rows }
      : undefined;
  if (!o.group) await group.destroy();
  return result;
}

/** The world group a benchmark runs in: a staging buffer of `stagingBytes(world)`, mailbox slots of at
 * least `mailboxBytes`. */
export function benchGroup(
  mailboxBytes: number,
  stagingBytes: (world: number) => number,
): Promise<BenchGroup> {
  return ProcessGroup.world<GpuCollectives>({}, (g) =>
    GpuCollectives.create(g, stagingBytes(g.worldSize), {
      mailboxSlotBytes: Math.max(DEFAULT_MAILBOX_SLOT_BYTES, Math.ceil(mailboxBytes / 16) * 16),
    }),
  );
}

/** Uniform inputs in [-1, 1), different on every rank, the same for every implementation. */
function randomInput(group: BenchGroup, stream: Stream, count: number, dtype: DType, seed: bigint): Tensor {
  const { rank: offset, device } = group;
  return Tensor.rand([count], dtype, { seed, offset, low: -1, high: 1, device, stream });
}

/** Sizes are bytes per rank. Validation: see validateReduction. */
export async function benchAllReduce(o: CollectiveBenchOptions): Promise<CollectiveBenchResult | undefined> {
  const chosen = choose("all-reduce", BENCH_IMPLEMENTATIONS["all-reduce"], o.implementations);
  const mailbox = mailboxNeed("all-reduce", chosen, o.sizes);
  return benchCollective("all-reduce", chosen, o, mailbox, async (group, stream, bytes, seed, nccl) => {
    const count = Math.floor(bytes / dtypeInfo(o.dtype).bytes);
    const sym = await group.symmetric.empty([count], o.dtype);
    const x = randomInput(group, stream, count, o.dtype, seed);
    sym.tensor.copyFrom(x, stream);
    const outs = chosen.map(() => Tensor.empty([count], o.dtype, { device: group.device }));
    return {
      row: { bytes, count, dtype: o.dtype },
      run: (i) => {
        const { algorithm, plain } = chosen[i]!;
        if (algorithm === "nccl") nccl.allReduce(plain ? x : sym.tensor, outs[i]!, "sum", stream);
        else group.collectives.allReduce(plain ? x : sym, { algorithm, output: outs[i]!, stream });
      },
      validate: () =>
        validateReduction("all-reduce", chosen, outs, stream, {
          dtype: o.dtype,
          count,
          world: group.worldSize,
          seed,
          bytes,
          at: 0,
        }),
      dispose: async () => {
        for (const t of [x, ...outs]) t.dispose();
        await sym.dispose();
      },
    };
  });
}

/** Sizes are output bytes per rank (the input is world times that); validated as all-reduce is. */
export async function benchReduceScatter(
  o: CollectiveBenchOptions,
): Promise<CollectiveBenchResult | undefined> {
  const chosen = choose("reduce-scatter", BENCH_IMPLEMENTATIONS["reduce-scatter"], o.implementations);
  const mailbox = mailboxNeed("reduce-scatter", chosen, o.sizes);
  return benchCollective("reduce-scatter", chosen, o, mailbox, async (group, stream, bytes, seed, nccl) => {
    const world = group.worldSize;
    const count = Math.floor(bytes / dtypeInfo(o.dtype).bytes);
    const sym = await group.symmetric.empty([count * world], o.dtype);
    const x = randomInput(group, stream, count * world, o.dtype, seed);
    sym.tensor.copyFrom(x, stream);
    const outs = chosen.map(() => Tensor.empty([count], o.dtype, { device: group.device }));
    return {
      row: { bytes: bytes * world, count: count * world, dtype: o.dtype },
      run: (i) => {
        const { algorithm } = chosen[i]!;
        if (algorithm === "nccl") nccl.reduceScatter(sym.tensor, outs[i]!, "sum", stream);
        else group.collectives.reduceScatter(sym, outs[i]!, { algorithm, stream });
      },
      validate: () =>
        validateReduction("reduce-scatter", chosen, outs, stream, {
          dtype: o.dtype,
          count,
          world,
          seed,
          bytes,
          at: group.rank * count,
          inputCount: count * world,
        }),
      dispose: async () => {
        for (const t of [x, ...outs]) t.dispose();
        await sym.dispose();
      },
    };
  });
}

/** all-gather per rank of `bytes` (sizes are per-rank inputs) on a symmetric input, validated exactly
 * against the inputs first. */
export async function benchAllGather(o: CollectiveBenchOptions): Promise<CollectiveBenchResult | undefined> {
  const chosen = choose("all-gather", BENCH_IMPLEMENTATIONS["all-gather"], o.implementations);
  const mailbox = mailboxNeed("all-gather", chosen, o.sizes);
  return benchCollective("all-gather", chosen, o, mailbox, async (group, stream, bytes, _seed, nccl) => {
    const { device, rank, worldSize: world } = group;
    const count = Math.floor(bytes / dtypeInfo(o.dtype).bytes);
    const sym = await group.symmetric.empty([count], o.dtype);
    sym.tensor.fill(rank + 1, stream);
    const outs = chosen.map(() => Tensor.empty([count * world], o.dtype, { device }));
    return {
      row: { bytes: bytes * world, count: count * world, dtype: o.dtype },
      run: (i) => {
        const { algorithm } = chosen[i]!;
        if (algorithm === "nccl") nccl.allGather(sym.tensor, outs[i]!, stream);
        else group.collectives.allGather(sym, outs[i]!, { algorithm, stream });
      },
      validate: () => {
        for (const [i, t] of outs.entries()) {
          const g = t.toHost({ stream, decode: true });
          for (let j = 0; j < g.length; j++) {
            if (g[j] !== Math.floor(j / count) + 1)
              throw new SymmkitError(
                "SYMMKIT_INVALID_ARGUMENT",
                `all-gather ${chosen[i]!.name} ${bytes}: element ${j} is ${g[j]}`,
              );
          }
        }
      },
      dispose: async () => {
        for (const t of outs) t.dispose();
        await sym.dispose();
      },
    };
  });
}

/** Unit roundoff of each reducing dtype: how far one rounding moves a value, relatively, at most. */
const UNIT_ROUNDOFF: Partial<Record<DType, number>> = { f32: 2 ** -24, f16: 2 ** -11, bf16: 2 ** -8 };

/**
 * The rank-order algorithms' outputs bit for bit equal to each other; up to 4 MiB also to the host
 * reference (f32 accumulation in rank order of elements [at, at + count) of inputs of `inputCount`
 * elements); the others (NCCL) within rounding of them: NCCL rounds each of its at most world - 1 partial
 * sums, each no larger than world in magnitude (inputs lie in [-1, 1)), where the reference rounds once,
 * so the two differ by at most world² unit roundoffs, and far more wherever a rank's input is missing.
 */
function validateReduction(
  collective: Collective,
  chosen: readonly Implementation<string>[],
  outputs: readonly Tensor[],
  stream: Stream,
  c: {
    dtype: DType;
    count: number;
    world: number;
    seed: bigint;
    bytes: number;
    at: number;
    inputCount?: number;
  },
): void {
  const fail = (what: string): never => {
    throw new SymmkitError(
      "SYMMKIT_INVALID_ARGUMENT",
      `${collective} ${c.bytes} bytes: ${what} (seed ${c.seed})`,
    );
  };
  const outs = outputs.map((t) => t.toHost({ stream }));
  const rankOrder = (m: Implementation<string>) => algorithmRecord(collective, m.algorithm).rankOrder;
  const ours = chosen.flatMap((m, i) => (rankOrder(m) ? [[m.name, outs[i]!] as const] : []));
  const theirs = chosen.flatMap((m, i) => (rankOrder(m) ? [] : [[m.name, outs[i]!] as const]));
  if (ours.length === 0) return;
  const [first, firstOut] = ours[0]!;
  for (const [name, other] of ours.slice(1)) {
    for (let i = 0; i < c.count; i++)
      if (firstOut[i] !== other[i]) fail(`${first} and ${name} differ at element ${i}`);
  }
  if (c.bytes <= 4 << 20) {
    const want = encode(c.dtype, new Float32Array(c.count));
    const n = c.inputCount ?? c.count;
    const inputs = Array.from({ length: c.world }, (_, r) =>
      encode(c.dtype, hostUniform(n, c.seed, r, -1, 1)),
    );
    reduceInto(c.dtype, "sum", inputs, c.at, want, 0, c.count);
    for (let i = 0; i < c.count; i++)
      if (firstOut[i] !== want[i]) fail(`${first}: element ${i} is ${firstOut[i]}, the reference ${want[i]}`);
  }
  const a = decodeToF32(c.dtype, firstOut);
  const tol = c.world * c.world * (UNIT_ROUNDOFF[c.dtype] ?? 0);
  for (const [name, out] of theirs) {
    const b = decodeToF32(c.dtype, out);
    for (let i = 0; i < c.count; i++)
      if (!(Math.abs(a[i]! - b[i]!) <= tol))
        fail(`element ${i}: ${first} ${a[i]}, ${name} ${b[i]}, more than its rounding allows (${tol})`);
  }
}

export function formatCollectives(r: CollectiveBenchResult): string {
  const world = r.environment.worldSize;
  // nccl-tests: all-reduce moves 2(W-1)/W of the bytes per rank, all-gather (W-1)/W of the output.
  const bus = ((r.collective === "all-reduce" ? 2 : 1) * (world - 1)) / world;
  const header = [
    "bytes",
    "count",
    ...r.implementations.flatMap((i) => [`${i} us`, `${i} busbw`]),
    "best/nccl",
  ];
  const rows = r.rows.map((row) => {
    const best = Math.min(...r.implementations.filter((i) => i !== "nccl").map((i) => row.us[i]!));
    return [
      String(row.bytes),
      String(row.count),
      ...r.implementations.flatMap((i) => [
        row.us[i]!.toFixed(1),
        ((row.bytes / row.us[i]! / 1e3) * bus).toFixed(1),
      ]),
      (best / row.us.nccl!).toFixed(2),
    ];
  });
  return [
    `${r.collective}, ${r.rows[0]?.dtype ?? ""}, ${world} x ${r.environment.device}`,
    table(header, rows),
  ].join("\n");
}

// `symmkit run -n N -- symmkit bench moe`: MoE dispatch and combine at the references' shapes (tokens per
// rank x hidden bf16, top-k of E experts, routing drawn at random with distinct experts per token).
// Validated first: dispatch -> identity expert -> combine must give each token times the sum of its
// weights (small integers and eighths, so exactly). Eager calls (events around each call, median): dispatch
// pull, which waits on the host for the counts, and pull_device. From CUDA-graph replays (median):
// dispatch pull_device (maxRows = the rows received, so no spare rows to zero; checked against pull bit
// for bit), its fp8 e4m3 form (per-token scales; checked against pull's), and combine (pull, in place,
// per_rank: each the exact result). Two byte counts: rows (one per (token, expert) pair this rank
// receives, bf16) and DeepEP's (bytes received per rank, each token once per rank that owns any of its
// experts, this rank's own included; fp8 rows as hidden bytes plus a 4-byte scale).
import { SymmkitError } from "../errors.js";
import { ProcessGroup } from "../distributed/process-group.js";
import { GpuCollectives } from "../ops/gpu-collectives.js";
import { dispatchTensors, type DispatchResult } from "../ops/moe/checks.js";
import { deviceCount } from "../runtime/device.js";
import { encodeBF16, encodeE4M3 } from "../runtime/dtype.js";
import { Event } from "../runtime/event.js";
import { hostRandInt } from "../runtime/random.js";
import { Stream } from "../runtime/stream.js";
import { freshSeed, Tensor } from "../runtime/tensor.js";
import { startTogether, timeTogether } from "./collectives.js";
import { startProgress } from "./progress.js";
import { benchEnvironment, median, table, type BenchEnvironment } from "./report.js";

export interface MoeShape {
  readonly tokens: number;
  readonly hidden: number;
  readonly topk: number;
  readonly experts: number;
}
export const DEFAULT_MOE_SHAPES: readonly MoeShape[] = [128, 512, 4096].map((tokens) => ({
  tokens,
  hidden: 7168,
  topk: 8,
  experts: 256,
}));

export interface MoeRow extends MoeShape {
  /** Rows this rank received. */
  readonly rows: number;
  /** Tokens this rank received counted once each (DeepEP's count: a token from any rank, this one
   * included, that picked any of its experts). */
  readonly tokensReceived: number;
  readonly dispatchUs: number;
  /** pull_device, graph-timed. */
  readonly dispatchDeviceUs: number;
  /** pull_device called eagerly (fresh outputs each call), timed as pull is. */
  readonly dispatchEagerDeviceUs: number;
  readonly combineUs: number;
  /** combine of a symmetric expert output, read in place (no staging copy), graph-timed. */
  readonly combineInPlaceUs: number;
  /** combine per_rank (owners' partials in rank order), graph-timed. */
  readonly combineByRankUs: number;
  /** dispatch pull_device of fp8 e4m3 tokens with per-token scales, graph-timed. */
  readonly dispatchFp8Us: number;
}

export interface MoeBenchResult {
  readonly environment: BenchEnvironment;
  readonly bench: "moe";
  readonly seed: string;
  readonly rows: readonly MoeRow[];
}

/** Every rank's routing: topk distinct experts per token (a partial shuffle), weights in eighths. */
function routing(s: MoeShape, seed: bigint, rank: number): { ids: Int32Array; weights: Float32Array } {
  const ids = new Int32Array(s.tokens * s.topk);
  const draws = hostRandInt(s.tokens * s.topk, seed, BigInt(rank) << 32n, 0, 2 ** 30);
  const pool = Int32Array.from({ length: s.experts }, (_, e) => e);
  for (let t = 0; t < s.tokens; t++)
    for (let k = 0; k < s.topk; k++) {
      const j = k + (Number(draws[t * s.topk + k]) % (s.experts - k));
      [pool[k], pool[j]] = [pool[j]!, pool[k]!];
      ids[t * s.topk + k] = pool[k]!;
    }
  const weights = Float32Array.from(ids, (_, i) => 1 + (i % 2)).map((w) => w / 8);
  return { ids, weights };
}

/** Tokens rank `me` receives counted once each: tokens of every rank with any expert on `me`. */
function tokensReceived(s: MoeShape, seed: bigint, world: number, me: number): number {
  const local = s.experts / world;
  let n = 0;
  for (let r = 0; r < world; r++) {
    const { ids } = routing(s, seed, r);
    for (let t = 0; t < s.tokens; t++)
      if (ids.subarray(t * s.topk, (t + 1) * s.topk).some((e) => Math.floor(e / local) === me)) n++;
  }
  return n;
}

const sameBits = (a: Tensor, b: Tensor): boolean =>
  Buffer.from(a.toHost().buffer).equals(Buffer.from(b.toHost().buffer));

export async function benchMoe(o: { shapes: readonly MoeShape[] }): Promise<MoeBenchResult | undefined> {
  for (const s of o.shapes)
    if (s.topk > s.experts)
      throw new SymmkitError(
        "SYMMKIT_INVALID_ARGUMENT",
        `bench moe: top-${s.topk} of ${s.experts} experts: topk must not exceed experts`,
      );
  // dispatch stages the tokens and routes; combine the rows received (about tokens x topk: room for 2x).
  const staging = Math.max(
    ...o.shapes.map(
      (s) => 2 * s.tokens * s.topk * s.hidden * 2 + s.tokens * (2 * s.hidden + 12 * s.topk + 4) + (1 << 20),
    ),
  );
  const group = await ProcessGroup.world<GpuCollectives>({}, (g) => GpuCollectives.create(g, staging));
  const { device, rank, worldSize: world } = group;
  const c = group.collectives;
  const stream = Stream.create(device);
  if (rank === 0) await group.store.set("bench/moe/seed", String(freshSeed()));
  const seed = BigInt((await group.store.get("bench/moe/seed")).toString());
  using progress = startProgress({ title: "moe", total: o.shapes.length, rank });
  progress.log(`seed ${seed}`);
  const rows: MoeRow[] = [];
  const start = Event.create(device);
  const end = Event.create(device);
  for (const s of o.shapes) {
    const { ids, weights } = routing(s, seed, rank);
    const values = hostRandInt(s.tokens * s.hidden, seed, (BigInt(rank) << 32n) + 1n, 0, 9);
    const xBits = Uint16Array.from(values, (v) => encodeBF16(Number(v) - 4));
    const x = Tensor.fromHost(xBits, "bf16", { device, shape: [s.tokens, s.hidden] });
    // The same small integers in fp8 (exact), scales 1.
    const x8 = Tensor.fromHost(
      Uint8Array.from(values, (v) => encodeE4M3(Number(v) - 4)),
      "fp8e4m3",
      { device, shape: [s.tokens, s.hidden] },
    );
    const scales = Tensor.fromHost(new Float32Array(s.tokens).fill(1), "f32", { device, shape: [s.tokens] });
    const idx = Tensor.fromHost(ids, "i32", { device, shape: [s.tokens, s.topk] });
    const w = Tensor.fromHost(weights, "f32", { device, shape: [s.tokens, s.topk] });
    progress.step(`moe ${s.tokens} x ${s.hidden}, top-${s.topk} of ${s.experts}: validating and timing ...`);
    const d = c.dispatch(x, idx, w, { numExperts: s.experts, stream });
    const out = Tensor.empty([s.tokens, s.hidden], "bf16", { device });
    c.combine(d.tokens, d.handle, { out, stream });
    group.synchronize(stream);
    validate(out.toHost(), xBits, ids, weights, s, rank);
    // Eager: events around one call, fresh outputs each time (disposed after). It warms up over tens of
    // calls (the JIT, the pool), so the median of 40 after 10 (a 2000-call loop of pull settles at 108 µs
    // of host time per call at 128 tokens on one H100).
    const eager = async (call: () => DispatchResult<Tensor>): Promise<number> => {
      const per: number[] = [];
      for (let i = 0; i < 50; i++) {
        await startTogether(group, stream);
        start.record(stream);
        const again = call();
        end.record(stream);
        group.synchronize(stream);
        if (i >= 10) per.push(end.elapsedMsSince(start) * 1000);
        for (const t of dispatchTensors(again)) t.dispose();
      }
      return median(per);
    };
    const onDevice = { numExperts: s.experts, maxRows: d.handle.received, stream } as const;
    const dispatchUs = await eager(() => c.dispatch(x, idx, w, { numExperts: s.experts, stream }));
    const dispatchEagerDeviceUs = await eager(() =>
      c.dispatch(x, idx, w, { ...onDevice, algorithm: "pull_device" }),
    );
    const dd = c.dispatch(x, idx, w, { ...onDevice, algorithm: "pull_device" });
    group.synchronize(stream);
    for (const [name, a, b] of [
      ["tokens", d.tokens, dd.tokens],
      ["weights", d.weights, dd.weights],
      ["counts", d.counts, dd.counts],
      ["rows", d.handle.row, dd.handle.row],
    ] as const)
      if (!sameBits(a, b))
        throw new SymmkitError(
          "SYMMKIT_INVALID_ARGUMENT",
          `moe ${s.tokens} tokens: dispatch pull_device's ${name} differ from pull's (rank ${rank}); not timing a wrong kernel`,
        );
    const fp8 = { numExperts: s.experts, scales, stream } as const;
    const d8 = c.dispatch(x8, idx, w, fp8);
    const dd8 = c.dispatch(x8, idx, w, { ...fp8, maxRows: d.handle.received, algorithm: "pull_device" });
    group.synchronize(stream);
    for (const [name, a, b] of [
      ["tokens", d8.tokens, dd8.tokens],
      ["scales", d8.scales!, dd8.scales!],
    ] as const)
      if (!sameBits(a, b))
        throw new SymmkitError(
          "SYMMKIT_INVALID_ARGUMENT",
          `moe ${s.tokens} tokens: fp8 dispatch pull_device's ${name} differ from pull's (rank ${rank}); not timing a wrong kernel`,
        );
    // The expert output in a symmetric tensor, as many rows on every rank (as many as any rank can get).
    const shared = await group.symmetric.empty([s.tokens * s.topk * world, s.hidden], "bf16");
    shared.tensor
      .view([shared.tensor.numel])
      .slice(0, d.tokens.numel)
      .copyFrom(d.tokens.view([d.tokens.numel]), stream);
    const outInPlace = Tensor.empty([s.tokens, s.hidden], "bf16", { device });
    const outByRank = Tensor.empty([s.tokens, s.hidden], "bf16", { device });
    c.combine(shared, d.handle, { out: outInPlace, stream });
    c.combine(d.tokens, d.handle, { out: outByRank, stream, algorithm: "per_rank" });
    group.synchronize(stream);
    if (!sameBits(out, outInPlace))
      throw new SymmkitError(
        "SYMMKIT_INVALID_ARGUMENT",
        `moe ${s.tokens} tokens: combine in place differs from the staged combine (rank ${rank}); not timing a wrong kernel`,
      );
    // Exact here too (the partials are small multiples of eighths).
    validate(outByRank.toHost(), xBits, ids, weights, s, rank);
    const dispatchDevice = (): void => void c.dispatch(x, idx, w, { ...onDevice, into: dd });
    const dispatchFp8 = (): void =>
      void c.dispatch(x8, idx, w, { ...fp8, maxRows: d.handle.received, into: dd8 });
    const combine = (): void => void c.combine(d.tokens, d.handle, { out, stream });
    const combineInPlace = (): void => void c.combine(shared, d.handle, { out: outInPlace, stream });
    const combineByRank = (): void =>
      void c.combine(d.tokens, d.handle, { out: outByRank, stream, algorithm: "per_rank" });
    const [dispatchDeviceUs, dispatchFp8Us, combineUs, combineInPlaceUs, combineByRankUs] =
      await timeTogether(
        group,
        stream,
        [dispatchDevice, dispatchFp8, combine, combineInPlace, combineByRank],
        { perGraph: 5 },
      );
    outInPlace.dispose();
    outByRank.dispose();
    await shared.dispose();
    const row: MoeRow = {
      ...s,
      rows: d.handle.received,
      tokensReceived: tokensReceived(s, seed, world, rank),
      dispatchUs,
      dispatchEagerDeviceUs,
      dispatchDeviceUs: dispatchDeviceUs!,
      combineUs: combineUs!,
      combineInPlaceUs: combineInPlaceUs!,
      combineByRankUs: combineByRankUs!,
      dispatchFp8Us: dispatchFp8Us!,
    };
    rows.push(row);
    progress.log(
      `  ${s.tokens} tokens: dispatch ${row.dispatchUs.toFixed(1)} us (pull_device ${row.dispatchDeviceUs.toFixed(1)} us, eager ${row.dispatchEagerDeviceUs.toFixed(1)} us, fp8 ${row.dispatchFp8Us.toFixed(1)} us), combine ${row.combineUs.toFixed(1)} us (in place ${row.combineInPlaceUs.toFixed(1)} us, per_rank ${row.combineByRankUs.toFixed(1)} us)`,
    );
    for (const t of [x, x8, scales, idx, w, out, ...[d, dd, d8, dd8].flatMap(dispatchTensors)]) t.dispose();
  }
  start.dispose();
  end.dispose();
  stream.dispose();
  const result =
    rank === 0
      ? {
          environment: benchEnvironment(device, world, deviceCount()),
          bench: "moe" as const,
          seed: seed.toString(),
          rows,
        }
      : undefined;
  await group.destroy();
  return result;
}

/** Identity experts: every token comes back times the sum of its weights, exactly. */
function validate(
  got: Uint16Array,
  x: Uint16Array,
  ids: Int32Array,
  w: Float32Array,
  s: MoeShape,
  rank: number,
): void {
  const f32 = new Float32Array(1);
  const u32 = new Uint32Array(f32.buffer);
  for (let t = 0; t < s.tokens; t++) {
    let sum = 0;
    for (let k = 0; k < s.topk; k++) if (ids[t * s.topk + k]! >= 0) sum += w[t * s.topk + k]!;
    for (let i = 0; i < s.hidden; i++) {
      u32[0] = x[t * s.hidden + i]! << 16;
      const want = encodeBF16(sum * f32[0]! + 0);
      if (got[t * s.hidden + i] !== want)
        throw new SymmkitError(
          "SYMMKIT_INVALID_ARGUMENT",
          `moe ${s.tokens} tokens: token ${t} element ${i} came back as bits ${got[t * s.hidden + i]}, expected ${want} (rank ${rank}); not timing a wrong kernel`,
        );
    }
  }
}

export function formatMoe(r: MoeBenchResult): string {
  const header = [
    "tokens",
    "hidden",
    "top-k",
    "experts",
    "rows",
    "tokens in",
    "dispatch us",
    "GB/s",
    "pull_device us",
    "GB/s",
    "DeepEP GB/s",
    "eager us",
    "fp8 us",
    "DeepEP GB/s",
    "combine us",
    "GB/s",
    "in place us",
    "GB/s",
    "per_rank us",
    "DeepEP GB/s",
  ];
  const rows = r.rows.map((x) => {
    const bytes = x.rows * x.hidden * 2;
    const deepEp = x.tokensReceived * x.hidden * 2;
    const deepEpFp8 = x.tokensReceived * (x.hidden + 4);
    const gb = (n: number, us: number): string => (n / us / 1e3).toFixed(1);
    return [
      String(x.tokens),
      String(x.hidden),
      String(x.topk),
      String(x.experts),
      String(x.rows),
      String(x.tokensReceived),
      x.dispatchUs.toFixed(1),
      gb(bytes, x.dispatchUs),
      x.dispatchDeviceUs.toFixed(1),
      gb(bytes, x.dispatchDeviceUs),
      gb(deepEp, x.dispatchDeviceUs),
      x.dispatchEagerDeviceUs.toFixed(1),
      x.dispatchFp8Us.toFixed(1),
      gb(deepEpFp8, x.dispatchFp8Us),
      x.combineUs.toFixed(1),
      gb(bytes, x.combineUs),
      x.combineInPlaceUs.toFixed(1),
      gb(bytes, x.combineInPlaceUs),
      x.combineByRankUs.toFixed(1),
      gb(deepEp, x.combineByRankUs),
    ];
  });
  return [
    `moe (rank 0), bf16, ${r.environment.worldSize} x ${r.environment.device}`,
    table(header, rows),
  ].join("\n");
}

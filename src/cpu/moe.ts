// MoE dispatch and combine on the CPU backend, the references (layout: src/ops/moe/checks.ts, rows:
// src/ops/moe/route.ts). Every rank stages its side (header, routes, tokens) and meets the others; the
// whole group judges every rank's header alike (dispatchVerdict), so a call one rank cannot take is
// refused on every rank, and each rank then pulls the rows it owns.
import { InvalidArgumentError } from "../errors.js";
import type { RawArray } from "../runtime/dtype.js";
import { checkAlgorithm, checkCapacity } from "../ops/validate.js";
import {
  checkCombine,
  checkDispatch,
  checkDispatchInto,
  CPU_COMBINE_ALGORITHMS,
  CPU_MOE_ALGORITHMS,
  dispatchHeader,
  dispatchVerdict,
  firstBadId,
  MOE_HEADER_FIXED,
  stagedRows,
  type CombineOptions,
  type CpuCombineAlgorithm,
  type CpuMoeAlgorithm,
  type DispatchOptions,
  type DispatchResult,
  type MoeHandle,
} from "../ops/moe/checks.js";
import {
  combineToken,
  combineTokenByRank,
  expertCounts,
  receivedCounts,
  routeRows,
} from "../ops/moe/route.js";
import { align16, type CpuGroup } from "./group.js";
import { HostTensor, hostOverlaps } from "./host-tensor.js";

/** A tensor's elements as bytes (raw arrays of 2-byte dtypes index elements, not bytes). */
const byteView = (raw: RawArray): Uint8Array => new Uint8Array(raw.buffer, raw.byteOffset, raw.byteLength);

/** Byte offsets of one rank's dispatch in its staging buffer. */
function moeStaging(tokens: number, topk: number, rowBytes: number, experts: number) {
  const ids = align16(4 * (MOE_HEADER_FIXED + experts));
  const weights = align16(ids + 4 * tokens * topk);
  const at = align16(weights + 4 * tokens * topk);
  const scales = align16(at + tokens * rowBytes);
  return { ids, weights, tokens: at, scales, end: scales + 4 * tokens };
}

/** Every rank computes every rank's rows from the staged per-expert counts and pulls the rows of its own
 * experts. */
export function dispatch(
  g: CpuGroup,
  tokens: HostTensor,
  topkIdx: HostTensor,
  topkWeights: HostTensor,
  options: DispatchOptions<HostTensor> & { algorithm?: CpuMoeAlgorithm },
): DispatchResult<HostTensor> {
  const what = "dispatch";
  const { rank, world } = g.sync;
  const p = checkDispatch(what, world, tokens, topkIdx, topkWeights, options);
  checkAlgorithm(what, options?.algorithm ?? "auto", CPU_MOE_ALGORITHMS);
  const into = options.into;
  if (into !== undefined) {
    checkDispatchInto(what, p, options.maxRows, rank, world, into);
    if (!(into.tokens instanceof HostTensor))
      throw new InvalidArgumentError(`${what}: into must be a result of this CPU group's dispatch`);
  }
  const ids = topkIdx.raw as Int32Array;
  const E = p.numExperts;
  const F = MOE_HEADER_FIXED;
  // Our side: the header (src/ops/moe/checks.ts), then ids, weights, tokens, scales.
  const at = moeStaging(p.tokens, p.topk, p.hidden * tokens.elementBytes, E);
  // The header always fits where the group's does (E is the group's); the data may not, which every
  // rank then learns from the header and refuses alike.
  checkCapacity(what, at.ids, g.capacityBytes);
  g.begin({ kind: "moe-dispatch/pull", dtype: p.dtype, count: p.hidden, dims: [p.topk, E] });
  g.settleSend();
  const mine = g.view(rank, "i32", 0, F + E) as Int32Array;
  mine.set(dispatchHeader(p, options.maxRows, at.end, g.capacityBytes));
  if (at.end <= g.capacityBytes) {
    mine[1] = firstBadId(p, ids);
    mine.set(expertCounts(ids, E), F);
    (g.view(rank, "i32", at.ids, ids.length) as Int32Array).set(ids);
    (g.view(rank, "f32", at.weights, ids.length) as Float32Array).set(topkWeights.raw as Float32Array);
    (g.view(rank, "u8", at.tokens, tokens.nbytes) as Uint8Array).set(byteView(tokens.raw));
    if (options.scales !== undefined)
      (g.view(rank, "f32", at.scales, p.tokens) as Float32Array).set(options.scales.raw as Float32Array);
  }
  g.meet();
  const headers = Array.from({ length: world }, (_, r) => g.view(r, "i32", 0, F + E) as Int32Array);
  const counts = headers.map((h) => h.subarray(F));
  const received = Array.from({ length: world }, (_, r) => receivedCounts(counts, r, p));
  const total = received.map((c) => c.reduce((a, b) => a + b, 0));
  const verdict = dispatchVerdict(what, headers, total, E, g.capacityBytes);
  if (verdict !== undefined) {
    g.meet();
    throw new InvalidArgumentError(verdict);
  }
  const rowsOut = options.maxRows ?? total[rank]!;
  const out = into ?? {
    tokens: HostTensor.zeros([rowsOut, p.hidden], p.dtype),
    weights: HostTensor.zeros([rowsOut], "f32"),
    scales: p.dtype === "fp8e4m3" ? HostTensor.zeros([rowsOut], "f32") : undefined,
  };
  // Spare rows are zero: an earlier dispatch's rows go first.
  if (into) for (const t of [into.tokens, into.weights, into.scales]) if (t) byteView(t.raw).fill(0);
  const rowBytes = p.hidden * tokens.elementBytes;
  const dest = byteView(out.tokens.raw);
  for (let s = 0; s < world; s++) {
    const t = headers[s]![0]!;
    const from = moeStaging(t, p.topk, rowBytes, E);
    const sIds = g.view(s, "i32", from.ids, t * p.topk) as Int32Array;
    const sWeights = g.view(s, "f32", from.weights, t * p.topk) as Float32Array;
    const sTokens = g.view(s, "u8", from.tokens, t * rowBytes) as Uint8Array;
    const sScales = g.view(s, "f32", from.scales, t) as Float32Array;
    const rows = routeRows(counts, s, sIds, p);
    for (let i = 0; i < rows.length; i++) {
      if (sIds[i]! < 0 || Math.floor(sIds[i]! / p.localExperts) !== rank) continue;
      const row = rows[i]!;
      const token = Math.floor(i / p.topk);
      dest.set(sTokens.subarray(token * rowBytes, (token + 1) * rowBytes), row * rowBytes);
      (out.weights.raw as Float32Array)[row] = sWeights[i]!;
      if (out.scales !== undefined) (out.scales.raw as Float32Array)[row] = sScales[token]!;
    }
  }
  const rowsOfPairs = routeRows(counts, rank, ids, p);
  const counted = received[rank]!;
  g.meet();
  if (into) {
    // Written again in place: the result's tensors, and its handle now describes this dispatch.
    (into.counts.raw as Int32Array).set(counted);
    (into.handle.expert.raw as Int32Array).set(ids);
    (into.handle.row.raw as Int32Array).set(rowsOfPairs);
    (into.handle.weights.raw as Float32Array).set(topkWeights.raw as Float32Array);
    Object.assign(into.handle, { received: total[rank]!, receivedByRank: total });
    return into;
  }
  const shape = [p.tokens, p.topk];
  const handle: MoeHandle<HostTensor> = {
    problem: p,
    rank,
    world,
    received: total[rank]!,
    receivedByRank: total,
    expert: HostTensor.fromHost(ids.slice(), "i32", { shape }),
    row: HostTensor.fromHost(rowsOfPairs, "i32", { shape }),
    weights: HostTensor.fromHost((topkWeights.raw as Float32Array).slice(), "f32", { shape }),
  };
  return {
    ...out,
    counts: HostTensor.fromHost(counted, "i32", { shape: [p.localExperts] }),
    handle,
  };
}

/** Every expert owner stages its rows; each rank sums its tokens' slots from the owners' buffers, in slot
 * order (pull) or owner by owner (per_rank: combineTokenByRank; GPUs sum each owner's part where it is). */
export function combine(
  g: CpuGroup,
  expertOut: HostTensor,
  handle: MoeHandle<HostTensor>,
  options: CombineOptions<HostTensor> & { algorithm?: CpuCombineAlgorithm },
): HostTensor {
  const what = "combine";
  const { rank, world } = g.sync;
  checkCombine(what, rank, world, expertOut, handle, options.out);
  const algorithm = options.algorithm ?? "auto";
  checkAlgorithm(what, algorithm, CPU_COMBINE_ALGORITHMS);
  const byRank = algorithm === "per_rank";
  const p = handle.problem;
  const out = options.out ?? HostTensor.empty([p.tokens, p.hidden], "bf16");
  if (hostOverlaps(out, expertOut)) throw new InvalidArgumentError(`${what}: out overlaps expertOut`);
  // The largest rank's rows: every rank judges the staging buffer's room alike.
  checkCapacity(what, stagedRows(handle) * p.hidden * 2, g.capacityBytes);
  const n = handle.received * p.hidden;
  g.begin({
    kind: byRank ? "moe-combine/per_rank" : "moe-combine/pull",
    dtype: "bf16",
    count: p.hidden,
    dims: [p.topk, p.numExperts],
  });
  g.stage(
    HostTensor.over(expertOut.raw.buffer, expertOut.raw.byteOffset, [n], "bf16", () => true),
    what,
  );
  g.meet();
  const staged = Array.from(
    { length: world },
    (_, r) => g.view(r, "bf16", 0, g.capacityBytes / 2) as Uint16Array,
  );
  const expert = handle.expert.raw as Int32Array;
  const row = handle.row.raw as Int32Array;
  const weights = handle.weights.raw as Float32Array;
  const K = p.topk;
  const L = p.localExperts;
  for (let t = 0; t < p.tokens; t++) {
    const used = (k: number): boolean => expert[t * K + k]! >= 0;
    const owner = (k: number): number => Math.floor(expert[t * K + k]! / L);
    const weight = (k: number): number => weights[t * K + k]!;
    const value = (k: number, i: number): number => staged[owner(k)]![row[t * K + k]! * p.hidden + i]!;
    if (byRank)
      combineTokenByRank(
        p.hidden,
        K,
        world,
        used,
        owner,
        weight,
        value,
        out.raw as Uint16Array,
        t * p.hidden,
      );
    else combineToken(p.hidden, K, used, weight, value, out.raw as Uint16Array, t * p.hidden);
  }
  g.meet();
  return out;
}

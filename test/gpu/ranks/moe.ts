// One rank of the MoE check (test/gpu/distributed.test.ts): dispatch and combine on GPUs, bit for bit
// against the host reference (src/ops/moe/route.ts: the CPU backend's layout and combine order), every
// rank drawing every rank's inputs from the shared seed: bf16 and fp8 tokens; hidden 7, 64 and 7168;
// top-1, 2 and 8 of world, 4 x world and 256 experts; a rank with no tokens, unused slots (-1), a token
// picking two experts of one rank; maxRows with zeroed spare rows; dispatch -> identity expert ->
// combine giving x times the summed weights exactly; combine in a CUDA graph replayed with the expert
// output changed in between; a rank 50 ms late; group-judged errors (an id out of range on one rank,
// one rank's maxRows too small) refused on every rank with nothing written; bad input typed errors.
// Every case on both routes: pull (the host routes) and pull_device (the device routes: no host wait),
// the latter also captured with a combine and replayed with new routes, and refused on the device.
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { assertSameBits, sharedSeed } from "../../support/agree.js";
import { init } from "../../../src/init.js";
import { InvalidArgumentError } from "../../../src/errors.js";
import { HostTensor } from "../../../src/cpu/host-tensor.js";
import { combineToken, expertCounts, receivedCounts, routeRows } from "../../../src/ops/moe/route.js";
import type { DispatchResult, MoeProblem } from "../../../src/ops/moe/checks.js";
import { decodeBF16, encode, encodeBF16, type DType } from "../../../src/runtime/dtype.js";
import { Graph } from "../../../src/runtime/graph.js";
import { defaultStream } from "../../../src/runtime/stream.js";
import { Tensor } from "../../../src/runtime/tensor.js";
import { guardsIntact, poisoned, sectionTimer } from "./guards.js";

const group = await init({ backend: "cuda", stagingBytes: 256 << 20 });
const c = group.collectives;
const { rank, worldSize: world } = group;
const stream = defaultStream(group.device);
const seed = await sharedSeed(group.store, rank);
const lap = sectionTimer(rank);
const typed = (e: unknown): boolean =>
  e instanceof InvalidArgumentError && e.code === "SYMMKIT_INVALID_ARGUMENT";

let draws = 0;
const rand = (n: number, low: number, high: number): Int32Array =>
  HostTensor.rand([n], "i32", { seed, offset: draws++, low, high }).raw;

interface Side {
  readonly tokens: number;
  readonly ids: Int32Array;
  readonly weights: Float32Array;
  /** Token values: small integers (exact in bf16 and e4m3). */
  readonly x: Uint8Array | Uint16Array;
  readonly scales: Float32Array;
}

/** Every rank's inputs for one case, drawn alike everywhere. */
function draw(
  tokensOf: (r: number) => number,
  hidden: number,
  topk: number,
  experts: number,
  dtype: DType,
): Side[] {
  return Array.from({ length: world }, (_, r) => {
    const t = tokensOf(r);
    const ids = rand(t * topk, -1, experts);
    // A token picking two experts of one rank, and one picking the same expert twice.
    if (t > 1 && topk > 1) {
      ids[0] = 0;
      ids[1] = 1 % experts;
      ids[topk] = experts - 1;
      ids[topk + 1] = experts - 1;
    }
    const weights = Float32Array.from(rand(t * topk, 0, 3), (v) => v / 8);
    const values = Array.from(rand(t * hidden, -8, 9));
    const x = encode(dtype, values) as Uint8Array | Uint16Array;
    const scales = Float32Array.from(rand(t, 1, 5), (v) => v / 4);
    return { tokens: t, ids, weights, x, scales };
  });
}

const problem = (
  hidden: number,
  topk: number,
  experts: number,
  dtype: DType,
  tokens: number,
): MoeProblem => ({
  tokens,
  hidden,
  topk,
  numExperts: experts,
  localExperts: experts / world,
  dtype,
});

interface Expected {
  readonly p: MoeProblem;
  readonly total: number;
  readonly counts: Int32Array;
  readonly tokens: Uint8Array;
  readonly weights: Float32Array;
  readonly scales: Float32Array;
  readonly rows: Int32Array;
  /** bf16 only: the identity expert's combine, x times the summed weights (exact). */
  readonly identity: Uint16Array | undefined;
}

/** This rank's dispatch of `sides` by the host reference, with `spare` zero rows after those received. */
function expected(
  sides: Side[],
  hidden: number,
  topk: number,
  experts: number,
  dtype: DType,
  spare: number,
): Expected {
  const me = sides[rank]!;
  const p = problem(hidden, topk, experts, dtype, me.tokens);
  const counts = sides.map((s) => expertCounts(s.ids, experts));
  const got = receivedCounts(counts, rank, p);
  const total = got.reduce((a, b) => a + b, 0);
  const elem = dtype === "bf16" ? 2 : 1;
  const tokens = new Uint8Array((total + spare) * hidden * elem);
  const weights = new Float32Array(total + spare);
  const scales = new Float32Array(total + spare);
  sides.forEach((s, src) => {
    const rows = routeRows(counts, src, s.ids, p);
    const xb = new Uint8Array(s.x.buffer, s.x.byteOffset, s.x.byteLength);
    for (let i = 0; i < rows.length; i++) {
      if (s.ids[i]! < 0 || Math.floor(s.ids[i]! / p.localExperts) !== rank) continue;
      const t = Math.floor(i / topk);
      tokens.set(xb.subarray(t * hidden * elem, (t + 1) * hidden * elem), rows[i]! * hidden * elem);
      weights[rows[i]!] = s.weights[i]!;
      scales[rows[i]!] = s.scales[t]!;
    }
  });
  let identity: Uint16Array | undefined;
  if (dtype === "bf16") {
    identity = new Uint16Array(me.tokens * hidden);
    for (let t = 0; t < me.tokens; t++) {
      let w = 0;
      for (let k = 0; k < topk; k++) if (me.ids[t * topk + k]! >= 0) w += me.weights[t * topk + k]!;
      for (let i = 0; i < hidden; i++)
        // + 0: the kernel's sum starts at +0, so a zero result is +0 (never -0).
        identity[t * hidden + i] = encodeBF16(w * decodeBF16((me.x as Uint16Array)[t * hidden + i]!) + 0);
    }
  }
  const rows = routeRows(counts, rank, me.ids, p);
  return { p, total, counts: got, tokens, weights, scales, rows, identity };
}

/** A dispatch's outputs against the reference, and (bf16) the identity expert's combine. */
function check(what: string, d: DispatchResult<Tensor>, want: Expected): void {
  const tb = d.tokens.toHost();
  assertSameBits(
    new Uint8Array(tb.buffer, tb.byteOffset, tb.byteLength),
    want.tokens,
    `${what} tokens`,
    seed,
  );
  assertSameBits(d.weights.toHost(), want.weights, `${what} weights`, seed);
  if (want.p.dtype === "fp8e4m3") assertSameBits(d.scales!.toHost(), want.scales, `${what} scales`, seed);
  assertSameBits(d.counts.toHost(), want.counts, `${what} counts`, seed);
  assertSameBits(d.handle.row.toHost(), want.rows, `${what} handle rows`, seed);
  if (want.identity === undefined) return;
  const back = c.combine(d.tokens, d.handle, { stream });
  assertSameBits(back.toHost({ stream }), want.identity, `${what}: identity combine`, seed);
}

/** One case on both routes: pull (the host routes; maxRows only with spare rows) and pull_device
 * (maxRows = the rows received plus `spare`, into fresh tensors whose spare rows it must zero). */
function runCase(
  name: string,
  tokensOf: (r: number) => number,
  hidden: number,
  topk: number,
  experts: number,
  dtype: DType,
  spare = 0,
): void {
  const sides = draw(tokensOf, hidden, topk, experts, dtype);
  const me = sides[rank]!;
  const want = expected(sides, hidden, topk, experts, dtype, spare);
  const inputs = [
    Tensor.fromHost(me.x, dtype, { shape: [me.tokens, hidden] }),
    Tensor.fromHost(me.ids, "i32", { shape: [me.tokens, topk] }),
    Tensor.fromHost(me.weights, "f32", { shape: [me.tokens, topk] }),
  ] as const;
  const scales = dtype === "fp8e4m3" ? Tensor.fromHost(me.scales, "f32") : undefined;
  for (const algorithm of ["pull", "pull_device"] as const) {
    const maxRows = algorithm === "pull_device" || spare > 0 ? want.total + spare : undefined;
    const d = c.dispatch(...inputs, { numExperts: experts, scales, maxRows, algorithm, stream });
    group.synchronize(stream);
    check(`${name}: dispatch ${algorithm}`, d, want);
  }
}

const E = [world, 4 * world, 256 - (256 % world)];
runCase("basic", (r) => 17 + r, 64, 2, E[1]!, "bf16");
runCase("no tokens on rank 0", (r) => (r === 0 ? 0 : 33), 64, 2, E[0]!, "bf16");
runCase("odd hidden", (r) => 9 + 2 * r, 7, 1, E[1]!, "bf16");
runCase("fp8 with scales", (r) => 40 - r, 64, 8, E[2]!, "fp8e4m3");
runCase("maxRows", () => 21, 64, 2, E[1]!, "bf16", 5);
runCase("reference shape", () => 512, 7168, 8, E[2]!, "bf16");
if (rank === 0) console.log("dispatch and identity combine: bit for bit");
lap("dispatch and identity combine");

// combine of a non-trivial expert output, and in a graph replayed with it changed.
{
  const hidden = 96;
  const topk = 4;
  const experts = E[1]!;
  const sides = draw((r) => 50 + 3 * r, hidden, topk, experts, "bf16");
  const me = sides[rank]!;
  const d = c.dispatch(
    Tensor.fromHost(me.x, "bf16", { shape: [me.tokens, hidden] }),
    Tensor.fromHost(me.ids, "i32", { shape: [me.tokens, topk] }),
    Tensor.fromHost(me.weights, "f32", { shape: [me.tokens, topk] }),
    { numExperts: experts },
  );
  const p = problem(hidden, topk, experts, "bf16", me.tokens);
  const counts = sides.map((s) => expertCounts(s.ids, experts));
  const totals = Array.from({ length: world }, (_, r) =>
    receivedCounts(counts, r, p).reduce((a, b) => a + b, 0),
  );
  const expertOut = Tensor.empty([totals[rank]!, hidden], "bf16");
  // The same output in a symmetric tensor (as many rows on every rank), read in place by the peers.
  const shared = await group.symmetric.empty([Math.max(...totals), hidden], "bf16");
  const [whole, out] = poisoned("bf16", [me.tokens, hidden]);
  const [wholeInPlace, outInPlace] = poisoned("bf16", [me.tokens, hidden]);
  const graph = Graph.capture(stream, () => {
    c.combine(expertOut, d.handle, { out, stream });
    c.combine(shared, d.handle, { out: outInPlace, stream });
  });
  for (let replay = 0; replay < 4; replay++) {
    const outs = totals.map((n) =>
      HostTensor.rand([n * hidden], "bf16", { seed, offset: draws++, low: -2, high: 2 }),
    );
    expertOut.copyFrom(Tensor.fromHost(outs[rank]!.raw, "bf16", { shape: [totals[rank]!, hidden] }));
    shared.tensor
      .view([shared.tensor.numel])
      .slice(0, expertOut.numel)
      .copyFrom(expertOut.view([expertOut.numel]));
    if (replay === 0) {
      c.combine(expertOut, d.handle, { out });
      c.combine(shared, d.handle, { out: outInPlace });
    } else graph.launch();
    stream.synchronize();
    const rows = routeRows(counts, rank, me.ids, p);
    const want = new Uint16Array(me.tokens * hidden);
    for (let t = 0; t < me.tokens; t++)
      combineToken(
        hidden,
        topk,
        (k) => me.ids[t * topk + k]! >= 0,
        (k) => me.weights[t * topk + k]!,
        (k, i) => {
          const owner = Math.floor(me.ids[t * topk + k]! / p.localExperts);
          return outs[owner]!.raw[rows[t * topk + k]! * hidden + i]!;
        },
        want,
        t * hidden,
      );
    assertSameBits(out.toHost(), want, `combine replay ${replay}`, seed);
    assertSameBits(outInPlace.toHost(), want, `combine in place, replay ${replay}`, seed);
  }
  graph.dispose();
  guardsIntact(whole, "combine out");
  guardsIntact(wholeInPlace, "combine in place out");
  await shared.dispose();
}
if (rank === 0)
  console.log("combine against the host reference, staged and in place, eager and in a graph: bit for bit");
lap("combine");

// A straggler, then repeated calls alternating shapes.
if (rank === world - 1) await sleep(50);
for (let i = 0; i < 40; i++)
  runCase(`repeat ${i}`, (r) => 1 + ((i * 7 + r) % 23), [7, 64][i % 2]!, 1 + (i % 3), E[i % 3]!, "bf16");
if (rank === 0) console.log("straggler and 40 alternating calls: bit for bit");
lap("straggler, alternating calls");

// Judged by the group: an id out of range on rank 0 only, then one rank's maxRows too small.
{
  const ids = Int32Array.from({ length: 8 }, (_, i) => i % world);
  if (rank === 0) ids[5] = world * 2;
  const args = [
    Tensor.zeros([4, 8], "bf16"),
    Tensor.fromHost(ids, "i32", { shape: [4, 2] }),
    Tensor.zeros([4, 2], "f32"),
  ] as const;
  assert.throws(
    () => c.dispatch(...args, { numExperts: world * 2 }),
    (e: unknown) => typed(e) && /rank 0/.test(String(e)),
    "bad id",
  );
  const fine = Tensor.fromHost(
    Int32Array.from({ length: 8 }, (_, i) => i % world),
    "i32",
    { shape: [4, 2] },
  );
  assert.throws(
    () => c.dispatch(args[0], fine, args[2], { numExperts: world, maxRows: rank === world - 1 ? 1 : 100 }),
    (e: unknown) => typed(e) && new RegExp(`rank ${world - 1}`).test(String(e)),
    "maxRows",
  );
  // One rank's tokens beyond the 256 MiB staging buffer: its header says so and every rank refuses.
  const big = rank === world - 1 ? 17_000 : 4;
  assert.throws(
    () =>
      c.dispatch(
        Tensor.zeros([big, 8192], "bf16"),
        Tensor.fromHost(
          Int32Array.from({ length: big * 2 }, (_, i) => i % world),
          "i32",
          { shape: [big, 2] },
        ),
        Tensor.zeros([big, 2], "f32"),
        { numExperts: world },
      ),
    (e: unknown) => typed(e) && new RegExp(`rank ${world - 1}'s dispatch needs`).test(String(e)),
    "staging",
  );
  // The group is still usable.
  runCase("after refusals", (r) => 5 + r, 64, 2, E[0]!, "bf16");
}

// pull_device in a CUDA graph: dispatch into an eager result's tensors, then combine, replayed with new
// ids, weights and tokens each time (the routes change, the outputs' rows stay maxRows).
{
  const hidden = 64;
  const topk = 2;
  const experts = E[1]!;
  const tokens = 24;
  const maxRows = tokens * topk * world;
  const x = Tensor.empty([tokens, hidden], "bf16");
  const ids = Tensor.empty([tokens, topk], "i32");
  const w = Tensor.empty([tokens, topk], "f32");
  const load = (): Expected => {
    const sides = draw(() => tokens, hidden, topk, experts, "bf16");
    const me = sides[rank]!;
    x.copyFrom(Tensor.fromHost(me.x, "bf16", { shape: [tokens, hidden] }), stream);
    ids.copyFrom(Tensor.fromHost(me.ids, "i32", { shape: [tokens, topk] }), stream);
    w.copyFrom(Tensor.fromHost(me.weights, "f32", { shape: [tokens, topk] }), stream);
    const total = receivedCounts(
      sides.map((s) => expertCounts(s.ids, experts)),
      rank,
      problem(hidden, topk, experts, "bf16", tokens),
    ).reduce((a, b) => a + b, 0);
    return expected(sides, hidden, topk, experts, "bf16", maxRows - total);
  };
  const options = { numExperts: experts, maxRows, stream } as const;
  let want = load();
  const d = c.dispatch(x, ids, w, { ...options, algorithm: "pull_device" });
  group.synchronize(stream);
  check("pull_device before the capture", d, want);
  const capture = (f: () => unknown): Graph => Graph.capture(stream, () => void f());
  // Inside a capture: pull cannot, pull_device needs into.
  assert.throws(
    () => capture(() => c.dispatch(x, ids, w, { ...options, algorithm: "pull" })),
    typed,
    "pull captured",
  );
  assert.throws(() => capture(() => c.dispatch(x, ids, w, options)), typed, "captured without into");
  const [whole, out] = poisoned("bf16", [tokens, hidden]);
  const graph = capture(() => {
    c.dispatch(x, ids, w, { ...options, into: d });
    c.combine(d.tokens, d.handle, { out, stream });
  });
  for (let replay = 0; replay < 4; replay++) {
    want = load();
    graph.launch(stream);
    group.synchronize(stream);
    const tb = d.tokens.toHost({ stream });
    const what = `pull_device graph replay ${replay}`;
    assertSameBits(
      new Uint8Array(tb.buffer, tb.byteOffset, tb.byteLength),
      want.tokens,
      `${what} tokens`,
      seed,
    );
    assertSameBits(d.weights.toHost({ stream }), want.weights, `${what} weights`, seed);
    assertSameBits(d.counts.toHost({ stream }), want.counts, `${what} counts`, seed);
    assertSameBits(d.handle.row.toHost({ stream }), want.rows, `${what} handle rows`, seed);
    assertSameBits(out.toHost({ stream }), want.identity!, `${what} combine`, seed);
  }
  graph.dispose();
  guardsIntact(whole, "pull_device graph combine out");

  // Refused on the device, alike on every rank: the next synchronize throws, counts are -1 and the
  // outputs keep what they held. An id out of range on rank 0 only, then one rank's maxRows too small.
  const held = [d.tokens.toHost({ stream }), d.weights.toHost({ stream })] as const;
  const bad = Int32Array.from({ length: tokens * topk }, (_, i) => i % experts);
  if (rank === 0) bad[5] = experts + 3;
  ids.copyFrom(Tensor.fromHost(bad, "i32", { shape: [tokens, topk] }), stream);
  c.dispatch(x, ids, w, { ...options, into: d });
  // A combine enqueued after it (as in a graph, before anyone synchronizes) reads no row: zeros.
  const none = c.combine(d.tokens, d.handle, { stream });
  assert.throws(
    () => group.synchronize(stream),
    (e: unknown) =>
      typed(e) &&
      /refused on every rank: rank 0's topkIdx has an expert id out of range at pair 5/.test(String(e)),
    "pull_device bad id",
  );
  assertSameBits(none.toHost({ stream }), new Uint16Array(tokens * hidden), "combine after a refusal", seed);
  assertSameBits(
    d.counts.toHost({ stream }),
    new Int32Array(experts / world).fill(-1),
    "refused counts",
    seed,
  );
  assertSameBits(d.tokens.toHost({ stream }), held[0], "refused: tokens kept", seed);
  assertSameBits(d.weights.toHost({ stream }), held[1], "refused: weights kept", seed);
  ids.copyFrom(
    Tensor.fromHost(
      bad.map((e) => e % experts),
      "i32",
      { shape: [tokens, topk] },
    ),
    stream,
  );
  const refused = c.dispatch(x, ids, w, {
    ...options,
    maxRows: rank === world - 1 ? 0 : maxRows,
    algorithm: "pull_device",
  });
  c.combine(refused.tokens, refused.handle, { stream });
  assert.throws(
    () => group.synchronize(stream),
    (e: unknown) =>
      typed(e) && new RegExp(`rank ${world - 1} receives \\d+ rows, more than its maxRows`).test(String(e)),
    "pull_device maxRows",
  );
  // Rank 0's maxRows rows would not fit the staging buffer for combine: refused on every rank, and the
  // combine after it throws on no rank (it stages what fits and reads nothing).
  const huge = (256 << 20) / (hidden * 2) + 1;
  const tooBig = c.dispatch(x, ids, w, {
    ...options,
    maxRows: rank === 0 ? huge : maxRows,
    algorithm: "pull_device",
  });
  const zeros = c.combine(tooBig.tokens, tooBig.handle, { stream });
  assert.throws(
    () => group.synchronize(stream),
    (e: unknown) => typed(e) && /rank 0's maxRows \(\d+\) rows of bf16 would not fit/.test(String(e)),
    "pull_device combine room",
  );
  assertSameBits(
    zeros.toHost({ stream }),
    new Uint16Array(tokens * hidden),
    "combine after a room refusal",
    seed,
  );
  for (const r of [refused, tooBig])
    for (const t of [
      r.tokens,
      r.weights,
      r.counts,
      r.handle.expert,
      r.handle.row,
      r.handle.weights,
      r.handle.route!,
    ])
      t.dispose();
  // pull_device needs maxRows; into must match.
  assert.throws(
    () => c.dispatch(x, ids, w, { numExperts: experts, algorithm: "pull_device" }),
    typed,
    "no maxRows",
  );
  assert.throws(
    () => c.dispatch(x, ids, w, { ...options, maxRows: maxRows + 1, into: d }),
    typed,
    "into of other rows",
  );
  for (const t of [x, ids, w]) t.dispose();
  runCase("after device refusals", (r) => 5 + r, 64, 2, E[0]!, "bf16");
}
if (rank === 0) console.log("pull_device: in a replayed graph, refusals on every rank: bit for bit");
lap("group-judged refusals, pull_device in a graph");

// Bad input: typed errors before anything runs (every rank alike).
{
  const tok = Tensor.zeros([4, 8], "bf16");
  const ids = Tensor.zeros([4, 2], "i32");
  const w = Tensor.zeros([4, 2], "f32");
  const bad: [string, () => unknown][] = [
    // Not a positive multiple of the world size (at world 1 every positive count is one).
    ["numExperts", () => c.dispatch(tok, ids, w, { numExperts: world === 1 ? 0 : world + 1 })],
    ["tokens dtype", () => c.dispatch(Tensor.zeros([4, 8], "f32"), ids, w, { numExperts: world })],
    ["fp8 without scales", () => c.dispatch(Tensor.zeros([4, 8], "fp8e4m3"), ids, w, { numExperts: world })],
    [
      "scales with bf16",
      () => c.dispatch(tok, ids, w, { numExperts: world, scales: Tensor.zeros([4], "f32") }),
    ],
    ["weights shape", () => c.dispatch(tok, ids, Tensor.zeros([4, 3], "f32"), { numExperts: world })],
    ["ids dtype", () => c.dispatch(tok, Tensor.zeros([4, 2], "i64"), w, { numExperts: world })],
    ["algorithm", () => c.dispatch(tok, ids, w, { numExperts: world, algorithm: "nccl" as "pull" })],
  ];
  for (const [what, call] of bad) assert.throws(call, typed, what);
}
lap("bad input");
c.barrier();
stream.synchronize();
console.log(`gpu moe ok rank ${rank}`);
await group.destroy();

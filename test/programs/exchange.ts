// One rank of the exchange check, on the backend its argument names (symmkit run -n N exchange.js cpu|cuda):
// send, recv, sendRecv, allToAll and allToAllV with every algorithm of that backend (the lists of
// src/ops/exchange/checks.ts) and the default, bit for bit against what the peers sent. The CPU backend
// runs it in test/cpu-exchange.test.ts (worlds 2 to 5), GPUs in test/gpu/distributed.test.ts,
// shared-gpu.test.ts and bench/gpu-suite.sh (any world from 2 to 8). Both backends make every check: every
// dtype; sizes 0, 1, 7, 1000, 4097 and powers of two up to the staging buffer; messages of several of put's
// chunks (on the CPU backend, which stages a message whole, as large as its staging buffer), misaligned
// views, outputs of another shape; uneven and zero counts (a rank that sends nothing, one that receives
// everything, each only to itself), as an array and in a tensor; x and out touching in one buffer;
// outputs poisoned inside guards and inputs checked unwritten; ranks 50 ms late; 500 calls alternating
// sizes, peers, kinds and algorithms back to back (100 when ranks share a GPU); group-judged errors
// refused by every rank alike, naming the rank, nothing written; local bad input typed errors with
// nothing written; the group usable after each kind. On GPUs only: a symmetric x read in place,
// copy_engine in chunks of a small staging buffer, ll messages of several chunks with a partial last one
// back to back, CUDA graphs replayed with the inputs changed.
//
// Each section makes its inputs and poisoned outputs first, meets the peers at a store barrier, makes its
// calls back to back, waits once, and only then computes what each output must hold: no rank does host
// work while a peer's kernel waits for it, so the GPU run also passes under a short
// SYMMKIT_SYNC_TIMEOUT_MS. Messages are a hash of (seed, case, sender, receiver, word), so a rank makes
// only what it sends and receives. Pairs meet in rounds: every pair once, each rank in at most one pair
// per round. Seeded, the seed printed; rank 0 prints each section with its seconds.
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { assertSameBits } from "../support/agree.js";
import type { Case } from "../support/batch.js";
import { startProgram, typed, untyped } from "../support/program.js";
import {
  bytesOf,
  concat,
  expectPoisonedIn,
  fromBytes,
  GUARD,
  poisonedIn,
  poisonOf,
} from "../support/tensors.js";
import {
  CPU_EXCHANGE_ALGORITHMS,
  GPU_ALL_TO_ALL_ALGORITHMS,
  GPU_ALL_TO_ALL_V_ALGORITHMS,
  GPU_SEND_RECV_ALGORITHMS,
} from "../../src/ops/exchange/checks.js";
import { P2P_LL_CHUNK_BYTES } from "../../src/ops/exchange/programs.js";
import { ALL_TO_ALL, ALL_TO_ALL_V, LL_AUTO_MAX_BYTES } from "../../src/ops/exchange/records.js";
import type { Need, OpRecords } from "../../src/ops/records.js";
import { GpuCollectives } from "../../src/ops/gpu-collectives.js";
import { DTYPES, dtypeInfo, type DType } from "../../src/runtime/dtype.js";
import { Graph } from "../../src/runtime/graph.js";
import { defaultStream } from "../../src/runtime/stream.js";
import { Tensor, type AnyTensor } from "../../src/runtime/tensor.js";
import { readEnvVar } from "../../src/settings.js";

// GPUs: pull holds 32 MiB per rank at world 4; the CPU backend: small, so that inputs beyond it stay small.
const program = await startProgram("exchange", { cuda: 128 << 20, cpu: 1 << 20 }, 2);
const { backend, cuda, group, gpu, c, make, rank, world, capacity, seed } = program;
const { agree, ranks, wait, batch, done, total } = program;
const ALL_DTYPES = Object.keys(DTYPES) as DType[];

// ---- Algorithms: this backend's, the default (undefined) first.
const P2P = [undefined, ...(cuda ? GPU_SEND_RECV_ALGORITHMS : CPU_EXCHANGE_ALGORITHMS)];
const A2A = [undefined, ...(cuda ? GPU_ALL_TO_ALL_ALGORITHMS : CPU_EXCHANGE_ALGORITHMS)];
const A2AV = [undefined, ...(cuda ? GPU_ALL_TO_ALL_V_ALGORITHMS : CPU_EXCHANGE_ALGORITHMS)];
type Algorithm = string | undefined;
/** Whether `a` needs `need` of the group (by its record; auto and the default pick, so need nothing). */
const needs = (records: OpRecords, a: Algorithm, need: Need): boolean =>
  records[a ?? "auto"]?.needs.includes(need) ?? false;
// allToAllV by where its counts are: on GPUs the algorithms that wait on the host for the peers' counts
// take an array and the others a tensor (auto and the default either); the CPU backend takes both.
const A2AV_HOST = A2AV.filter(
  (a) => !cuda || a === undefined || a === "auto" || needs(ALL_TO_ALL_V, a, "host wait"),
);
const A2AV_TENSOR = A2AV.filter((a) => !cuda || !needs(ALL_TO_ALL_V, a, "host wait"));
/** The algorithms of `list` that refuse an x beyond the staging buffer: those that stage it, and auto (and
 * the default) where every algorithm of the list does; else auto may pick one that does not (GPUs: nccl). */
function stagingBound(list: readonly Algorithm[], records: OpRecords): Algorithm[] {
  const stages = (a: Algorithm): boolean => needs(records, a, "staging buffer");
  const autoToo = list.filter((a) => a !== undefined && a !== "auto").every(stages);
  return list.filter((a) => (a === undefined || a === "auto" ? autoToo : stages(a)));
}
/** The algorithms of `other` that `mine` lacks: names a call of `mine` refuses. */
const theirs = (mine: readonly Algorithm[], other: readonly Algorithm[]): Algorithm[] =>
  other.filter((a) => !mine.includes(a));
const opt = (algorithm: Algorithm): { algorithm?: string } => (algorithm === undefined ? {} : { algorithm });
// Ranks sharing a GPU wait for its time slices at every call: there the sections cycle through their
// sizes and layouts (case `k` takes one) rather than trying each, and make fewer alternating calls.
const sharing = readEnvVar("SYMMKIT_SHARE_GPUS");
const someOf = <T>(list: readonly T[], k: number): readonly T[] =>
  sharing ? [list[k % list.length]!] : list;
const named = (algorithm: Algorithm): string => algorithm ?? "default";

// ---- Messages: any rank can make any of them, so each makes only its own.
const KEY0 = Number(seed & 0xffff_ffffn) | 0;
const KEY1 = Number((seed >> 32n) & 0xffff_ffffn) | 0;
/** murmur3's finaliser: a bijection on 32 bits. */
function mix(h: number): number {
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}
/** Cases are numbered alike on every rank, taking part or not. */
let tags = 0;
/** The `nbytes` bytes `src` sends `dst` in case `tag` (`dst` = world: a row sent to no one). */
function message(tag: number, src: number, dst: number, nbytes: number): Uint8Array {
  // Whole 8-byte words, so that any dtype can view them.
  const words = new Uint32Array(Math.ceil(nbytes / 8) * 2);
  const key = mix(mix(mix(KEY0 ^ tag) ^ KEY1) ^ (src * 257 + dst));
  for (let i = 0; i < words.length; i++) words[i] = mix((key + Math.imul(i, 0x9e3779b9)) | 0);
  return new Uint8Array(words.buffer, 0, nbytes);
}
const size = (dtype: DType): number => dtypeInfo(dtype).bytes;
const sum = (v: readonly number[]): number => v.reduce((a, b) => a + b, 0);
const upload = (dtype: DType, b: Uint8Array, shape?: number[]): AnyTensor => fromBytes(make, dtype, b, shape);
const poisoned = (dtype: DType, shape: number[]): [AnyTensor, AnyTensor] => poisonedIn(make, dtype, shape);
/** The CPU backend stages a message whole, so its messages are held to the staging buffer; GPUs pipeline
 * theirs in chunks (put, copy_engine) or hand them to NCCL. */
const p2pHeld = (n: number, dtype: DType): number => (cuda ? n : Math.min(n, capacity / size(dtype)));
/** allToAll's elements per rank, held to what the staging buffer stages whole (pull). */
const a2aHeld = (n: number, dtype: DType): number =>
  Math.min(n, Math.floor(capacity / (world * size(dtype))));

// ---- Poisoned outputs: one read of the whole tensor checks the guards and what lies between them.
const poison = (dtype: DType, n: number): Uint8Array => poisonOf(make, dtype, n);
/** `whole` (made by poisoned) holds the poison in its guards and `inner` between them. */
const expectPoisoned = (whole: AnyTensor, inner: Uint8Array, what: string): void =>
  void expectPoisonedIn(make, whole, inner, what, seed);
/** A tensor and the bytes it was made from. */
type Made = readonly [AnyTensor, Uint8Array];
/** An input still holds what it was made from. */
const unwritten = (t: AnyTensor, made: Uint8Array, what: string): void =>
  assertSameBits(bytesOf(t), made, `${what}: an input was written`, seed);
/** A tensor of `dtype` holding `inner` inside guards of poison, as poisoned makes them. */
const guarded = (dtype: DType, inner: Uint8Array): AnyTensor =>
  upload(dtype, concat([poison(dtype, GUARD), inner, poison(dtype, GUARD)]));

/** Every pair of ranks once, in rounds in which each rank has at most one peer (the circle method; at an
 * odd world one rank sits each round out). */
function rounds(n: number): [number, number][][] {
  const m = n + (n % 2);
  const out: [number, number][][] = [];
  for (let r = 0; r < m - 1; r++) {
    const pairs: [number, number][] = [[m - 1, r]];
    for (let i = 1; i < m / 2; i++) pairs.push([(r + i) % (m - 1), (r - i + m - 1) % (m - 1)]);
    out.push(pairs.filter(([a, b]) => a < n && b < n).map(([a, b]) => (a < b ? [a, b] : [b, a])));
  }
  return out;
}
const ROUNDS = rounds(world);
/** This rank's peer in round `r` (of ROUNDS, cyclically), if it has one. */
function peerIn(r: number): number | undefined {
  const pair = ROUNDS[r % ROUNDS.length]!.find(([a, b]) => a === rank || b === rank);
  return pair === undefined ? undefined : pair[0] === rank ? pair[1] : pair[0];
}
assert.deepEqual(
  ROUNDS.map((_, r) => peerIn(r))
    .filter((p) => p !== undefined)
    .sort((a, b) => a - b),
  ranks.filter((r) => r !== rank),
  `rank ${rank}: the rounds meet every peer once`,
);

// ---- allToAll.
/** allToAll of `perRank` elements per rank; x and out of varying shapes (only their element counts must
 * agree). */
function allToAllCase(
  dtype: DType,
  perRank: number,
  algorithm: Algorithm,
  what = "allToAll",
  call = (x: AnyTensor, out: AnyTensor): AnyTensor => c.allToAll(x, out, opt(algorithm)),
): Case {
  const tag = tags++;
  const chunk = perRank * size(dtype);
  const sent = concat(ranks.map((d) => message(tag, rank, d, chunk)));
  const x = upload(dtype, sent, perRank % 2 === 0 ? [world, perRank] : undefined);
  const [whole, out] = poisoned(dtype, perRank % 3 === 0 ? [world * perRank] : [world, perRank]);
  const name = `${what}: allToAll ${named(algorithm)} ${dtype} ${perRank} per rank`;
  let got: AnyTensor | undefined;
  return {
    run: () => void (got = call(x, out)),
    check: () => {
      assert.equal(got, out, `${name}: returns out`);
      expectPoisoned(whole, concat(ranks.map((s) => message(tag, s, rank, chunk))), name);
      unwritten(x, sent, name);
    },
    tensors: [x, whole],
  };
}

// ---- sendRecv, send and recv.
/** sendRecv of the pairs of round `round`: the lower rank sends `lowSends` elements, the higher
 * `highSends`, both viewed from element `offset` of their tensors; 4097 elements land in a [17, 241] out
 * (out's shape need not be x's). */
function pairCase(
  algorithm: Algorithm,
  dtype: DType,
  round: number,
  lowSends: number,
  highSends: number,
  offset = 0,
  what = "sendRecv",
  split?: "send, recv" | "recv, send",
): Case | undefined {
  const tag = tags++;
  const peer = peerIn(round);
  if (peer === undefined) return undefined;
  const [nSend, nRecv] = rank < peer ? [lowSends, highSends] : [highSends, lowSends];
  const eb = size(dtype);
  const sent = concat([poison(dtype, offset), message(tag, rank, peer, nSend * eb)]);
  const xWhole = upload(dtype, sent);
  const x = xWhole.slice(offset);
  const [whole, out] = poisoned(dtype, [nRecv + offset]);
  const target = nRecv === 4097 && offset === 0 ? out.view([17, 241]) : out.slice(offset);
  // Split: the higher rank makes its sendRecv a send and a recv, in that order (the lower rank's sendRecv
  // runs both sides at once).
  const parts = rank > peer ? split : undefined;
  const name =
    `${what}: sendRecv ${named(algorithm)} ${dtype} ${nSend}/${nRecv} +${offset} with rank ${peer}` +
    (parts ? ` as ${parts}` : "");
  const o = opt(algorithm);
  let got: AnyTensor | undefined;
  return {
    run: () => {
      if (parts === undefined) got = c.sendRecv(x, target, peer, o);
      else if (parts === "send, recv") {
        c.send(x, peer, o);
        got = c.recv(target, peer, o);
      } else {
        got = c.recv(target, peer, o);
        c.send(x, peer, o);
      }
    },
    check: () => {
      assert.equal(got, target, `${name}: returns out`);
      expectPoisoned(whole, concat([poison(dtype, offset), message(tag, peer, rank, nRecv * eb)]), name);
      unwritten(xWhole, sent, name);
    },
    tensors: [xWhole, whole],
  };
}
/** send to the right, recv from the left: each rank sends `base` + its rank elements. */
function ringCase(algorithm: Algorithm, dtype: DType, base: number): Case {
  const tag = tags++;
  const left = (rank + world - 1) % world;
  const right = (rank + 1) % world;
  const eb = size(dtype);
  const sent = message(tag, rank, right, (base + rank) * eb);
  const x = upload(dtype, sent);
  const [whole, out] = poisoned(dtype, [base + left]);
  const o = opt(algorithm);
  const name = `send/recv ring ${named(algorithm)} ${dtype} ${base} + rank`;
  let got: AnyTensor | undefined;
  return {
    // A CPU send returns once its message is staged (CpuCollectives.send): there every rank sends first. On
    // GPUs a send may complete only once its receiver has it: even ranks send first, odd ranks receive first.
    run: () => {
      if (!cuda || rank % 2 === 0) {
        c.send(x, right, o);
        got = c.recv(out, left, o);
      } else {
        got = c.recv(out, left, o);
        c.send(x, right, o);
      }
    },
    check: () => {
      assert.equal(got, out, `${name}: recv returns out`);
      expectPoisoned(whole, message(tag, left, rank, (base + left) * eb), name);
      unwritten(x, sent, name);
    },
    tensors: [x, whole],
  };
}

// ---- allToAllV.
type Matrix = number[][];
/** A count matrix (rows rank s sends rank d), 0 to 8 each, a third of them 0; alike on every rank. */
function randomCounts(): Matrix {
  const w = new Uint32Array(message(tags++, world, world, 4 * world * world).buffer, 0, world * world);
  return ranks.map((s) => ranks.map((d) => Math.max(0, (w[s * world + d]! % 12) - 3)));
}
/** Every rank sends rank t 10 + its rank rows, and no one else any. */
const sinkCounts = (t: number): Matrix => ranks.map((s) => ranks.map((d) => (d === t ? 10 + s : 0)));
/** Count matrices of every kind: random, each rank in turn sending nothing, each in turn receiving
 * everything, all zero, each rank to itself only. */
function countMatrices(): [string, Matrix][] {
  const out: [string, Matrix][] = [0, 1, 2].map((k) => [`random ${k}`, randomCounts()]);
  for (const s of ranks) {
    const m = randomCounts();
    m[s]!.fill(0);
    out.push([`rank ${s} sends nothing`, m]);
  }
  for (const t of ranks) out.push([`rank ${t} receives everything`, sinkCounts(t)]);
  out.push(["all zero", ranks.map(() => ranks.map(() => 0))]);
  out.push(["each rank to itself only", ranks.map((s) => ranks.map((d) => (s === d ? 2 + s : 0)))]);
  return out;
}
/** allToAllV's rows: the dtype and shape of one row ([]: a 1-D tensor, whose rows are its elements). */
type Layout = readonly [DType, readonly number[]];
const LAYOUTS: readonly Layout[] = [
  ["u8", []],
  ["f16", [3]],
  ["bf16", [4097]],
  ["i64", [2, 2]],
];
const rowElemsOf = ([, row]: Layout): number => row.reduce((a, b) => a * b, 1);
/** This rank's x for count matrix `m` in case `tag` (its rows for rank 0, then rank 1's, ...), and then
 * `spare` rows sent to no one. */
const vInput = (tag: number, m: Matrix, rowBytes: number, spare = 0): Uint8Array =>
  concat([
    ...m[rank]!.map((n, d) => message(tag, rank, d, n * rowBytes)),
    message(tag, rank, world, spare * rowBytes),
  ]);
/** What out holds after: every source's rows for this rank, packed in rank order. */
const vReceived = (tag: number, m: Matrix, rowBytes: number): Uint8Array =>
  concat(m.map((row, s) => message(tag, s, rank, row[rank]! * rowBytes)));
const columnOf = (m: Matrix, r: number): number[] => m.map((row) => row[r]!);
const column = (m: Matrix): number[] => columnOf(m, rank);

/** allToAllV with the counts as an array; case `k` varies the rest: out's spare rows (0 to 2), recvCounts
 * given on no rank, every rank or the even ranks, and x a view between guard rows or a tensor of its own. */
function vHostCase(algorithm: Algorithm, m: Matrix, layout: Layout, k: number, what: string): Case {
  const [dtype, row] = layout;
  const tag = tags++;
  const rowElems = rowElemsOf(layout);
  const rowBytes = rowElems * size(dtype);
  const xRows = sum(m[rank]!);
  const guard = Math.floor(k / 2) % 2;
  const sent = concat([
    poison(dtype, guard * rowElems),
    vInput(tag, m, rowBytes),
    poison(dtype, guard * rowElems),
  ]);
  const xWhole = upload(dtype, sent, [xRows + 2 * guard, ...row]);
  const x = xWhole.slice(guard, guard + xRows);
  const received = column(m);
  const spare = k % 3;
  const [whole, out] = poisoned(dtype, [sum(received) + spare, ...row]);
  const given = [false, true, rank % 2 === 0][Math.floor(k / 3) % 3]!;
  const name =
    `${what}: allToAllV ${named(algorithm)} ${dtype} rows ${JSON.stringify(row)} counts ` +
    `${JSON.stringify(m)}, ${spare} spare, recvCounts ${given ? "given" : "learned"}${guard ? ", x a view" : ""}`;
  let got: { output: AnyTensor; recvCounts: number[] } | undefined;
  return {
    run: () =>
      void (got = c.allToAllV(x, out, m[rank]!, {
        ...opt(algorithm),
        ...(given && { recvCounts: received }),
      })),
    check: () => {
      assert.equal(got?.output, out, `${name}: output is out`);
      assert.deepEqual(got.recvCounts, received, `${name}: recvCounts`);
      expectPoisoned(whole, concat([vReceived(tag, m, rowBytes), poison(dtype, spare * rowElems)]), name);
      unwritten(xWhole, sent, name);
    },
    tensors: [xWhole, whole],
  };
}
/** allToAllV with the counts in an i32 tensor: x holds a row more than they send (a buffer of fixed
 * capacity sends its first rows), out two spare rows; recvCountsOut given in every other case (`k`),
 * else returned. */
function vTensorCase(algorithm: Algorithm, m: Matrix, layout: Layout, k: number, what: string): Case {
  const [dtype, row] = layout;
  const tag = tags++;
  const rowElems = rowElemsOf(layout);
  const rowBytes = rowElems * size(dtype);
  const sent = vInput(tag, m, rowBytes, 1);
  const x = upload(dtype, sent, [sum(m[rank]!) + 1, ...row]);
  const [whole, out] = poisoned(dtype, [sum(column(m)) + 2, ...row]);
  const mine = Int32Array.from(m[rank]!);
  const counts = make.fromHost(mine, "i32");
  const into = k % 2 === 0 ? make.empty([world], "i32") : undefined;
  const tensors = [x, whole, counts, ...(into ? [into] : [])];
  const name = `${what}: allToAllV ${named(algorithm)} ${dtype} rows ${JSON.stringify(row)} counts ${JSON.stringify(m)} in a tensor`;
  let got: { output: AnyTensor; recvCounts: AnyTensor } | undefined;
  return {
    run: () => {
      got = c.allToAllV(x, out, counts, { ...opt(algorithm), ...(into && { recvCountsOut: into }) });
      if (!into) tensors.push(got.recvCounts);
    },
    check: () => {
      assert.equal(got?.output, out, `${name}: output is out`);
      if (into) assert.equal(got.recvCounts, into, `${name}: recvCounts is recvCountsOut`);
      assert.deepEqual(Array.from(got.recvCounts.toHost({ dtype: "i32" })), column(m), `${name}: recvCounts`);
      expectPoisoned(whole, concat([vReceived(tag, m, rowBytes), poison(dtype, 2 * rowElems)]), name);
      unwritten(x, sent, name);
      unwritten(counts, new Uint8Array(mine.buffer), `${name}: counts`);
    },
    tensors,
  };
}

/** After refusals: every pair exchanges with every algorithm, and every all-to-all algorithm runs. */
async function usable(what: string): Promise<void> {
  const cases: (Case | undefined)[] = [];
  for (const [i, algorithm] of P2P.entries())
    for (let r = 0; r < ROUNDS.length; r++) cases.push(pairCase(algorithm, "bf16", r, 7, 1 + i, 0, what));
  for (const algorithm of A2A) cases.push(allToAllCase("f32", 7, algorithm, what));
  for (const [k, algorithm] of A2AV_HOST.entries())
    cases.push(vHostCase(algorithm, randomCounts(), LAYOUTS[k % LAYOUTS.length]!, k, what));
  for (const [k, algorithm] of A2AV_TENSOR.entries())
    cases.push(vTensorCase(algorithm, randomCounts(), LAYOUTS[k % LAYOUTS.length]!, k, what));
  await batch(cases);
}

// On GPUs every kernel is compiled or loaded once, all ranks together, before any section counts on the
// peers' timing.
{
  const cases: (Case | undefined)[] = A2A.map((a) => allToAllCase("u8", 1, a, "first call"));
  // Two rounds: at an odd world the rank left out of the first has a peer in the second.
  for (const r of [0, 1]) for (const a of P2P) cases.push(pairCase(a, "u8", r, 16, 16, 0, "first call"));
  for (const [k, a] of A2AV_HOST.entries())
    cases.push(vHostCase(a, randomCounts(), LAYOUTS[0]!, k, "first call"));
  for (const [k, a] of A2AV_TENSOR.entries())
    cases.push(vTensorCase(a, randomCounts(), LAYOUTS[0]!, k, "first call"));
  await batch(cases);
  done("first call of every algorithm");
}

// Every algorithm, every dtype, sizes 0, 1, 7, 1000, 4097 per rank; then powers of two, bytes per rank
// 1 KiB up to 32 MiB or the staging buffer, chunks rounded down to whole bytes where the world does not
// divide them; then (GPUs) a symmetric x, read in place by pull.
{
  const cases: Case[] = [];
  for (const algorithm of A2A)
    for (const dtype of ALL_DTYPES)
      for (const n of someOf([0, 1, 7, 1000, 4097], cases.length))
        cases.push(allToAllCase(dtype, a2aHeld(n, dtype), algorithm));
  for (let b = 1024; b <= Math.min(32 << 20, capacity); b *= 8)
    for (const algorithm of A2A)
      cases.push(allToAllCase("u8", Math.max(1, Math.floor(b / world)), algorithm));
  // The CPU backend's calls take its symmetric tensors as the HostTensors they are, staged like any other.
  const symmetric = gpu && (await gpu.symmetric.empty([4099 * world], "bf16"));
  if (gpu && symmetric) {
    const n = 4099;
    const tag = tags++;
    const src = fromBytes(Tensor, "bf16", concat(ranks.map((d) => message(tag, rank, d, 2 * n))));
    symmetric.tensor.copyFrom(src);
    src.dispose();
    const want = concat(ranks.map((s) => message(tag, s, rank, 2 * n)));
    for (const algorithm of GPU_ALL_TO_ALL_ALGORITHMS) {
      const [whole, out] = poisonedIn(Tensor, "bf16", [n * world]);
      cases.push({
        run: () => void gpu.collectives.allToAll(symmetric, out, { algorithm }),
        check: () => expectPoisoned(whole, want, `allToAll ${algorithm} symmetric x`),
        tensors: [whole],
      });
    }
  }
  await batch(cases);
  await symmetric?.dispose();
  done(`allToAll: every algorithm, dtype and size exact; ${cases.length} calls`);
}

// sendRecv with every peer, one batch per algorithm: every dtype and pair of sizes in every round (sizes
// differing both ways, 0 among them); messages of several chunks (put pipelines 1 MiB chunks), an empty
// one and a misaligned view, each in one round; a sendRecv whose directions auto sends by different
// algorithms (one side up to LL_AUTO_MAX_BYTES, one above), matched by a sendRecv and by a separate send
// and recv; send + recv in rings.
const PAIR_SIZES: [number, number][] = [
  [1, 1],
  [7, 7],
  [4097, 4097],
  [1, 4097],
  [4097, 7],
  [7, 1],
  [0, 7],
  [0, 0],
];
const BIG_PAIRS: [DType, number, number, number][] = [
  ["u8", (5 << 20) + 3, 7, 0],
  ["bf16", 3 << 20, (2 << 20) + 1, 0],
  ["f32", 0, 33, 0],
  ["u8", 100_001, 65_536, 3],
];
/** Elements on either side of LL_AUTO_MAX_BYTES (auto: ll up to it, put above). */
const STRADDLING_PAIRS: [DType, number, number][] = [
  ["u8", LL_AUTO_MAX_BYTES - 3, LL_AUTO_MAX_BYTES + 1],
  ["bf16", LL_AUTO_MAX_BYTES / 2 + 7, 7],
];
for (const [i, algorithm] of P2P.entries()) {
  const cases: (Case | undefined)[] = [];
  for (let r = 0; r < ROUNDS.length; r++)
    for (const [d, dtype] of ALL_DTYPES.entries())
      for (const [low, high] of someOf(PAIR_SIZES, i + r + d))
        cases.push(pairCase(algorithm, dtype, r, low, high));
  for (const [k, [dtype, low, high, offset]] of BIG_PAIRS.entries())
    cases.push(pairCase(algorithm, dtype, i + k, p2pHeld(low, dtype), p2pHeld(high, dtype), offset));
  for (const [k, [dtype, low, high]] of STRADDLING_PAIRS.entries())
    for (const [j, split] of ([undefined, "send, recv", "recv, send"] as const).entries())
      cases.push(
        pairCase(
          algorithm,
          dtype,
          i + 3 * k + j,
          p2pHeld(low, dtype),
          p2pHeld(high, dtype),
          0,
          "sendRecv",
          split,
        ),
      );
  for (const [d, dtype] of (["bf16", "i64", "u8", "fp8e4m3", "f32"] as const).entries())
    for (const base of someOf([1, 7, 1000, 4097], i + d)) cases.push(ringCase(algorithm, dtype, base));
  await batch(cases);
}
done(`sendRecv with every peer (${ROUNDS.length} rounds), send/recv rings, every algorithm: exact`);

// Back to back with no host wait in between, the receiver 50 ms late: a sender must wait for the acks
// before it reuses a buffer (put's inbox, the CPU's staging buffer), and an all-to-all for its peers'
// reads before restaging (the last rank 50 ms late).
for (const [i, algorithm] of P2P.entries()) {
  const tag = tags++;
  const sizes = [(5 << 20) + 11, 1 << 20, 3].map((n) => p2pHeld(n, "u8"));
  const sent = rank === 0 ? sizes.map((n, j) => message(tag, 0, j, n)) : [];
  const xs = sent.map((b) => upload("u8", b));
  const got = rank === 1 ? sizes.map((n) => poisoned("u8", [n])) : [];
  const pulls = [0, 1].map(() => allToAllCase("u8", 3001, A2A[i % A2A.length], "back to back"));
  const o = opt(algorithm);
  await group.barrier();
  if (rank === 1) await sleep(50);
  for (const x of xs) c.send(x, 1, o);
  for (const [, out] of got) c.recv(out, 0, o);
  if (rank === world - 1) await sleep(50);
  for (const k of pulls) k.run();
  wait();
  const what = `back to back ${named(algorithm)}`;
  got.forEach(([whole], j) => expectPoisoned(whole, message(tag, 0, j, sizes[j]!), `${what} ${j}`));
  xs.forEach((x, j) => unwritten(x, sent[j]!, `${what} ${j}`));
  for (const k of pulls) k.check();
  for (const t of [...xs, ...got.map(([whole]) => whole), ...pulls.flatMap((k) => k.tensors)]) t.dispose();
}
done("back to back, receivers late: every send/recv algorithm and all-to-all exact");

// ll messages of several chunks whose partial last chunk leaves some receiving blocks without lines, many
// back to back with no wait: such a block counts that chunk as soon as it is done with the one before, and
// a count shared with the chunk two before ended that chunk early, its buffer overwritten while a slower
// block still read it (a wait that never ended, seen with ranks sharing GPUs, whose blocks run skewed).
if (P2P.includes("ll")) {
  const cases: (Case | undefined)[] = [];
  for (let k = 0; k < (sharing ? 6 : 12); k++) {
    for (let r = 0; r < ROUNDS.length; r++)
      cases.push(pairCase("ll", "u8", r + k, 600_001, (2 << 20) + 5, 0, "ll, partial last chunks"));
    // Five full chunks and 4097 bytes a peer: at world 4 (18 blocks a side) too, most blocks have no lines
    // in the last chunk.
    cases.push(allToAllCase("u8", 5 * P2P_LL_CHUNK_BYTES + 4097, "ll", "ll, partial last chunks"));
  }
  await batch(cases);
  done("ll messages of several chunks, partial last chunks, back to back: exact");
}

// copy_engine in chunks of half the staging buffer: a group whose buffer is 8 MiB cuts messages into 4
// MiB chunks, so these take up to 4 (both halves reused, the sender waiting for the acks), both ways at
// once, back to back; then rank 1 50 ms late for three messages from rank 0; then a graph replayed with
// new data. The CPU backend has no chunks: it stages a message whole.
if (gpu) {
  const small = (await gpu.newGroupWith<GpuCollectives>(gpu.ranks, (g) =>
    GpuCollectives.create(g, 8 << 20),
  ))!;
  const sc = small.collectives;
  const stream = defaultStream(gpu.device);
  const peer = peerIn(0);
  const ce = { algorithm: "copy_engine" } as const;
  {
    const sizes = [(13 << 20) + 5, 4 << 20, (9 << 20) + 1, 0];
    const cases: Case[] = [];
    for (const [i, n] of sizes.entries()) {
      const m = sizes[(i + 1) % sizes.length]!;
      const tag = tags++;
      if (peer === undefined) continue;
      const [nSend, nRecv] = rank < peer ? [n, m] : [m, n];
      const x = fromBytes(Tensor, "u8", message(tag, rank, peer, nSend));
      const [whole, out] = poisonedIn(Tensor, "u8", [nRecv]);
      cases.push({
        run: () => void sc.sendRecv(x, out, peer, ce),
        check: () =>
          expectPoisoned(
            whole,
            message(tag, peer, rank, nRecv),
            `copy_engine sendRecv ${nSend}/${nRecv} bytes`,
          ),
        tensors: [x, whole],
      });
    }
    const tag = tags++;
    const msgs = [(13 << 20) + 5, 3, 5 << 20];
    const sent = rank === 0 ? msgs.map((n, i) => fromBytes(Tensor, "u8", message(tag, 0, i, n))) : [];
    const got = rank === 1 ? msgs.map((n) => poisonedIn(Tensor, "u8", [n])) : [];
    await batch(cases);
    await group.barrier();
    if (rank === 1) await sleep(50);
    for (const x of sent) sc.send(x, 1, ce);
    for (const [, out] of got) sc.recv(out, 0, ce);
    small.synchronize();
    got.forEach(([whole], i) =>
      expectPoisoned(whole, message(tag, 0, i, msgs[i]!), `back-to-back copy_engine ${i}`),
    );
    for (const t of [...sent, ...got.map(([whole]) => whole)]) t.dispose();
  }
  /** `call(x, out)` captured once on `stream` (none: this rank has no part, but meets the others), then
   * replayed once per input, each copied into x first and out copied aside after: the outputs' bytes. */
  const replayed = async (
    bytes: number,
    inputs: readonly Uint8Array[],
    call: ((x: Tensor, out: Tensor) => void) | undefined,
  ): Promise<Uint8Array[]> => {
    const [x, out] = [Tensor.empty([bytes], "u8"), Tensor.empty([bytes], "u8")];
    const ins = inputs.map((b) => fromBytes(Tensor, "u8", b));
    const snaps = inputs.map(() => Tensor.empty([bytes], "u8"));
    await group.barrier();
    const graph = call && Graph.capture(stream, () => call(x, out));
    ins.forEach((input, i) => {
      x.copyFrom(input, stream);
      graph!.launch(stream);
      snaps[i]!.copyFrom(out, stream);
    });
    small.synchronize(stream);
    const got = snaps.map((t) => bytesOf(t));
    graph?.dispose();
    for (const t of [x, out, ...ins, ...snaps]) t.dispose();
    return got;
  };
  // The graph: each replay's input copied in and its output copied out on the stream, checked at the end.
  const n = (11 << 20) + 7;
  const replays = [0, 1, 2].map(() => tags++);
  const sendRecvGot = await replayed(
    n,
    peer === undefined ? [] : replays.map((tag) => message(tag, rank, peer, n)),
    peer === undefined ? undefined : (x, out) => void sc.sendRecv(x, out, peer, { ...ce, stream }),
  );
  sendRecvGot.forEach((got, i) =>
    assertSameBits(got, message(replays[i]!, peer!, rank, n), `copy_engine graph replay ${i}`, seed),
  );

  // allToAll copy_engine through the same buffer: rounds of 4 MiB / (world - 1) of each peer's chunk (4
  // rounds of the largest at world 2, 10 at world 4: both halves restaged), odd sizes and an empty call, back to back with the last rank
  // 50 ms late; then a graph replayed with new data, and a symmetric x read in place.
  {
    const what = "allToAll copy_engine, 8 MiB staging";
    const sizes = [(13 << 20) + 5, 3, 4 << 20, 0, (9 << 20) + 1];
    const call = (x: AnyTensor, out: AnyTensor): AnyTensor => sc.allToAll(x as Tensor, out as Tensor, ce);
    const cases = sizes.map((n) => allToAllCase("u8", n, "copy_engine", what, call));
    cases.push(allToAllCase("bf16", (3 << 20) + 7, "copy_engine", what, call));
    await group.barrier();
    if (rank === world - 1) await sleep(50);
    for (const k of cases) k.run();
    small.synchronize();
    for (const k of cases) k.check();
    for (const t of cases.flatMap((k) => k.tensors)) t.dispose();
    // Mixed, back to back, the last rank late: a copy_engine allToAll, a copy_engine sendRecv with this
    // round's peer (on the same signal slots), a pull allToAll (which restages the staging buffer) and a
    // copy_engine allToAll again.
    {
      const pullCall = (x: AnyTensor, out: AnyTensor): AnyTensor =>
        sc.allToAll(x as Tensor, out as Tensor, { algorithm: "pull" });
      const steps = [
        allToAllCase("u8", (6 << 20) + 1, "copy_engine", what, call),
        allToAllCase("u8", Math.floor((2 << 20) / world), "pull", what, pullCall),
        allToAllCase("bf16", (1 << 20) + 5, "copy_engine", what, call),
      ];
      const n = (5 << 20) + 3;
      const tag = tags++;
      const x = peer === undefined ? undefined : fromBytes(Tensor, "u8", message(tag, rank, peer, n));
      const [whole, out] = poisonedIn(Tensor, "u8", [n]);
      await group.barrier();
      if (rank === world - 1) await sleep(50);
      steps[0]!.run();
      if (x) sc.sendRecv(x, out, peer!, ce);
      for (const k of steps.slice(1)) k.run();
      small.synchronize();
      for (const k of steps) k.check();
      if (x) expectPoisoned(whole, message(tag, peer!, rank, n), `${what}: copy_engine sendRecv between`);
      for (const t of [...steps.flatMap((k) => k.tensors), whole, ...(x ? [x] : [])]) t.dispose();
    }
    const chunk = (5 << 20) + 3;
    const replays = [0, 1, 2].map(() => tags++);
    const a2aGot = await replayed(
      world * chunk,
      replays.map((tag) => concat(ranks.map((d) => message(tag, rank, d, chunk)))),
      (x, out) => void sc.allToAll(x, out, { ...ce, stream }),
    );
    a2aGot.forEach((got, i) =>
      assertSameBits(
        got,
        concat(ranks.map((s) => message(replays[i]!, s, rank, chunk))),
        `${what}: graph replay ${i}`,
        seed,
      ),
    );
    // A symmetric x larger than the staging buffer: one round, read in place.
    const tag = tags++;
    const symmetric = await small.symmetric.empty([world * chunk], "u8");
    const src = fromBytes(Tensor, "u8", concat(ranks.map((d) => message(tag, rank, d, chunk))));
    symmetric.tensor.copyFrom(src);
    const [whole, into] = poisonedIn(Tensor, "u8", [world * chunk]);
    await group.barrier();
    sc.allToAll(symmetric, into, ce);
    small.synchronize();
    expectPoisoned(whole, concat(ranks.map((s) => message(tag, s, rank, chunk))), `${what}: symmetric x`);
    for (const t of [src, whole]) t.dispose();
    await symmetric.dispose();
  }
  await small.destroy();
  done(
    "copy_engine in 4 MiB chunks (send/recv) and rounds (allToAll), back to back, late ranks, graph replays: exact",
  );
}

// x and out side by side in one tensor (touching, not overlapping): accepted, the guards around untouched.
{
  const n = 7 * world;
  const cases: Case[] = [];
  const recvCounts = new Map<DType, number[]>();
  const right = (rank + 1) % world;
  const left = (rank + world - 1) % world;
  const peer = rank ^ 1;
  for (const dtype of ["f16", "i64"] as const) {
    const eb = size(dtype);
    const chunk = (n / world) * eb;
    const [a2a, a2av, p2p] = [tags++, tags++, tags++];
    /** Each call: what x holds, what out must receive, the call. */
    const calls: [string, Uint8Array, Uint8Array, (x: AnyTensor, out: AnyTensor) => void][] = [
      [
        "allToAll",
        concat(ranks.map((d) => message(a2a, rank, d, chunk))),
        concat(ranks.map((s) => message(a2a, s, rank, chunk))),
        (x, out) => void c.allToAll(x, out),
      ],
      [
        "allToAllV",
        message(a2av, rank, right, n * eb),
        message(a2av, left, rank, n * eb),
        (x, out) => {
          const counts = ranks.map((d) => (d === right ? n : 0));
          recvCounts.set(dtype, c.allToAllV(x, out, counts).recvCounts);
        },
      ],
    ];
    // At an odd world the last rank has no mate.
    if (peer < world)
      calls.push([
        "sendRecv",
        message(p2p, rank, peer, n * eb),
        message(p2p, peer, rank, n * eb),
        (x, out) => void c.sendRecv(x, out, peer),
      ]);
    for (const [what, sent, received, call] of calls) {
      // [guard][x: n][out: n][guard]
      const whole = guarded(dtype, concat([sent, poison(dtype, n)]));
      cases.push({
        run: () => call(whole.slice(GUARD, GUARD + n), whole.slice(GUARD + n, GUARD + 2 * n)),
        check: () => expectPoisoned(whole, concat([sent, received]), `${what} ${dtype}, x and out touching`),
        tensors: [whole],
      });
    }
  }
  await batch(cases);
  for (const [dtype, got] of recvCounts)
    assert.deepEqual(
      got,
      ranks.map((s) => (s === left ? n : 0)),
      `allToAllV ${dtype}, x and out touching: recvCounts`,
    );
  done("x and out touching in one tensor: accepted, guards untouched");
}

// allToAllV, the counts as an array and in a tensor: every algorithm, every kind of count matrix and
// every layout of rows; out's spare rows kept, recvCounts given or learned.
{
  const matrices = countMatrices();
  const cases: Case[] = [];
  let k = 0;
  for (const algorithm of A2AV_HOST)
    for (const [kind, m] of matrices)
      for (const layout of someOf(LAYOUTS, k)) cases.push(vHostCase(algorithm, m, layout, k++, kind));
  for (const algorithm of A2AV_TENSOR)
    for (const [kind, m] of matrices)
      for (const layout of someOf(LAYOUTS, k)) cases.push(vTensorCase(algorithm, m, layout, k++, kind));
  await batch(cases);
  done(`allToAllV: ${cases.length} calls exact, counts as an array and in a tensor, spare rows kept`);
}

// A CUDA graph of allToAllV with the counts on the device: x and out of fixed capacity, the counts and rows
// changed before each replay; out and the counts received copied aside after each, so that nothing waits
// between replays. The CPU backend has no graphs.
if (gpu) {
  const stream = defaultStream(gpu.device);
  const onDevice = (row: readonly number[]): Tensor => Tensor.fromHost(Int32Array.from(row), "i32");
  const rowElems = 4097;
  const rowBytes = rowElems * 2;
  // Up to 8 rows to each rank (random), or 10 + its rank from each to the last (sink).
  const rows = 16 * world;
  const x = Tensor.zeros([rows, rowElems], "bf16");
  const [whole, out] = poisonedIn(Tensor, "bf16", [rows, rowElems]);
  const counts = Tensor.zeros([world], "i32");
  const recv = Tensor.zeros([world], "i32");
  const record = (): void =>
    void gpu.collectives.allToAllV(x, out, counts, { algorithm: "pull", stream, recvCountsOut: recv });
  const replays = [0, 1, 2, 3].map((i) => {
    const m = i % 2 === 0 ? randomCounts() : sinkCounts(world - 1);
    const tag = tags++;
    const mine = vInput(tag, m, rowBytes);
    const data = fromBytes(
      Tensor,
      "bf16",
      concat([mine, message(tag, rank, world, rows * rowBytes - mine.length)]),
      [rows, rowElems],
    );
    const snap = {
      before: Tensor.empty([rows, rowElems], "bf16"),
      after: Tensor.empty([rows, rowElems], "bf16"),
    };
    return { m, tag, data, counts: onDevice(m[rank]!), recv: Tensor.empty([world], "i32"), ...snap };
  });
  await group.barrier();
  record();
  gpu.synchronize();
  const graph = Graph.capture(stream, record);
  for (const r of replays) {
    x.copyFrom(r.data, stream);
    counts.copyFrom(r.counts, stream);
    r.before.copyFrom(out, stream);
    graph.launch(stream);
    r.after.copyFrom(out, stream);
    r.recv.copyFrom(recv, stream);
  }
  gpu.synchronize(stream);
  for (const [i, r] of replays.entries()) {
    const what = `allToAllV on the device, graph replay ${i}`;
    assert.deepEqual(Array.from(r.recv.toHost({ dtype: "i32" })), column(r.m), `${what}: recvCounts`);
    const want = bytesOf(r.before);
    want.set(vReceived(r.tag, r.m, rowBytes));
    assertSameBits(bytesOf(r.after), want, what, seed);
  }
  expectPoisoned(whole, bytesOf(replays[3]!.after), "allToAllV on the device, graphs: guards");
  graph.dispose();
  for (const t of [
    x,
    whole,
    counts,
    recv,
    ...replays.flatMap((r) => [r.data, r.counts, r.recv, r.before, r.after]),
  ])
    t.dispose();
  done("allToAllV with counts on the device in a replayed graph: exact");
}

// Group-judged errors, the counts as an array: one rank's out a row short or empty, one rank's recvCounts
// one too many or two swapped, and with an algorithm that stages x whole one rank's x beyond the staging
// buffer (named before any out it overflows). Every rank throws the same typed error naming that rank
// (the messages agreed through the store), no out (nor x) written; the group usable after.
{
  const said: string[] = [];
  const cases: Case[] = [];
  /** A call every rank must refuse: its error typed and naming the rank, x and out as they were. */
  function refused(what: string, [x, sent]: Made, whole: AnyTensor, names: RegExp, call: () => void): Case {
    let message = "";
    return {
      run: () =>
        assert.throws(
          call,
          (e: unknown) => {
            assert.ok(typed(e), `${what}: not an InvalidArgumentError: ${String(e)}`);
            message = (e as Error).message;
            return true;
          },
          `rank ${rank}: ${what}: allToAllV did not throw`,
        ),
      check: () => {
        assert.match(message, names, `${what}: the message names the rank`);
        expectPoisoned(whole, poison(whole.dtype, whole.numel - 2 * GUARD), `${what}: out was written`);
        unwritten(x, sent, what);
        said.push(message);
      },
      tensors: [x, whole],
    };
  }
  const bound = stagingBound(A2AV_HOST, ALL_TO_ALL_V);
  for (const algorithm of A2AV_HOST)
    for (const t of ranks) {
      // Every count at least 1: each rank receives at least `world` rows.
      const m = randomCounts().map((row) => row.map((v) => v + 1));
      const need = (r: number): number => sum(columnOf(m, r));
      const fault = (
        what: string,
        layout: Layout,
        outRows: number,
        recvCounts: number[] | undefined,
        names: RegExp,
      ): void => {
        const [dtype, row] = layout;
        const tag = tags++;
        const sent = vInput(tag, m, rowElemsOf(layout) * size(dtype));
        const x = upload(dtype, sent, [sum(m[rank]!), ...row]);
        const [whole, out] = poisoned(dtype, [outRows, ...row]);
        const o = { ...opt(algorithm), ...(recvCounts && { recvCounts }) };
        cases.push(
          refused(`${what} (${named(algorithm)})`, [x, sent], whole, names, () =>
            c.allToAllV(x, out, m[rank]!, o),
          ),
        );
      };
      fault(
        `out of rank ${t} one row short`,
        LAYOUTS[1]!,
        rank === t ? need(rank) - 1 : need(rank) + (rank % 2),
        rank % 2 === 0 ? column(m) : undefined,
        new RegExp(`\\brank ${t} receives ${need(t)} rows\\b.*out holds ${need(t) - 1}\\b`),
      );
      fault(
        `out of rank ${t} empty`,
        LAYOUTS[0]!,
        rank === t ? 0 : need(rank),
        undefined,
        new RegExp(`\\brank ${t} receives ${need(t)} rows\\b.*out holds 0\\b`),
      );
      fault(
        `recvCounts of rank ${t} one too many`,
        LAYOUTS[2]!,
        need(rank) + 1,
        rank === t ? column(m).map((v, s) => (s === 0 ? v + 1 : v)) : column(m),
        new RegExp(`\\brank ${t} expects\\b`),
      );
      const swapped = column(m);
      [swapped[0], swapped[1]] = [swapped[1]!, swapped[0]! + (swapped[0] === swapped[1] ? 1 : 0)];
      fault(
        `recvCounts of rank ${t} swapped`,
        LAYOUTS[3]!,
        need(rank) + 2,
        rank === t ? swapped : rank % 2 === 1 ? column(m) : undefined,
        new RegExp(`\\brank ${t} expects\\b`),
      );
      if (bound.includes(algorithm)) {
        // Rank t's x one byte past the staging buffer, in world equal parts: the others' outs overflow too.
        const per = rank === t ? Math.ceil((capacity + 1) / world) : 1;
        const sent = new Uint8Array(per * world);
        const x = upload("u8", sent);
        const [whole, out] = poisoned("u8", [world]);
        cases.push(
          refused(
            `x of rank ${t} beyond the staging buffer (${named(algorithm)})`,
            [x, sent],
            whole,
            new RegExp(`\\brank ${t}'s x needs \\d+ bytes`),
            () => c.allToAllV(x, out, new Array<number>(world).fill(per), opt(algorithm)),
          ),
        );
      }
    }
  await batch(cases);
  await agree(new TextEncoder().encode(said.join("\n")), "group-judged errors: the messages");
  await usable("after group-judged errors");
  done(`group-judged errors: ${cases.length} refused alike on every rank, nothing written; usable after`);
}

// The counts in a tensor, refused by the group: one rank's counts adding up to a row more than its x has,
// or negative; one rank's out a row short; one rank's rows of another size than the others'; with an
// algorithm that stages x whole, one rank's x beyond the staging buffer. The CPU backend throws at the
// call; GPUs write no row, set every count to -1 and throw at the next synchronize, once
// (Collectives.allToAllV). Either way every rank's message names the rank, alike, and nothing is written;
// one call per wait, as a GPU reports one refusal at a time.
{
  let refusals = 0;
  const refusal = async (
    what: string,
    layout: Layout,
    sent: Uint8Array,
    counts: number[],
    outRows: number,
    algorithm: Algorithm,
    names: RegExp,
  ): Promise<void> => {
    const [dtype, row] = layout;
    const x = upload(dtype, sent, [sent.length / (rowElemsOf(layout) * size(dtype)), ...row]);
    const [whole, out] = poisoned(dtype, [outRows, ...row]);
    const countsMade = Int32Array.from(counts);
    const onDevice = make.fromHost(countsMade, "i32");
    let got: { recvCounts: AnyTensor } | undefined;
    let error: unknown;
    await group.barrier();
    try {
      got = c.allToAllV(x, out, onDevice, opt(algorithm));
      wait();
    } catch (e) {
      error = e;
    }
    const name = `${what} (${named(algorithm)})`;
    if (cuda) {
      assert.ok(got !== undefined, `${name}: refused at the call, not by the GPU: ${String(error)}`);
      assert.match(String(error), /was refused on every rank: /, `${name}: the GPU's refusal`);
      wait();
      assert.deepEqual(
        Array.from(got.recvCounts.toHost({ dtype: "i32" })),
        new Array<number>(world).fill(-1),
        `${name}: recvCounts`,
      );
      got.recvCounts.dispose();
    } else assert.equal(got, undefined, `${name}: the call was not refused`);
    assert.ok(typed(error), `rank ${rank}: ${name}: not an InvalidArgumentError: ${String(error)}`);
    const message = (error as Error).message;
    assert.match(message, names, `${name}: the message names the rank`);
    expectPoisoned(whole, poison(dtype, out.numel), `${name}: out was written`);
    unwritten(x, sent, name);
    unwritten(onDevice, new Uint8Array(countsMade.buffer), `${name}: counts`);
    await agree(new TextEncoder().encode(message), `${name}: the message`);
    for (const t of [x, whole, onDevice]) t.dispose();
    refusals++;
  };
  const bound = stagingBound(A2AV_TENSOR, ALL_TO_ALL_V);
  const layout = LAYOUTS[1]!;
  const rowBytes = rowElemsOf(layout) * size(layout[0]);
  for (const algorithm of A2AV_TENSOR)
    for (const t of ranks) {
      const m = randomCounts().map((row) => row.map((v) => v + 1));
      const need = sum(column(m));
      const changed = (j: number, v: (c: number) => number): number[] =>
        m[rank]!.map((n, d) => (rank === t && d === j ? v(n) : n));
      await refusal(
        `counts of rank ${t} one row over its x`,
        layout,
        vInput(tags++, m, rowBytes),
        changed(0, (n) => n + 1),
        need + 1,
        algorithm,
        new RegExp(`\\brank ${t}'s sendCounts add up to ${sum(m[t]!) + 1} rows, more than its x has`),
      );
      await refusal(
        `counts of rank ${t} with a negative one`,
        layout,
        vInput(tags++, m, rowBytes),
        changed(world - 1, () => -1),
        need + 1,
        algorithm,
        new RegExp(`\\brank ${t} sends a negative row count to rank ${world - 1}\\b`),
      );
      await refusal(
        `out of rank ${t} one row short`,
        layout,
        vInput(tags++, m, rowBytes),
        m[rank]!,
        rank === t ? need - 1 : need,
        algorithm,
        new RegExp(`\\brank ${t} receives ${sum(columnOf(m, t))} rows\\b.*out holds`),
      );
      // Rank t's rows (x's and out's) an element wider: named by the first rank whose rows are not of rank
      // 0's size (rank 1 when rank 0's are the wide ones).
      const wide: Layout = [layout[0], [rowElemsOf(layout) + 1]];
      const wideBytes = rowElemsOf(wide) * size(layout[0]);
      const differs = t === 0 ? 1 : t;
      await refusal(
        `rows of rank ${t} of another size`,
        rank === t ? wide : layout,
        vInput(tags++, m, rank === t ? wideBytes : rowBytes),
        m[rank]!,
        need,
        algorithm,
        new RegExp(
          `\\brank ${differs}'s rows are ${differs === t ? wideBytes : rowBytes} bytes, not the size of rank 0's`,
        ),
      );
      // Rank t's x a byte past the staging buffer; the counts send one row to each rank, as x may hold
      // more rows than they send.
      if (bound.includes(algorithm))
        await refusal(
          `x of rank ${t} beyond the staging buffer`,
          LAYOUTS[0]!,
          new Uint8Array(rank === t ? capacity + 1 : world),
          new Array<number>(world).fill(1),
          world,
          algorithm,
          new RegExp(`\\brank ${t}'s x needs \\d+ bytes`),
        );
    }
  await usable("after refusals of counts in a tensor");
  done(`counts in a tensor: ${refusals} refusals alike on every rank, nothing written; usable after`);
}

// A CUDA graph of allToAll (every algorithm) and sendRecv (every algorithm, with this rank's peer of the
// first round), replayed with the inputs changed in between; each replay's outputs copied aside. The CPU
// backend has no graphs.
if (gpu) {
  const stream = defaultStream(gpu.device);
  const gc = gpu.collectives;
  const n = 3000;
  const peer = peerIn(0);
  const x = Tensor.empty([n * world], "bf16");
  const p2pIn = Tensor.empty([513], "f32");
  const outs = GPU_ALL_TO_ALL_ALGORITHMS.map(() => Tensor.empty([n * world], "bf16"));
  const p2pOuts = GPU_SEND_RECV_ALGORITHMS.map(() => Tensor.empty([513], "f32"));
  const replays = [0, 1, 2].map(() => {
    const tag = tags++;
    return {
      tag,
      x: fromBytes(Tensor, "bf16", concat(ranks.map((d) => message(tag, rank, d, 2 * n)))),
      p: fromBytes(Tensor, "f32", message(tag, rank, peer ?? rank, 4 * 513)),
      outs: outs.map((o) => Tensor.empty(o.shape, "bf16")),
      p2pOuts: p2pOuts.map(() => Tensor.empty([513], "f32")),
    };
  });
  await group.barrier();
  const graph = Graph.capture(stream, () => {
    GPU_ALL_TO_ALL_ALGORITHMS.forEach((algorithm, i) => gc.allToAll(x, outs[i]!, { algorithm, stream }));
    if (peer !== undefined)
      GPU_SEND_RECV_ALGORITHMS.forEach((algorithm, i) =>
        gc.sendRecv(p2pIn, p2pOuts[i]!, peer, { algorithm, stream }),
      );
  });
  for (const r of replays) {
    x.copyFrom(r.x, stream);
    p2pIn.copyFrom(r.p, stream);
    graph.launch(stream);
    r.outs.forEach((o, i) => o.copyFrom(outs[i]!, stream));
    r.p2pOuts.forEach((o, i) => o.copyFrom(p2pOuts[i]!, stream));
  }
  gpu.synchronize(stream);
  for (const [k, r] of replays.entries()) {
    const want = concat(ranks.map((s) => message(r.tag, s, rank, 2 * n)));
    r.outs.forEach((o, i) =>
      assertSameBits(bytesOf(o), want, `graph replay ${k} ${GPU_ALL_TO_ALL_ALGORITHMS[i]}`, seed),
    );
    if (peer !== undefined)
      r.p2pOuts.forEach((o, i) =>
        assertSameBits(
          bytesOf(o),
          message(r.tag, peer, rank, 4 * 513),
          `graph replay ${k} sendRecv ${GPU_SEND_RECV_ALGORITHMS[i]}`,
          seed,
        ),
      );
  }
  graph.dispose();
  for (const t of [
    x,
    p2pIn,
    ...outs,
    ...p2pOuts,
    ...replays.flatMap((r) => [r.x, r.p, ...r.outs, ...r.p2pOuts]),
  ])
    t.dispose();
  done("graph replays with changed inputs: exact");
}

// Calls alternating sizes, dtypes, peers, algorithms and kinds, made back to back in batches of 50 (the
// buffers each reuses settled in between), the last rank 50 ms late for the first batch (fewer when ranks
// share a GPU: there every call waits for the GPU's time slices).
{
  const CALLS = sharing ? 100 : 500;
  for (let start = 0; start < CALLS; start += 50) {
    const cases: (Case | undefined)[] = [];
    for (let i = start; i < Math.min(CALLS, start + 50); i++) {
      const n = [1, 7, 4097, 65536, 333, 1000][i % 6]!;
      const dtype = ALL_DTYPES[i % ALL_DTYPES.length]!;
      // The j-th call of its kind.
      const j = Math.floor(i / 5);
      const what = `call ${i}`;
      if (i % 5 === 4) {
        const m = j % 2 === 0 ? randomCounts() : sinkCounts(j % world);
        const layout = LAYOUTS[j % LAYOUTS.length]!;
        const pick = (list: readonly Algorithm[]): Algorithm => list[Math.floor(j / 3) % list.length];
        cases.push(
          j % 3 === 0
            ? vTensorCase(pick(A2AV_TENSOR), m, layout, i, what)
            : vHostCase(pick(A2AV_HOST), m, layout, i, what),
        );
      } else if (i % 5 === 2) {
        const other = p2pHeld([7, 70_000, 1][i % 3]!, "u8");
        cases.push(pairCase(P2P[j % P2P.length], "u8", j, p2pHeld(n, "u8"), other, 0, what));
      } else cases.push(allToAllCase(dtype, a2aHeld(n, dtype), A2A[i % A2A.length], what));
    }
    await batch(cases, start === 0 ? world - 1 : undefined);
  }
  done(`a straggler and ${CALLS} alternating calls back to back: exact`);
}

// Local bad inputs, made on every rank at once: typed errors with a stable code, nothing written, the
// group in step and usable after. A refused send or recv still takes its message number between the pair,
// so point-to-point calls are refused in matched pairs, as they are made: between mates (rank ^ 1), one
// sending, the other receiving. Arguments that are not tensors are typed errors too, never TypeErrors.
{
  const peer = rank ^ 1;
  const mated = peer < world;
  // Sizes valid at every world: n6 splits into world chunks, n7 never does.
  const n6 = 2 * world;
  const n7 = 2 * world + 1;
  const watched: Made[] = [];
  const watch = (dtype: DType, b: Uint8Array, shape?: number[]): AnyTensor => {
    const t = upload(dtype, b, shape);
    watched.push([t, b]);
    return t;
  };
  const mine = (nbytes: number): Uint8Array => message(tags++, rank, rank, nbytes);
  const x = watch("f32", mine(n6 * 4));
  const outF32 = watch("f32", poison("f32", n6));
  const outF16 = watch("f16", poison("f16", n6));
  const out7 = watch("f32", poison("f32", n7));
  const x7 = watch("f32", mine(n7 * 4));
  const v2 = watch("f16", mine(24), [4, 3]);
  const vOut = watch("f16", poison("f16", 60), [20, 3]);
  const vOut4 = watch("f16", poison("f16", 80), [20, 4]);
  const vOutU8 = watch("u8", poison("u8", 20));
  // One tensor of 2 n6 elements: x at [0, n6), out at [n6 / 2, 3 n6 / 2) (overlap), [0, n6) (identical),
  // [n6 - 1, 2 n6 - 1) (sharing x's last element).
  const shared = watch("f32", mine(8 * n6));
  const ox = shared.slice(0, n6);
  const oOut = shared.slice(n6 / 2, (3 * n6) / 2);
  const oSame = shared.slice(0, n6);
  const oLast = shared.slice(n6 - 1, 2 * n6 - 1);
  // Past the staging buffer by a chunk of f32 for each rank.
  const bigN = (Math.floor(capacity / 4 / world) + 1) * world;
  const big = watch("f32", poison("f32", bigN));
  const bigOut = watch("f32", poison("f32", bigN));
  const counts = ranks.map((r) => (r === 0 ? 4 : 0)); // all 4 rows of v2 to rank 0
  const countsI32 = watch("i32", new Uint8Array(Int32Array.from(counts).buffer));
  const countsF32 = watch("f32", new Uint8Array(Float32Array.from(counts).buffer));
  const countsShort = watch("i32", new Uint8Array(Int32Array.from(counts.slice(1)).buffer));
  const recvOut = watch("i32", poison("i32", world));
  // One i32 tensor of 5 world elements: x at [0, n6), out at [n6, 2 n6), and counts that send a row to
  // each rank (the call would run but for recvCountsOut); recvCountsOut inside x, or sharing out's last
  // element.
  const iShared = watch("i32", mine(20 * world));
  const ix = iShared.slice(0, n6);
  const iOut = iShared.slice(n6, 2 * n6);
  const ones = watch("i32", new Uint8Array(Int32Array.from(ranks.map(() => 1)).buffer));
  const toRank0 = (n: number): number[] => ranks.map((r) => (r === 0 ? n : 0));
  const no = (v: unknown): AnyTensor => v as AnyTensor;
  const nope = { algorithm: "nope" };
  type Bad = [string, () => unknown];
  const each = (
    algorithms: readonly Algorithm[],
    what: string,
    call: (o: { algorithm?: string }) => unknown,
  ): Bad[] => algorithms.map((a) => [`${what} ${named(a)}`, () => call(opt(a))]);
  const OTHER_P2P = theirs(P2P, cuda ? CPU_EXCHANGE_ALGORITHMS : GPU_SEND_RECV_ALGORITHMS);
  const mates: Bad[] = [
    ["sendRecv dtype mismatch", () => c.sendRecv(x, outF16, peer)],
    ["sendRecv out overlaps x", () => c.sendRecv(ox, oOut, peer)],
    ["sendRecv out = x", () => c.sendRecv(ox, oSame, peer)],
    ["sendRecv out overlaps x by one element", () => c.sendRecv(ox, oLast, peer)],
    ["sendRecv x overlaps out by one element", () => c.sendRecv(oLast, ox, peer)],
    ["sendRecv algorithm nope", () => c.sendRecv(x, outF32, peer, nope)],
    ...each(OTHER_P2P, "sendRecv algorithm of the other backend:", (o) => c.sendRecv(x, outF32, peer, o)),
    ["send / recv algorithm nope", () => (rank < peer ? c.send(x, peer, nope) : c.recv(outF32, peer, nope))],
    ...each(OTHER_P2P, "recv / send algorithm of the other backend:", (o) =>
      rank < peer ? c.recv(outF32, peer, o) : c.send(x, peer, o),
    ),
    ["sendRecv x null", () => c.sendRecv(no(null), outF32, peer)],
    ["sendRecv out undefined", () => c.sendRecv(x, no(undefined), peer)],
    ["send x null / recv out a number", () => (rank < peer ? c.send(no(null), peer) : c.recv(no(7), peer))],
    // Only the CPU backend stages a message whole.
    ...(cuda
      ? []
      : ([
          ["sendRecv out over the staging buffer", () => c.sendRecv(x, bigOut, peer)],
          ["sendRecv x over the staging buffer", () => c.sendRecv(big, outF32, peer)],
        ] satisfies Bad[])),
  ];
  const cases: Bad[] = [
    ...(mated ? mates : []),
    ["sendRecv peer = self", () => c.sendRecv(x, outF32, rank)],
    ["sendRecv peer = world", () => c.sendRecv(x, outF32, world)],
    ["sendRecv peer -1", () => c.sendRecv(x, outF32, -1)],
    ["sendRecv peer 0.5", () => c.sendRecv(x, outF32, 0.5)],
    ["send peer = self", () => c.send(x, rank)],
    ["send peer = world", () => c.send(x, world)],
    ["recv peer out of range", () => c.recv(outF32, world + 3)],
    ["allToAll dtype mismatch", () => c.allToAll(x, outF16)],
    ["allToAll numel not divisible", () => c.allToAll(x7, out7)],
    ["allToAll out of another size", () => c.allToAll(x, out7)],
    ["allToAll out overlaps x", () => c.allToAll(ox, oOut)],
    ["allToAll out = x", () => c.allToAll(ox, oSame)],
    ["allToAll out overlaps x by one element", () => c.allToAll(ox, oLast)],
    ["allToAll algorithm nope", () => c.allToAll(x, outF32, nope)],
    ["allToAll algorithm lamport (all-reduce's)", () => c.allToAll(x, outF32, { algorithm: "lamport" })],
    ...each(
      theirs(A2A, cuda ? CPU_EXCHANGE_ALGORITHMS : GPU_ALL_TO_ALL_ALGORITHMS),
      "allToAll algorithm of the other backend:",
      (o) => c.allToAll(x, outF32, o),
    ),
    // copy_engine takes x through the staging buffer a piece at a time, at any size.
    ...each(
      stagingBound(
        A2A.filter((a) => a !== "copy_engine"),
        ALL_TO_ALL,
      ),
      "allToAll over the staging buffer,",
      (o) => c.allToAll(big, bigOut, o),
    ),
    ["allToAll x null", () => c.allToAll(no(null), outF32)],
    ["allToAll out a number", () => c.allToAll(x, no(7))],
    ["allToAllV dtype mismatch", () => c.allToAllV(x, outF16, toRank0(n6))],
    ["allToAllV row size mismatch", () => c.allToAllV(v2, vOut4, counts)],
    ["allToAllV 2-D x, 1-D out", () => c.allToAllV(v2, vOutU8, counts)],
    ["allToAllV sendCounts add up to less", () => c.allToAllV(v2, vOut, toRank0(1))],
    ["allToAllV sendCounts add up to more", () => c.allToAllV(v2, vOut, new Array<number>(world).fill(3))],
    ["allToAllV sendCounts too long", () => c.allToAllV(v2, vOut, [...counts, 0])],
    ["allToAllV sendCounts too short", () => c.allToAllV(v2, vOut, counts.slice(1))],
    ["allToAllV sendCounts empty", () => c.allToAllV(v2, vOut, [])],
    ["allToAllV counts tensor of f32", () => c.allToAllV(v2, vOut, countsF32)],
    ["allToAllV counts tensor too short", () => c.allToAllV(v2, vOut, countsShort)],
    [
      "allToAllV recvCounts with a counts tensor",
      () => c.allToAllV(v2, vOut, countsI32, { recvCounts: counts } as never),
    ],
    ["allToAllV negative count", () => c.allToAllV(v2, vOut, [5, -1, ...toRank0(0).slice(2)])],
    ["allToAllV count 1.5", () => c.allToAllV(v2, vOut, [2.5, 1.5, ...toRank0(0).slice(2)])],
    ["allToAllV count NaN", () => c.allToAllV(v2, vOut, [NaN, 4, ...toRank0(0).slice(2)])],
    [
      "allToAllV count a string",
      () => c.allToAllV(v2, vOut, ["4", ...toRank0(0).slice(1)] as unknown as number[]),
    ],
    ["allToAllV sendCounts not an array", () => c.allToAllV(v2, vOut, 4 as unknown as number[])],
    ["allToAllV out overlaps x", () => c.allToAllV(ox, oOut, toRank0(n6))],
    ["allToAllV out = x", () => c.allToAllV(ox, oSame, toRank0(n6))],
    ["allToAllV out overlaps x by one element", () => c.allToAllV(ox, oLast, toRank0(n6))],
    ["allToAllV algorithm nope", () => c.allToAllV(v2, vOut, counts, nope)],
    ["allToAllV algorithm put (send's)", () => c.allToAllV(v2, vOut, counts, { algorithm: "put" })],
    ...each(
      theirs(A2AV, cuda ? CPU_EXCHANGE_ALGORITHMS : GPU_ALL_TO_ALL_V_ALGORITHMS),
      "allToAllV algorithm of the other backend:",
      (o) => c.allToAllV(v2, vOut, counts, o),
    ),
    ...each(theirs(A2AV_HOST, A2AV), "allToAllV with counts as an array, algorithm", (o) =>
      c.allToAllV(v2, vOut, counts, o),
    ),
    ...each(theirs(A2AV_TENSOR, A2AV), "allToAllV with counts in a tensor, algorithm", (o) =>
      c.allToAllV(v2, vOut, countsI32, o),
    ),
    [
      "allToAllV recvCountsOut with counts as an array",
      () => c.allToAllV(v2, vOut, counts, { recvCountsOut: recvOut } as never),
    ],
    [
      "allToAllV recvCountsOut overlaps x",
      () => c.allToAllV(ix, iOut, ones, { recvCountsOut: iShared.slice(0, world) }),
    ],
    [
      "allToAllV recvCountsOut overlaps out by one element",
      () => c.allToAllV(ix, iOut, ones, { recvCountsOut: iShared.slice(2 * n6 - 1, 2 * n6 - 1 + world) }),
    ],
    ["allToAllV recvCountsOut of f32", () => c.allToAllV(v2, vOut, countsI32, { recvCountsOut: countsF32 })],
    ["allToAllV recvCountsOut null", () => c.allToAllV(v2, vOut, countsI32, { recvCountsOut: no(null) })],
    ["allToAllV recvCounts too short", () => c.allToAllV(v2, vOut, counts, { recvCounts: [4] })],
    ["allToAllV recvCounts negative", () => c.allToAllV(v2, vOut, counts, { recvCounts: toRank0(-1) })],
    ...each(stagingBound(A2AV_HOST, ALL_TO_ALL_V), "allToAllV x over the staging buffer,", (o) =>
      c.allToAllV(big, bigOut, toRank0(bigN), o),
    ),
    ["allToAllV x null", () => c.allToAllV(no(null), outF32, toRank0(n6))],
    ["allToAllV out undefined", () => c.allToAllV(x, no(undefined), toRank0(n6))],
  ];
  const wrong = untyped(cases);
  wait();
  assert.deepEqual(wrong, [], `rank ${rank}: bad inputs must give InvalidArgumentError`);
  watched.forEach(([t, made], k) => unwritten(t, made, `bad inputs: tensor ${k}`));
  for (const [t] of watched) t.dispose();
  await usable("after bad inputs");
  done(`bad inputs: ${cases.length} typed errors, nothing written; usable after`);
}

c.barrier();
wait();
total(world);
console.log(`${backend} exchange ok rank ${rank}`);
await group.destroy();

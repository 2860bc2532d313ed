// One rank of the collectives check, on the backend its argument names (symmkit run -n N collectives.js
// cpu|cuda): allReduce, allGather, reduceScatter and barrier with every algorithm of that backend (the
// lists of src/ops/coll/registry.ts). The CPU backend runs it in test/cpu-collectives.test.ts (worlds 2 to
// 4), GPUs in test/gpu/distributed.test.ts and bench/gpu-suite.sh. Sizes up to 1 GiB: GPUs only,
// test/gpu/ranks/collectives-large.ts.
//
// Both backends make every check: f32, bf16 and f16; sizes 1, 7, 4097 and 65539 (GPUs also 1 000 003);
// random inputs and small integers; sum, max and min; outputs poisoned inside guards and misaligned by an
// element, inputs checked unwritten, in place; every result bit for bit against a host reference written
// here apart from the backends' code (f32 accumulation in rank order, one rounding), hence alike on
// every rank, and agreed through the store all the same; NCCL's reductions, in their own order, only
// where no order can change the bits. Inputs holding NaN; auto at sizes on both sides of its rules; a
// barrier waiting for a late rank; 1000 calls alternating collectives, sizes, dtypes and algorithms
// (200 on the CPU backend), in place and not, with a rank 50 ms late; bad inputs as typed errors with a
// stable code, alike on every rank, nothing written, the group usable after. On GPUs only: symmetric
// inputs read in place and NCCL on them, copy-engine progress flags, the mailbox's sentinel, CUDA graphs
// replayed with new inputs, auto in pieces, GPU-only refusals. On the CPU backend only: broadcast.
//
// Sections run in batches (test/support/batch.ts): inputs and poisoned outputs first, a store barrier,
// the calls back to back, one wait, then the checks. Seeded, the seed printed; rank 0 prints each section
// with its seconds.
import assert from "node:assert/strict";
import { assertSameBits, rawHash } from "../support/agree.js";
import type { Case } from "../support/batch.js";
import { startProgram } from "../support/program.js";
import { asBytes, concat, expectPoisonedIn, poisonedIn, poisonOf } from "../support/tensors.js";
import { InvalidArgumentError } from "../../src/errors.js";
import {
  algorithmRecord,
  AUTO_ALGORITHMS,
  CPU_ALL_GATHER_ALGORITHMS,
  CPU_ALL_REDUCE_ALGORITHMS,
  CPU_REDUCE_SCATTER_ALGORITHMS,
  GPU_ALL_GATHER_ALGORITHMS,
  GPU_ALL_REDUCE_ALGORITHMS,
  GPU_REDUCE_SCATTER_ALGORITHMS,
  type CollectiveName,
  type GpuAllGatherAlgorithm,
  type GpuAllReduceAlgorithm,
  type GpuReduceScatterAlgorithm,
} from "../../src/ops/coll/registry.js";
import { REDUCE_OPS, type ReduceOp } from "../../src/ops/validate.js";
import { readDistEnv } from "../../src/distributed/env.js";
import { Device, deviceCount } from "../../src/runtime/device.js";
import { decodeToF32, dtypeInfo, encode, type DType, type RawArray } from "../../src/runtime/dtype.js";
import { Graph } from "../../src/runtime/graph.js";
import { defaultStream } from "../../src/runtime/stream.js";
import { Tensor, type AnyTensor } from "../../src/runtime/tensor.js";
import { readEnvVar } from "../../src/settings.js";

// GPUs: the largest input below staged whole, a reduce-scatter of 1 000 003 f32 per rank from every rank
// (16 MiB at least); the CPU backend: 4 MiB, so that inputs beyond it stay small.
const program = await startProgram("collectives", {
  cuda: Math.max(16, Math.ceil((4 * 1_000_003 * readDistEnv().worldSize) / (1 << 20))) << 20,
  cpu: 1 << 22,
});
const { backend, cuda, group, gpu, c, make, rank, world, capacity, seed } = program;
const { agree, ranks, wait, batch, done, total } = program;
// The CPU test checks that this directory is gone after the job.
if (rank === 0) console.log(`job directory ${readEnvVar("SYMMKIT_FD_DIR")}`);
const FLOATS = ["f32", "bf16", "f16"] as const;

// ---- Algorithms: this backend's, auto among them.
const ALGORITHMS: Readonly<Record<CollectiveName, readonly string[]>> = cuda
  ? {
      "all-reduce": GPU_ALL_REDUCE_ALGORITHMS,
      "all-gather": GPU_ALL_GATHER_ALGORITHMS,
      "reduce-scatter": GPU_REDUCE_SCATTER_ALGORITHMS,
    }
  : {
      "all-reduce": CPU_ALL_REDUCE_ALGORITHMS,
      "all-gather": CPU_ALL_GATHER_ALGORITHMS,
      "reduce-scatter": CPU_REDUCE_SCATTER_ALGORITHMS,
    };
/** The algorithms of `collective` that take `bytes` per rank (all-reduce's and all-gather's input,
 * reduce-scatter's output) from a plain input of `inBytes` (0: a symmetric one). GPUs: auto always (beyond
 * the staging buffer in pieces), the others where the mailbox and staging buffer hold what their records
 * need; the CPU backend stages every input whole. */
function runnable(collective: CollectiveName, bytes: number, inBytes: number): string[] {
  return ALGORITHMS[collective].filter((a) =>
    gpu ? a === "auto" || gpu.collectives.canRun(collective, a, bytes, inBytes) : inBytes <= capacity,
  );
}
/** Whether `algorithm` gives the reference's bits: the rank-order ones always; NCCL's reductions, in their
 * own order, only where no order changes them (max, min, or sums of small integers). */
const exactFor = (collective: CollectiveName, algorithm: string, op: ReduceOp, integers: boolean): boolean =>
  algorithm === "auto" || algorithmRecord(collective, algorithm).rankOrder || op !== "sum" || integers;

// ---- Inputs and the reference.
let salts = 0;
/** Rank r's input of case `salt`: small integers (`integers`: every partial sum exact in any dtype and
 * order), or uniform in [-2, 2), drawn by the backend (GPUs draw every rank's millions fast, where the
 * host's Philox would take seconds). */
function inputOf(dtype: DType, n: number, r: number, salt: number, integers: boolean): RawArray {
  if (integers)
    return encode(
      dtype,
      Array.from({ length: n }, (_, i) => ((i * 37 + r * 101 + salt * 13) % 64) - 32),
    );
  const t = make.rand([n], dtype, { seed, offset: BigInt(r + 100 * salt) << 32n, low: -2, high: 2 });
  const raw = t.toHost();
  t.dispose();
  return raw;
}
/** Every rank's input of a new case. */
function inputs(dtype: DType, n: number, integers: boolean): RawArray[] {
  const salt = salts++;
  return ranks.map((r) => inputOf(dtype, n, r, salt, integers));
}
/** The reduction rule written out plainly, apart from the backends' code (src/ops/coll/reduce.ts): element
 * by element from `at`, f32 accumulation in rank order (a NaN loses to a number in max and min), then one
 * rounding to the dtype. */
function reference(dtype: DType, op: ReduceOp, xs: readonly RawArray[], at = 0, n = xs[0]!.length): RawArray {
  const vals = xs.map((x) => decodeToF32(dtype, x.subarray(at, at + n)));
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    let acc = vals[0]![i]!;
    for (let r = 1; r < world; r++) {
      const v = vals[r]![i]!;
      if (op === "sum") acc = Math.fround(acc + v);
      else if (Number.isNaN(acc) || (!Number.isNaN(v) && (op === "max" ? v > acc : v < acc))) acc = v;
    }
    out[i] = acc;
  }
  return encode(dtype, out);
}
/** What an all-gather of the first `n` elements of every rank's input gives. */
function gathered(xs: readonly RawArray[], n = xs[0]!.length): RawArray {
  const out = new (xs[0]!.constructor as new (length: number) => RawArray)(n * world);
  xs.forEach((x, r) => out.set(x.subarray(0, n) as never, r * n));
  return out;
}

// ---- Checks: outputs inside guards, hashed for the ranks to agree on once a batch.
let outputs: string[] = [];
/** `whole` (made by poisoned) holds `offset` elements of poison, then `want`, inside its guards. */
function holds(whole: AnyTensor, offset: number, want: RawArray, what: string, alike: boolean): void {
  const inner = concat([poisonOf(make, whole.dtype, offset), asBytes(want)]);
  const got = expectPoisonedIn(make, whole, inner, what, seed);
  if (alike) outputs.push(rawHash(got));
}
/** `t` holds `want` (no guards: an input written in place). */
function equals(t: AnyTensor, want: RawArray, what: string, alike = true): void {
  const got = t.toHost();
  assertSameBits(got, want, what, seed);
  if (alike) outputs.push(rawHash(got));
}
/** A batch, then every rank's outputs agreed bit for bit. */
async function checked(what: string, cases: readonly (Case | undefined)[], late?: number): Promise<void> {
  outputs = [];
  await batch(cases, late);
  await agree(new TextEncoder().encode(outputs.join("\n")), `${what}: the outputs`);
}
const upload = (dtype: DType, raw: RawArray): AnyTensor => make.fromHost(raw, dtype);
/** A case that checks, after the others' calls, that inputs were left as they were made. */
const unwritten = (made: readonly [AnyTensor, RawArray][], what: string): Case => ({
  run: () => undefined,
  check: () =>
    made.forEach(([t, raw], k) => assertSameBits(t.toHost(), raw, `${what}: input ${k} was written`, seed)),
  tensors: made.map(([t]) => t),
});
/** A call into a poisoned output of `n` elements, `offset` elements in (a misaligned view), that returns
 * it: checked against `want`, and agreed by the ranks if `alike` (not a reduce-scatter's chunk). */
function into(
  dtype: DType,
  n: number,
  offset: number,
  want: RawArray,
  what: string,
  call: (out: AnyTensor) => AnyTensor,
  alike = true,
): Case {
  const [whole, inner] = poisonedIn(make, dtype, [n + offset]);
  const out = inner.slice(offset);
  let got: AnyTensor | undefined;
  return {
    run: () => void (got = call(out)),
    check: () => {
      assert.equal(got, out, `${what}: returns its output`);
      holds(whole, offset, want, what, alike);
    },
    tensors: [whole],
  };
}
/** A call on a tensor holding `made`, checked to hold `want` after (in place). */
function inPlace(
  dtype: DType,
  made: RawArray,
  want: RawArray,
  what: string,
  call: (t: AnyTensor) => void,
): Case {
  const t = upload(dtype, made);
  return { run: () => call(t), check: () => equals(t, want, what), tensors: [t] };
}
const opt = (algorithm: string): { algorithm: string } => ({ algorithm });

// ---- allReduce, allGather and reduceScatter with every algorithm that takes the size: every op, outputs
// misaligned and in place at 4097; the copy-engine all-gather (GPUs) with its progress flags.
/** The cases of one dtype and size, `integers` or random inputs; `tag` names them. */
function everyAlgorithm(dtype: DType, n: number, integers: boolean, tag: string): Case[] {
  const eb = dtypeInfo(dtype).bytes;
  const xs = inputs(dtype, n, integers);
  const bigs = inputs(dtype, n * world, integers);
  const x = upload(dtype, xs[rank]!);
  const big = upload(dtype, bigs[rank]!);
  const ops = n === 4097 ? REDUCE_OPS : (["sum"] as const);
  const offsets = n === 4097 ? [0, 1] : [0];
  const name = `${tag}${dtype} n=${n}${integers ? " integers" : ""}`;
  const cases: Case[] = [];
  for (const op of ops) {
    const want = reference(dtype, op, xs);
    for (const a of runnable("all-reduce", n * eb, n * eb)) {
      if (!exactFor("all-reduce", a, op, integers)) continue;
      for (const offset of offsets)
        cases.push(
          into(dtype, n, offset, want, `allReduce ${a} ${op} ${name} +${offset}`, (output) =>
            c.allReduce(x, { ...opt(a), op, output }),
          ),
        );
      if (n === 4097)
        cases.push(
          inPlace(dtype, xs[rank]!, want, `allReduce ${a} ${op} ${name} in place`, (t) =>
            c.allReduce(t, { ...opt(a), op, output: t }),
          ),
        );
    }
    const rsWant = reference(dtype, op, bigs, rank * n, n);
    for (const a of runnable("reduce-scatter", n * eb, n * world * eb)) {
      if (!exactFor("reduce-scatter", a, op, integers)) continue;
      for (const offset of offsets)
        cases.push(
          into(
            dtype,
            n,
            offset,
            rsWant,
            `reduceScatter ${a} ${op} ${name} +${offset}`,
            (output) => c.reduceScatter(big, output, { ...opt(a), op }),
            false,
          ),
        );
      // In place: the output is this rank's own chunk of the input.
      if (n === 4097) {
        const y = upload(dtype, bigs[rank]!);
        const what = `reduceScatter ${a} ${op} ${name} in place`;
        cases.push({
          run: () => void c.reduceScatter(y, y.slice(rank * n, (rank + 1) * n), { ...opt(a), op }),
          check: () => equals(y.slice(rank * n, (rank + 1) * n), rsWant, what, false),
          tensors: [y],
        });
      }
    }
  }
  const all = gathered(xs);
  for (const a of runnable("all-gather", n * eb, n * eb))
    for (const offset of offsets) {
      const what = `allGather ${a} ${name} +${offset}`;
      if (gpu && a === "copy_engine") {
        // Poisoned first: the call zeroes the flags, then raises each as its rank's chunk lands.
        const flags = Tensor.full([world + 1], 7, "u32");
        const k = into(dtype, n * world, offset, all, what, (output) =>
          gpu.collectives.allGather(x as Tensor, output as Tensor, { algorithm: a, progressFlags: flags }),
        );
        cases.push({
          ...k,
          check: () => {
            k.check();
            assert.deepEqual([...flags.toHost()], [...ranks.map(() => 1), 7], `${what}: progress flags`);
          },
          tensors: [...k.tensors, flags],
        });
      } else
        cases.push(into(dtype, n * world, offset, all, what, (output) => c.allGather(x, output, opt(a))));
    }
  cases.push(
    unwritten(
      [
        [x, xs[rank]!],
        [big, bigs[rank]!],
      ],
      name,
    ),
  );
  return cases;
}

{
  const SIZES = [1, 7, 4097, 65539, ...(cuda ? [1_000_003] : [])];
  let calls = 0;
  for (const dtype of FLOATS)
    for (const n of SIZES)
      for (const integers of [false, true]) {
        const cases = everyAlgorithm(dtype, n, integers, "");
        calls += cases.length - 1;
        await checked(`${dtype} n=${n}`, cases);
      }
  done(
    `every algorithm, dtype, op and size (misaligned, in place): bit for bit with the reference, guards intact, inputs unwritten, ranks agree; ${calls} calls`,
  );
}

// ---- NaN in the inputs (all bits set, the mailbox algorithms' sentinel on GPUs, carried as another NaN):
// NaN where any rank has one, the exact sum elsewhere, every reducing algorithm, in place.
{
  const n = 4099;
  const cases: Case[] = [];
  for (const dtype of FLOATS) {
    const eb = dtypeInfo(dtype).bytes;
    const salt = salts++;
    const sentinels = (m: number): RawArray[] =>
      ranks.map((r) => {
        const a = inputOf(dtype, m, r, salt, true);
        for (let i = r; i < m; i += 97) asBytes(a).fill(0xff, i * eb, (i + 1) * eb);
        return a;
      });
    const xs = sentinels(n);
    const bigs = sentinels(n * world);
    /** Values, not bits: a NaN's payload is the backend's. */
    const sameValues = (t: AnyTensor, want: RawArray, what: string, alike = true): void => {
      const [got, w] = [t.toHost({ decode: true }), decodeToF32(dtype, want)];
      const i = w.findIndex((v, k) => !Object.is(v, got[k]));
      if (i >= 0) assert.fail(`${what}: element ${i} is ${got[i]}, expected ${w[i]} (seed ${seed})`);
      if (alike) outputs.push(rawHash(t.toHost()));
    };
    const want = reference(dtype, "sum", xs);
    for (const a of runnable("all-reduce", n * eb, n * eb)) {
      const t = upload(dtype, xs[rank]!);
      cases.push({
        run: () => void c.allReduce(t, { ...opt(a), output: t }),
        check: () => sameValues(t, want, `allReduce ${a} ${dtype} with NaNs`),
        tensors: [t],
      });
    }
    const rsWant = reference(dtype, "sum", bigs, rank * n, n);
    for (const a of runnable("reduce-scatter", n * eb, n * world * eb)) {
      const t = upload(dtype, bigs[rank]!);
      const out = t.slice(rank * n, (rank + 1) * n);
      cases.push({
        run: () => void c.reduceScatter(t, out, opt(a)),
        check: () => sameValues(out, rsWant, `reduceScatter ${a} ${dtype} with NaNs`, false),
        tensors: [t],
      });
    }
  }
  await checked("NaN inputs", cases);
  done("inputs holding all-bits-set NaNs: NaN where they should be, exact sums elsewhere, in place");
}

// ---- auto (the default) at sizes on both sides of its rules, into outputs it makes: on GPUs from this
// machine's tune table when there is one (the package ships H200 tables), else the built-in rules, and
// always a rank-order algorithm; the CPU backend up to its staging buffer.
{
  if (gpu && rank === 0)
    console.log(
      `auto's table: ${gpu.collectives.tuneTable ? gpu.collectives.tuneTable.file : "none, built-in rules"}`,
    );
  const cases: Case[] = [];
  for (const n of [7, 4097, 300_001, 3_000_000]) {
    const bytes = 2 * n;
    if (!gpu && bytes * world > capacity) continue;
    if (gpu) {
      for (const [collective, b, staged] of [
        ["all-reduce", bytes * world, bytes * world],
        ["reduce-scatter", bytes, bytes * world],
        ["all-gather", bytes, bytes],
      ] as const)
        assert.ok(
          (AUTO_ALGORITHMS[collective] as readonly string[]).includes(
            gpu.collectives.autoAlgorithm(collective, b, staged),
          ),
          `auto's ${collective} of ${b} bytes picks a rank-order algorithm`,
        );
    }
    const xs = inputs("bf16", n * world, false);
    const x = upload("bf16", xs[rank]!);
    const head = x.slice(0, n);
    const what = `auto n=${n}`;
    const tensors = [x];
    cases.push({
      run: () =>
        void tensors.push(
          c.allReduce(x),
          c.allGather(head, make.empty([n * world], "bf16")),
          c.reduceScatter(x, make.empty([n], "bf16")),
        ),
      check: () => {
        const [, ar, ag, rs] = tensors as [AnyTensor, AnyTensor, AnyTensor, AnyTensor];
        assert.deepEqual(ar.shape, x.shape, `${what}: allReduce's output shape`);
        equals(ar, reference("bf16", "sum", xs), `${what}: allReduce`);
        equals(ag, gathered(xs, n), `${what}: allGather`);
        equals(rs, reference("bf16", "sum", xs, rank * n, n), `${what}: reduceScatter`, false);
      },
      tensors,
    });
  }
  await checked("auto", cases);
  done("auto: all-reduce, all-gather and reduce-scatter exact at every size tried");
}

// ---- Symmetric inputs, read in place without a copy, every algorithm that takes them, and NCCL from a
// plain copy: the same bits on small integers; then in place on the symmetric tensor, two-shot once and
// one-shot 20 times with the input copied in again each time (one-shot stages an input its output
// overwrites, as peers still read it: repeated, so that a race would show), each result copied aside on
// the stream. The CPU backend takes its symmetric tensors as the HostTensors they are, staged like any
// other: nothing of its own to check.
if (gpu) {
  const gc = gpu.collectives;
  const cases: Case[] = [];
  const symmetric: { dispose(): Promise<void> }[] = [];
  for (const dtype of ["f32", "bf16"] as const) {
    const n = 65536 + 5;
    const eb = dtypeInfo(dtype).bytes;
    const xs = inputs(dtype, n, true);
    const bigs = inputs(dtype, n * world, true);
    const exact = Tensor.fromHost(xs[rank]!, dtype);
    const plain = Tensor.fromHost(xs[rank]!, dtype);
    const sym = await gpu.symmetric.empty([n], dtype);
    const symBig = await gpu.symmetric.empty([n * world], dtype);
    symmetric.push(sym, symBig);
    sym.tensor.copyFrom(exact);
    symBig.tensor.copyFrom(Tensor.fromHost(bigs[rank]!, dtype));
    const want = reference(dtype, "sum", xs);
    const rsWant = reference(dtype, "sum", bigs, rank * n, n);
    const name = `${dtype} symmetric input`;
    for (const a of runnable("all-reduce", n * eb, 0))
      cases.push(
        into(dtype, n, 0, want, `allReduce ${a} ${name}`, (o) =>
          gc.allReduce(sym, { algorithm: a as GpuAllReduceAlgorithm, output: o as Tensor }),
        ),
      );
    for (const a of runnable("all-gather", n * eb, 0))
      cases.push(
        into(dtype, n * world, 0, gathered(xs), `allGather ${a} ${name}`, (o) =>
          gc.allGather(sym, o as Tensor, { algorithm: a as GpuAllGatherAlgorithm }),
        ),
      );
    for (const a of runnable("reduce-scatter", n * eb, 0))
      cases.push(
        into(
          dtype,
          n,
          0,
          rsWant,
          `reduceScatter ${a} ${name}`,
          (o) => gc.reduceScatter(symBig, o as Tensor, { algorithm: a as GpuReduceScatterAlgorithm }),
          false,
        ),
      );
    cases.push(
      into(dtype, n, 0, want, `allReduce nccl ${dtype} from a plain copy`, (o) =>
        gc.allReduce(plain, { algorithm: "nccl", output: o as Tensor }),
      ),
    );
    // After the calls above on the stream: every peer has read this rank's input (their closing barriers).
    const snaps = Array.from({ length: 21 }, () => Tensor.empty([n], dtype));
    cases.push({
      run: () => {
        gc.allReduce(sym, { algorithm: "two_shot", output: sym.tensor });
        snaps[0]!.copyFrom(sym.tensor);
        for (const snap of snaps.slice(1)) {
          sym.tensor.copyFrom(exact);
          gc.allReduce(sym, { algorithm: "one_shot", output: sym.tensor });
          snap.copyFrom(sym.tensor);
        }
      },
      check: () =>
        snaps.forEach((s, i) =>
          equals(
            s,
            want,
            `in place on a symmetric tensor, ${dtype}, ${i ? `one-shot call ${i}` : "two-shot"}`,
          ),
        ),
      tensors: [exact, plain, ...snaps],
    });
  }
  await checked("symmetric inputs", cases);
  for (const s of symmetric) await s.dispose();
  done("symmetric inputs read in place by every algorithm, NCCL the same bits on small integers, in place");
}

// ---- A CUDA graph of every algorithm of the three collectives but auto, replayed 4 times with a new
// input copied in before each replay and each output copied aside after it, all on the stream; checked
// once the stream is done. The CPU backend has no graphs.
if (gpu) {
  const gc = gpu.collectives;
  const stream = defaultStream(gpu.device);
  const n = 10_001;
  const chunk = Math.floor(n / world);
  const dtype = "bf16";
  const x = Tensor.empty([n], dtype);
  const head = x.slice(0, chunk * world);
  const progress = Tensor.empty([world], "u32");
  /** Each captured call: its name, its output, the call. */
  const calls: [string, Tensor, () => void][] = [];
  /** The algorithms besides auto that run `bytes` per rank with a plain input of `staged` bytes. */
  const named = (collective: CollectiveName, bytes: number, staged = bytes): string[] =>
    runnable(collective, bytes, staged).filter((a) => a !== "auto");
  for (const a of named("all-reduce", 2 * n)) {
    const out = Tensor.empty([n], dtype);
    calls.push([
      `allReduce ${a}`,
      out,
      () => void gc.allReduce(x, { algorithm: a as GpuAllReduceAlgorithm, output: out, stream }),
    ]);
  }
  for (const a of named("all-gather", 2 * n)) {
    const out = Tensor.empty([n * world], dtype);
    const flags = a === "copy_engine" ? { progressFlags: progress } : {};
    calls.push([
      `allGather ${a}`,
      out,
      () => void gc.allGather(x, out, { algorithm: a as GpuAllGatherAlgorithm, stream, ...flags }),
    ]);
  }
  for (const a of named("reduce-scatter", 2 * chunk, head.nbytes)) {
    const out = Tensor.empty([chunk], dtype);
    calls.push([
      `reduceScatter ${a}`,
      out,
      () => void gc.reduceScatter(head, out, { algorithm: a as GpuReduceScatterAlgorithm, stream }),
    ]);
  }
  const replays = [0, 1, 2, 3].map(() => {
    const xs = inputs(dtype, n, true);
    return {
      xs,
      x: Tensor.fromHost(xs[rank]!, dtype),
      outs: calls.map(([, o]) => Tensor.empty(o.shape, dtype)),
      flags: Tensor.empty([world], "u32"),
    };
  });
  await group.barrier();
  const graph = Graph.capture(stream, () => {
    for (const [, , call] of calls) call();
  });
  for (const r of replays) {
    x.copyFrom(r.x, stream);
    graph.launch(stream);
    r.outs.forEach((o, i) => o.copyFrom(calls[i]![1], stream));
    r.flags.copyFrom(progress, stream);
  }
  gpu.synchronize(stream);
  for (const [k, r] of replays.entries()) {
    const want = {
      allReduce: reference(dtype, "sum", r.xs),
      allGather: gathered(r.xs),
      reduceScatter: reference(dtype, "sum", r.xs, rank * chunk, chunk),
    };
    calls.forEach(([what], i) =>
      equals(r.outs[i]!, want[what.split(" ")[0] as keyof typeof want], `graph replay ${k}: ${what}`),
    );
    assert.deepEqual([...r.flags.toHost()], Array(world).fill(1), `graph replay ${k}: progress flags`);
  }
  graph.dispose();
  for (const t of [
    x,
    progress,
    ...calls.map(([, o]) => o),
    ...replays.flatMap((r) => [r.x, r.flags, ...r.outs]),
  ])
    t.dispose();
  done(`a graph of ${calls.length} collectives replayed 4 times with new inputs: exact`);
}

// ---- barrier: a rank 50 ms late holds every other rank there (GPUs: at the wait for the barrier's
// kernel).
{
  const late = world - 1;
  await group.barrier();
  const t0 = performance.now();
  if (rank === late) await new Promise((resolve) => setTimeout(resolve, 50));
  c.barrier();
  wait();
  const ms = performance.now() - t0;
  if (rank !== late)
    assert.ok(ms >= 25, `barrier: rank ${rank} left after ${ms.toFixed(1)} ms, before the late rank came`);
  done("barrier: every rank waits for the late one");
}

// ---- Calls alternating collectives, sizes, dtypes and algorithms in batches of 50 made back to back (the
// buffers each reuses, mailbox call counts and copy-engine slots among them, settled only by the calls
// themselves), every other all-reduce in place, the last rank 50 ms late for every other batch; every call
// checked. 200 on the CPU backend, whose every call is a host reduction on shared cores.
{
  const CALLS = cuda ? 1000 : 200;
  const SIZES = [3, 4096, 777, 20_000, 65_537, 1024, 4093, 10];
  const pick = (list: readonly string[], i: number): string => list[i % list.length]!;
  for (let start = 0; start < CALLS; start += 50) {
    const cases: Case[] = [];
    for (let i = start; i < start + 50; i++) {
      const n = SIZES[i % SIZES.length]!;
      const dtype = (["f32", "bf16"] as const)[i % 2]!;
      const eb = dtypeInfo(dtype).bytes;
      const what = `call ${i}`;
      const xs = inputs(dtype, n, true);
      if (i % 7 === 3) {
        const a = pick(runnable("all-gather", n * eb, n * eb), i);
        const x = upload(dtype, xs[rank]!);
        const k = into(dtype, n * world, 0, gathered(xs), `${what}: allGather ${a}`, (o) =>
          c.allGather(x, o, opt(a)),
        );
        cases.push({ ...k, tensors: [...k.tensors, x] });
      } else if (i % 3 === 1) {
        const m = Math.ceil(n / world);
        const bigs = inputs(dtype, m * world, true);
        const a = pick(runnable("reduce-scatter", m * eb, m * world * eb), i);
        const x = upload(dtype, bigs[rank]!);
        const want = reference(dtype, "sum", bigs, rank * m, m);
        const k = into(
          dtype,
          m,
          0,
          want,
          `${what}: reduceScatter ${a}`,
          (o) => c.reduceScatter(x, o, opt(a)),
          false,
        );
        cases.push({ ...k, tensors: [...k.tensors, x] });
      } else {
        const a = pick(runnable("all-reduce", n * eb, n * eb), i);
        const want = reference(dtype, "sum", xs);
        const x = upload(dtype, xs[rank]!);
        if (i % 2 === 0)
          cases.push(
            inPlace(dtype, xs[rank]!, want, `${what}: allReduce ${a} in place`, (t) =>
              c.allReduce(t, { ...opt(a), output: t }),
            ),
          );
        else {
          const k = into(dtype, n, 0, want, `${what}: allReduce ${a}`, (o) =>
            c.allReduce(x, { ...opt(a), output: o }),
          );
          cases.push({ ...k, tensors: [...k.tensors, x] });
        }
      }
    }
    await checked(`calls ${start} to ${start + 49}`, cases, (start / 50) % 2 === 0 ? world - 1 : undefined);
  }
  done(`${CALLS} calls alternating collectives, sizes, dtypes and algorithms, a rank late: exact`);
}

// ---- broadcast, the CPU backend's only: GPUs have none (it is no call of Collectives).
if (group.backend === "cpu") {
  const root = world - 1;
  const want = inputOf("i64", 1001, root, salts++, true);
  const b = group.tensors.fromHost(rank === root ? want : new BigInt64Array(1001).fill(-7n), "i64");
  group.collectives.broadcast(b, root);
  assertSameBits(b.toHost(), want, "broadcast i64", seed);
  done("broadcast from the last rank: exact");
}

// ---- Bad inputs, made alike on every rank: typed errors with a stable code, the same message on every
// rank, nothing written, the group usable after. Arguments that are not tensors are typed errors too,
// never TypeErrors.
{
  const watched: [AnyTensor, RawArray][] = [];
  const watch = (t: AnyTensor): AnyTensor => {
    watched.push([t, t.toHost()]);
    return t;
  };
  const full = (n: number, dtype: DType = "f32"): AnyTensor => watch(make.full([n], 5, dtype));
  const f32 = full(16);
  const out16 = full(16);
  const bf16 = full(16, "bf16");
  const out15 = full(15);
  const i32 = full(16, "i32");
  const x4 = full(4);
  // Past the staging buffer by a chunk of f32 for each rank.
  const overN = (Math.floor(capacity / 4 / world) + 1) * world;
  const over = full(overN);
  const overOut = full(overN);
  const overGathered = full(overN * world);
  const overChunk = full(overN / world);
  const odd = full(world * 3 + 1);
  const no = (v: unknown): AnyTensor => v as AnyTensor;
  const nope = { algorithm: "nope" };
  type Bad = [string, () => unknown, RegExp];
  const beyond = new RegExp(`exceed the ${capacity}-byte symmetric staging buffer`);
  /** The algorithms of `collective` that stage a plain input whole (GPUs: auto runs it in pieces). */
  const staging = (collective: CollectiveName): string[] =>
    ALGORITHMS[collective].filter((a) =>
      gpu ? a !== "auto" && algorithmRecord(collective, a).stagingBytes !== undefined : true,
    );
  /** Names of `collective`'s algorithms that this backend lacks (the other backend's, another collective's). */
  const foreign = (collective: CollectiveName): string[] =>
    [...GPU_ALL_REDUCE_ALGORITHMS, ...GPU_ALL_GATHER_ALGORITHMS, ...GPU_REDUCE_SCATTER_ALGORITHMS].filter(
      (a, i, all) => all.indexOf(a) === i && !ALGORITHMS[collective].includes(a),
    );
  const cases: Bad[] = [
    ["allReduce f32 into bf16", () => c.allReduce(f32, { output: bf16 }), /input is f32 but output is bf16/],
    ["allReduce bf16 into f32", () => c.allReduce(bf16, { output: f32 }), /input is bf16 but output is f32/],
    ["allReduce 16 into 15", () => c.allReduce(f32, { output: out15 }), /output must have 16 elements/],
    ["allReduce 15 into 16", () => c.allReduce(out15, { output: out16 }), /output must have 15 elements/],
    ["allReduce into a far smaller output", () => c.allReduce(over, { output: out16 }), /output must have/],
    ["allReduce i32", () => c.allReduce(i32), /reductions support f32, f16, bf16, not i32/],
    ["reduceScatter i32", () => c.reduceScatter(i32, i32), /reductions support f32, f16, bf16, not i32/],
    [
      "allReduce op prod",
      () => c.allReduce(f32, { op: "prod" as ReduceOp }),
      /op prod is not one of sum, max, min/,
    ],
    ["allReduce null", () => c.allReduce(no(null)), /allReduce: input must be a tensor, got null/],
    [
      "allReduce undefined",
      () => c.allReduce(no(undefined)),
      /allReduce: input must be a tensor, got undefined/,
    ],
    [
      "allGather output a number",
      () => c.allGather(x4, no(7)),
      /allGather: output must be a tensor, got number/,
    ],
    [
      "reduceScatter input null",
      () => c.reduceScatter(no(null), x4),
      /reduceScatter: input must be a tensor, got null/,
    ],
    ["allGather bf16 into f32", () => c.allGather(bf16, overGathered), /input is bf16 but output is f32/],
    [
      "allGather output too small",
      () => c.allGather(x4, out15),
      new RegExp(`output must have ${4 * world} elements`),
    ],
    ["reduceScatter uneven", () => c.reduceScatter(odd, out15), /do not split evenly/],
    ["allReduce algorithm nope", () => c.allReduce(f32, nope), /algorithm nope is not one of/],
    ["allGather algorithm nope", () => c.allGather(x4, overGathered, nope), /algorithm nope is not one of/],
    [
      "reduceScatter algorithm nope",
      () => c.reduceScatter(over, overChunk, nope),
      /algorithm nope is not one of/,
    ],
    ...foreign("all-reduce").map((a): Bad => [
      `allReduce algorithm ${a}`,
      () => c.allReduce(f32, opt(a)),
      /is not one of/,
    ]),
    ...foreign("all-gather").map((a): Bad => [
      `allGather algorithm ${a}`,
      () => c.allGather(x4, overGathered, opt(a)),
      /is not one of/,
    ]),
    ...foreign("reduce-scatter").map((a): Bad => [
      `reduceScatter algorithm ${a}`,
      () => c.reduceScatter(over, overChunk, opt(a)),
      /is not one of/,
    ]),
    ...staging("all-reduce").map((a): Bad => [
      `allReduce ${a} over the staging buffer`,
      () => c.allReduce(over, { ...opt(a), output: overOut }),
      beyond,
    ]),
    ...staging("all-gather").map((a): Bad => [
      `allGather ${a} over the staging buffer`,
      () => c.allGather(over, overGathered, opt(a)),
      beyond,
    ]),
    ...staging("reduce-scatter").map((a): Bad => [
      `reduceScatter ${a} over the staging buffer`,
      () => c.reduceScatter(over, overChunk, opt(a)),
      beyond,
    ]),
  ];
  // GPUs only: what the mailbox holds, the copy-engine reduce-scatter's slots, progress flags, devices.
  const symmetric =
    gpu && (await gpu.symmetric.empty([(Math.ceil(capacity / (4 * world)) + 4) * world], "f32"));
  if (gpu && symmetric) {
    const gc = gpu.collectives;
    const chunk = symmetric.tensor.numel / world;
    const chunkOut = watch(Tensor.full([chunk], 5, "f32"));
    const slot = watch(Tensor.zeros([(gc.mailboxSlotBytes >> 2) + 1], "f32"));
    assert.notEqual(
      gc.autoAlgorithm("reduce-scatter", chunk * 4, 0),
      "copy_engine",
      "auto's copy-engine slots",
    );
    cases.push(
      [
        "reduceScatter copy_engine of a symmetric input, its slots over the staging buffer",
        () => gc.reduceScatter(symmetric, chunkOut as Tensor, { algorithm: "copy_engine" }),
        beyond,
      ],
      [
        "allReduce lamport over the mailbox slot",
        () => gc.allReduce(slot as Tensor, { algorithm: "lamport", output: slot as Tensor }),
        /exceed the \d+-byte mailbox slot/,
      ],
      [
        "allGather progressFlags with pull",
        () =>
          gc.allGather(x4 as Tensor, overGathered.slice(0, 4 * world) as Tensor, {
            algorithm: "pull",
            progressFlags: i32 as Tensor,
          }),
        /progressFlags come with algorithm copy_engine only/,
      ],
    );
  }
  const wrong: string[] = [];
  const said: string[] = [];
  for (const [what, call, pattern] of cases) {
    try {
      call();
      wrong.push(`${what}: no error`);
    } catch (e) {
      if (!(
        e instanceof InvalidArgumentError &&
        e.code === "SYMMKIT_INVALID_ARGUMENT" &&
        pattern.test(e.message)
      ))
        wrong.push(`${what}: ${String(e)}`);
      said.push(String(e));
    }
  }
  // The device is this rank's own: its message too.
  if (gpu && deviceCount() > 1) {
    const other = Device.get((gpu.device.ordinal + 1) % deviceCount());
    try {
      gpu.collectives.allReduce(Tensor.zeros([16], "f32", { device: other }));
      wrong.push("allReduce on another GPU: no error");
    } catch (e) {
      if (!(e instanceof InvalidArgumentError && /must be on cuda:/.test(e.message)))
        wrong.push(`allReduce on another GPU: ${String(e)}`);
    }
    Device.setDefault(gpu.device);
  }
  wait();
  assert.deepEqual(wrong, [], `rank ${rank}: bad inputs must give InvalidArgumentError`);
  await agree(new TextEncoder().encode(said.join("\n")), "bad inputs: the messages");
  watched.forEach(([t, made], k) =>
    assertSameBits(t.toHost(), made, `bad inputs: tensor ${k} was written`, seed),
  );
  for (const [t] of watched) t.dispose();
  await symmetric?.dispose();
  // A plain input larger than the staging buffer and the mailbox: auto runs it in pieces on GPUs (the CPU
  // backend refuses it, above), with rank-order algorithms: small integers, exact.
  const pieces: Case[] = [];
  if (gpu) {
    const n = 4 * overN + 3;
    const xs = inputs("f32", n, true);
    pieces.push(
      into("f32", n, 0, reference("f32", "sum", xs), "auto all-reduce in pieces", (o) =>
        c.allReduce(upload("f32", xs[rank]!), { output: o }),
      ),
    );
  }
  for (const n of [7, 4097]) pieces.push(...everyAlgorithm("f32", n, true, "after bad inputs: "));
  await checked("after bad inputs", pieces);
  done(`bad inputs: ${cases.length} typed errors alike on every rank, nothing written; usable after`);
}

c.barrier();
wait();
total(world);
console.log(`${backend} collectives ok rank ${rank}`);
await group.destroy();

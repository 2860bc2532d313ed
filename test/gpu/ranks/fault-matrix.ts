// One rank of the GPU fault matrix (test/gpu/fault-matrix.test.ts): every collective algorithm, NCCL
// included, by CASE:
// - straggle: the last rank arrives 300 ms late at every algorithm's call, eager and replayed from a
//   graph; every call must succeed with the exact result (inputs rank + 1).
// - skip / graph-skip: ALG ("collective/algorithm") is called by every rank but the last, which waits at
//   the store (graph-skip: after one replay in step, the last rank stops replaying); the others must end
//   with a typed error naming it (SymmTimeoutError: for nccl too, from the fingerprint barrier before the
//   NCCL call) within the deadline
//   plus 5 s.
// - kill: the last rank SIGKILLs itself in the middle of a stream of ALG calls; the launcher must stop
//   the job and name it.
// Every rank prints "matrix <CASE> <ALG>: <outcome>".
import { setTimeout as sleep } from "node:timers/promises";
import { exitFlushed } from "../../../src/exit.js";
import { init } from "../../../src/init.js";
import { NcclTimeoutError } from "../../../src/distributed/nccl-watchdog.js";
import { SymmTimeoutError } from "../../../src/distributed/sync-watch.js";
import { TUNABLE_ALGORITHMS, type CollectiveName } from "../../../src/ops/coll/registry.js";
import { Graph } from "../../../src/runtime/graph.js";
import { Stream } from "../../../src/runtime/stream.js";
import { Tensor } from "../../../src/runtime/tensor.js";

const group = await init({ backend: "cuda", stagingBytes: 16 << 20 });
const c = group.collectives;
const { rank, worldSize: world, device } = group;
const last = world - 1;
const kase = process.env.CASE ?? "straggle";
const limit = group.watch.timeoutMs;
const stream = Stream.create(device);
const n = 4096;
const t = (count: number, v: number): Tensor => Tensor.full([count], v, "bf16", { device, stream });
const ins = { ar: t(n, rank + 1), ag: t(n, rank + 1), rs: t(n * world, rank + 1) };
const outs = { ar: t(n, NaN), ag: t(n * world, NaN), rs: t(n, NaN) };
const sum = (world * (world + 1)) / 2;

type Alg = `${CollectiveName}/${string}`;
const ALL: Alg[] = (Object.keys(TUNABLE_ALGORITHMS) as CollectiveName[]).flatMap((col) =>
  TUNABLE_ALGORITHMS[col].map((a) => `${col}/${a}` as Alg),
);

function call(alg: Alg, s: Stream = stream): void {
  const [col, algorithm] = alg.split("/") as [CollectiveName, string];
  if (col === "all-reduce")
    c.allReduce(ins.ar, { algorithm: algorithm as never, output: outs.ar, stream: s });
  else if (col === "all-gather") c.allGather(ins.ag, outs.ag, { algorithm: algorithm as never, stream: s });
  else c.reduceScatter(ins.rs, outs.rs, { algorithm: algorithm as never, stream: s });
}

/** The result of `alg`'s last call, checked exactly; a description of the first wrong element. */
function wrong(alg: Alg): string | undefined {
  const col = alg.split("/")[0];
  const got = (col === "all-reduce" ? outs.ar : col === "all-gather" ? outs.ag : outs.rs).toHost({
    stream,
    decode: true,
  });
  for (let i = 0; i < got.length; i++) {
    const want = col === "all-gather" ? Math.floor(i / n) + 1 : sum;
    if (got[i] !== want) return `element ${i} is ${got[i]}, expected ${want}`;
  }
  return undefined;
}

function verdict(e: unknown, t0: number): string {
  const ms = Date.now() - t0;
  const late = ms > limit + 5000 ? " TOO LATE" : "";
  if (e instanceof NcclTimeoutError)
    return `NcclTimeoutError naming ${JSON.stringify(e.culprits)} after ${ms} ms${late}`;
  if (e instanceof SymmTimeoutError)
    return `SymmTimeoutError naming [${e.record.peer}] after ${ms} ms${late}`;
  return `WRONG after ${ms} ms: ${String(e)}`;
}

const alg = process.env.ALG as Alg;
// In step once, so that every kernel is loaded and NCCL connected before any fault.
for (const a of kase === "straggle" ? ALL : [alg]) call(a);
group.synchronize(stream);
await group.barrier();

if (kase === "straggle") {
  const bad: string[] = [];
  for (const a of ALL) {
    for (const mode of ["eager", "graph"]) {
      const g = mode === "graph" ? Graph.capture(stream, () => call(a)) : undefined;
      for (const o of Object.values(outs)) o.fill(NaN, stream);
      if (rank === last) await sleep(300);
      if (g) g.launch();
      else call(a);
      group.synchronize(stream);
      const w = wrong(a);
      if (w) bad.push(`${a} ${mode}: ${w}`);
      g?.dispose();
      await group.barrier();
    }
  }
  console.log(
    `matrix straggle all: ${bad.length ? `WRONG ${bad.join("; ")}` : `ok (${ALL.length} algorithms, eager and graph)`}`,
  );
} else if (kase === "skip" || kase === "graph-skip") {
  const g = kase === "graph-skip" ? Graph.capture(stream, () => call(alg)) : undefined;
  if (g) {
    g.launch();
    group.synchronize(stream);
    await group.barrier();
  }
  let outcome = "skipped";
  if (rank !== last) {
    const t0 = Date.now();
    try {
      if (g) g.launch();
      else call(alg);
      group.synchronize(stream);
      outcome = `NO ERROR after ${Date.now() - t0} ms`;
    } catch (e) {
      outcome = verdict(e, t0);
    }
  }
  console.log(`matrix ${kase} ${alg}: ${outcome}`);
  await group.store.barrier("done");
} else if (kase === "kill") {
  for (let i = 0; ; i++) {
    if (rank === last && i === 20) process.kill(process.pid, "SIGKILL");
    call(alg);
    if (i % 5 === 0) group.synchronize(stream);
  }
}
await exitFlushed(0);

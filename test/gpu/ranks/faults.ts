// One rank of the GPU fault cases (test/gpu/faults.test.ts), by FAULT:
// - nccl-skip / nccl-graph-skip: the last rank never enters an NCCL all-reduce (eager, or replayed from a
//   CUDA graph) and waits at the store; the others must end with SymmTimeoutError naming it, within the
//   deadline plus 5 s: the barrier that carries the call's fingerprint before every NCCL call is where
//   they wait for it (NcclTimeoutError is for a rank that dies inside NCCL: nccl-kill).
// - a2a-ce-skip: the last rank never enters an allToAll by copy_engine (x past the staging buffer, in
//   rounds); the others must end with SymmTimeoutError naming it within the deadline plus 5 s.
// - nccl-kill: rank 1 kills itself (SIGKILL) before an all-reduce on the group's NCCL communicator itself;
//   run without the launcher (which would stop the job), every other rank must end with NcclTimeoutError
//   naming rank 1.
// - mismatch-size, -algorithm, -lamport, -ll, -copy-engine, -nccl, -a2a-copy-engine: the last
//   rank's call differs from the others' (element count of a one-shot all-reduce; one-shot against
//   two-shot; the mailbox all-reduce and all-gather, the copy-engine all-gather, NCCL's all-reduce and
//   the copy-engine allToAll, of another size);
//   every rank must end with CollectiveMismatchError naming a peer, long before the deadline.
// - mismatch-a2a-symmetric-pull, -copy-engine: the last rank passes allToAll a plain x where the others
//   pass a symmetric one (read where the peers' copies are, not where x was staged): every rank must end
//   in a typed error, never wrong data (copy_engine: CollectiveMismatchError; pull: SymmTimeoutError
//   naming a peer, its barriers meeting in different pads).
// - collision-one-shot, -lamport, -ll: 3603 f32 elements on the last rank against 4096 (sizes a 9-bit
//   hash of the count once let pass): CollectiveMismatchError naming the element count.
// - shape-fused, shape-fused-mailbox, shape-norm-lamport, shape-norm-one-shot: the same element count in
//   another shape (a fused GEMM + reduce-scatter's or GEMM + all-reduce's k, allReduceRmsNorm's hidden
//   size): CollectiveMismatchError naming it.
// - mismatch-fused-mailbox: the last rank's Lamport all-reduce meets the others' fused GEMM + all-reduce
//   in the mailbox: CollectiveMismatchError naming the operation.
// - weight-digest (with SYMMKIT_CHECK_CALLS): allReduceRmsNorm with another weight on the last rank:
//   CollectiveMismatchError naming the weight and bias digest.
// - refused-lamport, refused-one-shot: rank 0's all-reduce is refused (output too small) and caught, the
//   others' goes ahead; then every rank calls it again: every rank must end in CollectiveMismatchError or
//   SymmTimeoutError naming a rank (the refused call took its turn), never wrong data.
// - p2p-put-vs-ll, p2p-ll-vs-put: rank 0 sends 64 KiB to rank 1 by put (ll), rank 1 receives it by ll
//   (put); the other ranks idle. The receiver must end in CollectiveMismatchError naming rank 0 before the
//   deadline (each algorithm's first wait looks for the other's first store); the sender in a typed error
//   or none (an ll send completes once its lines are stored), never wrong data.
// - destroy-graph: a graph that captured a one-shot and an NCCL all-reduce stays alive; destroy() must
//   release it and return promptly; replaying it then is a typed error.
// Every rank prints one line "fault <FAULT>: <outcome>" and meets the others at the store at the end.
import { exitFlushed } from "../../../src/exit.js";
import { init } from "../../../src/init.js";
import { CollectiveMismatchError } from "../../../src/distributed/fingerprint.js";
import { NcclTimeoutError } from "../../../src/distributed/nccl-watchdog.js";
import { SymmTimeoutError } from "../../../src/distributed/sync-watch.js";
import { SymmkitError } from "../../../src/errors.js";
import { Graph } from "../../../src/runtime/graph.js";
import { defaultStream } from "../../../src/runtime/stream.js";
import { Tensor } from "../../../src/runtime/tensor.js";

const group = await init({ backend: "cuda", stagingBytes: 16 << 20 });
const c = group.collectives;
const { rank, worldSize: world } = group;
const fault = process.env.FAULT ?? "";
const limit = group.watch.timeoutMs;
const last = world - 1;
const stream = defaultStream(group.device);
const x = (n: number): Tensor => Tensor.full([n], 1, "bf16");
// Warm up NCCL and the kernels in step, so that the faults below hit a running job.
c.allReduce(x(4096), { algorithm: "nccl" });
c.allReduce(x(4096), { algorithm: "one_shot" });
group.synchronize();
await group.barrier();

function verdict(e: unknown, t0: number): string {
  const ms = Date.now() - t0;
  if (e instanceof NcclTimeoutError)
    return `NcclTimeoutError naming ${JSON.stringify(e.culprits)} after ${ms} ms (limit ${limit} ms): ${e.message.split(";")[0]}`;
  if (e instanceof SymmTimeoutError)
    return `SymmTimeoutError naming [${e.record.peer}] after ${ms} ms (limit ${limit} ms)`;
  if (e instanceof CollectiveMismatchError)
    return `CollectiveMismatchError rank ${e.rank} names rank ${e.peer} after ${ms} ms: ${e.differences.join("; ")}`;
  return `WRONG after ${ms} ms: ${String(e)}`;
}

/** Runs `f` then waits for the GPU; the outcome in one line. */
function attempt(f: () => void): string {
  const t0 = Date.now();
  try {
    f();
    group.synchronize();
    return `NO ERROR after ${Date.now() - t0} ms`;
  } catch (e) {
    return verdict(e, t0);
  }
}

let outcome: string;
switch (fault) {
  case "nccl-skip":
    outcome = rank === last ? "skipped" : attempt(() => c.allReduce(x(1 << 20), { algorithm: "nccl" }));
    break;
  case "nccl-graph-skip": {
    const [input, output] = [x(1 << 20), x(1 << 20)];
    const g = Graph.capture(stream, () => void c.allReduce(input, { algorithm: "nccl", stream, output }));
    outcome = rank === last ? "skipped" : attempt(() => g.launch());
    break;
  }
  case "a2a-ce-skip": {
    // 24 MiB chunks (48 MiB of x at world 2) through the 16 MiB staging buffer: several rounds, both halves.
    const n = (12 << 20) * world;
    const [input, output] = [x(n), x(n)];
    outcome =
      rank === last ? "skipped" : attempt(() => c.allToAll(input, output, { algorithm: "copy_engine" }));
    break;
  }
  case "nccl-kill": {
    // The communicator itself: no fingerprint barrier goes first (through group.collectives the others
    // would wait for the dead rank there, and SymmTimeoutError would name it), so the survivors wait
    // inside NCCL, where only the watchdog ends the wait.
    const comm = await group.nccl();
    if (rank === 1) process.kill(process.pid, "SIGKILL");
    const t = x(1 << 20);
    outcome = attempt(() => comm.allReduce(t, t));
    break;
  }
  case "mismatch-size":
    outcome = attempt(() => c.allReduce(x(rank === last ? 8200 : 8192), { algorithm: "one_shot" }));
    break;
  case "mismatch-algorithm":
    outcome = attempt(() => c.allReduce(x(8192), { algorithm: rank === last ? "two_shot" : "one_shot" }));
    break;
  case "mismatch-nccl":
    outcome = attempt(() => c.allReduce(x(rank === last ? 4104 : 4096), { algorithm: "nccl" }));
    break;
  case "mismatch-lamport":
    outcome = attempt(() => c.allReduce(x(rank === last ? 4104 : 4096), { algorithm: "lamport" }));
    break;
  case "mismatch-ll": {
    const n = rank === last ? 2056 : 2048;
    outcome = attempt(() => c.allGather(x(n), x(n * world), { algorithm: "ll" }));
    break;
  }
  case "mismatch-a2a-copy-engine": {
    const n = (rank === last ? 4104 : 4096) * world;
    outcome = attempt(() => c.allToAll(x(n), x(n), { algorithm: "copy_engine" }));
    break;
  }
  case "mismatch-a2a-symmetric-pull":
  case "mismatch-a2a-symmetric-copy-engine": {
    const n = 4096 * world;
    const symmetric = await group.symmetric.empty([n], "bf16");
    symmetric.tensor.copyFrom(x(n));
    const algorithm = fault === "mismatch-a2a-symmetric-pull" ? "pull" : "copy_engine";
    outcome = attempt(() => c.allToAll(rank === last ? x(n) : symmetric, x(n), { algorithm }));
    break;
  }
  case "mismatch-copy-engine": {
    const n = rank === last ? 4104 : 4096;
    outcome = attempt(() => c.allGather(x(n), x(n * world), { algorithm: "copy_engine" }));
    break;
  }
  // Sizes a hashed count let pass for each other, and shapes with the same element count: the call word
  // holds the count exactly, the shape word what else the ranks must agree on.
  case "collision-one-shot":
  case "collision-lamport":
  case "collision-ll": {
    const n = rank === last ? 3603 : 4096;
    const f32 = (count: number): Tensor => Tensor.full([count], 1, "f32");
    outcome =
      fault === "collision-ll"
        ? attempt(() => c.allGather(f32(n), f32(n * world), { algorithm: "ll" }))
        : attempt(() =>
            c.allReduce(f32(n), { algorithm: fault === "collision-lamport" ? "lamport" : "one_shot" }),
          );
    break;
  }
  case "shape-fused": {
    // a [m, k] and b [n, k] with m x k alike: k 512 against 256.
    const k = rank === last ? 256 : 512;
    const a = Tensor.full([(65536 * world) / k, k], 1, "bf16");
    outcome = attempt(() =>
      c.matmulReduceScatter(a, Tensor.full([256, k], 1, "bf16"), { algorithm: "fused" }),
    );
    break;
  }
  case "shape-fused-mailbox": {
    // GEMM + all-reduce at decode sizes, through the Lamport mailbox: a [m, k] with m x k alike, k 512
    // against 256; the mailbox's headers carry the call's fingerprint.
    const k = rank === last ? 256 : 512;
    const a = Tensor.full([4096 / k, k], 1, "bf16");
    outcome = attempt(() => c.matmulAllReduce(a, Tensor.full([1024, k], 1, "bf16"), { algorithm: "fused" }));
    break;
  }
  case "mismatch-fused-mailbox":
    // The last rank's Lamport all-reduce meets the others' GEMM + all-reduce in the mailbox.
    outcome = attempt(() =>
      rank === last
        ? c.allReduce(x(8192), { algorithm: "lamport" })
        : c.matmulAllReduce(Tensor.full([8, 512], 1, "bf16"), Tensor.full([1024, 512], 1, "bf16"), {
            algorithm: "fused",
          }),
    );
    break;
  case "shape-norm-lamport":
  case "shape-norm-one-shot": {
    // [rows, hidden] with rows x hidden alike: hidden 1024 against 512.
    const hidden = rank === last ? 512 : 1024;
    const algorithm = fault === "shape-norm-lamport" ? "lamport" : "one_shot";
    outcome = attempt(
      () =>
        void c.allReduceRmsNorm(Tensor.full([8192 / hidden, hidden], 1, "bf16"), {
          weight: Tensor.full([hidden], 1, "bf16"),
          eps: 1e-5,
          algorithm,
        }),
    );
    break;
  }
  case "weight-digest": {
    // Run with SYMMKIT_CHECK_CALLS: the same shapes, another weight on the last rank.
    const weight = Tensor.full([1024], rank === last ? 2 : 1, "bf16");
    outcome = attempt(
      () =>
        void c.allReduceRmsNorm(Tensor.full([8, 1024], 1, "bf16"), {
          weight,
          eps: 1e-5,
          algorithm: "two_shot",
        }),
    );
    break;
  }
  case "refused-lamport":
  case "refused-one-shot": {
    // Rank 0 refuses a call (its output too small) and goes on; the others' call went ahead. The refused
    // call took its turn, so the next call's numbers differ: no rank may get wrong data.
    const algorithm = fault === "refused-lamport" ? "lamport" : "one_shot";
    if (rank === 0) {
      try {
        c.allReduce(x(4096), { algorithm, output: x(16) });
      } catch {
        // refused, as meant
      }
    } else c.allReduce(x(4096), { algorithm });
    outcome = attempt(() => {
      const got = c.allReduce(x(4096), { algorithm }).toHost({ decode: true });
      if (got.some((v) => v !== world)) throw new Error(`wrong data: ${got[0]}, expected ${world}`);
    });
    break;
  }
  case "p2p-put-vs-ll":
  case "p2p-ll-vs-put": {
    const [sends, receives] = fault === "p2p-put-vs-ll" ? (["put", "ll"] as const) : (["ll", "put"] as const);
    const n = 32768;
    outcome =
      rank === 0
        ? attempt(() => c.send(x(n), 1, { algorithm: sends }))
        : rank === 1
          ? attempt(() => c.recv(x(n), 0, { algorithm: receives }))
          : "idle";
    break;
  }
  case "destroy-graph": {
    const [input, a, b] = [x(4096), x(4096), x(4096)];
    const g = Graph.capture(stream, () => {
      c.allReduce(input, { algorithm: "one_shot", stream, output: a });
      c.allReduce(input, { algorithm: "nccl", stream, output: b });
    });
    for (let i = 0; i < 5; i++) g.launch();
    group.synchronize();
    const t0 = Date.now();
    await group.destroy();
    const ms = Date.now() - t0;
    let replay = "replay ran";
    try {
      g.launch();
    } catch (e) {
      replay = e instanceof SymmkitError ? `replay refused: ${e.code}` : `replay WRONG ${String(e)}`;
    }
    console.log(`fault ${fault}: destroy took ${ms} ms; ${replay}`);
    await exitFlushed(0);
    throw new Error("unreachable");
  }
  default:
    throw new Error(`unknown FAULT ${fault}`);
}
console.log(`fault ${fault}: ${outcome}`);
// The store still works after a rank's CUDA context is gone; ranks that are alive meet there.
if (fault !== "nccl-kill") await group.store.barrier("done");
await exitFlushed(0);

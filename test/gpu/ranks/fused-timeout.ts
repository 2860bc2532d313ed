// One rank of the fused-matmul timeout check: the last rank meets the others at the call's opening
// barrier (the group's barrier kernel on the staging buffer, its signals carrying the fused call's
// fingerprint, so that it pairs with it) and then never runs the fused kernel; GEMM + all-reduce at a
// decode shape (ar) goes through the Lamport mailbox, with no opening barrier, so there it runs nothing
// (ar-staging: B as [k, n], the Hopper GEMM, through the staging buffer behind the barrier).
// The others must fail with SymmTimeoutError naming it, within the deadline plus 5 s: for
// GEMM + reduce-scatter the owner's reduce waits on the missing rank's tiles, and every rank's sum waits
// on its partials for GEMM + all-reduce; for all-gather + GEMM the closing barrier waits for it. Run with
// SYMMKIT_SYNC_TIMEOUT_MS and FUSED_OP=rs, ar, ar-staging or ag.
import { exitFlushed } from "../../../src/exit.js";
import { init } from "../../../src/init.js";
import { timeoutOutcome } from "../../support/timeout-outcome.js";
import { Tensor } from "../../../src/runtime/tensor.js";
import { fingerprint } from "../../../src/distributed/fingerprint.js";
import { sharedModule } from "../../../src/runtime/module.js";
import {
  BARRIER_KERNEL_THREADS,
  BARRIER_KERNELS,
  GROUP_BARRIER_PARAMS,
} from "../../../src/ops/coll/programs.js";

const group = await init({ backend: "cuda" });
const c = group.collectives;
const { rank, worldSize: world } = group;
const skipper = world - 1;
const ops = ["rs", "ar", "ar-staging", "ag"] as const;
const op = ops.find((o) => o === process.env.FUSED_OP) ?? "rs";
const allReduce = op === "ar" || op === "ar-staging";
const a = Tensor.rand([allReduce ? 64 : 512 * world, 512], "bf16", {
  seed: 1n,
  offset: BigInt(rank) << 32n,
});
// b as [n, k]; ar-staging takes it as [k, n] (n = k here), which sends the call to the Hopper GEMM.
const b = Tensor.rand([op === "ar-staging" ? 512 : 1024, 512], "bf16", {
  seed: 2n,
  offset: BigInt(rank) << 32n,
});
group.synchronize();
await group.barrier();
const t0 = Date.now();
if (rank === skipper && op !== "ar") {
  // The fused call is this group's first collective call (#0).
  const kind =
    op === "rs"
      ? "matmul-reduce-scatter/fused"
      : op === "ar-staging"
        ? "matmul-all-reduce/fused"
        : "all-gather-matmul/fused_copy_engine";
  // The fused ops' shapes: k for all-gather + GEMM, n and k for the others (b is [n, k], or [k, n] with
  // n = k).
  const [n, k] = b.shape as [number, number];
  const tag = fingerprint(0, { kind, dtype: "bf16", count: a.numel, dims: op === "ag" ? [k] : [n, k] });
  const barrier = sharedModule(BARRIER_KERNELS, group.device).kernel(
    "symmkit::group_barrier",
    GROUP_BARRIER_PARAMS,
  );
  barrier.launch({ grid: 1, block: BARRIER_KERNEL_THREADS }, c.staging.deviceView(), tag, 0);
} else if (rank === skipper) {
  // GEMM + all-reduce: nothing (see above).
} else if (op === "rs") c.matmulReduceScatter(a, b, { algorithm: "fused" });
else if (op === "ar") c.matmulAllReduce(a, b, { algorithm: "fused" });
else if (op === "ar-staging") c.matmulAllReduce(a, b, { algorithm: "fused", layoutB: "kn" });
else c.allGatherMatmul(a, b, { algorithm: "fused_copy_engine" });
const outcome = timeoutOutcome(() => group.synchronize(), {
  rank,
  skipper,
  limitMs: group.watch.timeoutMs,
  startMs: t0,
  what: op,
});
console.log(outcome);
await group.store.barrier("done");
await exitFlushed(outcome.startsWith("timeout") || outcome === "skipped" ? 0 : 1);

# PyTorch's figures, to be measured beside symmkit's in the same call on the same machine: NCCL through
# torch.distributed, cuBLAS through torch.matmul, F.rms_norm, and PyTorch's fused symmetric-memory matmuls
# (torch.ops.symm_mem.fused_all_gather_matmul / fused_matmul_reduce_scatter, B as [k, n] contiguous, as
# they expect), on the shapes symmkit's benches time by default (m, K and counts rounded to whole shards
# at odd worlds). Each figure is the median over rounds of the GPU time per call, from replays of a CUDA
# graph of a burst of calls, or, where any rank cannot capture the call, from an eager burst queued behind
# a sleep kernel; each row records which. The ranks meet at a barrier before every round. bf16, seeded
# inputs, shapes only (symmkit's benches check their own results). NVLink multicast stays off
# (NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1).
# Run from the repo root on a GPU machine, one process per GPU, e.g.
#   torchrun --nproc_per_node 2 bench/torch-baselines.py --sections ar-norm,gemm-ar --json out.json
# Sections: ar-norm, gemm-ar, ag-gemm, gemm-rs, send-recv, all-to-all (default: all). Rank 0 prints a
# line per figure and writes the JSON (device, world size, torch and NCCL versions, git revision).
import argparse
import datetime
import json
import math
import os
import statistics
import subprocess
import warnings

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402

DTYPE = torch.bfloat16
ROUNDS = 20
# A timed graph or burst of calls lasts about this long, so that the events' own cost is negligible.
BURST_US = 2000
# Cycles of the sleep kernel an eager burst waits behind (a few ms): the host queues the burst meanwhile.
QUEUE_CYCLES = 5_000_000


def barrier():
    torch.cuda.synchronize()
    dist.barrier()


def calls_per_burst(fn):
    """Calls per timed burst: BURST_US over one warm eager call's time, 3 to 100."""
    for _ in range(3):
        fn()
    barrier()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    once = max(start.elapsed_time(end) * 1000, 1.0)
    # Every rank must capture and replay the same count: take the slowest rank's estimate.
    n = torch.tensor([min(100, max(3, math.ceil(BURST_US / once)))], device="cuda")
    dist.all_reduce(n, op=dist.ReduceOp.MIN)
    return int(n.item())


def capture(fn, per):
    """A CUDA graph of `per` calls of fn, or None on every rank if any rank could not capture it (a capture
    talks to no peer, so the ranks agree before any of them replays)."""
    g = torch.cuda.CUDAGraph()
    try:
        # thread_local: the NCCL watchdog's own CUDA calls from its thread must not end the capture.
        with torch.cuda.graph(g, capture_error_mode="thread_local"):
            for _ in range(per):
                fn()
        ok = 1
    except RuntimeError:
        ok = 0
    torch.cuda.synchronize()
    everyone = torch.tensor([ok], device="cuda")
    dist.all_reduce(everyone, op=dist.ReduceOp.MIN)
    return g if everyone.item() == 1 else None


def time_us(fn):
    """Median GPU µs per call of fn over ROUNDS bursts, and how they ran: "graph" (replays of a captured
    burst), or "eager" where a rank could not capture fn (the burst then queued behind a sleep kernel, so
    that the host's launch cost is hidden unless it exceeds the GPU's time)."""
    per = calls_per_burst(fn)
    g = capture(fn, per)
    if g is not None:
        run = g.replay
    else:

        def run():
            for _ in range(per):
                fn()

    run()
    times = []
    for _ in range(ROUNDS):
        barrier()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if g is None:
            torch.cuda._sleep(QUEUE_CYCLES)
        start.record()
        run()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000 / per)
    return statistics.median(times), "graph" if g is not None else "eager"


def randn(*shape):
    return torch.randn(*shape, device="cuda", dtype=DTYPE)


def empty(*shape):
    return torch.empty(*shape, device="cuda", dtype=DTYPE)


# What symmkit's benches time by default: `bench ar-norm`'s tokens per rank and hidden sizes, `gemm-ar`'s
# m x n x k (K split over the ranks), `ag-gemm`'s and `gemm-rs`'s m x n x k (m all ranks' rows), and bytes
# per rank for send/recv and all-to-all.
AR_NORM_TOKENS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
AR_NORM_HIDDEN = (4096, 8192)
GEMM_AR_SHAPES = tuple((m, 8192, 28672) for m in (1, 8, 32, 64, 128, 256, 512))
AG_GEMM_SHAPES = ((1024, 8192, 8192), (2048, 8192, 8192), (4096, 8192, 8192), (8192, 8192, 8192),
                  (16384, 6656, 16384), (8192, 14336, 4096))
GEMM_RS_SHAPES = ((1024, 8192, 8192), (2048, 8192, 8192), (4096, 8192, 8192), (8192, 8192, 8192),
                  (16384, 16384, 6656), (8192, 4096, 14336))
SIZES = (4 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20, 256 << 20)


def ar_norm(world, rank):
    """symmkit's allReduceRmsNorm unfused: the all-reduce, then h = x + bias + residual (the next residual)
    and F.rms_norm(h); tokens x hidden per rank as `symmkit bench ar-norm` runs them."""
    rows = []
    for hidden in AR_NORM_HIDDEN:
        weight, bias = randn(hidden), randn(hidden)
        for tokens in AR_NORM_TOKENS:
            x, residual = randn(tokens, hidden), randn(tokens, hidden)
            us, mode = time_us(lambda: dist.all_reduce(x))
            rows.append(dict(impl="nccl all_reduce", tokens=tokens, hidden=hidden, us=us, mode=mode))

            def unfused():
                dist.all_reduce(x)
                F.rms_norm(x + bias + residual, (hidden,), weight, 1e-6)

            us, mode = time_us(unfused)
            impl = "nccl all_reduce + F.rms_norm"
            rows.append(dict(impl=impl, tokens=tokens, hidden=hidden, us=us, mode=mode))
    return rows


def gemm_ar(world, rank):
    """The row-parallel layer: each rank's GEMM over its part of K, then the sum over the ranks."""
    rows = []
    for m, n, full_k in GEMM_AR_SHAPES:
        k = full_k // world // 8 * 8  # whole 16-byte rows for cuBLAS at any world
        a, b = randn(m, k), randn(k, n)
        out = empty(m, n)
        us, mode = time_us(lambda: torch.matmul(a, b, out=out))
        rows.append(dict(impl="cublas matmul alone", m=m, n=n, k=full_k, rankK=k, us=us, mode=mode))

        def seq():
            torch.matmul(a, b, out=out)
            dist.all_reduce(out)

        us, mode = time_us(seq)
        rows.append(dict(impl="cublas matmul + nccl all_reduce", m=m, n=n, k=full_k, rankK=k, us=us, mode=mode))
    return rows


def group_name():
    """The world group's name for torch.ops.symm_mem, whose ops importing the module registers."""
    import torch.distributed._symmetric_memory as symm_mem

    name = dist.group.WORLD.group_name
    # Required before PyTorch 2.10, a deprecated no-op since.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        symm_mem.enable_symm_mem_for_group(name)
    return name


def ag_gemm(world, rank):
    rows = []
    name = group_name()
    for m, n, k in AG_GEMM_SHAPES:
        m -= m % world  # whole shards at any world
        shard, b = randn(m // world, k), randn(k, n)
        full, out = randn(m, k), empty(m, n)
        us, mode = time_us(lambda: torch.matmul(full, b, out=out))
        rows.append(dict(impl="cublas matmul alone", m=m, n=n, k=k, us=us, mode=mode))

        def seq():
            dist.all_gather_into_tensor(full, shard)
            torch.matmul(full, b, out=out)

        us, mode = time_us(seq)
        rows.append(dict(impl="nccl all_gather + cublas matmul", m=m, n=n, k=k, us=us, mode=mode))

        def fused():
            torch.ops.symm_mem.fused_all_gather_matmul(shard, [b], 0, name)

        us, mode = time_us(fused)
        rows.append(dict(impl="symm_mem fused_all_gather_matmul", m=m, n=n, k=k, us=us, mode=mode))
    return rows


def gemm_rs(world, rank):
    """The row-parallel layer's other form: each rank's GEMM over its part of K (A [m, k / world], as
    `symmkit bench gemm-rs` splits it), then each rank's m / world rows of the sum."""
    rows = []
    name = group_name()
    for m, n, full_k in GEMM_RS_SHAPES:
        m -= m % world
        k = full_k // world // 8 * 8  # whole 16-byte rows for cuBLAS at any world
        a, b = randn(m, k), randn(k, n)
        full, part = empty(m, n), empty(m // world, n)
        shape = dict(m=m, n=n, k=full_k, rankK=k)
        us, mode = time_us(lambda: torch.matmul(a, b, out=full))
        rows.append(dict(impl="cublas matmul alone", **shape, us=us, mode=mode))

        def seq():
            torch.matmul(a, b, out=full)
            dist.reduce_scatter_tensor(part, full)

        us, mode = time_us(seq)
        rows.append(dict(impl="cublas matmul + nccl reduce_scatter", **shape, us=us, mode=mode))

        def fused():
            torch.ops.symm_mem.fused_matmul_reduce_scatter(a, b, "sum", 0, name)

        us, mode = time_us(fused)
        rows.append(dict(impl="symm_mem fused_matmul_reduce_scatter", **shape, us=us, mode=mode))
    return rows


def send_recv(world, rank):
    """Pairs (0, 1), (2, 3), ...: one way (even ranks send) and both ways; a rank without a pair idles."""
    rows = []
    peer = rank ^ 1
    paired = peer < world
    for nbytes in SIZES:
        send, recv = randn(nbytes // 2), empty(nbytes // 2)

        def one_way():
            if paired:
                dist.send(send, peer) if rank % 2 == 0 else dist.recv(recv, peer)

        def both_ways():
            if paired:
                ops = [dist.P2POp(dist.isend, send, peer), dist.P2POp(dist.irecv, recv, peer)]
                for w in dist.batch_isend_irecv(ops):
                    w.wait()

        for impl, fn in (("nccl send/recv, one way", one_way), ("nccl send/recv, both ways", both_ways)):
            us, mode = time_us(fn)
            rows.append(dict(impl=impl, bytes=nbytes, us=us, gbps=nbytes / us / 1e3, mode=mode))
    return rows


def all_to_all(world, rank):
    rows = []
    for nbytes in SIZES:
        count = nbytes // 2 - nbytes // 2 % world  # whole chunks at any world
        nbytes = 2 * count
        x, out = randn(count), empty(count)
        us, mode = time_us(lambda: dist.all_to_all_single(out, x))
        rows.append(dict(impl="nccl all_to_all_single", bytes=nbytes, us=us, mode=mode))
    return rows


SECTIONS = {
    "ar-norm": ar_norm,
    "gemm-ar": gemm_ar,
    "ag-gemm": ag_gemm,
    "gemm-rs": gemm_rs,
    "send-recv": send_recv,
    "all-to-all": all_to_all,
}


def revision():
    if "SYMMKIT_GIT_REVISION" in os.environ:
        return os.environ["SYMMKIT_GIT_REVISION"]
    try:
        git = ["git", "rev-parse", "--short", "HEAD"]
        return subprocess.run(git, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def main():
    parser = argparse.ArgumentParser(description="PyTorch's figures beside symmkit's (run under torchrun)")
    names = ",".join(SECTIONS)
    parser.add_argument("--sections", default=names, help=f"comma-separated, of {names}")
    parser.add_argument("--json", help="write the figures to this file (rank 0)")
    args = parser.parse_args()
    sections = args.sections.split(",")
    unknown = [s for s in sections if s not in SECTIONS]
    if unknown:
        parser.error(f"unknown sections {unknown}; choose from {list(SECTIONS)}")

    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    # A rank left waiting (a peer failed) ends in minutes, not the default ten.
    timeout = datetime.timedelta(minutes=3)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local), timeout=timeout)
    world, rank = dist.get_world_size(), dist.get_rank()
    if world < 2:
        raise SystemExit("torch-baselines: every section needs at least 2 ranks (torchrun --nproc_per_node N)")
    torch.manual_seed(1234 + rank)

    rows = []
    for s in sections:
        for row in SECTIONS[s](world, rank):
            row = dict(section=s, dtype="bf16", **row)
            rows.append(row)
            if rank == 0:
                keys = ("m", "n", "k", "tokens", "hidden", "bytes")
                shape = " ".join(f"{key}={row[key]}" for key in keys if key in row)
                print(f"{s}: {row['impl']} {shape}: {row['us']:.1f} us ({row['mode']})", flush=True)
    if rank == 0 and args.json:
        environment = dict(
            device=torch.cuda.get_device_name(local),
            deviceCount=torch.cuda.device_count(),
            worldSize=world,
            torch=torch.__version__,
            nccl=".".join(map(str, torch.cuda.nccl.version())),
            gitRevision=revision(),
            date=datetime.datetime.now(datetime.timezone.utc).isoformat(),
        )
        with open(args.json, "w") as f:
            json.dump(dict(bench="pytorch", environment=environment, rounds=ROUNDS, rows=rows), f, indent=1)
    barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

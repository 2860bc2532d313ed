# Which kernels PyTorch's cuBLAS(Lt) runs for m x n x k bf16 GEMMs (B stored [n, k], as symmkit's "nk"),
# and their GPU time: names carry the tile shape, split-K and whether A and B are swapped, which is what
# symmkit's small-m GEMM is measured against. Run on a GPU machine:
#   python3 bench/cublas-kernels.py [MxNxK,...]
import sys, torch
from torch.profiler import profile, ProfilerActivity

shapes = [tuple(map(int, s.split("x"))) for s in (sys.argv[1] if len(sys.argv) > 1 else
          "1x8192x14336,32x8192x14336,64x8192x14336,128x8192x14336,256x8192x14336,1x8192x3584,128x8192x3584").split(",")]
torch.manual_seed(0)
for m, n, k in shapes:
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    for _ in range(20): a @ b.t()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(50): a @ b.t()
        torch.cuda.synchronize()
    rows = [(e.key, e.device_time_total / e.count, e.count) for e in prof.key_averages() if e.device_time_total > 0]
    for name, us, count in rows:
        print(f"{m}x{n}x{k}  {us:8.1f} us  x{count}  {name[:200]}")

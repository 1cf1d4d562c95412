"""A GPU load for the check: matrix products on cuda:0 for N seconds, holding ~4 GiB.

python3 scripts/gpu_check/load.py SECONDS
"""
import sys
import time

import torch

seconds = float(sys.argv[1])
held = torch.empty(2**30, dtype=torch.float32, device="cuda")   # 4 GiB, seen by NVML as used memory
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
end = time.monotonic() + seconds
products = 0
while time.monotonic() < end:
    for _ in range(20):
        a @ a
    torch.cuda.synchronize()
    products += 20
print(f"load: {products} products of 8192^3 in {seconds:.0f} s, held {held.numel() * 4 >> 20} MiB")

"""The GPU check's notebook part: %%mpirun cells on a real GPU, in IPython's test shell.

python3 scripts/gpu_check/cells.py OUT_DIR

1. Two ranks each hold (rank + 1) GiB on cuda:0; while they hold it, `mlp-magic status --json`
   and `top --once` must attribute that memory to ranks 0 and 1 (the sampler's pid -> rank).
2. A 20 s GPU cell; while it runs, `status --json` is read every 2 s: the GPUs' utilisation must
   show the load during the cell (the live path), not only between cells; `mlp-magic stacks`
   reads the busy ranks' stacks.
3. A 60 s GPU cell interrupted after 5 s (SIGINT to the kernel, as the stop button): it ends,
   and the ranks answer the next cell.
4. A 1-rank World: torch.distributed with nccl, all_reduce of 256 MiB, its time.
Everything printed is kept in OUT_DIR/cells.log by the caller; exit status 1 if a step failed.
"""
import json
import re
import signal
import subprocess
import sys
import threading
import time

from IPython.testing.globalipapp import start_ipython

OUT = sys.argv[1]
ip = start_ipython()
ip.run_line_magic("load_ext", "mlp_magic")
failed = []


def cell(code: str, label: str):
    print(f"\n=== cell: {label}", flush=True)
    result = ip.run_cell(code)
    if result.error_in_exec is not None or result.error_before_exec is not None:
        failed.append(label)
        print(f"--- {label} FAILED: {result.error_in_exec or result.error_before_exec!r}", flush=True)


def cli(*args, timeout=60):
    done = subprocess.run([sys.executable, "-m", "mlp_magic.cli", *args], capture_output=True, text=True,
                          timeout=timeout)
    return done.returncode, done.stdout, done.stderr


def gpu_rows(document):
    """(host, util, memory used, processes) of every GPU in a status --json document."""
    return [(host.get("name"), gpu) for host in document.get("hosts", [])
            for gpu in (host.get("gpus") or {}).get("gpus", [])]


def status_snapshot(label):
    rc, out, err = cli("status", "--json")
    with open(f"{OUT}/status-{label}.json", "w") as file:
        file.write(out or err)
    print(f"--- status --json ({label}): rc={rc}, {len(out)} bytes; {err.strip()[:300]}", flush=True)
    return out


cell("%%mpirun -np 2\nimport torch\nfrom mpi4py import MPI\nrank = MPI.COMM_WORLD.rank\n"
     "held = torch.empty((rank + 1) * 2**28, dtype=torch.float32, device='cuda')\n"
     "torch.cuda.synchronize()\n"
     "print(rank, torch.cuda.get_device_name(0), torch.cuda.memory_allocated() >> 20, 'MiB')",
     "two ranks hold memory")
time.sleep(3)   # the agents' sampler ticks once a second
status_snapshot("holding")
rc, out, err = cli("top", "--once")
print(f"--- top --once: rc={rc}\n{out}\n{err}", flush=True)
# NVML counts each process's CUDA context too (~0.5 GiB on the H100): rank 0 holds 1 GiB + that
if not re.search(r"rank 0: 1\.\d GiB, rank 1: 2\.\d GiB", out):
    failed.append("top names the ranks holding GPU memory")

samples = []
stop = threading.Event()


def watch():
    while not stop.is_set():
        started = time.monotonic()
        samples.append((time.time(), status_snapshot(f"during-{len(samples)}")))
        stop.wait(max(0.0, 2.0 - (time.monotonic() - started)))


def stacks_midway():
    time.sleep(8)
    rc, out, err = cli("stacks", timeout=90)
    print(f"--- stacks during the GPU cell: rc={rc}\n{out[-3000:]}\n{err[-1000:]}", flush=True)
    if rc != 0 or "rank" not in out:
        failed.append("stacks of the GPU ranks")


watcher = threading.Thread(target=watch, daemon=True)
watcher.start()
stacker = threading.Thread(target=stacks_midway, daemon=True)
stacker.start()
cell("%%mpirun\nimport time\na = torch.randn(8192, 8192, device='cuda', dtype=torch.bfloat16)\n"
     "end = time.monotonic() + 20\nn = 0\nwhile time.monotonic() < end:\n    a @ a; n += 1\n"
     "torch.cuda.synchronize()\nprint(rank, n, 'products')", "20 s GPU cell")
stop.set()
watcher.join()
stacker.join()
utils = []
for _, text in samples:
    try:
        utils += [gpu.get("utilization_pct") for _, gpu in gpu_rows(json.loads(text))]
    except ValueError:
        pass
print(f"--- {len(samples)} status documents during the cell, GPU utilisation seen: {utils}", flush=True)
if not any((u or 0) >= 50 for u in utils):
    failed.append("status --json shows the GPU busy during the cell")

# the notebook's stop button on a GPU-bound cell: SIGINT to the kernel's main thread after 5 s
main = threading.get_ident()
stop_button = threading.Timer(5, lambda: signal.pthread_kill(main, signal.SIGINT))
stop_button.start()
started = time.monotonic()
result = ip.run_cell("%%mpirun\nend = time.monotonic() + 60\nwhile time.monotonic() < end:\n    a @ a\n"
                     "torch.cuda.synchronize()")
took = time.monotonic() - started
stop_button.cancel()
print(f"--- interrupted GPU cell ended after {took:.1f} s: {result.error_in_exec!r}", flush=True)
if took > 30:
    failed.append("interrupt of a GPU cell")
cell("%%mpirun\nprint(rank, 'alive after the interrupt', float((a @ a).float().mean()) is not None)",
     "ranks answer after the interrupt")
cell("%mpirun --stop", "stop")
cell("%%mpirun -np 1\nimport os, time, torch, torch.distributed as dist\n"
     "dist.init_process_group('nccl', init_method='env://')\n"
     "x = torch.ones(2**26, device='cuda')\nfor _ in range(3): dist.all_reduce(x)\n"
     "torch.cuda.synchronize(); t = time.perf_counter()\nfor _ in range(20): dist.all_reduce(x)\n"
     "torch.cuda.synchronize(); took = (time.perf_counter() - t) / 20\n"
     "print('nccl', torch.cuda.nccl.version(), 'all_reduce 256 MiB', round(took * 1e3, 3), 'ms',\n"
     "      x[0].item())\n"
     "dist.destroy_process_group()", "nccl all_reduce")
cell("%mlp_doctor", "doctor magic")
cell("%mpirun --stop", "stop again")
print("\nFAILED: " + ", ".join(failed) if failed else "\nall cells passed", flush=True)
sys.exit(1 if failed else 0)

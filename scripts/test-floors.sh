#!/usr/bin/env bash
# The floors job: every dependency at the lowest version pyproject.toml declares
# (constraints/floors.txt, made by scripts/floors.py), then the unit, server and integration tiers
# and the platform notebook on two namespace hosts (a real kernel: ipykernel 6, IPython 8).
# The main suite (the README's test command) runs on the newest versions; this one proves the
# floors. Run from the project root: bash scripts/test-floors.sh [pytest arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
python3 scripts/floors.py --check
venv=${MLP_MAGIC_FLOORS_VENV:-/tmp/mlp-magic-floors-venv}
python3 -m venv --clear "$venv"
# shellcheck disable=SC1091
source "$venv/bin/activate"
export PIP_DISABLE_PIP_VERSION_CHECK=1
python -m pip install -q --upgrade pip
pip install -q -c constraints/floors.txt -e '.[test,bench]'
python scripts/floors.py --installed   # each pinned package is there, at its floor
# Left out:
# - the tests where only a framework meets torch (DeepSpeed and FSDP2, TensorFlow's own all-reduce).
#   The frameworks are unpinned, the same versions as the main job's, and no floor of ours is on
#   their path; the tests that meet IPython, ipykernel or ipywidgets (Lightning's, the Hugging Face
#   Trainer's table, TF_CONFIG) run here;
# - the pure parts' tests: pure code imports the standard library only (the layout test holds it
#   to that), so no declared floor can change what they test;
# - 128 ranks (test_scale): the same calls as 4 ranks, many times over; a scale, not a floor.
if [ $# -eq 0 ]; then
  set -- tests/unit tests/server tests/integration tests/notebook/test_platform_notebook.py \
    --ignore-glob='tests/unit/**/pure/*' --ignore=tests/unit/core \
    --ignore=tests/integration/test_sharded_training.py --ignore=tests/integration/test_scale.py \
    --deselect=tests/integration/test_tensorflow.py::test_multi_worker_mirrored_strategy_reduces_across_all_ranks
fi
python -m pytest -q -p no:cacheprovider "$@"

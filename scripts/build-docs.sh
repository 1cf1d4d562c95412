#!/usr/bin/env bash
# The docs site: MyST pages, the reference made from the command table, and the example notebooks
# executed on local ranks; warnings (a dead internal link, an option that does not exist, a cell
# that cannot run) are errors. Output: docs/_build/html/index.html.
#   bash scripts/build-docs.sh            (MLP_DOCS_EXECUTE=off: without running the notebooks)
set -euo pipefail
cd "$(dirname "$0")/.."
pip install -q -e '.[docs]'
python -m sphinx -W --keep-going -n -q -b html docs docs/_build/html
echo "docs: docs/_build/html/index.html"

"""A notebook's kernel for the browser tests: an IPython shell with mlp_magic that runs the cells
it is given on stdin (JSON strings, one a line) and says on stdout when each ended:
``{"ended": true, "error": null | "<exception type>", "ranks": {rank: "<status>: <last line>"}}``
(``ranks``: a failed cell's ranks, from the Failure's results, so that a test can tell an
interrupted cell from one that broke). It stops its World when stdin closes."""
import contextlib
import io
import json
import sys

from IPython.testing.globalipapp import start_ipython


def _ranks(error) -> dict:
    result = getattr(error, "result", None)
    if result is None:
        return {}
    said = {}
    for rank in result:   # RankResult records
        lines = [line for line in (rank.error or "").splitlines() if line.strip()]
        said[str(rank.rank)] = f"{rank.status}: {lines[-1] if lines else ''}"
    return said


def main() -> None:
    shell = start_ipython()
    shell.run_line_magic("load_ext", "mlp_magic")
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        with contextlib.redirect_stdout(io.StringIO()):
            result = shell.run_cell(json.loads(line))
        error = result.error_in_exec or result.error_before_exec
        said = {"ended": True, "error": type(error).__name__ if error else None}
        if error is not None:
            said["ranks"] = _ranks(error)
        print(json.dumps(said), flush=True)
    with contextlib.redirect_stdout(io.StringIO()):
        shell.run_line_magic("mpirun", "--stop")


if __name__ == "__main__":
    main()

"""A notebook's kernel for the browser tests: an IPython shell with mlp_magic that runs the cells
it is given on stdin (JSON strings, one a line) and says on stdout when each ended:
``{"ended": true, "error": null | "<exception type>"}``. It stops its World when stdin closes."""
import contextlib
import io
import json
import sys

from IPython.testing.globalipapp import start_ipython


def main() -> None:
    shell = start_ipython()
    shell.run_line_magic("load_ext", "mlp_magic")
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        with contextlib.redirect_stdout(io.StringIO()):
            result = shell.run_cell(json.loads(line))
        error = result.error_in_exec or result.error_before_exec
        print(json.dumps({"ended": True, "error": type(error).__name__ if error else None}), flush=True)
    with contextlib.redirect_stdout(io.StringIO()):
        shell.run_line_magic("mpirun", "--stop")


if __name__ == "__main__":
    main()

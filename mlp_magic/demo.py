"""``python -m mlp_magic.demo [NOTEBOOK...]``: run example notebooks headless, print what they show.

The README's first command: it executes ``examples/01-hello-ranks.ipynb`` (4 local ranks, the
embedded default) with nbclient in a real kernel and prints every cell with its text output,
so a new user sees the grouped outputs without opening Jupyter.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile

DEFAULT = os.path.join("examples", "01-hello-ranks.ipynb")


def _text_of(output: dict) -> str:
    if output.get("output_type") == "stream":
        return output.get("text", "")
    if output.get("output_type") == "error":
        return f"{output.get('ename')}: {output.get('evalue')}\n"
    return (output.get("data") or {}).get("text/plain", "") + "\n"


def print_notebook(notebook, stream=sys.stdout) -> None:
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        stream.write("\n>>> " + cell.source.replace("\n", "\n... ") + "\n")
        for output in cell.get("outputs", []):
            stream.write(_text_of(output))
    stream.flush()


IOPUB_WAIT_S = 120   # an int: nbclient's trait refuses a float


def run_notebook(path: str, timeout: int = 600, private_kernel: bool = False):
    import nbformat

    notebook = nbformat.read(path, as_version=4)
    return execute_notebook(notebook, os.path.dirname(os.path.abspath(path)), timeout, private_kernel)


def execute_notebook(notebook, folder: str, timeout: int = 600, private_kernel: bool = False):
    """Run every cell of ``notebook`` (in place) in a python3 kernel started in ``folder``, over
    TCP on loopback as Jupyter's frontends start it, or, ``private_kernel``, over Unix sockets in
    a folder of this user's alone (the demo: no one else on the machine can reach its kernel,
    and ipykernel has no warning to print about it)."""
    import nbclient

    # nbclient waits 4 s by default for a cell's output after the cell's reply, then goes on
    # without it and says nothing: on a busy machine the widget cell of 04-cluster-view (some
    # 900 widget messages) came back empty (CI; reproduced with iopub_timeout=0). Wait longer,
    # and fail loudly rather than drop output.
    with tempfile.TemporaryDirectory(prefix="mlp-magic-demo-") as sockets:   # 0700
        manager = None
        if private_kernel:
            from jupyter_client import KernelManager

            manager = KernelManager(kernel_name="python3", transport="ipc",
                                    ip=os.path.join(sockets, "kernel"))
        client = nbclient.NotebookClient(notebook, km=manager, timeout=timeout, kernel_name="python3",
                                         iopub_timeout=IOPUB_WAIT_S, raise_on_iopub_timeout=True,
                                         resources={"metadata": {"path": folder}})
        client.execute()
    return notebook


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mlp_magic.demo", description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", default=[DEFAULT])
    args = parser.parse_args(argv)
    try:
        import nbclient  # noqa: F401
    except ImportError:
        print("the demo needs nbclient: pip install 'mlp_magic[demo]'", file=sys.stderr)
        return 2
    if os.geteuid() == 0:  # containers run as root; OpenMPI wants to be told that is fine
        os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    import nbformat

    for path in args.notebooks:
        if not os.path.isfile(path):
            print(f"no such notebook: {path} (run from the mlp_magic checkout)", file=sys.stderr)
            return 2
        print(f"=== {path}")
        notebook = run_notebook(path, private_kernel=True)
        print_notebook(notebook)
        saved = os.path.join(tempfile.gettempdir(), "executed-" + os.path.basename(path))
        nbformat.write(notebook, saved)
        print(f"\n=== executed notebook saved to {saved} (open it in Jupyter to see the HTML view)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

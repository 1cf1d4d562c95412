"""The stop button on ranks blocked in a C call, against the previous policy and ipyparallel, one run.

One command: ``python benchmarks/stop_button.py [--ranks 4,16,64,128]``.

For each size: a World whose every rank waits in an MPI ``Recv`` that no rank sends (blocked in
C: SIGINT cannot end it); the stop button (SIGINT to this process, as ipykernel's interrupt is
to a kernel) 2 s into the cell; the time from the SIGINT until the cell returns, saying which
ranks did not stop. Ours: one round of the interrupt's grace, then a short second round where
the first stopped no rank (world/pure/budget.second_round_grace). The previous policy, in the
same run on the same World: two full rounds. Between them ``%mpirun --unblock`` frees the ranks
(ULFM revokes the communicator; ``comm`` is a new one). The peer, ipyparallel's own wait
(``DirectView.execute(block=True)`` on the same engines): it returns at the SIGINT, because it
only stops waiting: it does not say that the ranks still run, and the next request queues
behind them (the World is stopped after it).

Last line: one JSON object.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")

SETUP = "%%mpirun -np {np} --oversubscribe\nimport numpy\n"
STUCK = "numpy_buffer = numpy.zeros(1)\ncomm.Recv(numpy_buffer, source=(rank + 1) % world_size)\n"
PRESS_AFTER_S = 2.0


def _press_at(seconds: float) -> list:
    """SIGINT to this process ``seconds`` from now; [when it was sent] once it is."""
    sent: list = []

    def press():
        sent.append(time.perf_counter())
        os.kill(os.getpid(), signal.SIGINT)
    threading.Timer(seconds, press).start()
    return sent


def stopped_cell(shell) -> tuple:
    """(seconds from the SIGINT to the cell's return, what it printed) of the stuck cell."""
    out = io.StringIO()
    sent = _press_at(PRESS_AFTER_S)
    with contextlib.redirect_stdout(out):
        shell.run_cell("%%mpirun\n" + STUCK)
        returned = time.perf_counter()
    return returned - sent[0], out.getvalue()


def unblocked(shell) -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        shell.run_cell("%mpirun --unblock")
    assert "came free" in out.getvalue() and "new one" in out.getvalue(), out.getvalue()


def peer_wait(shell) -> float:
    """ipyparallel's blocking wait on the same engines, interrupted: seconds to its return."""
    from mlp_magic.world.owner import owner_of

    view = owner_of(shell).world.client[:]
    sent = _press_at(PRESS_AFTER_S)
    try:
        view.execute(STUCK, block=True)
    except KeyboardInterrupt:
        return time.perf_counter() - sent[0]
    raise AssertionError("the stuck request returned")


def measure(shell, np: int) -> dict:
    from mlp_magic.client import job
    from mlp_magic.world.pure import budget

    shell.run_cell("%mpirun --stop")
    with contextlib.redirect_stdout(io.StringIO()):
        assert shell.run_cell(SETUP.format(np=np)).error_in_exec is None
    ours, said = stopped_cell(shell)
    assert "did not stop on SIGINT" in said, said
    unblocked(shell)
    job.second_round_grace = lambda grace, before, after: grace   # the previous policy
    try:
        before, said = stopped_cell(shell)
    finally:
        job.second_round_grace = budget.second_round_grace
    assert "did not stop on SIGINT" in said, said
    unblocked(shell)
    peer = peer_wait(shell)
    with contextlib.redirect_stdout(io.StringIO()):
        shell.run_cell("%mpirun --stop")
    return {"ranks": np, "ours_s": round(ours, 3), "previous_policy_s": round(before, 3),
            "ratio_vs_previous": round(ours / before, 3), "ipyparallel_wait_s": round(peer, 3),
            "cores": os.cpu_count()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ranks", default="4,16,64,128")
    sizes = [int(n) for n in parser.parse_args().ranks.split(",")]
    from IPython.testing.globalipapp import start_ipython

    shell = start_ipython()
    shell.run_line_magic("load_ext", "mlp_magic")
    rows = []
    for np in sizes:
        row = measure(shell, np)
        rows.append(row)
        print(f"{np:4d} ranks stuck in C: the stop button returns in {row['ours_s']:.2f} s, "
              f"{row['previous_policy_s']:.2f} s with two full rounds "
              f"(ratio {row['ratio_vs_previous']:.2f}); "
              f"ipyparallel's wait {row['ipyparallel_wait_s']:.2f} s, saying nothing of the ranks "
              f"({row['cores']} cores)", flush=True)
    print(json.dumps({"benchmark": "stop_button", "rows": rows}))


if __name__ == "__main__":
    main()

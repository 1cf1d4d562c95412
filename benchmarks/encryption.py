"""What encrypting a World's traffic across hosts costs (CurveZMQ), against the same World in the
clear, measured in one run.

One command (root: it brings up the multi-host test bed of tests/multihost/netns.py, 2 namespace
hosts, and takes it down): ``python benchmarks/encryption.py [--rounds 30]``.

For each setting (``MLP_MAGIC_ENCRYPT=0``, then the default), a World of 4 ranks on the 2 hosts
is started; then a warm ``pass`` cell (the median of ``--rounds``) and a 4 MB ``--pull`` from
every rank (the median of a third as many). The two settings alternate, twice each, so that the
machine's drift falls on both. Ratio: encrypted over clear. Goal: <= 1.15x.

Last line: one JSON object.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(1, os.path.join(HERE, "..", "tests", "multihost"))
os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")

PULL = "%%mpirun\nimport numpy\nblob = numpy.ones(4 * 1024 * 1024 // 8)\n"


def quiet(shell, cell: str):
    with contextlib.redirect_stdout(io.StringIO()) as out:
        result = shell.run_cell(cell)
    assert result.error_in_exec is None, out.getvalue()
    return out.getvalue()


def timed(shell, cell: str, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        began = time.perf_counter()
        quiet(shell, cell)
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def measure(shell, hostfile: str, encrypt: str, rounds: int) -> dict:
    os.environ["MLP_MAGIC_ENCRYPT"] = encrypt
    quiet(shell, "%mpirun --stop")
    said = quiet(shell, f"%%mpirun --hostfile {hostfile} -np 4\npass")
    assert ("encrypted" in said) == (encrypt == "1"), said
    quiet(shell, PULL)
    timed(shell, "%%mpirun\npass", 3)   # warm
    return {"pass_s": timed(shell, "%%mpirun\npass", rounds),
            "pull_4mb_s": timed(shell, "blobs = %mpirun --pull blob", max(3, rounds // 3))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=30)
    rounds = parser.parse_args().rounds
    import netns
    from IPython.testing.globalipapp import start_ipython

    reason = netns.unavailable_reason()
    if reason:
        print(json.dumps({"benchmark": "encryption", "skipped": reason}))
        return
    shell = start_ipython()
    shell.run_line_magic("load_ext", "mlp_magic")
    rows: dict = {"0": [], "1": []}
    with netns.Testbed(2) as bed, tempfile.TemporaryDirectory(prefix="bench-encrypt-") as folder:
        os.environ["MLP_MAGIC_SSH"] = " ".join(bed.ssh_command())
        os.environ.update(bed.env())
        hostfile = os.path.join(folder, "hostfile")
        with open(hostfile, "w") as handle:
            handle.write("".join(f"{host.name} slots=2\n" for host in bed.hosts))
        try:
            for encrypt in ("0", "1", "0", "1"):
                rows[encrypt].append(measure(shell, hostfile, encrypt, rounds))
        finally:
            quiet(shell, "%mpirun --stop")
            bed.close_ssh_masters()
    figures = {}
    for name in ("pass_s", "pull_4mb_s"):
        clear = statistics.median(row[name] for row in rows["0"])
        encrypted = statistics.median(row[name] for row in rows["1"])
        figures[name] = {"clear": round(clear, 4), "encrypted": round(encrypted, 4),
                         "ratio": round(encrypted / clear, 3)}
        print(f"{name}: clear {clear * 1000:.1f} ms, encrypted {encrypted * 1000:.1f} ms: "
              f"ratio {encrypted / clear:.3f} (goal <= 1.15)", flush=True)
    print(json.dumps({"benchmark": "encryption", "rounds": rounds, "figures": figures}))


if __name__ == "__main__":
    main()

"""``mlp-magic doctor`` and ``%mlp_doctor``: ask every host, compare, report.

  options -> the hosts (``core/topology``: hostfile, -H, the MLP_* variables, Slurm; else this
  machine) -> ``collect`` (every host at once, one deadline) -> ``doctor/pure/checks`` (findings,
  what all share) -> [--links: ``doctor/links``] -> text, HTML or JSON.

Exit status: 0 when no finding is an error, 1 when one is, 2 for bad input.
"""
from __future__ import annotations

import copy
import json
import os
import sys
import time
from collections.abc import Mapping

from mlp_magic.doctor.collect import collect
from mlp_magic.machine.names import this_machine_names
from mlp_magic.doctor.path_pip import pip_on_path


def _expected_gpus(env: Mapping) -> int | None:
    """MLP_WORKER_GPU when it is a count (0 on CPU jobs)."""
    text = str(env.get("MLP_WORKER_GPU", "")).strip()
    return int(text) if text.isdigit() and int(text) <= 64 else None


def gather(options, env: Mapping | None = None, transport_for=None):
    """The report (``doctor/pure/report.Report``). ``transport_for``: a live World's transport (the
    magic's), used where it covers the hosts."""
    from mlp_magic.doctor.pure.checks import Context, check_hosts
    from mlp_magic.machine.topology import topology_from_environment

    env = os.environ if env is None else env
    started = time.monotonic()
    options = copy.copy(options)
    options.packages = tuple(dict.fromkeys(options.packages))   # each once, in the order asked
    topology = topology_from_environment(env, hostfile=options.hostfile, hosts=options.hosts)
    asked, answers = collect(topology.hosts, options, env, transport_for)
    python = options.python or sys.executable   # what the probe and the engines run
    context = Context(expected_gpus=_expected_gpus(env), asked_packages=options.packages,
                      windows=answers.windows, timeout=options.timeout, ranks_python=python,
                      path_pip=pip_on_path(env, python),
                      here=next((h for h in asked if h.lower() in this_machine_names()), os.uname().nodename))
    report = check_hosts(asked, answers.facts, answers.failures, context)
    if options.links:
        from mlp_magic.doctor.links import run_links

        run_links(report, topology, options, env)
    report.seconds = time.monotonic() - started
    save_report(report, env)
    return report


def save_report(report, env: Mapping | None = None) -> None:
    """The report as the last one, in the state folder (0600, written atomically): the panel's
    health column reads it. A folder that cannot be written costs the column, never the run."""
    import tempfile

    from mlp_magic import config
    from mlp_magic.doctor.pure.report import REPORT_NAME
    from mlp_magic.world.published import private_folder

    folder = config.state_dir(env)
    try:
        private_folder(folder)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-doctor-", suffix=".json")
        with os.fdopen(fd, "w") as handle:
            json.dump(dict(report.to_json(), checked_at=time.time()), handle)
        os.replace(tmp, os.path.join(folder, REPORT_NAME))
    except OSError:
        pass


def run_command(options) -> int:
    """``mlp-magic doctor``: print the report (or its JSON); the exit status."""
    report = gather(options)
    if options.json:
        print(json.dumps(report.to_json(), indent=1))
    else:
        sys.stdout.write(report.text)
    return report.exit_status


def in_notebook(context, options) -> None:
    """``%mlp_doctor``: the report, through the live World's engines where it covers the hosts."""
    context.show_report(gather(options, context.env, context.world_transport_for()), options.json)

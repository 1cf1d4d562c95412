"""``mlp-magic stacks`` and ``%mlp_stacks``: collect, merge, show.

  options -> the hosts (``core/topology``: hostfile, -H, the MLP_* variables; else this machine)
  -> ``collect`` (every host at once) -> ``stacks/pure/jobs`` (sections, problems)
  -> ``stacks/pure/render`` (text; HTML in a notebook), or JSON with ``--json``.

Exit status of the command: 0 when every host answered and every process was read, 1 when
something is listed as not shown (or nothing matched), 2 for bad input, and 1 with one line when
nothing could be read for a reason with a known fix (py-spy missing, ptrace refused).

The merging and rendering modules are imported where they are used, once the hosts' ssh started
(they are a third of the command's imports): the handshakes run meanwhile.
"""
from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping

from mlp_magic.errors import StacksFault
from mlp_magic.stacks.collect import collect


class StacksReport:
    """One collection: every host's scan, the merged sections, and what could not be shown."""

    def __init__(self, scans: list, options):
        from mlp_magic.output.pure.grouping import fold_hosts_shown
        from mlp_magic.stacks.pure.jobs import problems, sections

        self.scans, self.options = scans, options
        self.sections = sections(scans, options.threads)
        self.problems = problems(scans, self.sections, whole_jobs=not (options.pids or options.match))
        hosts = fold_hosts_shown(s.host for s in scans)
        count = sum(len(s.processes) for s in scans)
        native = " --native" if options.native else ""
        self.heading = (f"Python stacks of {count} process{'es' if count != 1 else ''} on {hosts} "
                        f"(py-spy dump{native}; --> marks each stack's innermost line of user code)")

    @property
    def complete(self) -> bool:
        return not self.problems and any(s.processes for s in self.scans)

    @property
    def text(self) -> str:
        from mlp_magic.stacks.pure.render import render_report_text

        return render_report_text(self.sections, self.problems, self.heading)

    @property
    def html(self) -> str:
        from mlp_magic.stacks.pure.render import render_report_html

        return render_report_html(self.sections, self.problems, self.heading)

    def to_json(self) -> dict:
        hosts = []
        for scan in self.scans:
            processes = [{name: getattr(p, name) for name in p._fields if name != "host"}
                         for p in scan.processes]
            for process in processes:
                process["threads"] = [dict(t, frames=[[f.file, f.line, f.function] for f in t["frames"]])
                                      for t in process["threads"]]
            hosts.append({"host": scan.host, "error": scan.error, "pyspy": scan.pyspy,
                          "ptrace_scope": scan.ptrace_scope, "processes": processes})
        return {"hosts": hosts, "problems": self.problems}

    def _repr_html_(self) -> str:
        return self.html

    def __repr__(self) -> str:
        return self.text


def gather(options, env: Mapping | None = None, transport_for=None) -> StacksReport:
    """Collect and merge; StacksFault when nothing could be read for a reason with a known fix.
    ``transport_for``: see ``collect`` (the magic's live World)."""
    from mlp_magic.machine.topology import topology_from_environment

    env = os.environ if env is None else env
    # --pid names processes of this machine (a pid means nothing elsewhere) unless hosts are given
    pids_here = options.pids is not None and not (options.hostfile or options.hosts)
    topology = topology_from_environment({} if pids_here else env, hostfile=options.hostfile,
                                         hosts=options.hosts)
    scans = collect(topology.hosts, options, env, transport_for)
    report = StacksReport(scans, options)
    from mlp_magic.stacks.pure.jobs import fault_only

    fault = fault_only(scans, report.sections)
    if fault:
        raise StacksFault(fault)
    return report


def run_command(options) -> int:
    """``mlp-magic stacks``: print the report (or its JSON); the exit status."""
    report = gather(options)
    if options.json:
        print(json.dumps(report.to_json(), indent=1))
    else:
        sys.stdout.write(report.text)
    return 0 if report.complete else 1


def in_notebook(context, options) -> None:
    """``%mlp_stacks``: the report, through the live World's engines where it covers the hosts."""
    context.show_report(gather(options, context.env, context.world_transport_for()), options.json)

"""``%allrun CMD`` and ``%%allrun``: live lines tagged by host, then the grouped summary."""
from __future__ import annotations

from collections.abc import Callable, Mapping

from mlp_magic.core.ranges import fold_hosts
from mlp_magic.core.results import OK, AllrunResult
from mlp_magic.errors import HostFailure
from mlp_magic.output.display import LiveOutput, footnote_html
from mlp_magic.allrun import report
from mlp_magic.allrun.options import AllrunOptions, parse_allrun_line
from mlp_magic.allrun.plan import Plan, run_plan, select_hosts


def run_allrun_line(line: str, cell: str | None, user_ns: Mapping | None = None, *,
                    env: Mapping | None = None, on_output: Callable | None = None,
                    transport: Callable | None = None) -> tuple[AllrunOptions, AllrunResult]:
    """Parse a magic line (and cell), run it, render it; no display. ``transport``, when given,
    replaces ssh: ``transport(host_names, command, timeout, on_output) -> list[HostResult]``
    (e.g. the live engines of a World, one per host)."""
    options = parse_allrun_line(line, cell, env, user_ns)
    if transport is not None and not options.copy:
        hosts, _ = select_hosts(options, env)
        results = transport([h.name for h in hosts], options.command, options.timeout, on_output)
    else:
        results = run_plan(Plan(options, env), on_output)
    outcome = AllrunResult(results, report.render_text(results, options),
                           report.render_html(results, options), report.exit_status(results))
    return options, outcome


def allrun_magic(line: str, cell: str | None, user_ns: dict | None = None, *,
                 env: Mapping | None = None, transport: Callable | None = None) -> None:
    """``%allrun CMD`` / ``%%allrun``: live lines tagged by host, replaced at the end by the
    grouped summary (HTML in a notebook, text in a terminal); ``-o NAME`` stores the
    AllrunResult in the notebook; raises HostFailure when a host did not succeed."""
    live = LiveOutput()

    def show_line(host: str, stream: str, text: str) -> None:
        live.add([(host, stream, text + "\n")])

    options, outcome = run_allrun_line(line, cell, user_ns, env=env, on_output=show_line,
                                       transport=transport)
    note = report.footer(outcome.results)
    live.finish({"text/plain": f"{outcome.text.rstrip()}\n{note}",
                 "text/html": outcome.html + footnote_html(note)})
    if options.out and user_ns is not None:
        user_ns[options.out] = outcome
    if not outcome.ok:
        bad = [r for r in outcome.results if r.status != OK]
        raise HostFailure(f"{' / '.join(sorted({r.status for r in bad}))} on "
                          f"{fold_hosts([r.host for r in bad])} ({len(bad)} of {len(outcome)} hosts); "
                          "details above", outcome)

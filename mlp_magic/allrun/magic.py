"""``%allrun CMD`` and ``%%allrun``: live lines tagged by host, then the grouped summary."""
from __future__ import annotations

from collections.abc import Callable, Mapping

from mlp_magic.allrun import report
from mlp_magic.allrun.plan import Plan, run_plan, select_hosts
from mlp_magic.core.ranges import fold_hosts
from mlp_magic.core.results import OK, AllrunResult
from mlp_magic.errors import HostFailure
from mlp_magic.output.display import StreamingOutput, footnote_html


def allrun_verb(context, options) -> None:
    """The magic's verb (commands/table): through the live World's engines when it covers the
    hosts (no ssh), else over ssh."""
    transport = None
    world = context.owner.world
    if world is not None and not options.copy:
        from mlp_magic.allrun.via_engines import WorldTransport, covers

        hosts, _ = select_hosts(options, context.env)
        if covers(world, [h.name for h in hosts]):
            transport = WorldTransport(world)
    allrun_in_notebook(options, context.user_ns, env=context.env, transport=transport)


def run_allrun(options, env: Mapping | None = None, on_output: Callable | None = None,
               transport: Callable | None = None) -> AllrunResult:
    """Run it and render it; no display. ``transport``, when given, replaces ssh:
    ``transport(host_names, command, timeout, on_output) -> list[HostResult]`` (e.g. the live
    engines of a World, one per host)."""
    if transport is not None and not options.copy:
        hosts, _ = select_hosts(options, env)
        results = transport([h.name for h in hosts], options.command, options.timeout, on_output)
    else:
        results = run_plan(Plan(options, env), on_output)
    return AllrunResult(results, report.render_text(results, options), report.render_html(results, options),
                        report.exit_status(results))


def allrun_in_notebook(options, user_ns: dict | None = None, *, env: Mapping | None = None,
                       transport: Callable | None = None) -> None:
    """Live lines tagged by host, replaced at the end by the grouped summary (HTML in a
    notebook, text in a terminal); ``-o NAME`` stores the AllrunResult in the notebook; raises
    HostFailure when a host did not succeed."""
    live = StreamingOutput()

    def show_line(host: str, stream: str, text: str) -> None:
        live.add([(host, stream, text + "\n")])

    outcome = run_allrun(options, env, on_output=None if options.json else show_line, transport=transport)
    if options.json:   # what `allrun --json` prints, for a cell that reads it as data
        print(report.results_json(outcome.results))
    else:
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

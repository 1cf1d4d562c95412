"""How an allrun ended, for people and programs: exit status, grouped text and HTML, JSON."""
from __future__ import annotations

from mlp_magic.output.pure.grouping import group_results
from mlp_magic.core.ranges import fold_hosts
from mlp_magic.output.pure.html import render_groups_html
from mlp_magic.output.pure.text import render_groups_text
from mlp_magic.core.results import FAILED, INTERRUPTED, TIMEOUT, UNREACHABLE, HostResult

EXIT_INTERRUPTED = 130
EXIT_UNREACHABLE = 255


def exit_status(results: list[HostResult]) -> int:
    """0 all ok; 130 interrupted; 255 a host unreachable or timed out; else the largest exit."""
    statuses = {r.status for r in results}
    if INTERRUPTED in statuses:
        return EXIT_INTERRUPTED
    if statuses & {UNREACHABLE, TIMEOUT}:
        return EXIT_UNREACHABLE
    codes = [r.exit_code for r in results if r.status == FAILED and r.exit_code is not None]
    return min(max(codes, default=0), 255) or (1 if FAILED in statuses else 0)


def summary_groups(results: list[HostResult], group: bool = True) -> list:
    if group:
        return group_results(results)
    return [g for r in results for g in group_results([r])]


def footer(results: list[HostResult]) -> str:
    """One line: counts per status, the hosts that did not finish, the slowest host's time."""
    counts: dict[str, list] = {}
    for r in results:
        counts.setdefault(r.status, []).append(r.host)
    parts = [f"{len(names)} {status}" for status, names in counts.items()]
    note = ""
    if INTERRUPTED in counts:
        note = f"; not finished: {fold_hosts(counts[INTERRUPTED])}"
    slowest = max((r.seconds for r in results), default=0.0)
    hosts = "1 host" if len(results) == 1 else f"{len(results)} hosts"
    return f"allrun: {hosts}: {', '.join(parts)}{note} ({slowest:.2f} s)"


def render_text(results: list[HostResult], options, color: bool = False) -> str:
    groups = summary_groups(results, options.group)
    return render_groups_text(groups, color=color, diff=options.diff)


def render_html(results: list[HostResult], options) -> str:
    return render_groups_html(summary_groups(results, options.group), diff=options.diff)


def results_json(results: list[HostResult]) -> str:
    import json

    return json.dumps([r.to_json() for r in results])

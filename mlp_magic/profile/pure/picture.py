"""The picture of ``%%mpirun --profile`` (pure): a flame graph of every rank's samples merged, and
a timeline of when each rank entered each collective.

The flame graph folds the ranks where their stacks agree: a frame's width is its samples summed
over the ranks, and it lists the ranks that reached it; a frame only some ranks reached (where
they part ways) is marked. The timeline draws a row per rank, a tick where it entered each
collective, and a bar from there to the last rank's arrival: its wait, where the skew shows.
"""
from __future__ import annotations

import html

from mlp_magic.core.ranges import rank_words
from mlp_magic.profile.pure.arrivals import matched
from mlp_magic.stacks.pure.frames import frame_text
from mlp_magic.stacks.pure.tree import Node, merge_counted

TIMELINE_COLLECTIVES, TIMELINE_RANKS = 40, 32   # the last collectives, the first ranks (and the straggler)
MIN_SHARE = 0.005   # frames narrower than this share of all samples are left out
MAX_DEPTH = 24
ROW_PX, LABEL_PX, WIDTH_PX = 16, 64, 640
STYLE = ("<style>.mlp-flame{font:11px monospace}"
         ".mlp-fn{display:inline-block;vertical-align:top;overflow:hidden}"
         ".mlp-fl{background:#f3c98b;border:1px solid #fff;white-space:nowrap;overflow:hidden;"
         "text-overflow:ellipsis;padding:0 2px}.mlp-fl.mlp-part{background:#e9857a}"
         ".mlp-fc{display:flex}</style>")


def flame_html(stacks: dict) -> str:
    """The merged flame graph, outermost frame on top; '' without samples."""
    root = merge_counted(stacks)
    if not root.weight():
        return ""
    return (f"{STYLE}<div class='mlp-flame'>"
            f"{_children_html(root, root.weight(), root.members, 0)}</div>")


def _children_html(node: Node, whole: int, everyone: set, depth: int) -> str:
    weighed = [(child.weight(), child) for child in node.children.values()]   # once: a sum over ranks
    kept = [(weight, child) for weight, child in weighed if weight >= MIN_SHARE * whole]
    if not kept or depth >= MAX_DEPTH:
        return ""
    parts, here = [], node.weight()
    for weight, child in sorted(kept, key=lambda kept_child: -kept_child[0]):
        width = 100.0 * weight / here
        ranks = sorted(child.members)
        part = set(ranks) != everyone
        who = rank_words(ranks) if part else "all ranks"
        text = f"{frame_text(child.frame)} · {who} · {100.0 * weight / whole:.0f} %"
        per_rank = ", ".join(f"{rank}: {count}" for rank, count in sorted(child.counts.items()))
        parts.append(f"<div class='mlp-fn' style='width:{width:.2f}%'>"
                     f"<div class='mlp-fl{' mlp-part' if part else ''}' title='{html.escape(text)}&#10;"
                     f"samples by rank: {per_rank}'>{html.escape(text)}</div>"
                     f"{_children_html(child, whole, everyone, depth + 1)}</div>")
    return f"<div class='mlp-fc'>{''.join(parts)}</div>"


def timeline_svg(collectives: list, straggler: int | None) -> str:
    """Each rank's arrivals at the collectives (arrivals.Collective), its waits as bars; ''
    without collectives."""
    if not collectives:
        return ""
    collectives = collectives[-TIMELINE_COLLECTIVES:]
    first = min(t for c in collectives for _, t in c.arrivals)
    span = max(max(t for _, t in c.arrivals) for c in collectives) - first or 1.0
    ranks = [rank for rank, _ in collectives[0].arrivals]
    if len(ranks) > TIMELINE_RANKS:
        ranks = ranks[:TIMELINE_RANKS - 1] + [straggler if straggler is not None else ranks[-1]]
    scale = (WIDTH_PX - LABEL_PX - 8) / span
    rows = []
    for row, rank in enumerate(ranks):
        y = row * ROW_PX
        colour = "#c0392b" if rank == straggler else "#34495e"
        rows.append(f"<text x='0' y='{y + 12}' fill='{colour}'>rank {rank}</text>")
        for collective in collectives:
            at = dict(collective.arrivals)[rank]
            x, wait = LABEL_PX + (at - first) * scale, collective.waited(rank) * scale
            rows.append(f"<rect x='{x:.1f}' y='{y + 4}' width='{max(wait, 0.5):.1f}' height='8' "
                        f"fill='#aed6f1'>"
                        f"<title>rank {rank}: {collective.op} #{collective.seq}, waited "
                        f"{collective.waited(rank) * 1000:.0f} ms</title></rect>"
                        f"<rect x='{x:.1f}' y='{y + 2}' width='1.5' height='12' fill='{colour}'/>")
    height = ROW_PX * len(ranks) + 14
    return (f"<svg xmlns='http://www.w3.org/2000/svg' width='{WIDTH_PX}' height='{height}' "
            f"style='font:11px monospace'>{''.join(rows)}<text x='{LABEL_PX}' y='{height - 2}' fill='#777'>"
            f"0 s</text><text x='{WIDTH_PX - 60}' y='{height - 2}' fill='#777'>{span:.2f} s</text></svg>")


def report_html(found) -> str:
    """The whole report for the notebook: its text, the flame graph and the timeline."""
    parts = [f"<pre>{html.escape(found.text)}</pre>"]
    flame = flame_html(found.stacks)
    if flame:
        parts.append(f"<details open><summary>where the time went: every rank's samples, merged "
                     f"(red: frames only some ranks reached)</summary>{flame}</details>")
    timeline = timeline_svg(matched({rank: found.entered.get(rank, []) for rank in found.stacks}),
                            found.straggler)
    if timeline:
        parts.append(f"<details open><summary>when each rank entered each collective (bars: its wait for "
                     f"the last)</summary>{timeline}</details>")
    return "".join(parts)

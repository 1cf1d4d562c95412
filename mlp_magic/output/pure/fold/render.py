"""A folded group's body (output/pure/fold/groups.FoldedGroup) as text and as HTML (pure).

Text: one line per folded line, a ``[ranks ...]`` prefix on lines only some members print, and
``  ! rank 37: loss nan`` under a line for each outlier. HTML: the same lines with each varying
field highlighted and outliers in red; a line with varying fields is a plain ``<details>`` that
opens to every rank's own version of it (no JavaScript: works in nbconvert output), as long as
the group's budget of expanded characters lasts.
"""
from __future__ import annotations

from html import escape

from mlp_magic.output.pure.fold.groups import FoldedGroup, FoldedLine
from mlp_magic.core.ranges import fold_hosts, fold_ranks, rank_words

MAX_OUTLIERS_SHOWN = 6     # per line; the rest are counted
PREVIEW_LINES = 20         # HTML: a longer group shows these, the rest behind <details>
COLLAPSE_OVER_LINES = 40
# HTML: at most this many folded lines. A notebook keeps every output's HTML in its file and the
# browser lays it all out; 64 ranks x 20,000 lines differing in numbers were 5 MB of HTML. The
# text view, -o NAME and the logs keep every line.
MAX_HTML_LINES = 2000
_CYAN, _RED, _RESET = "\x1b[36m", "\x1b[31m", "\x1b[0m"

_BODY = ("margin:0;padding:4px 8px;white-space:pre;overflow-x:auto;line-height:1.3;"
         "color:var(--jp-content-font-color1,inherit)")
_FIELD = "background:rgba(0,131,143,0.14);border-radius:2px"
_BAD = "background:rgba(198,40,40,0.14);color:#c62828;font-weight:600;border-radius:2px"
_OUTLIER = "color:#c62828"
_MUTED = "color:var(--jp-content-font-color2,#666)"
_VERSIONS = ("margin:0 0 2px 1.2em;padding-left:6px;border-left:2px solid var(--jp-border-color2,#ddd);"
             "color:var(--jp-content-font-color2,#555)")
_SUMMARY = "cursor:pointer"


def who(keys, kind: str) -> str:
    """ "rank 3", "ranks 0-2,7", "worker1", "worker[1-2]"."""
    if kind == "hosts":
        return fold_hosts(keys)
    return rank_words(keys)


def outlier_lines(line: FoldedLine, kind: str) -> list[str]:
    """ "  ! rank 37: loss nan", at most MAX_OUTLIERS_SHOWN, then how many more."""
    found = line.outliers()
    shown = [f"  ! {who(o.keys, kind)}: {label} {o.token}" for label, o in found[:MAX_OUTLIERS_SHOWN]]
    hidden = sum(len(o.keys) for _, o in found[MAX_OUTLIERS_SHOWN:])
    if hidden:
        shown.append(f"  ! and {hidden} more outlying value{'s' if hidden > 1 else ''}")
    return shown


def _prefix(line: FoldedLine, kind: str) -> str:
    return f"[{who(line.keys, kind)}] " if line.keys is not None else ""


def folded_text(group: FoldedGroup, color: bool = False) -> str:
    """The body as text, ending with a newline."""
    out = []
    for line in group.lines:
        if color:
            body = "".join(p if isinstance(p, str) else _colored(p) for p in line.pieces())
        else:
            body = line.text
        out.append(_prefix(line, group.kind) + body)
        for outlier in outlier_lines(line, group.kind):
            out.append(f"{_RED}{outlier}{_RESET}" if color else outlier)
    return "\n".join(out) + "\n"


def _colored(field) -> str:
    if field.bad:
        return f"{_RED}{field.text}{_RESET}"
    return f"{_CYAN}{field.text}{_RESET}" if field.varies else field.text


def folded_html(group: FoldedGroup, expand_budget: int) -> list[str]:
    """The body as HTML pieces; per-rank versions while ``expand_budget`` characters last."""
    rows, left, expanded = [], expand_budget, 0
    for line in group.lines[:MAX_HTML_LINES]:
        versions = None
        if left > 0 and any(f.varies for f in line.fields):
            versions = _versions(group, line)
            left -= sum(len(v) for v in versions)
            expanded += 1
        rows.append(_line_html(line, group.kind, versions))
    if len(rows) > COLLAPSE_OVER_LINES:
        rest = len(rows) - PREVIEW_LINES
        rows[PREVIEW_LINES:] = [f'<details><summary style="{_SUMMARY};{_MUTED}">{rest:,} more folded lines'
                                f'</summary>{"".join(rows[PREVIEW_LINES:])}</details>']
    varying = sum(1 for line in group.lines[:MAX_HTML_LINES] if any(f.varies for f in line.fields))
    note = ""
    if len(group.lines) > MAX_HTML_LINES:
        hidden = len(group.lines) - MAX_HTML_LINES
        note = (f'<div style="{_MUTED}">({hidden:,} more folded lines are not shown here: the text view, '
                "-o NAME and the log have them)</div>")
    elif expanded < varying:
        note = (f'<div style="{_MUTED}">(each rank\'s own line is shown for the first {expanded} of '
                f"{varying} lines with varying numbers; -o NAME and the log have every rank's output)</div>")
    return [f'<div style="{_BODY}">', *rows, note, "</div>"]


def _versions(group: FoldedGroup, line: FoldedLine) -> list[str]:
    """ "[0,5] step 10 loss 0.5" (as live lines are tagged): one entry per distinct version."""
    by_text: dict = {}
    for keys, text in group.versions(line):
        by_text.setdefault(text, []).extend(keys)
    tag = fold_ranks if group.kind == "ranks" else fold_hosts
    return [f"[{tag(keys)}] {text}" for text, keys in by_text.items()]


def _line_html(line: FoldedLine, kind: str, versions: list | None) -> str:
    prefix = _prefix(line, kind)
    body = "".join(escape(p, quote=False) if isinstance(p, str) else _field_html(p) for p in line.pieces())
    shown = (f'<span style="{_MUTED}">{escape(prefix, quote=False)}</span>' if prefix else "") + body
    outliers = "".join(f'<div style="{_OUTLIER}">{escape(text, quote=False)}</div>'
                       for text in outlier_lines(line, kind))
    if versions is None:
        return f"<div>{shown}</div>{outliers}"
    listed = escape("\n".join(versions), quote=False)
    return (f'<details><summary style="{_SUMMARY}">{shown}</summary>'
            f'<div style="{_VERSIONS}">{listed}</div></details>{outliers}')


def _field_html(field) -> str:
    text = escape(field.text, quote=False)
    if field.bad:
        return f'<span style="{_BAD}">{text}</span>'
    if field.outliers:
        return f'<span style="{_FIELD};border-bottom:2px solid #c62828">{text}</span>'
    return f'<span style="{_FIELD}">{text}</span>' if field.varies else text

"""Grouped outputs as self-contained HTML for notebooks (inline styles, no JavaScript).

Colours use JupyterLab's CSS variables with plain fallbacks, so the same markup reads well in
light and dark Lab themes and in nbconvert's static HTML. Every piece of text is escaped.
"""
from __future__ import annotations

from html import escape
from collections.abc import Sequence

from mlp_magic.output.pure.fold.groups import FoldedGroup
from mlp_magic.output.pure.grouping import OutputGroup
from mlp_magic.output.pure.fold.render import folded_html
from mlp_magic.output.pure.text import CAPPED_NOTE, diff_reference, group_body, is_diff

# Accent colour per status; failures not listed here use the error colour.
_ACCENTS = {
    "ok": "#2e7d32",
    "error": "#c62828",
    "failed": "#c62828",
    "died": "#c62828",
    "timeout": "#ef6c00",
    "interrupted": "#ef6c00",
    "paused": "#1565c0",
    "running": "#1565c0",
    "quit": "#ef6c00",
    "unreachable": "#6a1b9a",
}
# A group longer than this shows its first lines, with the whole text folded in <details>.
PREVIEW_LINES = 20
COLLAPSE_OVER_LINES = 40

_BOX = ("margin:4px 0;border:1px solid var(--jp-border-color2,#ddd);border-left:4px solid {accent};"
        "border-radius:2px;font-family:var(--jp-code-font-family,monospace);"
        "font-size:var(--jp-code-font-size,13px)")
_HEADER = ("padding:2px 8px;background:{tint};color:var(--jp-content-font-color1,inherit);"
           "font-weight:600")
_BADGE = "margin-left:8px;padding:0 6px;border-radius:3px;background:{accent};color:#fff;font-weight:600"
_PRE = ("margin:0;padding:4px 8px;white-space:pre;overflow-x:auto;background:transparent;"
        "color:var(--jp-content-font-color1,inherit);line-height:1.3")
_SUMMARY = "padding:2px 8px;cursor:pointer;color:var(--jp-content-font-color2,#555)"
_DIFF_COLORS = {"+": "#2e7d32", "-": "#c62828", "@": "#00838f"}


def render_groups_html(groups: Sequence[OutputGroup | FoldedGroup], *, diff: bool = False,
                       max_chars_per_group: int | None = 1_000_000) -> str:
    """All groups as one HTML fragment; with ``diff`` minority groups show a diff against the majority."""
    reference = diff_reference(groups, diff)
    pieces = ['<div class="mlp-magic-groups">']
    for group in groups:
        pieces.extend(_group_block(group, reference, max_chars_per_group))
    pieces.append("</div>")
    return "".join(pieces)


def _group_block(group, reference: OutputGroup | None, max_chars: int | None) -> list[str]:
    accent = _ACCENTS.get(group.status, _ACCENTS["error"])
    if isinstance(group, FoldedGroup):
        body = folded_html(group, expand_budget=(max_chars or 1_000_000) // 2)
        if group.truncated:
            body.append(f'<div style="{_SUMMARY}">{escape(CAPPED_NOTE)}</div>')
    else:
        to_html = _diff_html if is_diff(group, reference) else _plain_html
        body = _body_html(group_body(group, reference, max_chars), to_html)
    status = escape(group.status)
    folded = ' data-folded="1"' if isinstance(group, FoldedGroup) else ""   # attributes in nbconvert's order
    return [
        f'<div class="mlp-magic-group"{folded} data-status="{status}" style="{_BOX.format(accent=accent)}">',
        _header(group, accent),
        *body,
        "</div>",
    ]


def _header(group: OutputGroup, accent: str) -> str:
    tint = _tint(accent)
    badge = ""
    if group.status_tag:
        badge = f'<span style="{_BADGE.format(accent=accent)}">{escape(group.status_tag)}</span>'
    return f'<div style="{_HEADER.format(tint=tint)}">{escape(group.label)}{badge}</div>'


def _tint(accent: str) -> str:
    """The accent at 12% opacity, readable on light and dark themes (rgba: the most widely accepted form)."""
    red, green, blue = (int(accent[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgba({red},{green},{blue},0.12)"


def _body_html(body: list[str], to_html) -> list[str]:
    """The text in <pre>; a long one shows its first lines, the whole of it folded in <details>."""
    line_count = sum(p.count("\n") for p in body) + (0 if body[-1].endswith("\n") else 1)
    escaped = to_html(body)
    if line_count <= COLLAPSE_OVER_LINES:
        return [f'<pre style="{_PRE}">', *escaped, "</pre>"]
    characters = sum(len(p) for p in body)
    return [
        f'<pre style="{_PRE}">', *to_html([_first_lines(body, PREVIEW_LINES)]), "</pre>",
        f'<details><summary style="{_SUMMARY}">',
        f"all {line_count:,} lines ({characters:,} characters)</summary>",
        f'<pre style="{_PRE};max-height:40em;overflow-y:auto">', *escaped, "</pre></details>",
    ]


def _first_lines(pieces: list[str], count: int) -> str:
    """The first ``count`` lines of the text made of ``pieces``, without joining all of it."""
    taken: list[str] = []
    for piece in pieces:
        position = -1
        while count and (position := piece.find("\n", position + 1)) >= 0:
            count -= 1
        if not count:
            taken.append(piece[:position + 1])
            break
        taken.append(piece)
    return "".join(taken)


def text_box(header: str, body_html: str, status: str = "ok") -> str:
    """Markup already escaped (``body_html``) in the box a group has, under ``header`` (plain text)."""
    accent = _ACCENTS.get(status, _ACCENTS["error"])
    heading = (f'<div style="{_HEADER.format(tint=_tint(accent))}">{escape(header)}</div>'
               if header else "")
    box = _BOX.format(accent=accent)
    return (f'<div class="mlp-magic-group" data-status="{escape(status)}" style="{box}">'
            f'{heading}<pre style="{_PRE}">{body_html}</pre></div>')


def _plain_html(pieces: list[str]) -> list[str]:
    return [escape(piece, quote=False) for piece in pieces]  # no copy when nothing needs escaping


def _diff_html(pieces: list[str]) -> list[str]:
    """A unified diff (small) with added, removed and hunk lines coloured."""
    lines = []
    for line in "".join(pieces).split("\n"):
        color = None if line.startswith(("+++", "---")) else _DIFF_COLORS.get(line[:1])
        escaped = escape(line, quote=False)
        lines.append(f'<span style="color:{color}">{escaped}</span>' if color else escaped)
    return ["\n".join(lines)]

"""Grouped outputs as plain text for terminals and logs, like ``clush -b``.

Each group: one header line naming its ranks/hosts (and status when not ok), then its text.
Group bodies are handled as lists of the original strings, so a big output is copied once,
into the final result, and not along the way.
"""
from __future__ import annotations

from collections.abc import Sequence

from mlp_magic.output.pure.fold.groups import FoldedGroup
from mlp_magic.output.pure.grouping import OutputGroup, diff_against_majority, majority
from mlp_magic.output.pure.fold.render import folded_text

RULE = "-" * 16
_RED, _GREEN, _CYAN, _BOLD, _RESET = "\x1b[31m", "\x1b[32m", "\x1b[36m", "\x1b[1m", "\x1b[0m"
CAPPED_NOTE = "[display capped; the log has every byte]"
NO_OUTPUT = "(no output)"


def render_groups_text(groups: Sequence[OutputGroup | FoldedGroup], *, color: bool = False,
                       diff: bool = False, max_chars_per_group: int | None = 1_000_000) -> str:
    """All groups as one string; with ``diff`` minority groups show a diff against the majority.

    Exact groups (OutputGroup) show their text; folded ones (output/pure/fold/groups) their folded lines."""
    reference = diff_reference(groups, diff)
    pieces: list[str] = []
    for group in groups:
        pieces.append(header_line(group, color=color))
        pieces.append("\n")
        body = group_body(group, reference, max_chars_per_group, color=color)
        if color and is_diff(group, reference):
            body = [_color_diff("".join(body))]
        pieces.extend(body)
        if not body[-1].endswith("\n"):
            pieces.append("\n")
    return "".join(pieces)


def header_line(group: OutputGroup, *, color: bool = False) -> str:
    """ "---------------- ranks 0-3 (4) on localhost [error] ----------------" """
    tag = f" [{group.status_tag}]" if group.status_tag else ""
    line = f"{RULE} {group.label}{tag} {RULE}"
    if not color:
        return line
    return f"{_BOLD}{_GREEN if group.ok else _RED}{line}{_RESET}"


def diff_reference(groups: Sequence[OutputGroup | FoldedGroup], diff: bool) -> OutputGroup | None:
    """The group others are diffed against: the majority, when diffs are asked for and useful
    (exact groups only: a folded group is not a text to diff)."""
    exact = [g for g in groups if isinstance(g, OutputGroup)]
    return majority(exact) if diff and len(exact) > 1 else None


def is_diff(group, reference: OutputGroup | None) -> bool:
    return reference is not None and group is not reference and isinstance(group, OutputGroup)


def group_body(group: OutputGroup | FoldedGroup, reference: OutputGroup | None, max_chars: int | None,
               color: bool = False) -> list[str]:
    """The pieces shown under the header: the text, the diff against ``reference``, or the folded
    lines (coloured with ``color``); capped.

    Never empty; the last piece is non-empty.
    """
    if isinstance(group, FoldedGroup):
        pieces = [folded_text(group, color=color)]
    else:
        pieces = _diff_pieces(group, reference) if is_diff(group, reference) else group.text_pieces
    size = sum(len(p) for p in pieces)
    if not size:
        pieces = [NO_OUTPUT]
    elif max_chars is not None and size > max_chars:
        pieces = [cap_text("".join(pieces), max_chars)]
    if group.truncated:
        pieces = [*pieces, "" if pieces[-1].endswith("\n") else "\n", CAPPED_NOTE]
    return pieces


def _diff_pieces(group: OutputGroup, reference: OutputGroup) -> list[str]:
    delta = diff_against_majority(group, reference) or f"(same stdout/stderr as {reference.label})"
    if group.error and group.error != reference.error:
        return [delta, "\n", group.error]
    return [delta]


def cap_text(text: str, max_chars: int) -> str:
    """Keep the head and the tail (at line boundaries when possible) and say how much was cut."""
    if len(text) <= max_chars:
        return text
    half = max(max_chars // 2, 1)
    head_end = text.rfind("\n", 0, half) + 1 or half
    tail_from = len(text) - half
    newline = text.find("\n", tail_from - 1, len(text) - 1)
    tail_start = max(newline + 1 if newline >= 0 else tail_from, head_end)
    cut_chars = tail_start - head_end
    cut_lines = text.count("\n", head_end, tail_start)
    head = text[:head_end]
    marker = f"[... {cut_chars:,} characters ({cut_lines:,} lines) cut here; the log has every byte ...]\n"
    return "".join((head, "" if head.endswith("\n") else "\n", marker, text[tail_start:]))


def _color_diff(body: str) -> str:
    lines = []
    for line in body.split("\n"):
        if line.startswith(("+++", "---")):
            lines.append(f"{_BOLD}{line}{_RESET}")
        elif line.startswith("+"):
            lines.append(f"{_GREEN}{line}{_RESET}")
        elif line.startswith("-"):
            lines.append(f"{_RED}{line}{_RESET}")
        elif line.startswith("@@"):
            lines.append(f"{_CYAN}{line}{_RESET}")
        else:
            lines.append(line)
    return "\n".join(lines)

"""A merged stack tree (``stacks/pure/tree``) as text for terminals and as HTML for notebooks (pure).

Frames that every member of a branch shares are printed one under the other; the tree only
indents where members part ways, so a 16-rank job stuck in one place reads as one stack::

    ranks 0-15 (16) on worker[0-3]
          train.py:120 <module>
      --> train.py:88 step
        * ranks part here: 2 groups
        |-- ranks 0-6,8-15 (15) on worker[0-3]
        |         mpi4py/MPI.pyx:... Barrier
        `-- rank 7 on worker1  [odd]
              --> train.py:25 sleeper

``-->`` marks each stack's innermost frame of user code, ``>`` the user's other frames.
Both renderers walk the same lines (``tree_lines``); HTML only adds colour.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from html import escape

from mlp_magic.output.pure.html import text_box
from mlp_magic.output.pure.text import RULE
from mlp_magic.stacks.pure.jobs import label_for
from mlp_magic.stacks.pure.frames import frame_text
from mlp_magic.stacks.pure.tree import Node, chain, deepest_user_nodes, odd, summary

HEAD, ODD, FRAME, USER, INNERMOST, SPLIT, END = "head", "odd", "frame", "user", "innermost", "split", "end"
ODD_TAG = "  [odd]"
_STYLES = {HEAD: "font-weight:600", ODD: "font-weight:600;color:#c62828", USER: "font-weight:600",
           INNERMOST: "font-weight:600;color:#1565c0", SPLIT: "color:#ef6c00", END: "color:#777"}
Label = Callable[[Iterable[int]], str]


def tree_lines(root: Node, label: Label, frame_text: Callable, is_user: Callable) -> list:
    """[(kind, text)]: the tree, one line each (kinds: head, odd, frame, user, innermost, split, end)."""
    innermost = deepest_user_nodes(root, is_user)
    lines: list = []
    # (node or None for "the stacks end here", members, header prefix, body prefix, odd)
    pending = [(root, frozenset(root.members), "", "", False)]
    while pending:
        node, members, head_prefix, body, is_odd = pending.pop()
        lines.append((ODD if is_odd else HEAD, f"{head_prefix}{label(members)}{ODD_TAG if is_odd else ''}"))
        if node is None:
            lines.append((END, f"{body}      (the stack ends at the frame above)"))
            continue
        nodes, last = chain(node)
        for each in nodes:
            kind = INNERMOST if id(each) in innermost else USER if is_user(each.frame) else FRAME
            gutter = {INNERMOST: "-->", USER: "  >", FRAME: "   "}[kind]
            lines.append((kind, f"{body}{gutter} {frame_text(each.frame)}"))
        parts = last.branches()
        if len(parts) < 2:
            continue
        lines.append((SPLIT, f"{body}  * ranks part here: {len(parts)} groups"))
        for index in reversed(range(len(parts))):
            part_members, child = parts[index]
            final = index == len(parts) - 1
            pending.append((child, part_members, f"{body}  {'`' if final else '|'}-- ",
                            f"{body}  {' ' if final else '|'}   ", odd(parts, index)))
    return lines


def render_tree_text(root: Node, label: Label, frame_text: Callable, is_user: Callable) -> str:
    return "".join(text + "\n" for _, text in tree_lines(root, label, frame_text, is_user))


def render_tree_html(root: Node, label: Label, frame_text: Callable, is_user: Callable,
                     title: str = "", status: str = "ok") -> str:
    """The same lines in a box (``render_html.text_box``), odd groups and split points coloured."""
    lines = []
    for kind, text in tree_lines(root, label, frame_text, is_user):
        style = _STYLES.get(kind)
        lines.append(f'<span style="{style}">{escape(text)}</span>' if style else escape(text))
    return text_box(title, "\n".join(lines), status)


# ------------------------------------------------------------------------- a whole report

def is_user(frame) -> bool:
    """User code: not a library, not a pseudo-frame (a thread's name, "idle": no file)."""
    return bool(frame.file) and frame.is_user


def merged_text(root: Node, label: Label) -> str:
    """The summary line, then the tree (frames are ``stacks/pure/frames.Frame``)."""
    tree = render_tree_text(root, label, frame_text, is_user)
    return f"summary: {summary(root, label, frame_text)}\n{tree}"


def merged_html(root: Node, label: Label, title: str = "") -> str:
    line = escape("summary: " + summary(root, label, frame_text))
    return (f'<div style="margin-top:0.6em">{line}</div>'
            + render_tree_html(root, label, frame_text, is_user, title=title))


def collectives_html(lines: list) -> str:
    """The collectives lines (stacks/pure/collectives.section) under their title; none: nothing."""
    if not lines:
        return ""
    body = "\n".join(escape(line) for line in lines[1:])
    return (f"<div style='margin-top:0.6em;font-weight:bold'>{escape(lines[0])}</div>"
            f"<pre style='margin:0.2em 0'>{body}</pre>")


def _idle_note(section) -> str:
    by_count: dict = {}
    for member, count in section.hidden_idle.items():
        by_count.setdefault(count, []).append(member)
    label = label_for(section)
    parts = [f"{count} on {label(members)}" for count, members in sorted(by_count.items())]
    return f"idle threads not shown (--threads shows them): {'; '.join(parts)}" if parts else ""


def render_report_text(found: list, problems: list, heading: str) -> str:
    """``mlp-magic stacks``' report: each section's trees, then what could not be shown."""
    pieces = [heading + "\n"]
    for section in found:
        label = label_for(section)
        pieces.append(f"\n{RULE} {section.title} {RULE}\n")
        if section.tree is not None:
            pieces.append(merged_text(section.tree, label))
        if section.threads is not None:
            pieces.append("other threads:\n" + render_tree_text(section.threads, label, frame_text, is_user))
        pieces.append("".join(f"{line}\n" for line in section.collectives))
        note = _idle_note(section)
        pieces.append(note + "\n" if note else "")
    if problems:
        pieces.append("\nnot shown:\n" + "".join(f"  {line}\n" for line in problems))
    return "".join(pieces)


def render_report_html(found: list, problems: list, heading: str) -> str:
    pieces = [f'<div class="mlp-magic-stacks"><div style="font-weight:600">{escape(heading)}</div>']
    for section in found:
        label = label_for(section)
        if section.tree is not None:
            pieces.append(merged_html(section.tree, label, section.title))
        else:
            pieces.append(f'<div style="margin-top:0.6em;font-weight:600">{escape(section.title)}</div>')
        if section.threads is not None:
            pieces.append(render_tree_html(section.threads, label, frame_text, is_user,
                                           title=f"{section.title}: other threads"))
        pieces.append(collectives_html(section.collectives))
        note = _idle_note(section)
        pieces.append(f'<div style="color:#777">{escape(note)}</div>' if note else "")
    if problems:
        items = "".join(f"<li>{escape(line)}</li>" for line in problems)
        pieces.append(f'<div style="margin-top:0.6em;color:#c62828">not shown:<ul>{items}</ul></div>')
    return "".join(pieces) + "</div>"

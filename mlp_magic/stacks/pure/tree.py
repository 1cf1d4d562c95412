"""Many processes' stacks merged into one prefix tree, the way LLNL's STAT merges them (pure).

Each stack is a sequence of frames, outermost call first. Stacks that begin with the same frames
share those nodes, and every node carries the set of members (ranks, or indexes of processes
without a rank) whose stack passes through it. Where a node's members part ways (it has several
children, or some stacks end there while others go on), the ranks diverge: the biggest branch is
the majority, and a branch at most half its size is an odd group, named with its members.
A profile's tree (``merge_counted``) holds many sampled stacks a member, and each node counts
every member's samples through it: the flame graph of ``%%mpirun --profile``.

Members are plain ints; what they stand for, and how a set of them reads ("ranks 0-6,8-15 (15)
on worker[0-3]"), is the caller's ``label``. Frames are any hashable values; the renderers
(``stacks/pure/render``) show them with the caller's ``frame_text``.
"""
from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence


SUMMARY_GROUPS = 8   # a summary names at most this many distinct stacks, then counts the rest


class Node:
    """One frame of the tree (the root has none): the members that reach it, the frames they
    call next (``children``, in the order first seen) and the members whose stack ends here."""

    __slots__ = ("frame", "members", "children", "ends", "counts")

    def __init__(self, frame: Hashable = None):
        self.frame = frame
        self.members: set = set()
        self.children: dict = {}
        self.ends: set = set()
        self.counts: dict = {}   # {member: samples through this node}: ``merge_counted``'s trees

    def weight(self) -> int:
        """The samples through this node, all members together (``merge_counted``'s trees)."""
        return sum(self.counts.values())

    def branches(self) -> list:
        """How the members part at this node: [(members, child Node, or None for the stacks that
        end here)], biggest first, then by lowest member."""
        parts = [(frozenset(child.members), child) for child in self.children.values()]
        if self.ends:
            parts.append((frozenset(self.ends), None))
        return sorted(parts, key=lambda part: (-len(part[0]), min(part[0])))

    def diverges(self) -> bool:
        return len(self.children) + (1 if self.ends else 0) > 1


def merge_counted(stacks: Mapping[int, Mapping[Sequence[Hashable], int]]) -> Node:
    """{member: {frames: samples}}, many stacks a member (a profile's samples) -> their prefix
    tree, each node counting every member's samples through it."""
    root = Node()
    for member in sorted(stacks):
        for frames, count in stacks[member].items():
            node = _counted(root, member, count)
            for frame in frames:
                node = _counted(_child(node, frame), member, count)
            node.ends.add(member)
    return root


def merge(stacks: Mapping[int, Sequence[Hashable]]) -> Node:
    """{member: frames, outermost first} -> the root of their prefix tree (empty stacks end at
    the root)."""
    root = Node()
    for member in sorted(stacks):
        node = root
        node.members.add(member)
        for frame in stacks[member]:
            node = _child(node, frame)
            node.members.add(member)
        node.ends.add(member)
    return root


def _counted(node: Node, member: int, count: int) -> Node:
    """``node``, with ``count`` more samples of ``member`` through it."""
    node.members.add(member)
    node.counts[member] = node.counts.get(member, 0) + count
    return node


def _child(node: Node, frame: Hashable) -> Node:
    """``node``'s child at ``frame``, made if it is new (children keep the order first seen)."""
    child = node.children.get(frame)
    if child is None:
        child = node.children[frame] = Node(frame)
    return child


def chain(node: Node) -> tuple:
    """(nodes, last): from ``node`` down while the members stay together (one child, nobody's
    stack ending): the frames printed one under the other before the next divergence."""
    nodes = [node] if node.frame is not None else []
    while len(node.children) == 1 and not node.ends:
        node = next(iter(node.children.values()))
        nodes.append(node)
    return nodes, node


def odd(parts: Sequence, index: int) -> bool:
    """Is branch ``index`` of ``Node.branches()`` an odd group: at most half the biggest one?
    (15 against 1 and 3 against 1 are; 76 against 52, or 2 against 2, are two camps.)"""
    return 2 * len(parts[index][0]) <= len(parts[0][0])


def classes(root: Node) -> list:
    """The distinct whole stacks: [(members, frames outermost first)], biggest first."""
    found: list = []
    _walk_iteratively(root, found)
    return sorted(found, key=lambda item: (-len(item[0]), min(item[0])))


def _walk_iteratively(root: Node, found: list) -> None:
    """``classes``' walk without recursion (stacks may be thousands of frames deep)."""
    pending = [(root, ())]
    while pending:
        node, path = pending.pop()
        here = path + ((node.frame,) if node.frame is not None else ())
        if node.ends:
            found.append((frozenset(node.ends), here))
        pending.extend((child, here) for child in reversed(list(node.children.values())))


def deepest_user_nodes(root: Node, is_user: Callable[[Hashable], bool]) -> set:
    """ids of the nodes that are some stack's innermost frame of user code (marked ``-->``)."""
    marked = set()
    pending = [(root, None)]
    while pending:
        node, last_user = pending.pop()
        if node.frame is not None and is_user(node.frame):
            last_user = node
        if node.ends and last_user is not None:
            marked.add(id(last_user))
        pending.extend((child, last_user) for child in node.children.values())
    return marked


def _span(frames: Sequence, frame_text: Callable) -> str:
    """``first > ... > innermost`` (the frames in between elided)."""
    if not frames:
        return "(no Python frame)"
    if len(frames) <= 2:
        return " > ".join(frame_text(f) for f in frames)
    return f"{frame_text(frames[0])} > ... > {frame_text(frames[-1])}"


def summary(root: Node, label: Callable[[Iterable[int]], str], frame_text: Callable) -> str:
    """One line: each distinct stack's members and where it goes after the frames all share,
    ``ranks 0-6,8-15 (15): train.py:88 step > ... > all_reduce; rank 7: dataset.py:41 __getitem__``."""
    found = classes(root)
    if not found:
        return ""
    if len(found) == 1:
        members, frames = found[0]
        return f"{label(members)}: {_span(frames, frame_text)}"
    shared = _common_length([frames for _, frames in found])
    pieces = []
    for members, frames in found[:SUMMARY_GROUPS]:
        tail = frames[shared:] or frames[max(0, shared - 1):shared]
        pieces.append(f"{label(members)}: {_span(tail, frame_text)}")
    if len(found) > SUMMARY_GROUPS:
        rest = [m for members, _ in found[SUMMARY_GROUPS:] for m in members]
        pieces.append(f"{len(found) - SUMMARY_GROUPS} more groups ({label(rest)}): see the tree")
    return "; ".join(pieces)


def _common_length(paths: Sequence[tuple]) -> int:
    length = min(len(p) for p in paths)
    for index in range(length):
        if any(p[index] != paths[0][index] for p in paths):
            return index
    return length

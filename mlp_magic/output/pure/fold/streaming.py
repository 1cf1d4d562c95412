"""A running cell's lines folded by template as they come (pure): a bounded view of any number of ranks.

Each complete line is masked (``fold_numbers``); lines of one template (and stream) are one
entry that counts them and keeps the ranks that printed them and the latest line. So 512 ranks
printing ``step N loss X`` in a loop are one entry, shown as ``[0-511 ×3,072] step 5 loss 0.4``.

- A notebook shows ``view()``: one line per entry, the most recently active ones, in the order
  they first came.
- A terminal prints a line the first time its template comes (``add`` returns it), then, from
  ``due()``, each entry that came again, at most once per ``interval`` seconds. The stream grows
  with templates and time, not with ranks.
"""
from __future__ import annotations

from mlp_magic.output.pure.fold.numbers import NUMBER, MASK
from mlp_magic.core.ranges import fold_ranks

MAX_TEMPLATES = 500   # more distinct templates are counted, not kept


class _Entry:
    __slots__ = ("first", "keys", "count", "line", "stream", "printed_at", "changed", "touched", "tag")

    def __init__(self, order: int, key: int, stream: str, line: str, now: float):
        self.first, self.keys, self.count = order, {key}, 1
        self.line, self.stream = line, stream
        self.printed_at, self.changed, self.touched, self.tag = now, False, order, None


class StreamingFold:
    def __init__(self, interval: float = 2.0, max_templates: int = MAX_TEMPLATES):
        self.interval = interval
        self.max_templates = max_templates
        self.entries: dict = {}
        self.others = 0       # lines whose template came after max_templates were kept
        self._clock = 0       # counts lines: orders entries by their latest line

    def add(self, key: int, stream: str, line: str, now: float) -> list[str]:
        """Take one complete line of rank ``key``; returns the lines to print at once."""
        self._clock += 1
        template = NUMBER.sub(MASK, line)
        entry = self.entries.get((stream, template))
        if entry is None:
            if len(self.entries) >= self.max_templates:
                self.others += 1
                return []
            entry = self.entries[(stream, template)] = _Entry(self._clock, key, stream, line, now)
            return [self._shown(entry)]
        entry.count += 1
        entry.keys.add(key)
        entry.line, entry.changed, entry.touched, entry.tag = line, True, self._clock, None
        return []

    def due(self, now: float) -> list[str]:
        """Entries that came again since shown, each at most once per ``interval`` seconds."""
        out = []
        for entry in self.entries.values():
            if entry.changed and now - entry.printed_at >= self.interval:
                entry.changed, entry.printed_at = False, now
                out.append(self._shown(entry))
        return out

    def next_due(self) -> float | None:
        """When ``due`` will next have a line to show (None: no entry came again)."""
        times = [entry.printed_at + self.interval for entry in self.entries.values() if entry.changed]
        return min(times) if times else None

    def view(self, max_lines: int) -> list[str]:
        """The notebook's lines: the ``max_lines`` most recently active entries, oldest first."""
        latest = sorted(self.entries.values(), key=lambda e: e.touched)[-max_lines:]
        lines = [self._shown(entry) for entry in sorted(latest, key=lambda e: e.first)]
        if self.others:
            lines.append(f"[{self.others:,} more lines of other kinds; the summary follows the cell]")
        return lines

    @property
    def lines_seen(self) -> int:
        return self._clock

    def _shown(self, entry: _Entry) -> str:
        if entry.tag is None:
            who = fold_ranks(entry.keys)
            err = ":err" if entry.stream != "stdout" else ""
            times = f" ×{entry.count:,}" if entry.count > 1 else ""
            entry.tag = f"[{who}{err}{times}]"
        return f"{entry.tag} {entry.line}"

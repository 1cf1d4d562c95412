"""Progress bars as the ranks draw them, one line per group of ranks (pure).

A rank's progress bar (tqdm's text bar, any that draws tqdm's format, rich's) is the last
``\\r``-separated piece of its stream's current line, or a display's text: ``parse_bar`` reads
it. ``ProgressBoard`` keeps each rank's latest bar per kind (the description with its numbers
masked: "epoch 0" and "epoch 1" are one kind) and shows one line per kind, at the pace of the
group's median rank, the slowest rank named:
``epoch 0 31/50 [######----] | ranks 0-3, slowest rank 2 at 22/50``. Any number of ranks gives
one line per kind, never a bar per rank.
"""
from __future__ import annotations

import html
import re
from dataclasses import dataclass

from mlp_magic.core.ranges import fold_ranks
from mlp_magic.output.pure.fold.numbers import MASK, NUMBER

MAX_GROUPS = 8   # more kinds of bar are counted in one line
BAR_WIDTH = 10
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_COUNT = r"\d+(?:\.\d+)?[kMGTPEZY]?"
# tqdm's l_bar, bar and r_bar: "desc: 40%|####      | 2/5 [00:00<00:00, 10.00it/s, loss=0.5]"
_WITH_TOTAL = re.compile(
    rf"^(?:(?P<desc>.*?): )?\s*\d{{1,3}}%\|[^|]*\|\s*(?P<n>{_COUNT})/(?P<total>{_COUNT})(?:\s|$)")
# rich's bar (Lightning's RichProgressBar, rich.progress): "Epoch 0/-2 ━━━━━━╸━━━━━ 1/2 0:00:01 • ..."
_RICH = re.compile(rf"^(?P<desc>.*?)\s*[━╸╺]+[━╸╺ ]*\s(?P<n>{_COUNT})/(?P<total>{_COUNT})(?:\s|$)")
# without a total: "desc: 12it [00:01, 9.98it/s]"
_NO_TOTAL = re.compile(rf"^(?:(?P<desc>.*?): )?(?P<n>{_COUNT})[^\s\d\[]*\s\[\d[\d:]*[,\]]")
# an HTML progress element (the Hugging Face Trainer's notebook table), what comes before it its label
_HTML_PROGRESS = re.compile(r"^(?P<before>.*?)<progress\b(?P<attributes>[^>]*)>", re.S | re.I)
_ATTRIBUTE = re.compile(r"""\b(value|max)\s*=\s*["']?(\d+(?:\.\d+)?)""", re.I)
_TAG = re.compile(r"<[^>]*>")
_SCALE = {"": 1, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18, "Z": 1e21, "Y": 1e24}


@dataclass(frozen=True)
class Bar:
    """One bar as drawn: its description, its count and total as shown ("1.2k") and as numbers."""
    desc: str
    shown_n: str
    shown_total: str | None

    @property
    def n(self) -> float:
        return _count(self.shown_n)

    @property
    def total(self) -> float | None:
        return None if self.shown_total is None else _count(self.shown_total)

    @property
    def kind(self) -> str:
        return NUMBER.sub(MASK, self.desc)

    def position(self) -> tuple:
        """How far along: the description's numbers first ("epoch 1" is past "epoch 0"), then n."""
        return (*(_count_or_zero(m.group()) for m in NUMBER.finditer(self.desc)), self.n)

    def counts(self) -> str:
        return self.shown_n if self.shown_total is None else f"{self.shown_n}/{self.shown_total}"


def current_piece(text: str) -> str:
    """What a terminal shows of a line that ``\\r`` rewrites: its last non-empty piece."""
    pieces = [piece for piece in text.split("\r") if piece.strip()]
    return pieces[-1] if pieces else ""


def parse_bar(piece: str) -> Bar | None:
    """The bar ``piece`` draws in tqdm's format, or None when it is no bar."""
    plain = _ANSI.sub("", piece).strip()
    found = _WITH_TOTAL.match(plain) or _RICH.match(plain) or _NO_TOTAL.match(plain)
    if found is None:
        return None
    total = found.groupdict().get("total")
    return Bar((found.group("desc") or "").strip(), found.group("n"), total)


def bar_in_html(markup) -> Bar | None:
    """The first ``<progress value= max=>`` of an HTML display as a bar, the text before it its
    description; None without one."""
    found = _HTML_PROGRESS.match(markup) if isinstance(markup, str) else None
    if found is None:
        return None
    attributes = {name.lower(): number for name, number in _ATTRIBUTE.findall(found.group("attributes"))}
    if "value" not in attributes:
        return None
    return Bar(plain_text(found.group("before")), attributes["value"], attributes.get("max"))


def plain_text(markup) -> str:
    """An HTML fragment's text on one line: tags out, entities read, tqdm's figure spaces as spaces."""
    if not isinstance(markup, str):
        return ""
    return " ".join(html.unescape(_TAG.sub(" ", markup)).replace("\u2007", " ").split())


class ProgressBoard:
    """The latest bar of each rank, per kind, in the order the kinds first came."""

    def __init__(self, max_groups: int = MAX_GROUPS):
        self.max_groups = max_groups
        self._kinds: dict = {}   # kind -> {rank: Bar}

    def __bool__(self) -> bool:
        return bool(self._kinds)

    def update(self, rank: int, bar: Bar) -> None:
        self._kinds.setdefault(bar.kind, {})[rank] = bar

    def lines(self) -> list[str]:
        """One line per kind of bar (the first ``max_groups``), then how many more there are."""
        kinds = list(self._kinds.values())
        lines = [group_line(bars) for bars in kinds[:self.max_groups]]
        if len(kinds) > self.max_groups:
            more = len(kinds) - self.max_groups
            lines.append(f"[{more} more kinds of progress bar; each rank's in its log]")
        return lines


def group_line(bars: dict) -> str:
    """One group's line ({rank: Bar}): the median rank's bar, the ranks, the slowest one named
    where it is behind that pace."""
    ordered = sorted(bars, key=lambda rank: (bars[rank].position(), rank))
    pace = bars[ordered[(len(ordered) - 1) // 2]]
    slowest = ordered[0]
    line = " ".join(part for part in (pace.desc, pace.counts(), drawn_bar(pace.n, pace.total)) if part)
    line += f" | {'rank' if len(bars) == 1 else 'ranks'} {fold_ranks(bars)}"
    behind = bars[slowest]
    if behind.position() < pace.position():
        where = behind.counts() if behind.desc == pace.desc else f"{behind.desc} {behind.counts()}"
        line += f", slowest rank {slowest} at {where}"
    return line


def drawn_bar(n: float, total: float | None) -> str:
    """"[######----]": ``n`` of ``total`` in ``BAR_WIDTH`` characters; "" without a total."""
    if not total or total <= 0:
        return ""
    filled = max(0, min(BAR_WIDTH, int(BAR_WIDTH * n / total)))
    return f"[{'#' * filled}{'-' * (BAR_WIDTH - filled)}]"


def _count(shown: str) -> float:
    scale = _SCALE.get(shown[-1:], None)
    return float(shown[:-1]) * scale if scale is not None and shown[-1:].isalpha() else float(shown)


def _count_or_zero(text: str) -> float:
    try:
        return float(text)
    except ValueError:   # NUMBER also matches hex ids, versions: not a position
        return 0.0

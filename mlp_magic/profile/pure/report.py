"""The report of ``%%mpirun --profile`` (pure): where each group of ranks spent the cell, and the
straggler named by arrival.

Ranks whose time went to the same places (the same top places, in the same order) are one line,
their shares as ranges; a rank that differs stands out on its own line.
"""
from __future__ import annotations

from collections import Counter

from mlp_magic.core.ranges import fold_ranks, rank_words
from mlp_magic.core.records import Record
from mlp_magic.profile.pure.arrivals import Verdict, matched, straggler, waits_of
from mlp_magic.profile.pure.samples import in_collectives, parse_raw, stack_text, where_it_went

TOP = 4           # places named per rank at most
NAMED_SHARE = 0.1   # ... each with at least this share of its cell (the rest: the samples' files)
WAITING = "waiting for later ranks"


class RankProfile(Record, frozen=True):
    rank: int
    spent: Counter        # {place: samples} (samples.where_it_went)
    waited_s: float = 0.0   # in collectives, for later ranks (arrivals.waits_of)
    error: str = ""       # why this rank has no samples


def rank_shares(profile: RankProfile, rate: float) -> dict:
    """{place: share} of the rank's main places (its top one always), and its waiting for later
    ranks: the share of its cell it spent in collectives before the last rank came."""
    total = sum(profile.spent.values())
    shares = {place: count / total for place, count in profile.spent.most_common(TOP)}
    if profile.waited_s > 0 and in_collectives(profile.spent):
        shares[WAITING] = min(1.0, profile.waited_s * rate / total)
    top = max(shares, key=shares.get)
    return {place: share for place, share in shares.items() if share >= NAMED_SHARE or place == top}


def group_lines(profiles: list, rate: float) -> list:
    """One line per group of ranks that spent the cell in the same main places (their shares as
    ranges, the largest first); ranks without samples say why."""
    groups: dict = {}   # {places: ([rank], [shares])}
    failed: dict = {}
    for profile in sorted(profiles, key=lambda p: p.rank):
        if not profile.spent:
            failed.setdefault(profile.error or "no samples of the cell", []).append(profile.rank)
            continue
        shares = rank_shares(profile, rate)
        ranks, members = groups.setdefault(tuple(sorted(shares)), ([], []))
        ranks.append(profile.rank)
        members.append(shares)
    lines = [f"{_who(ranks)}: " + " · ".join(_share_text(place, [shares[place] for shares in members])
                                             for place in _by_share(key, members))
             for key, (ranks, members) in groups.items()]
    return lines + [f"{_who(ranks)}: {why}" for why, ranks in failed.items()]


def _by_share(places: tuple, members: list) -> list:
    """The places, the largest share first; waiting (a part of the collectives' time) last."""
    return sorted(places, key=lambda place: (place == WAITING, -sum(shares[place] for shares in members)))


def _who(ranks: list) -> str:
    return rank_words(ranks) + (f" ({len(ranks)})" if len(ranks) > 1 else "")


def _share_text(place: str, shares: list) -> str:
    low, high = round(100 * min(shares)), round(100 * max(shares))
    return f"{place} {low} %" if low == high else f"{place} {low}-{high} %"


def straggler_lines(verdict: Verdict, profiles: list, has_collectives: bool) -> list:
    """The straggler's lines, with where its own time went before the collectives."""
    if not has_collectives:
        return ["no torch.distributed collective was recorded in the cell: the straggler is named by "
                "when each rank enters a collective (torch's flight recorder); MPI's are not recorded"]
    lines = list(verdict.lines)
    if verdict.straggler is not None:
        mine = next((p for p in profiles if p.rank == verdict.straggler and p.spent), None)
        outside = Counter({k: v for k, v in mine.spent.items() if not k.startswith("in ")}) if mine else {}
        if outside:
            place, count = outside.most_common(1)[0]
            lines[0] += f"; its time went to {place}, {round(100 * count / sum(mine.spent.values()))} %"
    return lines


def header(ranks: list, rate: float, seconds: float) -> str:
    return f"profile of ranks {fold_ranks(ranks)} at {rate:g} Hz over {seconds:.1f} s:"


# A py-spy sampling an engine (about 16 threads: torch's, ZeroMQ's, the kernel's) at 100 Hz takes
# about a sixth of a core (docs/performance.md). By default the samplers take at most this share
# of the busiest host's CPUs: 100 Hz where the ranks use under a fifth of the cores (GPU nodes),
# lower where they share them, since a rank slowed by its sampler is not the rank it was.
PYSPY_CORES_AT_100_HZ = 0.16
SAMPLERS_SHARE = 0.03
DEFAULT_RATE = 100


def default_rate(ranks_per_cpu: float) -> int:
    """Samples a second when ``--rate`` is not given, from the busiest host's ranks per CPU."""
    if ranks_per_cpu <= 0:
        return DEFAULT_RATE
    fitting = DEFAULT_RATE * SAMPLERS_SHARE / (PYSPY_CORES_AT_100_HZ * ranks_per_cpu)
    return max(1, min(DEFAULT_RATE, round(fitting)))


def rate_note(rate: int, ranks_per_cpu: float) -> str:
    """Why the default rate is lower than 100 Hz, or ''."""
    if rate >= DEFAULT_RATE:
        return ""
    return (f"(at {rate} Hz, not {DEFAULT_RATE}: {ranks_per_cpu:g} ranks a CPU on the busiest host, and the "
            f"samplers take at most {SAMPLERS_SHARE:.0%} of its CPUs; --rate HZ sets it)")


class Found(Record):
    """What ``%%mpirun --profile`` found: the report's lines, and per rank its stacks, the
    collectives it entered and why it has no samples (``-o NAME`` keeps it, the exports read it)."""
    lines: tuple
    rate: float
    seconds: float
    stacks: dict        # {rank: Counter({frames: samples})}
    entered: dict       # {rank: [{"group", "seq", "op", "t"}]}
    errors: dict        # {rank: why it has no samples}
    straggler: int | None = None

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    def collapsed(self, rank: int) -> str:
        """The rank's samples as collapsed stacks (``f (file:line);g (file:line) COUNT``): what
        speedscope, flamegraph.pl and inferno read."""
        return "".join(f"{stack_text(frames)} {count}\n" for frames, count in self.stacks[rank].most_common())


def found(raws: dict, entered: dict, errors: dict, rate: float, seconds: float) -> Found:
    """The report from each rank's raw samples ({rank: text}), the collectives each entered and the
    ranks' errors ({rank: text})."""
    stacks = {rank: parse_raw(raw) for rank, raw in raws.items()}
    collectives = matched({rank: entered.get(rank, []) for rank in stacks})
    waits = waits_of(collectives)
    profiles = [RankProfile(rank, where_it_went(stacks[rank]), waits.get(rank, 0.0),
                            "" if stacks[rank] else "no samples in the cell")
                for rank in stacks] + [RankProfile(rank, Counter(), 0.0, why) for rank, why in errors.items()]
    verdict = straggler(collectives)
    lines = [header(sorted(set(stacks) | set(errors)), rate, seconds), *group_lines(profiles, rate),
             *straggler_lines(verdict, profiles, bool(collectives))]
    return Found(tuple(lines), rate, seconds, stacks, entered, errors, verdict.straggler)

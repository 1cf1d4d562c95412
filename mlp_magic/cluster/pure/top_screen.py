"""``mlp-magic top``'s screen: the live cluster document as lines of text. Pure: values in, lines out.

The same document the panel shows (cluster/live), drawn for a terminal: per World its summary line,
the running cell, the stragglers, one row per host with a mark per rank; then the GPUs, one row per
GPU while the hosts are few, one row per host (a mark per GPU, by utilisation) at scale. Marks:
``#`` busy, ``.`` idle, ``p`` paused at a breakpoint, ``x`` dead, ``s`` starting, ``!`` a straggler.
"""
from __future__ import annotations

from datetime import datetime
from collections.abc import Sequence

from mlp_magic.core.ranges import fold_ranks
from mlp_magic.world.pure.rank_states import RankState, age_text, by_host, stragglers, summary_line

MARKS = {"busy": "#", "idle": ".", "dead": "x", "starting": "s", "paused": "p"}
STRAGGLER = "!"
LEVELS = " .:-=+*#%@"          # a GPU's utilisation, 0-100 %, in ten steps
PER_GPU_UP_TO_HOSTS = 8        # more hosts than this: one GPU row per host (the heatmap)
THROTTLE_NAMES = {0x4: "SW power cap", 0x8: "HW slowdown", 0x40: "SW thermal", 0x80: "HW thermal",
                  0x100: "HW power brake"}   # the reasons worth a flag (not idle, app clocks, ...)


def epoch(text: str | None) -> float | None:
    try:
        return datetime.fromisoformat(text).timestamp() if text else None
    except (TypeError, ValueError):
        return None


def rank_rows(world: dict) -> list[RankState]:
    """The World record's ranks as RankState rows (ISO times back to epoch seconds)."""
    return [RankState(r["rank"], r.get("host", "?"), r.get("state", "?"), epoch(r.get("since")) or 0.0,
                      epoch(r.get("last_output"))) for r in world.get("ranks") or [] if isinstance(r, dict)]


def world_lines(world: dict, now: float) -> list[str]:
    rows = rank_rows(world)
    mpi = f", {world['mpi']}" if world.get("mpi") else ""
    lines = [f"World {world.get('id', world.get('pid'))}: {world.get('np', len(rows))} ranks{mpi}, "
             f"{world.get('state', '?')}", "  " + summary_line(rows, now)]
    cell = world.get("cell")
    if cell:
        lines.append(f"  cell: {cell.get('first_line') or '(no code)'}  "
                     f"(running {age_text(now - (epoch(cell.get('started')) or now))})")
    late = stragglers(rows, now)
    for rank, why in sorted(late.items())[:6]:
        lines.append(f"  ! rank {rank}: {why}")
    if len(late) > 6:
        lines.append(f"  ! and {len(late) - 6} more")
    hosts = by_host(rows)
    width = max((len(host) for host in hosts), default=0)
    for host, members in hosts.items():
        marks = "".join(STRAGGLER if m.rank in late else MARKS.get(m.state, "?") for m in members)
        lines.append(f"  {host.ljust(width)}  {fold_ranks(m.rank for m in members):>9}  {marks}")
    return lines


def _number(value, unit: str, scale: float = 1.0, digits: int = 0) -> str:
    return "-" if value is None else f"{value / scale:.{digits}f}{unit}"


def _flags(sample: Sequence) -> str:
    throttle, xid, ecc = (list(sample) + [None] * 7)[4:7]
    flags = [name for bit, name in THROTTLE_NAMES.items() if throttle and throttle & bit]
    if xid:
        flags.append(f"XID {xid}")
    if ecc:
        flags.append(f"ECC {ecc}")
    return ", ".join(flags)


def holders(processes: Sequence[Sequence], index) -> str:
    """Who holds GPU ``index``'s memory, as the panel says it: "rank 0: 1.0 GiB, pid 77: 0.5 GiB"
    (ranks first; a process whose rank could not be read by its pid)."""
    rows = sorted((row for row in processes if len(row) >= 4 and row[0] == index),
                  key=lambda row: (row[1] is None, row[1] if row[1] is not None else 0, row[2]))
    return ", ".join(f"{'pid %s' % pid if rank is None else 'rank %s' % rank}: "
                     f"{'?' if mib is None else f'{mib / 1024:.1f}'} GiB" for _, rank, pid, mib in rows)


def gpu_row(host: str, info: dict, sample: Sequence, processes: Sequence[Sequence] = ()) -> str:
    util, mem, temp, power = (list(sample) + [None] * 4)[:4]
    total = info.get("memory_total_mib")
    memory = f"{_number(mem, '', 1024, 1)}/{_number(total, 'G', 1024, 0)}"
    flags, held = _flags(sample), holders(processes, info.get("index"))
    return (f"  {host}  GPU{info.get('index', '?')}  {_number(util, '%'):>4}  {memory:>10}  "
            f"{_number(temp, 'C'):>4}  {_number(power, 'W'):>5}" + (f"  ! {flags}" if flags else "")
            + (f"  [{held}]" if held else ""))


def heat_row(host: str, samples: Sequence[Sequence], width: int) -> str:
    marks = "".join(" " if not s or s[0] is None else LEVELS[min(9, int(s[0]) // 10)] for s in samples)
    flagged = [f"GPU{i}: {_flags(s)}" for i, s in enumerate(samples) if s and _flags(s)]
    return f"  {host.ljust(width)}  [{marks}]" + (f"  ! {'; '.join(flagged)}" if flagged else "")


def gpu_lines(hosts: Sequence[dict], latest: dict[str, Sequence]) -> list[str]:
    """The GPUs of every host: their static part from the document, the latest samples given."""
    shown = [h for h in hosts if h.get("live_gpus")]
    if not shown:
        return ["GPUs: not sampled (no agent: start a World, or run with ssh to the hosts)"]
    lines = ["GPUs" + ("  (utilisation: ' ' 0% .. '@' 100%)" if len(shown) > PER_GPU_UP_TO_HOSTS else "")]
    width = max(len(h["name"]) for h in shown)
    for host in shown:
        live, samples = host["live_gpus"], latest.get(host["name"]) or []
        if not live.get("gpus"):
            why = live.get("error")
            said = f" ({why})" if why and why != "no GPUs" else ""
            lines.append(f"  {host['name'].ljust(width)}  no GPUs{said}")
        elif len(shown) > PER_GPU_UP_TO_HOSTS:
            lines.append(heat_row(host["name"], samples, width))
        else:
            lines += [gpu_row(host["name"].ljust(width), info, samples[i] if i < len(samples) else [],
                              live.get("processes") or ())
                      for i, info in enumerate(live["gpus"])]
    return lines


def top_lines(doc: dict | None, latest: dict[str, Sequence], now: float, width: int = 120,
              height: int = 0) -> list[str]:
    """The whole screen; ``height`` > 0 cuts it, saying how much was left out."""
    if doc is None:
        return ["mlp-magic top: waiting for the first look at the cluster..."]
    head = (f"mlp-magic top: {doc.get('source') or doc.get('error')}, {len(doc.get('hosts') or [])} hosts, "
            f"{doc.get('total_slots', 0)} slots   (q quits)")
    lines = [head]
    worlds = doc.get("worlds") or []
    for world in worlds:
        lines += world_lines(world, now)
    if not worlds:
        lines.append("No World running (start one with %%mpirun in a notebook).")
    lines += gpu_lines(doc.get("hosts") or [], latest)
    lines = [line[:width] for line in lines]
    if height and len(lines) > height:
        left = len(lines) - height + 1
        lines = lines[:height - 1] + [f"... {left} more lines (a taller terminal shows them)"]
    return lines

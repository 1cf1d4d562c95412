"""``mlp-magic worlds``: one row per World of this machine, from the records (world/published)."""
from __future__ import annotations

from mlp_magic.core.ranges import fold_hosts

HEADER = ("ID", "KERNEL", "RANKS", "HOSTS", "STATE", "KEPT", "NO KERNEL SINCE")


def _shown(value) -> str:
    """A record's value on one line of a terminal: what does not print is a "?"."""
    return "".join(c if c.isprintable() else "?" for c in str(value))


def world_row(record: dict) -> tuple:
    """The columns of one World: its id, its kernel (pid, alive or gone), ranks, hosts, state
    (busy while a rank runs a cell), whether it is kept (and for how long with no kernel)."""
    listed = record.get("ranks")
    ranks = [r for r in listed if isinstance(r, dict)] if isinstance(listed, list) else []
    hosts = fold_hosts(dict.fromkeys(str(r.get("host")) for r in ranks)) if ranks else "-"
    busy = sum(r.get("state") == "busy" for r in ranks)
    state = str(record.get("state") or "?") + (f", {busy} busy" if busy else "")
    hours = record.get("keep_hours")
    numeric = isinstance(hours, (int, float)) and not isinstance(hours, bool)
    kept = f"yes, {hours:g} h" if record.get("kept") is True and numeric else "no"
    kernel = f"{record.get('pid')} {record.get('kernel', '?')}"
    row = (record.get("id"), kernel, record.get("np", len(ranks)), hosts, state, kept,
           record.get("idle_since") or "-")
    return tuple(_shown(value) for value in row)


def worlds_table(records: list) -> str:
    """The rows under the header, columns aligned; a line saying so when there is none."""
    if not records:
        return "no World on this machine (a %%mpirun cell starts one)"
    rows = [HEADER, *(world_row(record) for record in records)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(HEADER))]
    lines = ("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows)
    return "\n".join(lines)

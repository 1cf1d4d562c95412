"""A World's record as read back from its file, made safe to act on.

The kernel writes the record (world/published) and every reader acts on it: the Jupyter server
builds the panel's document and signals ranks from it, a new kernel stops a dead one's World by
it, ``mlp-magic worlds`` lists it. The file is its owner's only, but it outlives versions,
disks fill and people edit files, and JSON reads ``Infinity``, ``1e999`` and any type anywhere: a
pid of 2**63 made ``os.kill`` raise OverflowError in the server's folder watch, a row without its
``host`` a KeyError in the panel's Unblock. So each record is checked once, here, as it is read:
a record whose kernel pid is not a pid is no record; a rank row, a process or an agent that is
malformed is left out; a field of the wrong type reads as absent. Readers then trust the types.
The private part (every rank's pid, the keeper, the agents' key) is checked where it is used
(``private_part``, ``agent_key``): the server reads a 512-rank record 4 times a second, and acts
on the private part only when asked.
"""
from __future__ import annotations

import json
import math

from mlp_magic.core.numbers import number
from mlp_magic.core.proc_stat import process_id, start_time

# Fields that are text or absent; anything else there reads as absent.
_TEXTS = ("id", "host", "state", "started_at", "mpi", "source", "log_dir", "idle_since", "updated_at")


def finite_json(text: str):
    """JSON text with every number that is not finite (Infinity, NaN, 1e999) read as null: the
    panel's browser parses what the server passes on, and its JSON has no such numbers."""
    return json.loads(text, parse_constant=lambda _: None, parse_float=_finite_float)


def _finite_float(text: str) -> float | None:
    value = float(text)
    return value if math.isfinite(value) else None


def sane_record(raw) -> dict | None:
    """The record with every field the readers use of the right type, or None when it cannot
    be one (not an object, no kernel pid, or a host that is not a name)."""
    if not isinstance(raw, dict) or process_id(raw.get("pid")) is None:
        return None
    if "host" in raw and not isinstance(raw["host"], str):
        return None
    record = dict(raw)
    for key in _TEXTS:
        if key in record and not isinstance(record[key], str):
            record[key] = None
    record["np"] = rank_number(raw.get("np"))
    record["cell"] = raw.get("cell") if isinstance(raw.get("cell"), dict) else None
    record["gpus"] = raw.get("gpus") if isinstance(raw.get("gpus"), dict) else {}
    record["ranks"] = rank_rows(raw.get("ranks"))
    record["processes"] = [{"pid": pid, "create_time": started}
                           for pid, started in process_entries(raw.get("processes"))]
    record["agents"] = agents(raw.get("agents"))
    record["kept"] = raw.get("kept") is True
    hours = raw.get("keep_hours")
    record["keep_hours"] = hours if _finite(hours) and hours >= 0 else None
    return record   # its private part is checked where it is used (private_part): rarely


def rank_number(value) -> int | None:
    """A rank (or a count of them): an int from 0, not a bool; else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def rank_key(key) -> int | None:
    """A rank written as a JSON object's key ("12"): ASCII digits only ("²".isdigit() is true
    and int("²") raises), else None."""
    return int(key) if isinstance(key, str) and key.isascii() and key.isdigit() else None


def rank_rows(value) -> list:
    """The rows of the record's ranks that name a rank and a host; the state of a row that has
    none that reads is "unknown", its times and engine absent where they are not of their type."""
    rows = []
    for row in value if isinstance(value, list) else ():
        if not isinstance(row, dict) or rank_number(row.get("rank")) is None \
                or not isinstance(row.get("host"), str):
            continue
        # the server reads a 512-rank record 4 times a second: a sound row is kept as it is
        rows.append(row if _sound_row(row) else _mended_row(row))
    return rows


def _sound_row(row: dict) -> bool:
    since, output, engine = row.get("since"), row.get("last_output"), row.get("engine_id")
    return type(row.get("state")) is str and (since is None or type(since) is str) \
        and (output is None or type(output) is str) and (engine is None or rank_number(engine) is not None)


def _mended_row(row: dict) -> dict:
    row = dict(row)
    row["state"] = row.get("state") if isinstance(row.get("state"), str) else "unknown"
    for key in ("since", "last_output"):
        if not isinstance(row.get(key), str):
            row[key] = None
    row["engine_id"] = rank_number(row.get("engine_id"))
    return row


def process_entries(value) -> list:
    """[(pid, start time)] of a record's "processes" ({"pid", "create_time"} each), those with
    no pid left out. The start time is None where it does not read as one (the process had
    ended when the record was written): such a process matches none now, and is never stopped."""
    entries = value if isinstance(value, list) else ()
    found = [(process_id(e.get("pid")), start_time(e.get("create_time")))
             for e in entries if isinstance(e, dict)]
    return [(pid, started) for pid, started in found if pid is not None]


def process_pair(value) -> tuple | None:
    """(pid, start time or None) of a [pid, start time, ...] list, or None where either is not
    one (a start time written as null is unknown; one that is no time makes the pair no pair)."""
    if not isinstance(value, list) or len(value) < 2 or process_id(value[0]) is None:
        return None
    started = start_time(value[1])
    return None if started is None and value[1] is not None else (value[0], started)


def private_part(value) -> dict:
    """The record's private part with its ranks, groups, keeper and key checked."""
    value = value if isinstance(value, dict) else {}
    private = dict(value)
    ranks = value.get("ranks") if isinstance(value.get("ranks"), dict) else {}
    private["ranks"] = {key: list(pair) for key, pair in
                        ((key, process_pair(entry)) for key, entry in ranks.items())
                        if rank_key(key) is not None and pair is not None}
    groups = value.get("groups") if isinstance(value.get("groups"), dict) else {}
    private["groups"] = {key: ids for key, ids in groups.items() if rank_key(key) is not None
                         and isinstance(ids, list) and len(ids) == 2
                         and all(process_id(i) is not None for i in ids)}
    keeper = process_pair(value.get("keeper"))
    private["keeper"] = list(keeper) if keeper else None
    private["agent_key"] = agent_key(value)
    private["workdir"] = value.get("workdir") if isinstance(value.get("workdir"), str) else None
    return private


def agent_key(private):
    """The agents' key in a private part: hex (plain TCP), or {"key", "cert"} (TLS across hosts:
    agent/tls); None."""
    value = private.get("agent_key") if isinstance(private, dict) else None
    if isinstance(value, str):
        return value
    whole = isinstance(value, dict) and all(isinstance(value.get(part), str) for part in ("key", "cert"))
    return value if whole else None


def agents(value) -> dict:
    """{host: agent} where each agent is {"addr", "port", "pid"} (the pid None where it is not
    one) or {"error"}, of the right types; an agent with neither is left out."""
    found = {}
    for host, agent in (value.items() if isinstance(value, dict) else ()):
        if not isinstance(agent, dict):
            continue
        if isinstance(agent.get("error"), str):
            found[host] = {"error": agent["error"]}
        elif isinstance(agent.get("addr"), str) and _port(agent.get("port")):
            found[host] = dict(agent, pid=process_id(agent.get("pid")))
    return found


def _port(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value < 65536


def _finite(value) -> bool:
    return number(value) is not None

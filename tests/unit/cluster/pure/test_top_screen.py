"""cluster/pure/top_screen: mlp-magic top's screen from the live document."""
from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from mlp_magic.world.pure.rank_states import iso
from mlp_magic.cluster.pure.top_screen import heat_row, top_lines

NOW = 1_764_064_843.0   # 43 s after the cell below started


def world(states: str, hosts: int = 2, **extra) -> dict:
    per_host = max(1, len(states) // hosts)
    kinds = {"B": "busy", "I": "idle", "D": "dead", "S": "starting", "P": "paused"}
    ranks = [{"rank": r, "host": f"w{r // per_host}", "state": kinds[c], "since": iso(NOW - 43),
              "last_output": None} for r, c in enumerate(states)]
    return {"id": "w0-1-1", "np": len(states), "mpi": "openmpi", "state": "running", "ranks": ranks,
            "cell": {"first_line": "model.train()", "started": iso(NOW - 43)}, **extra}


def doc(*worlds, hosts=()) -> dict:
    return {"source": "hostfile /etc/mlp/hostfile", "total_slots": 16, "hosts": list(hosts),
            "worlds": list(worlds)}


def test_a_world_with_a_straggler():
    busy = world("BBBBBBBB")
    busy["ranks"][5]["state"] = "idle"
    lines = top_lines(doc(busy), {}, NOW)
    assert lines[1] == "World w0-1-1: 8 ranks, openmpi, running"
    assert lines[2] == "  8 ranks: 7 busy 43 s, 1 idle (rank 5)"
    assert lines[3] == "  cell: model.train()  (running 43 s)"
    assert lines[4:6] == ["  w0        0-3  ####", "  w1        4-7  #.##"]


def test_stragglers_are_marked_and_named():
    late = world("IIIIIIIB")
    late["ranks"][7]["since"] = iso(NOW - 100)
    lines = top_lines(doc(late), {}, NOW)
    assert "  ! rank 7: still busy 43 s after most finished" in lines
    assert "  w1        4-7  ...!" in lines


def test_ranks_stopped_at_a_breakpoint_are_marked_paused_and_are_no_stragglers():
    stopped = world("PPPIPPPI")
    lines = top_lines(doc(stopped), {}, NOW)
    assert lines[2] == "  8 ranks: 6 paused 43 s, 2 idle (ranks 3,7)"
    assert lines[4:6] == ["  w0        0-3  ppp.", "  w1        4-7  ppp."]
    assert not any(line.lstrip().startswith("!") for line in lines)


def test_no_world_and_no_document_yet():
    assert "No World running" in "\n".join(top_lines(doc(), {}, NOW))
    assert top_lines(None, {}, NOW) == ["mlp-magic top: waiting for the first look at the cluster..."]


H100 = {"index": 0, "name": "NVIDIA H100 80GB HBM3", "memory_total_mib": 81559, "power_limit_w": 700}


def host(name: str, gpus: int = 1, error=None) -> dict:
    return {"name": name, "live_gpus": {"source": "replay", "error": error,
                                        "gpus": [dict(H100, index=i) for i in range(gpus)]}}


def test_gpus_per_gpu_with_their_flags():
    hosts = [host("w0", 2), host("w1", 0, error="no GPUs")]
    latest = {"w0": [[97, 61230, 65, 312.0, 0x4, 0, 0], [0, 4, 30, 69.0, 0, 79, 2]]}
    lines = top_lines(doc(hosts=hosts), latest, NOW)
    gpus = lines[lines.index("GPUs") + 1:]
    assert gpus[0] == "  w0  GPU0   97%    59.8/80G   65C   312W  ! SW power cap"
    assert gpus[1] == "  w0  GPU1    0%     0.0/80G   30C    69W  ! XID 79, ECC 2"
    assert gpus[2] == "  w1  no GPUs"


def test_many_hosts_make_a_heatmap_row_each():
    hosts = [host(f"node{i:02d}", 8) for i in range(64)]
    latest = {h["name"]: [[u * 11, 0, 0, 0, 0, 0, 0] for u in range(8)] for h in hosts}
    lines = top_lines(doc(hosts=hosts), latest, NOW, height=30)
    assert lines[2] == "GPUs  (utilisation: ' ' 0% .. '@' 100%)"
    assert lines[3] == "  node00  [ .:-=+*#]"    # 0, 11, ... 77 %
    assert len(lines) == 30 and lines[-1] == "... 38 more lines (a taller terminal shows them)"


@given(st.lists(st.one_of(st.none(), st.integers(0, 100)), max_size=16))
def test_a_heat_row_has_one_mark_per_gpu(utils):
    row = heat_row("h", [[u, 0, 0, 0, 0, 0, 0] for u in utils], 1)
    assert len(row[row.index("[") + 1:row.index("]")]) == len(utils)


def test_lines_are_cut_to_the_width():
    assert all(len(line) <= 20 for line in top_lines(doc(world("B" * 64)), {}, NOW, width=20))


def test_a_gpu_row_names_the_ranks_holding_its_memory():
    one = host("w0", 2)
    one["live_gpus"]["processes"] = [[0, 1, 702, 2048], [1, None, 77, 512], [0, 0, 701, 1024],
                                     [0, 3, 9, None]]
    lines = top_lines(doc(hosts=[one]), {"w0": [[50, 3072, 40, 100.0, 0, 0, 0]] * 2}, NOW)
    gpus = lines[lines.index("GPUs") + 1:]
    assert gpus[0].endswith("  [rank 0: 1.0 GiB, rank 1: 2.0 GiB, rank 3: ? GiB]")
    assert gpus[1].endswith("  [pid 77: 0.5 GiB]")

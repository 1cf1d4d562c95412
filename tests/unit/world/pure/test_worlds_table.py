"""``mlp-magic worlds``'s table (world/pure/worlds_table)."""
from hypothesis import given, strategies as st

from mlp_magic.world.pure.worlds_table import HEADER, world_row, worlds_table


def record(**fields) -> dict:
    base = {"id": "vm-1-0", "pid": 1, "kernel": "alive", "np": 2, "state": "running", "kept": False,
            "keep_hours": None, "idle_since": None,
            "ranks": [{"rank": 0, "host": "w0", "state": "idle"},
                      {"rank": 1, "host": "w1", "state": "busy"}]}
    return {**base, **fields}


def test_a_kept_world_with_no_kernel_and_a_plain_one():
    kept = record(id="vm-9-0", pid=9, kernel="gone", kept=True, keep_hours=0.5,
                  idle_since="2026-11-28T10:00:00")
    assert world_row(kept) == ("vm-9-0", "9 gone", "2", "w[0-1]", "running, 1 busy", "yes, 0.5 h",
                               "2026-11-28T10:00:00")
    assert world_row(record()) == ("vm-1-0", "1 alive", "2", "w[0-1]", "running, 1 busy", "no", "-")
    lines = worlds_table([kept, record()]).splitlines()
    assert lines[0].split() == ["ID", "KERNEL", "RANKS", "HOSTS", "STATE", "KEPT", "NO", "KERNEL", "SINCE"]
    assert lines[1].index("9 gone") == lines[0].index("KERNEL") == lines[2].index("1 alive")


def test_no_world_is_one_line():
    assert worlds_table([]) == "no World on this machine (a %%mpirun cell starts one)"


scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5)
junk = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=8)


@given(st.lists(st.dictionaries(st.sampled_from(list(record())), junk, max_size=8), max_size=4))
def test_any_record_a_reader_may_find_gives_one_aligned_row(records):
    """Records are files anyone of ours may have left half-written or edited: never a traceback."""
    table = worlds_table(records)
    if records:
        lines = table.splitlines()
        assert len(lines) == len(records) + 1 and lines[0].startswith(HEADER[0])
        assert all(len(world_row(r)) == len(HEADER) for r in records)

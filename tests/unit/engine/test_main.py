"""The rank's program: its engine id and log tag, and the per-host start slots."""
from __future__ import annotations

import os
import threading
import time

from mlp_magic.engine.main import ENGINE_ARGS, engine_argv, slot_names
from mlp_magic.engine.start_slots import slot_folder, take_start_slot


def test_a_rank_registers_under_its_own_number_and_tags_its_log_lines():
    argv = engine_argv(["--log-level=WARN", "--file=x.json"], 7)
    assert argv[:2] == ["--log-level=WARN", "--file=x.json"]
    assert "--IPEngine.id=7" in argv
    assert any(a.startswith("--IPEngine.log_format=") and "[rank 7]" in a for a in argv)
    assert engine_argv(["--x"], None) == ["--x", *ENGINE_ARGS]


def test_a_slot_is_held_until_its_file_is_closed(tmp_path):
    first = take_start_slot(0, ["cpu0"], str(tmp_path))
    got = []
    waiter = threading.Thread(target=lambda: got.append(take_start_slot(1, ["cpu0"], str(tmp_path))))
    waiter.start()
    time.sleep(0.3)
    assert got == []                       # one slot, taken: the second rank waits
    first.close()
    waiter.join(5)
    assert len(got) == 1
    got[0].close()


def test_slots_are_spread_so_ranks_up_to_the_slot_count_never_wait(tmp_path):
    names = ["cpu0", "cpu1", "cpu5"]
    held = [take_start_slot(rank, names, str(tmp_path)) for rank in range(3)]
    assert {os.fstat(h.fileno()).st_ino for h in held} == {(tmp_path / name).stat().st_ino for name in names}
    for handle in held:
        handle.close()
    assert slot_names() and all(name.startswith("cpu") for name in slot_names())


def test_where_slots_cannot_work_the_rank_starts_at_once(tmp_path):
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("")
    assert take_start_slot(0, ["cpu0"], str(blocked / "slots")) is None
    assert "mlp_magic-start-slots-" in slot_folder()

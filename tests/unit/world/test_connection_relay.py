"""world/processes.relay_when_complete: the engines' copy of the controller's connection file
appears only whole (ipyparallel writes the original in place; an engine reading it half-written
exits with status 1 before logging anything)."""
import json
import os
import stat
import sys
import time

from mlp_magic.world.processes import ManagedProcess, relay_when_complete


def wait_for(predicate, seconds=5.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return False


def a_controller(tmp_path, seconds):
    return ManagedProcess([sys.executable, "-c", f"import time; time.sleep({seconds})"],
                          str(tmp_path / "controller.log"), name="controller")


def test_the_copy_appears_whole_and_private_only_once_the_original_parses(tmp_path):
    original = tmp_path / "ipcontroller-x-engine.json"
    controller = a_controller(tmp_path, 30)
    try:
        relay = relay_when_complete(str(original), controller, timeout=10)
        assert relay != str(original) and relay.endswith(".json")
        content = {"interface": "tcp://127.0.0.1", "key": "k" * 32, "location": "here"}
        text = json.dumps(content)
        original.write_text(text[: len(text) // 2])      # the controller, halfway
        time.sleep(0.3)
        assert not os.path.exists(relay)
        original.write_text(text)
        assert wait_for(lambda: os.path.exists(relay))
        with open(relay) as handle:
            assert json.load(handle) == content
        assert stat.S_IMODE(os.stat(relay).st_mode) == 0o600
    finally:
        controller.stop(grace=1)


def test_no_copy_when_the_controller_dies_first(tmp_path):
    original = tmp_path / "ipcontroller-y-engine.json"
    controller = a_controller(tmp_path, 0)
    relay = relay_when_complete(str(original), controller, timeout=10)
    assert wait_for(lambda: not controller.running())
    time.sleep(0.3)
    original.write_text("{}")
    time.sleep(0.3)
    assert not os.path.exists(relay)

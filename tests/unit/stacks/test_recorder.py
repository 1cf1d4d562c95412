"""The flight recorder's size in a World's ranks (stacks/rank/recorder.turn_on) and a rank's
answer when it has no process group, or a dump with values torch never writes."""
import json
import os
import sys
import tempfile
from types import SimpleNamespace
from unittest import mock

from hypothesis import example, given

from mlp_magic.stacks.pure.recorded import parse_answer
from mlp_magic.stacks.rank import recorder

from tests.unit.fuzz_checks import FUZZ
from tests.unit.hostile_json import dumps, hostile
from tests.unit.stacks.pure.test_collectives import DUMP, entry


def test_the_recorder_is_sized_unless_the_user_did():
    environ: dict = {}
    assert recorder.turn_on(environ) and environ == {"TORCH_FR_BUFFER_SIZE": str(recorder.DEFAULT_ENTRIES)}
    for name in recorder.BUFFER_VARIABLES:
        mine = {name: "50"}
        assert not recorder.turn_on(mine) and mine == {name: "50"}


def test_a_rank_without_a_group_answers_no_groups_in_a_private_file(tmp_path):
    path = tmp_path / "1.collectives.json"
    recorder.write_answer(str(path))
    assert json.loads(path.read_text()) == {"groups": []}
    assert path.stat().st_mode & 0o777 == 0o600


def _no_constant(name):
    raise AssertionError(f"{name} written: not JSON")


@FUZZ
@given(hostile(DUMP))
@example(dict(DUMP, entries=[dict(entry(1), process_group=5)]))   # was "TypeError: 'int' object is not ..."
def test_a_dump_with_hostile_values_is_answered_with_the_groups_it_holds(dump):
    """torch's dump is JSON too: a value it should never hold costs that entry, not the answer
    (before: the rank answered the exception's text, "TypeError: ...")."""
    dist = SimpleNamespace(is_available=lambda: True, is_initialized=lambda: True)
    c10d = SimpleNamespace(_dump_fr_trace_json=lambda **_: dumps(dump))
    handle, path = tempfile.mkstemp(suffix=".collectives.json")
    os.close(handle)
    try:
        with mock.patch.dict(sys.modules, {"torch.distributed": dist, "torch._C._distributed_c10d": c10d}), \
                mock.patch.object(recorder, "live_groups", return_value=None):
            recorder.write_answer(path)
        with open(path) as file:
            text = file.read()
    finally:
        os.unlink(path)
    json.loads(text, parse_constant=_no_constant)
    assert isinstance(parse_answer(text), list), text

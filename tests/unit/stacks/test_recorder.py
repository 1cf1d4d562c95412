"""The flight recorder's size in a World's ranks (stacks/rank/recorder.turn_on) and a rank's
answer when it has no process group."""
import json

from mlp_magic.stacks.rank import recorder


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

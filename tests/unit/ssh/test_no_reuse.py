"""A one-off ssh call (a hang report) can ask for no ControlMaster: its ssh argv then says so and
no control directory is made, where allrun's calls share one that persists 60 s."""
from mlp_magic.ssh.argv import NO_REUSE
from mlp_magic.ssh.spawn import Launch


def _options(argv: list) -> dict:
    return dict(argv[i + 1].split("=", 1) for i, word in enumerate(argv) if word == "-o")


def test_no_reuse_connects_without_a_master_and_makes_no_control_directory(monkeypatch):
    import shutil
    import tempfile
    from pathlib import Path

    tmp_path = Path(tempfile.mkdtemp(prefix="c", dir="/tmp"))   # short: a socket path's limit
    monkeypatch.setenv("MLP_MAGIC_SSH_CONTROL_DIR", str(tmp_path / "control"))
    try:
        _check(tmp_path)
    finally:
        shutil.rmtree(tmp_path)


def _check(tmp_path) -> None:
    shared = Launch(["worker1"], "true", ssh="ssh", local=False)
    one_off = Launch(["worker1"], "true", ssh="ssh", local=False, control=NO_REUSE)
    assert _options(shared.argv(0))["ControlMaster"] == "auto"
    assert (tmp_path / "control").is_dir()
    (tmp_path / "control").rmdir()
    options = _options(one_off.argv(0))
    assert (options["ControlMaster"], options["ControlPath"]) == ("no", "none")
    assert not (tmp_path / "control").exists()

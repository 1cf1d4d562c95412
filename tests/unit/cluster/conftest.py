"""The cluster tests give the view its World, if any, themselves."""
import pytest


@pytest.fixture(autouse=True)
def no_world_of_this_process(monkeypatch):
    """A World an integration test left running in this pytest process (it is reused across
    tests, as in a notebook) stays out of these tests."""
    monkeypatch.setattr("mlp_magic.cluster.widget.kernel_world", lambda: None)

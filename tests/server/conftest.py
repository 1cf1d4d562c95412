"""Fixtures for the panel's server extension: pytest-jupyter's server fixtures, a test hostfile
whose hosts are loopback listeners we own (one answering, one refusing, one silent)."""
from __future__ import annotations

import socket

import pytest

# pytest-jupyter registers no entry point; importing its fixtures (and its async-test hooks) here
# keeps them, including its autouse event-loop fixture, to the tests in this folder.
from pytest_jupyter.jupyter_server import *  # noqa: F401,F403


class LoopbackHosts:
    """Sockets standing in for hosts' ssh ports, all on 127.0.0.0/8 (nothing else is contacted)."""

    def __init__(self):
        self._sockets = []
        self.answering_port = self._listener("127.0.0.2", backlog=8)
        self.refusing_port = self._bound_only("127.0.0.3")
        self.silent_port = self._full_listener("127.0.0.4")

    def _socket(self, address: str) -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind((address, 0))
        self._sockets.append(sock)
        return sock

    def _listener(self, address: str, backlog: int) -> int:
        sock = self._socket(address)
        sock.listen(backlog)
        return sock.getsockname()[1]

    def _bound_only(self, address: str) -> int:
        # Bound (so no one else takes the port) but not listening: connects are refused.
        return self._socket(address).getsockname()[1]

    def _full_listener(self, address: str) -> int:
        # A listener whose accept queue is full drops new SYNs: a connect hears nothing back.
        port = self._listener(address, backlog=0)
        filler = socket.create_connection((address, port), timeout=1.0)
        self._sockets.append(filler)
        return port

    def hostfile_text(self) -> str:
        return (
            "# test cluster: this machine plus three loopback 'hosts'\n"
            "localhost slots=2\n"
            f"root@127.0.0.2:{self.answering_port}\n"
            f"root@127.0.0.3:{self.refusing_port}\n"
            f"root@127.0.0.4:{self.silent_port}\n"
        )

    def close(self) -> None:
        for sock in self._sockets:
            sock.close()


@pytest.fixture
def loopback_hosts():
    hosts = LoopbackHosts()
    yield hosts
    hosts.close()


@pytest.fixture
def test_hostfile(tmp_path, loopback_hosts):
    path = tmp_path / "hostfile"
    path.write_text(loopback_hosts.hostfile_text())
    return path


@pytest.fixture
def world_state_dir(tmp_path, monkeypatch):
    directory = tmp_path / "worlds"
    directory.mkdir()
    monkeypatch.setenv("MLP_MAGIC_STATE_DIR", str(directory))
    return directory


@pytest.fixture
def probe_timeout() -> float:
    """Seconds the server waits for each host's port (short: the silent host costs this)."""
    return 0.5


@pytest.fixture
def jp_server_config(test_hostfile, world_state_dir, probe_timeout):
    return {
        "ServerApp": {"jpserver_extensions": {"mlp_magic.panel": True}},
        "MlpMagicPanel": {"hostfile": str(test_hostfile), "probe_timeout": probe_timeout},
    }

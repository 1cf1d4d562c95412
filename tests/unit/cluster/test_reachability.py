"""Is a host reachable: who needs a probe, and a real refused port."""
from __future__ import annotations

import asyncio
import socket

from mlp_magic.cluster.reachability import needs_probe, probe_tcp

LOCAL = frozenset({"localhost", "127.0.0.1", "::1", "node7"})


def test_only_remote_names_or_explicit_ports_are_probed():
    assert not needs_probe("localhost", None, LOCAL)
    assert not needs_probe("127.0.0.5", None, LOCAL)
    assert needs_probe("127.0.0.5", 2222, LOCAL)
    assert needs_probe("node8", None, LOCAL)


def test_probe_of_a_refusing_port():
    with socket.socket() as bound:
        bound.bind(("127.0.0.1", 0))  # bound, not listening: refused
        outcome = asyncio.run(probe_tcp("127.0.0.1", bound.getsockname()[1], timeout=1.0))
    assert outcome.reachable is False and "refused" in outcome.error

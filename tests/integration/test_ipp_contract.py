"""The contract with ipyparallel on a real World (what only exists once connected): a request's
per-engine futures with their output futures and iopub callbacks, its targets, the client's
reply handlers and tables, a remote error resolved as a value, our key kept in the metadata, a
finished request forgotten. Each is a name client/ipp_private reaches; an upgrade that moves one
fails here before any cell loses output.

The client is the kernel's (it cannot be pickled): each check runs there, through ``ip.call``."""
from __future__ import annotations

import os

from mlp_magic.engine.quiet import SECONDS_KEY
from tests import worlds
from mlp_magic.client.ipp_private import (children, forget_results, on_iopub, remote_error, reply_hooks,
                                          request_futures, targets)

from tests.integration.conftest import run


def _every_internal_we_use() -> None:
    """In the kernel: the World's client and one request of it."""
    client = worlds.current_world().client
    assert reply_hooks(client) is not None
    engines = sorted(client.ids)
    request = client[engines].apply_async(os.getpid)
    kids = children(request)
    assert len(kids) == 2 and len(request_futures(request)) == 4
    assert on_iopub(kids[0], lambda msg: None) is True
    assert sorted(targets(request)) == engines
    assert [type(pid) for pid in request.get(30)] == [int, int]
    msg_id = kids[0].header["msg_id"]
    assert isinstance(kids[0].output.metadata.get(SECONDS_KEY), float)   # kept by our reply hook
    assert forget_results(client, request) is True
    assert msg_id not in client._futures and msg_id not in client._output_futures


def _a_remote_error_value() -> None:
    """In the kernel: a request that raised on its engine, one that did not."""
    client = worlds.current_world().client
    request = client[sorted(client.ids)[0]].apply_async(divmod, 1, 0)
    request.wait(30)
    error = remote_error(children(request)[0])
    assert error is not None and error.ename == "ZeroDivisionError"
    fine = client[sorted(client.ids)[0]].apply_async(abs, -1)
    assert fine.get(30) == 1 and remote_error(children(fine)[0]) is None


def test_a_connected_client_and_its_requests_have_every_internal_we_use(ip):
    assert run(ip, "%%mpirun -np 2 --oversubscribe\npass") is None
    ip.call(_every_internal_we_use)


def test_a_request_that_raised_on_its_engine_is_a_remote_error_value(ip):
    assert run(ip, "%%mpirun -np 2 --oversubscribe\npass") is None
    ip.call(_a_remote_error_value)

"""The contract with the installed ipyparallel, class by class (client/ipp_private, and the
command lines of world/processes): every private name we reach and every setting we pass exists
with the shape we use. An upgrade that moves one fails here, loudly; what only exists on a
connected client is held on a real World (tests/integration/test_ipp_contract.py)."""
from __future__ import annotations

import inspect

import pytest

from mlp_magic.world import processes
from mlp_magic.client.ipp_private import REPLY_HOOKS, REPLY_KINDS, keep_in_metadata


def test_the_client_keeps_the_tables_we_read_and_the_handlers_we_wrap():
    from ipyparallel import Client

    traits = Client.class_trait_names()
    assert {"_output_futures", "_futures", "outstanding", "metadata"} <= set(traits)
    assert REPLY_HOOKS[0] in Client.__init__.__code__.co_names   # set in __init__: a plain dict
    source = inspect.getsource(Client.__init__)
    assert all(f'"{kind}"' in source or f"'{kind}'" in source for kind in REPLY_KINDS)
    assert list(inspect.signature(Client._send_control_request).parameters)[1:] == \
        ["targets", "msg_type", "content", "block"]
    assert callable(Client.send_signal) and callable(Client.purge_local_results)


def test_an_async_result_keeps_its_futures_and_targets():
    from ipyparallel.client.asyncresult import AsyncResult

    assert {"_children", "_targets"} <= set(AsyncResult.__init__.__code__.co_names)


def test_metadata_refuses_our_key_through_its_own_setitem_only():
    from ipyparallel.client.client import Metadata

    record = Metadata()
    with pytest.raises(KeyError):
        record["mlp_seconds"] = 1.5
    client = type("C", (), {"metadata": {"m1": record}})()
    assert keep_in_metadata(client, "m1", "mlp_seconds", 1.5) is True
    assert record.get("mlp_seconds") == 1.5 and record["started"] is None
    assert keep_in_metadata(client, "gone", "mlp_seconds", 1.5) is False


def test_every_setting_the_controller_and_engines_are_given_exists():
    from ipyparallel.controller import app as controller_app
    from ipyparallel.controller.app import IPController
    from ipyparallel.controller.heartmonitor import HeartMonitor
    from ipyparallel.engine import app as engine_app
    from ipyparallel.engine.app import IPEngine

    known = {"IPController": IPController.class_trait_names(config=True),
             "HeartMonitor": HeartMonitor.class_trait_names(config=True),
             "IPEngine": IPEngine.class_trait_names(config=True)}
    controller = processes.start_controller.__code__.co_consts
    argv = [*processes.engine_command("x.json", 60)[3:], *(c for c in controller if isinstance(c, str))]
    checked = []
    for word in argv:
        if word.startswith("--") and "." in word.split("=")[0]:
            owner, name = word[2:].split("=")[0].split(".")
            assert name in known[owner], word
            checked.append(name)
    assert {"registration_timeout", "max_heartmonitor_misses", "broadcast_scheduler_depth",
            "wait_for_url_file", "enable_nanny", "timeout", "max_heartbeat_misses"} <= set(checked)
    assert {"ip", "ping", "cluster-id", "profile-dir", "log-level"} <= set(controller_app.aliases)
    assert {"usethreads", "nodb"} <= set(controller_app.flags)
    assert {"file", "log-level"} <= set(engine_app.aliases)


def test_the_engine_registers_in_a_coroutine_and_then_has_its_kernel():
    """engine/main overrides ``IPEngine.register`` (a coroutine since ipyparallel 9) and quietens
    ``self.kernel`` once it returns."""
    from ipyparallel.engine.app import IPEngine

    assert inspect.iscoroutinefunction(IPEngine.register)
    assert "kernel" in IPEngine.class_trait_names()


def test_the_client_calls_its_registration_callbacks_on_each_engine_event():
    """world/start/registration's start wakes on them (ipp_private.on_registration)."""
    from ipyparallel import Client

    from mlp_magic.client.ipp_private import REGISTRATION_CALLBACKS, on_registration

    assert REGISTRATION_CALLBACKS in Client.class_trait_names()
    for handler in (Client._register_engine, Client._unregister_engine):
        assert REGISTRATION_CALLBACKS in inspect.getsource(handler)
    client, heard = Client.__new__(Client), []   # a client's own list, as a connected one has
    stop = on_registration(client, lambda: heard.append(1))
    for callback in list(client._registration_callbacks):
        callback({"event": "register", "id": 0})
    stop()
    assert heard == [1] and client._registration_callbacks == []

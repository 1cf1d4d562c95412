"""client/ipp_private: each use of ipyparallel's client internals has its fallback or one clear
error, checked against a real (unconnected) ipyparallel Client's attributes where it matters."""
from concurrent.futures import Future
from types import SimpleNamespace

import pytest

from mlp_magic.client.ipp_private import REPLY_KINDS, has_control_request, interrupt_engines, reply_hooks
from mlp_magic.client.quiet_replies import complete_quiet_outputs


def a_client(**overrides):
    client = SimpleNamespace(_queue_handlers={kind: (lambda msg: None) for kind in REPLY_KINDS},
                             _output_futures={}, metadata={})
    for name, value in overrides.items():
        if value is None:
            delattr(client, name)
        else:
            setattr(client, name, value)
    return client


@pytest.mark.parametrize("change", [{"_queue_handlers": None}, {"_output_futures": None},
                                    {"_queue_handlers": {"execute_reply": print}}])
def test_a_client_without_the_hooks_is_left_as_it_is(change):
    client = a_client(**change)
    before = dict(vars(client))
    assert complete_quiet_outputs(client) is False   # the World then asks for plain replies
    assert vars(client) == before


def test_the_reply_handlers_are_wrapped_once():
    client = a_client()
    assert complete_quiet_outputs(client) is True
    wrapped = dict(client._queue_handlers)
    complete_quiet_outputs(client)
    assert client._queue_handlers == wrapped
    assert all(getattr(h, "_mlp_quiet", False) for h in wrapped.values())
    assert reply_hooks(client)[1] is client._output_futures


def test_the_ranks_run_time_is_kept_before_the_request_completes():
    # ipyparallel's handler completes the request's future; the cell waiting on it reads the
    # run time at once, so the time must be in the metadata by then
    seen = []
    client = a_client(metadata={"m1": {}})
    client._queue_handlers["execute_reply"] = lambda msg: seen.append(dict(client.metadata["m1"]))
    complete_quiet_outputs(client)
    client._queue_handlers["execute_reply"](
        {"parent_header": {"msg_id": "m1"}, "metadata": {"mlp_seconds": 0.5}})
    assert seen == [{"mlp_seconds": 0.5}]


def test_a_second_reply_to_an_answered_request_is_dropped_not_raised_on_the_io_thread():
    """A rank interrupted and freed late (``--unblock``) may answer twice; ipyparallel's handler
    then sets a finished future again, which raised on the client's IO thread (a traceback per
    reply, seen at 64 ranks). The first answer stands."""
    answered = Future()
    answered.set_result("first")
    client = a_client(metadata={"m1": {}})
    client._queue_handlers["execute_reply"] = lambda msg: answered.set_result("second")
    complete_quiet_outputs(client)
    client._queue_handlers["execute_reply"]({"parent_header": {"msg_id": "m1"}, "metadata": {}})
    assert answered.result() == "first"


def test_this_ipyparallels_client_has_the_hooks():
    from ipyparallel import Client

    assert callable(getattr(Client, "_send_control_request", None))
    assert "_queue_handlers" in Client.__init__.__code__.co_names or hasattr(Client, "_queue_handlers")


def test_an_interrupt_is_the_control_request_not_the_nannies_signal():
    private = []
    client = SimpleNamespace(send_signal=lambda *a, **k: pytest.fail("no nanny answers send_signal"),
                             abort=lambda **kw: private.append(("abort", kw["targets"])),
                             _send_control_request=lambda **kw: private.append(kw))
    assert has_control_request(client)
    assert interrupt_engines(client, [1]) == [1]
    assert private == [{"targets": [1], "msg_type": "interrupt_request", "content": {}, "block": False}]
    assert not has_control_request(SimpleNamespace())


def test_a_ranks_run_time_is_its_own_count_else_ipyparallels_dates():
    from datetime import datetime, timezone

    from mlp_magic.client.quiet_replies import run_seconds

    assert run_seconds({"mlp_seconds": 0.25, "started": None}) == 0.25
    started = datetime(2026, 11, 25, 9, 42, 48, 525275, tzinfo=timezone.utc)
    assert run_seconds({"started": started, "completed": "2026-11-25T09:42:49.025275Z"}) == 0.5
    assert run_seconds({"started": None, "completed": None}) is None


def test_forgetting_a_request_says_whether_the_client_let_it():
    from mlp_magic.client.ipp_private import forget_results

    kid = SimpleNamespace(header={"msg_id": "m1"})
    request = SimpleNamespace(_children=[kid])
    client = SimpleNamespace(purge_local_results=lambda jobs: None, _futures={"m1": 1},
                             _output_futures={"m1": 2}, metadata={"m1": {}}, outstanding={"m1"})
    assert forget_results(client, request) is True
    assert client._futures == client._output_futures == client.metadata == {} and client.outstanding == set()
    del client._output_futures
    assert forget_results(client, request) is False


def test_a_request_without_per_engine_futures_or_targets_is_one_clear_error():
    from mlp_magic.errors import MlpMagicError
    from mlp_magic.client.ipp_private import children, targets

    for missing in (children, targets):
        with pytest.raises(MlpMagicError, match=r"needs ipyparallel>=9.0,<10"):
            missing(SimpleNamespace())

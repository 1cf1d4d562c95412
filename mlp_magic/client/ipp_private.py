"""What we use of ipyparallel's client beyond its public API, in one place, each use with a fallback.

- ``children``: an AsyncResult's per-engine futures (``_children``): the only way to wait on each
  rank of a broadcast request, and to read each one's output as it arrives. Without them a request
  cannot be followed rank by rank, so their absence is an error said once, not a silent loss.
- ``on_iopub``: a future's ``iopub_callbacks`` (what ``AsyncResult.stream_output`` uses): a rank's
  output wakes the waiting loop. Missing, output is still read at the end (it is in the request's
  metadata), the wait is simply woken by the request's end only.
- ``forget_results``: drops a finished request from the client's tables (``_futures``,
  ``_output_futures``, ``outstanding``), else memory grows cell after cell; missing, it leaks,
  said once.
- ``interrupt_engines`` (after ``abort_jobs``): ``_send_control_request`` (ipykernel's
  ``interrupt_request`` through the controller, as ``Client.interrupt`` would but without waiting
  for every engine's reply); missing, the ranks' processes get SIGINT (agent/signals: here
  directly, elsewhere through each host's agent), said once. Not the public ``send_signal``: it
  asks the engines' nannies, and ours have none.
- ``send_control``: the same method for a request of ours on the control channel (a stopped
  rank's pdb command: debugging/stopped), one engine at a time so that each answer is its own
  future; missing, breakpoints' commands cannot be sent, said in one line.
- ``reply_hooks``: the client's reply handlers by message type (``_queue_handlers``) and its
  output futures by request (``_output_futures``), for client/quiet_replies. The engines leave out
  a quiet request's 'idle', which only these let the client do without; missing, the World asks
  its engines to publish as plain ipykernel does (engine/quiet.unquieten: more messages, the same
  output) and says so once (world/guards).
- ``keep_in_metadata``: a key of ours in a request's ``Metadata``, which refuses unknown keys
  through its own ``__setitem__``; missing, the rank's run time is read from ipyparallel's own
  'started' and 'completed' instead.
- ``remote_error``: a request that raised on its engine resolves its future to the RemoteError as
  a value, not as the future's exception (ipyparallel's ``_handle_apply_reply``).
- ``targets``: the engines a request was sent to (``AsyncResult._targets``), for allrun/via_engines.
- ``on_registration``: the client's ``_registration_callbacks`` (what its own ``wait_for_engines``
  uses), called on its IO thread as each engine registers or unregisters: a starting World's wait
  wakes on them (world/start/registration). Missing, that wait asks ``client.ids`` on a clock instead.
tests/unit/world/test_ipp_contract.py and tests/integration/test_ipp_contract.py hold each use
against the installed ipyparallel, on a real World for what only exists once connected.
"""
from __future__ import annotations

from mlp_magic.errors import MlpMagicError


def children(async_result) -> list:
    """One future per engine of the request, in target order."""
    try:
        return list(async_result._children)
    except AttributeError:
        raise MlpMagicError("this ipyparallel has no per-engine futures (AsyncResult._children); "
                            "mlp_magic needs ipyparallel>=9.0,<10") from None


def request_futures(async_result) -> list:
    """Every request's two futures: its reply and its output. Both travel on different sockets,
    so a request is over only when both are done (the output completes on the rank's 'idle', or
    on its reply when it published nothing)."""
    return [future for child in children(async_result) for future in (child, child.output)]


def on_iopub(future, callback) -> bool:
    """Call ``callback(msg)`` on the client's IO thread for each iopub message of ``future``'s
    request; False where the client cannot (the caller then learns of output at the end only)."""
    callbacks = getattr(future, "iopub_callbacks", None)
    if not isinstance(callbacks, list):
        return False
    callbacks.append(callback)
    return True


def is_engine_death(future) -> bool:
    """A finished future whose engine died: ipyparallel resolves it to an EngineError, raised or
    as its value (a dead engine's task)."""
    try:
        error = future.exception(timeout=0)
        if error is None:
            error = future.result(timeout=0)
    except Exception:  # noqa: BLE001 - not finished, or cancelled: not a death we can see
        return False
    return "EngineError" in type(error).__name__


def remote_error(future):
    """The exception a finished future of a request stands for, or None: ipyparallel resolves a
    request that raised on its engine to the RemoteError (or EngineError, TaskAborted) as its
    value, not as the future's exception."""
    if not future.done() or future.cancelled():
        return None
    error = future.exception()
    if error is None:
        error = future.result()
    return error if isinstance(error, BaseException) else None


def forget_results(client, async_result) -> bool:
    """Let ipyparallel's client drop a finished request's results. It keeps each rank's result and
    output, the broadcast request's own futures (never answered as such), and AsyncResult memoises
    ``len`` in a class-wide lru_cache that holds the last 128 AsyncResults alive. False where a
    table moved (the results then stay: memory grows, cells go on)."""
    forgotten = True
    try:
        client.purge_local_results(jobs=async_result)
        kids = async_result._children
        request = kids[0].header["msg_id"] if kids else None
        for table in (client._futures, client._output_futures, client.metadata):
            table.pop(request, None)
        client.outstanding.discard(request)
    except Exception:  # noqa: BLE001 - a client internal moved: a leak is better than a failed cell
        forgotten = False
    for method in ("__len__", "_count_chunks"):
        getattr(getattr(type(async_result), method, None), "cache_clear", lambda: None)()
    return forgotten


CONTROL_REQUEST = "_send_control_request"   # the client's method for control-channel requests


def has_control_request(client) -> bool:
    return getattr(client, CONTROL_REQUEST, None) is not None


def abort_jobs(client, jobs_by_engine: dict) -> list:
    """Drop each engine's job if still queued (a msg id, an AsyncResult, or None: nothing
    queued), one engine at a time, not waiting (a vanished host never answers): the engines
    reached. One the client forgot meanwhile is skipped, not an error for all: its IO thread
    drops a dead engine at any moment (a rank's death the World survived), and
    ``_build_targets`` then raises KeyError."""
    return [engine for engine, job in jobs_by_engine.items() if job is None or _reached(
        lambda: client.abort(jobs=[job], targets=[engine], block=False))]


def interrupt_engines(client, engines: list) -> list:
    """ipykernel's interrupt_request to each of ``engines``, as ``abort_jobs`` sends: those
    reached. The caller checks ``has_control_request`` first."""
    return [engine for engine in engines
            if _reached(lambda: send_control(client, engine, "interrupt_request", {}))]


def _reached(send) -> bool:
    try:
        send()
        return True
    except Exception:  # noqa: BLE001 - KeyError for a forgotten engine; or the client is gone
        return False


def send_control(client, engine: int, msg_type: str, content: dict):
    """``msg_type`` with ``content`` to ``engine`` on the control channel, not waiting: a future
    whose result is [the reply message]; None where the client has no such method."""
    send = getattr(client, CONTROL_REQUEST, None)
    if send is None:
        return None
    return send(targets=[engine], msg_type=msg_type, content=content, block=False)


REPLY_KINDS = ("execute_reply", "apply_reply")
REPLY_HOOKS = ("_queue_handlers", "_output_futures")   # the client's names for them


def reply_hooks(client):
    """(handlers, output_futures): the client's reply handlers by message type, which may be
    replaced by wrappers, and its output futures by request id; None where this client keeps
    them under other names (the caller falls back to plain messages)."""
    handlers, outputs = (getattr(client, name, None) for name in REPLY_HOOKS)
    if not (isinstance(handlers, dict) and all(kind in handlers for kind in REPLY_KINDS)
            and isinstance(outputs, dict)):
        return None
    return handlers, outputs


def keep_in_metadata(client, msg_id: str, key: str, value) -> bool:
    """Store ``key`` in the request's Metadata (which only takes its own keys through ``[]``);
    False where the client keeps no such record."""
    metadata = getattr(client, "metadata", None)
    record = metadata.get(msg_id) if isinstance(metadata, dict) else None
    if not isinstance(record, dict):
        return False
    dict.__setitem__(record, key, value)
    return True


def targets(async_result) -> list:
    """The engine ids a request was sent to."""
    found = getattr(async_result, "_targets", None)
    if found is None:
        raise MlpMagicError("this ipyparallel's AsyncResult names no targets (AsyncResult._targets); "
                            "mlp_magic needs ipyparallel>=9.0,<10")
    return list(found)


REGISTRATION_CALLBACKS = "_registration_callbacks"   # the client's list, called with each event


def on_registration(client, callback):
    """Call ``callback()`` on the client's IO thread each time an engine registers or unregisters;
    returns the function that stops it, or None where this client keeps no such list."""
    callbacks = getattr(client, REGISTRATION_CALLBACKS, None)
    if not isinstance(callbacks, list):
        return None

    def heard(_event) -> None:
        callback()

    callbacks.append(heard)

    def stop() -> None:
        try:
            callbacks.remove(heard)
        except ValueError:
            pass
    return stop

"""``breakpoint()`` on a rank: the rank stops there, and pdb's commands reach it on the control channel.

Installed in every rank at the World's start (engine/bootstrap), and light: pdb and the debugger
(debugging/rank/debugger) load only when a rank first stops.

- ``sys.breakpointhook`` becomes ``stop_here``; ``PYTHONBREAKPOINT`` still rules where it is set
  ("0": no stop; "module.function": that hook), as Python's own hook would read it.
- A stopped rank's main thread waits in pdb for its next command, inside the cell: the shell
  channel is the cell's. Commands come on the control channel instead, which ipykernel serves on
  a thread of its own: ``answer`` hands each one to the debugger and replies with what pdb wrote,
  once pdb asks for its next command (or after the request's ``wait``, saying it still runs).
- Each time a rank stops, it says so on iopub as a message of the cell's (``PAUSED``): the
  kernel's wait for the cell wakes on it, without a request of its own.
"""
from __future__ import annotations

import os
import sys

REQUEST, REPLY, PAUSED = "mlp_pdb_request", "mlp_pdb_reply", "mlp_paused"
_STATE: dict = {}   # "kernel": the engine's kernel; "debugger": this cell's RankDebugger
_BREAKS: list = []  # (file: a real path or "cell", line, condition or None): `%mpirun --break`


def install(shell) -> bool:
    """``breakpoint()`` stops this rank from now on (again at a re-bootstrap: replaced, never
    stacked); False where its kernel cannot be reached while stopped (then ``breakpoint()``
    raises one clear error)."""
    from mlp_magic.engine.ipykernel_private import add_control_handler

    sys.breakpointhook = stop_here
    for event, hook in (("pre_run_cell", _cell_starting), ("post_run_cell", _cell_ended)):
        if hook in shell.events.callbacks[event]:
            shell.events.unregister(event, hook)
        shell.events.register(event, hook)
    kernel = getattr(shell, "kernel", None)
    reachable = kernel is not None and add_control_handler(kernel, REQUEST, answer)
    _STATE["kernel"] = kernel if reachable else None
    return reachable


def stop_here(*args, **kwargs):
    """``sys.breakpointhook``: stop in the caller's frame, unless PYTHONBREAKPOINT says otherwise."""
    if os.environ.get("PYTHONBREAKPOINT"):
        return sys.__breakpointhook__(*args, **kwargs)
    return stop(sys._getframe(1))


def stop(frame) -> None:
    """Stop this rank in ``frame``, for commands from the notebook. Only the main thread stops:
    it runs the cell, whose end ends the debugging (a thread's stop could outlive its cell)."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        print(f"mlp_magic: breakpoint() in thread {threading.current_thread().name!r} not stopped at: "
              "a rank stops in its main thread only", file=sys.stderr, flush=True)
        return
    _debugger().set_trace(frame)


def _debugger():
    """This cell's debugger, made at its first use."""
    kernel = _STATE.get("kernel")
    if kernel is None:
        raise RuntimeError("breakpoint(): this rank's ipykernel has no control handler table, "
                           "so a stopped rank could not be reached (see `%mpirun --status`)")
    debugger = _STATE.get("debugger")
    if debugger is None or debugger.quitting:
        from mlp_magic.debugging.rank.debugger import RankDebugger

        from mlp_magic.engine.ipykernel_private import shell_parent

        parent = shell_parent(kernel)   # the cell's request: its stops are said as its messages
        if parent is None:
            raise RuntimeError("breakpoint(): this rank's ipykernel does not say which request it "
                               "runs (Kernel.get_parent), so the notebook could not learn it stopped")
        debugger = _STATE["debugger"] = RankDebugger(lambda content: _publish(kernel, parent, content))
    return debugger


def add_break(file: str, line: int, condition: str | None) -> str:
    """``%mpirun --break FILE:LINE``: stop there from the next cell on; "" or why it cannot be."""
    if file != "cell":
        import linecache

        file = os.path.realpath(file)
        if not os.path.isfile(file):
            return f"no such file on this rank: {file}"
        if not linecache.getline(file, line).strip():
            return f"{file} has no line {line} with code"
    _BREAKS.append((file, line, condition))
    return ""


def clear_breaks() -> int:
    """``%mpirun --break clear``: how many there were."""
    count = len(_BREAKS)
    _BREAKS.clear()
    return count


def _cell_starting(_info=None) -> None:
    """With breakpoints set, every cell runs traced (only the frames of their files are followed)."""
    if _BREAKS and _STATE.get("kernel") is not None:
        _debugger().arm(_BREAKS, sys._getframe(1))


def conditional(ranks, when, frame) -> None:
    """``mlp_magic.breakpoint``: stop only on ``ranks`` (an int, or a collection; None: all) and
    where ``when`` is true."""
    rank = int(os.environ.get("RANK", "-1"))
    if ranks is not None and rank not in ((ranks,) if isinstance(ranks, int) else ranks):
        return
    if not when:
        return
    if os.environ.get("PYTHONBREAKPOINT"):   # "0": none; "module.function": that hook
        sys.__breakpointhook__()
        return
    stop(frame)


def _cell_ended(_result=None) -> None:
    """The cell is over: its debugger goes (a later ``breakpoint()`` makes a new one), and with
    it the tracing a step left on."""
    debugger = _STATE.pop("debugger", None)
    if debugger is not None:
        sys.settrace(None)
        debugger.close()


def _call(blob: str) -> dict:
    """``function(*args)`` of a pickled ("module:function", args) from the kernel (the session's
    signature vouches for it, as for any ipyparallel request); its value pickled, or its error."""
    import base64
    import importlib
    import pickle

    target, args = pickle.loads(base64.b64decode(blob))
    module, _, name = target.partition(":")
    try:
        value = getattr(importlib.import_module(module), name)(*args)
        return {"state": "called", "value": base64.b64encode(pickle.dumps(value)).decode()}
    except Exception as error:  # noqa: BLE001 - the kernel shows it as that rank's answer
        return {"state": "called", "error": f"{type(error).__name__}: {error}"}


def _publish(kernel, parent, content: dict) -> None:
    """``PAUSED`` on iopub, as a message of the cell (the kernel's wait follows it)."""
    for stream in (sys.stdout, sys.stderr):   # what the cell printed first reaches the notebook first
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - a closed or odd stream must not keep the rank from stopping
            pass
    kernel.session.send(kernel.iopub_socket, PAUSED, content, parent=parent,
                        ident=b"mlp_magic." + PAUSED.encode())


def frame_namespace():
    """(globals, locals) of the frame this rank is stopped in, or None where it is not stopped:
    what ``%mpirun --compare`` evaluates in (values/rank/compare)."""
    debugger = _STATE.get("debugger")
    if debugger is None or debugger.state != "stopped":
        return None
    return debugger.curframe.f_globals, debugger.curframe_locals


async def answer(stream, idents, msg) -> None:
    """The control channel's handler: one pdb command (or none: where the rank is) and its
    answer; or a call of one of our functions (``--compare`` on stopped ranks), run here."""
    content = msg.get("content") or {}
    debugger = _STATE.get("debugger")
    if "call" in content:
        reply = _call(content["call"])
    elif debugger is None:
        reply = {"state": "none", "output": "", "where": None}
    else:
        reply = await debugger.ask(content.get("command"), content.get("code"),
                                   float(content.get("wait", 1.0)))
    _STATE["kernel"].session.send(stream, REPLY, {"status": "ok", **reply}, parent=msg, ident=idents)

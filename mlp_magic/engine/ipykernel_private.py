"""What the engine uses of ipykernel beyond its public API, in one place, each use with its fallback
(the engine's twin of client/ipp_private; tests/unit/engine/test_ipykernel_private.py holds the
contract against the installed ipykernel).

- ``KERNEL_HOOKS``, for engine/quiet: the kernel's ``_publish_status(status, channel, parent)``,
  ``finish_metadata(parent, metadata, reply_content)``, ``_publish_execute_input(code, parent,
  execution_count)``, ``get_parent(channel)`` and its ``session.send``. Replaced all together or
  not at all: where one is missing the engine publishes as ipykernel does (a 'busy', the code and
  an 'idle' per request), which the client handles as ever: more messages, the same output.
- ``FD_PIPE``, for engine/fd_watch: an OutStream's fd pipe (``_fid``), its copy of the original
  fd (``_original_stdstream_copy``), the fd itself (``_original_stdstream_fd``), the reading
  thread (``watch_fd_thread``) and the flag that ends it (``_should_watch``). Where one is
  missing ipykernel keeps reading fd 1 and 2 itself: that output still reaches the notebook, but
  may show after its cell's end and is not in the rank's log.

- ``EXECUTE_HANDLER``, for ``run_every_cell``: the kernel's table of shell handlers
  (``shell_handlers["execute_request"]``, called as ``(stream, idents, msg)``) and the request's
  ``stop_on_error`` that its execute handler reads (true by default). Where the table is not
  there, ipykernel may abort a cell on the rank where the previous one failed (below).
- ``DEBUGGER_MODULE``'s ``DEBUGGER_FLAG``, for engine/main's lean start: ipykernel's kernel builds
  its debugger (and imports debugpy) only where ``ipykernel.debugger._is_debugpy_available`` is
  true. Where the flag is gone, engine/main leaves the debugger module to be imported as before.

- ``CONTROL_HANDLERS``, for debugging/rank/breakpoints: the kernel's table of control-channel
  handlers (``control_handlers``, called as ``(stream, idents, msg)``, awaited when they return an
  awaitable), served by ipykernel's control thread while the main thread is stopped in pdb. Where
  it is not there, ``breakpoint()`` on a rank raises one clear error instead of waiting for
  commands that could never come.

``missing()`` names what this engine found missing; the World says it once (world/guards).
"""
from __future__ import annotations

import os

KERNEL_HOOKS = ("_publish_status", "finish_metadata", "_publish_execute_input", "get_parent")
FD_PIPE = ("_fid", "_original_stdstream_copy", "_original_stdstream_fd", "_should_watch")
DEBUGGER_MODULE, DEBUGGER_FLAG = "ipykernel.debugger", "_is_debugpy_available"
EXECUTE_HANDLER = ("shell_handlers", "execute_request")
CONTROL_HANDLERS = "control_handlers"

_MISSING: dict = {}        # name -> what it was for, as found in this engine
_REPLACED: list = []       # (object, name, original or None when it was the class's) to restore


def missing() -> dict:
    """{private name: what it was needed for} of the internals this engine could not find."""
    return dict(_MISSING)


def kernel_hooks(kernel) -> dict | None:
    """The kernel's hooks by name (and "send", its session's), or None when one is missing."""
    if kernel is None:
        return None
    hooks = {name: getattr(kernel, name, None) for name in KERNEL_HOOKS}
    hooks["send"] = getattr(getattr(kernel, "session", None), "send", None)
    absent = [name for name in (*KERNEL_HOOKS, "send") if not callable(hooks.get(name))]
    if absent:
        for name in absent:
            _MISSING[f"Kernel.{name}" if name != "send" else "Kernel.session.send"] = \
                "quiet replies (engine/quiet)"
        return None
    return hooks


def replace(target, name: str, value) -> None:
    """``target.name = value``, the original kept for ``restore_all``."""
    _REPLACED.append((target, name, vars(target).get(name) if hasattr(target, "__dict__") else None))
    setattr(target, name, value)


def replace_hooks(kernel, send, finish_metadata, publish_status, publish_execute_input) -> None:
    """The kernel's hooks (``KERNEL_HOOKS`` but get_parent, its session's send) replaced."""
    replace(kernel.session, "send", send)
    replace(kernel, "finish_metadata", finish_metadata)
    replace(kernel, "_publish_status", publish_status)
    replace(kernel, "_publish_execute_input", publish_execute_input)


def restore_all() -> bool:
    """Put back every hook ``replace`` changed (the latest first); True when there were any."""
    changed = bool(_REPLACED)
    while _REPLACED:
        target, name, original = _REPLACED.pop()
        if original is None:
            try:
                delattr(target, name)   # it was the class's method: the instance's copy goes
            except AttributeError:
                pass
        else:
            setattr(target, name, original)
    return changed


def run_every_cell(kernel) -> bool:
    """Every cell the World sends runs on every rank, whatever the previous cell did there.

    ipykernel aborts the execute requests queued behind one that failed (``stop_on_error``),
    and it marks itself aborting only after the failure's reply has left: a next cell sent as
    soon as that reply came (a notebook run by nbclient, a cell after an interrupt) can be
    aborted on that rank alone while the others run it, and a collective in it then hangs.
    So each execute request is handled as if it said ``stop_on_error: false``; a failure still
    fails its cell, and the kernel's own notebook still stops there. False, noted missing and
    changing nothing, where the handler table is not there."""
    table, name = EXECUTE_HANDLER
    handlers = getattr(kernel, table, None)
    handler = handlers.get(name) if isinstance(handlers, dict) else None
    if not callable(handler):
        _MISSING[f"Kernel.{table}['{name}']"] = "every rank runs every cell after a failure (run_every_cell)"
        return False
    if getattr(handler, "_mlp_runs_every_cell", False):
        return True

    def execute_request(stream, idents, msg):
        content = msg.get("content") if isinstance(msg, dict) else None
        if isinstance(content, dict):
            content.setdefault("stop_on_error", False)
        return handler(stream, idents, msg)
    execute_request._mlp_runs_every_cell = True
    handlers[name] = execute_request
    return True


def add_control_handler(kernel, msg_type: str, handler) -> bool:
    """Serve ``msg_type`` on the kernel's control channel with ``handler``; False, noted missing,
    where the kernel keeps no such table."""
    handlers = getattr(kernel, CONTROL_HANDLERS, None)
    if not isinstance(handlers, dict):
        _MISSING[f"Kernel.{CONTROL_HANDLERS}"] = "breakpoints on the ranks (debugging/rank/breakpoints)"
        return False
    handlers[msg_type] = handler
    return True


def shell_parent(kernel):
    """The shell request the kernel is running (``get_parent("shell")``, one of ``KERNEL_HOOKS``):
    a stopped rank says so as a message of that cell. None, noted missing, where it is gone."""
    get_parent = getattr(kernel, "get_parent", None)
    if not callable(get_parent):
        _MISSING["Kernel.get_parent"] = "breakpoints on the ranks (debugging/rank/breakpoints)"
        return None
    return get_parent("shell")


def current_kernel():
    """This engine's kernel (ipykernel's singleton), or None outside one."""
    from ipykernel.kernelbase import Kernel

    return Kernel.instance() if Kernel.initialized() else None


class FdPipe:
    """ipykernel's reading of one of fd 1/2, seen through the names it uses."""

    def __init__(self, stream):
        self.stream = stream
        self.fid = stream._fid
        self.echo_fd = stream._original_stdstream_copy
        self.reader = stream.watch_fd_thread

    def stop_reader(self) -> None:
        """ipykernel's loop ends when it reads with ``_should_watch`` off; a NUL byte wakes it
        (not echoed)."""
        self.stream._should_watch = False
        os.write(self.stream._original_stdstream_fd, b"\0")

    def resume_reader(self) -> None:
        self.stream._should_watch = True


def fd_pipe(stream) -> FdPipe | None:
    """The stream's fd pipe where ipykernel reads one (None where it does not: fd output then
    goes straight to the launcher's log, nothing to take over); None too, noted as missing,
    where it reads one through names this module does not know."""
    reader = getattr(stream, "watch_fd_thread", None)
    if reader is None or not reader.is_alive():
        return None
    absent = [name for name in FD_PIPE if getattr(stream, name, None) is None]
    if absent:
        for name in absent:
            _MISSING[f"OutStream.{name}"] = "fd 1/2 output drained at its cell's end (engine/fd_watch)"
        return None
    return FdPipe(stream)


def with_missing(function, *args, **kwargs) -> dict:
    """``function(*args, **kwargs)`` (a dict: engine/bootstrap.bootstrap), with ``missing()``
    under "missing": the World's set-up call, so that it learns what each engine lacks without
    another round trip."""
    return {**function(*args, **kwargs), "missing": missing()}

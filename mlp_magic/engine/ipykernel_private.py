"""What the engine uses of ipykernel beyond its public API, in one place, each use with its fallback
(the engine's twin of world/ipp_private; tests/unit/engine/test_ipykernel_private.py holds the
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

- ``DEBUGGER_MODULE``'s ``DEBUGGER_FLAG``, for engine/main's lean start: ipykernel's kernel builds
  its debugger (and imports debugpy) only where ``ipykernel.debugger._is_debugpy_available`` is
  true. Where the flag is gone, engine/main leaves the debugger module to be imported as before.

``missing()`` names what this engine found missing; the World says it once (world/guards).
"""
from __future__ import annotations

import os

KERNEL_HOOKS = ("_publish_status", "finish_metadata", "_publish_execute_input", "get_parent")
FD_PIPE = ("_fid", "_original_stdstream_copy", "_original_stdstream_fd", "_should_watch")
DEBUGGER_MODULE, DEBUGGER_FLAG = "ipykernel.debugger", "_is_debugpy_available"

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

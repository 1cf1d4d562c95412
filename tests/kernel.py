"""A real ipykernel, started and driven through jupyter_client as JupyterLab, Notebook 7 and VS Code
do: every cell runs inside the kernel's running asyncio loop, its output comes back as iopub
messages (streams, rich displays and their updates, comms, errors), Ctrl-C is the kernel's
interrupt (SIGINT). An in-process IPython shell has none of that, and a World across hosts failed
in every real kernel while every test through such a shell passed.

``Kernel.run_cell(code)`` returns a ``CellRun``: what a frontend received for that cell, and its
status. So that the tests read it as they read an in-process shell's, what the kernel sends is
also written to this process's stdout and stderr as a console frontend shows it (``capsys``
reads it), and ``user_ns[name]`` and ``eval``/``call`` bring values back by pickle.

The kernel sees the test's environment and working directory as they are when each request is
sent (``monkeypatch.setenv`` before a cell is seen by that cell), as an in-process shell did.
"""
from __future__ import annotations

import ast
import base64
import builtins
import os
import pickle
import queue
import re
import sys
import threading
import time

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SESSION: Kernel | None = None   # the session's kernel (the ``ip`` fixture), for tests/worlds.py


class KernelDied(AssertionError):
    pass


def _error_of(ename: str, evalue: str, traceback: list) -> BaseException:
    """The cell's error as an exception of the type the kernel raised, where this process knows
    it by name (mlp_magic.errors, builtins), else a ``CellError``; ``str()`` is its message."""
    from mlp_magic import errors

    known = getattr(errors, ename, None) or getattr(builtins, ename, None)
    cls = known if isinstance(known, type) and issubclass(known, BaseException) else CellError
    error = cls.__new__(cls)
    error.args = (evalue,)
    error.ename, error.evalue, error.traceback = ename, evalue, traceback
    return error


class CellError(Exception):
    """A cell's error of a type this process does not know by name."""

    def __str__(self):
        return self.args[0] if self.args else ""


class CellRun:
    """What a frontend received for one cell: ``outputs`` as nbclient keeps them (streams merged,
    a display updated in place by ``update_display_data``), ``messages`` (every iopub message, in
    order), ``status`` ("ok", "error", "aborted") and the error."""

    def __init__(self):
        self.outputs: list = []
        self.messages: list = []
        self.status: str | None = None
        self.error_in_exec: BaseException | None = None
        self.error_before_exec = None
        self.execution_count = None

    @property
    def success(self) -> bool:
        return self.status == "ok"

    def stream(self, name: str = "stdout") -> str:
        return "".join(out["text"] for out in self.outputs if out.get("name") == name)

    @property
    def stdout(self) -> str:
        return self.stream("stdout")

    @property
    def stderr(self) -> str:
        return self.stream("stderr")

    def of_type(self, msg_type: str) -> list:
        return [m for m in self.messages if m["msg_type"] == msg_type]

    @property
    def shown(self) -> str:
        """The text a frontend shows at the end: streams, displays in their last state, errors."""
        parts = []
        for out in self.outputs:
            if out["output_type"] == "stream":
                parts.append(out["text"])
            elif out["output_type"] == "error":
                parts.append(_ANSI.sub("", "\n".join(out["traceback"])) + "\n")
            else:
                parts.append(out["data"].get("text/plain", "") + "\n")
        return "".join(parts)

    def take(self, message: dict, echo: bool) -> None:
        kind, content = message["msg_type"], message["content"]
        self.messages.append(message)
        if kind == "stream":
            last = self.outputs[-1] if self.outputs else None
            if last is not None and last.get("name") == content["name"]:
                last["text"] += content["text"]
            else:
                self.outputs.append({"output_type": "stream", "name": content["name"],
                                     "text": content["text"]})
            if echo:
                (sys.stderr if content["name"] == "stderr" else sys.stdout).write(content["text"])
        elif kind in ("display_data", "execute_result"):
            display_id = (content.get("transient") or {}).get("display_id")
            self.outputs.append({"output_type": kind, "data": content["data"], "display_id": display_id})
            self._echo_data(content, echo)
        elif kind == "update_display_data":
            display_id = (content.get("transient") or {}).get("display_id")
            for out in self.outputs:
                if display_id is not None and out.get("display_id") == display_id:
                    out["data"] = content["data"]
            self._echo_data(content, echo)
        elif kind == "clear_output":
            self.outputs.clear()
        elif kind == "error":
            self.outputs.append({"output_type": "error", **content})
            if echo:
                sys.stdout.write(_ANSI.sub("", "\n".join(content["traceback"])) + "\n")

    @staticmethod
    def _echo_data(content: dict, echo: bool) -> None:
        text = content["data"].get("text/plain")
        if echo and text is not None:
            sys.stdout.write(text + "\n")


class Namespace:
    """The kernel's user namespace, read and written by pickle."""

    def __init__(self, kernel: Kernel):
        self._kernel = kernel

    def __getitem__(self, name: str):
        if not self._kernel.eval(f"{name!r} in globals()"):
            raise KeyError(name)
        return self._kernel.eval(name)

    def get(self, name: str, default=None):
        try:
            return self[name]
        except KeyError:
            return default

    def __contains__(self, name: str) -> bool:
        return self._kernel.eval(f"{name!r} in globals()")

    def __setitem__(self, name: str, value) -> None:
        payload = base64.b64encode(pickle.dumps(value)).decode()
        self._kernel.quietly(f"import pickle as _p, base64 as _b\n"
                             f"{name} = _p.loads(_b.b64decode({payload!r}))\ndel _p, _b")

    def pop(self, name: str, default=None):
        value = self.get(name, default)
        self._kernel.quietly(f"globals().pop({name!r}, None)")
        return value


class Kernel:
    """One ipykernel (the ``python3`` kernel of this Python), ``%load_ext mlp_magic`` run in it.
    ``env``: variables set for it beside this process's."""

    def __init__(self, env: dict | None = None, load_ext: bool = True, echo: bool = True):
        from jupyter_client import KernelManager

        self.echo = echo
        self.manager = KernelManager(kernel_name="python3")
        self._pinned = dict(env or {})   # the kernel's own, kept when the test's environment changes
        self._env = {**os.environ, **self._pinned}
        self._cwd = os.getcwd()
        self.manager.start_kernel(env=self._env, cwd=self._cwd)
        self.client = self.manager.client()
        self.client.start_channels()
        self.client.wait_for_ready(timeout=60)
        self.pid = self.manager.provisioner.process.pid
        self.user_ns = Namespace(self)
        self.stray: list = []   # iopub messages of no cell of ours (a thread's print between cells)
        self._in_use = threading.Lock()   # one request at a time: a kernel runs one cell at a time
        self._unfinished: str | None = None   # a cell given up on (a test's timeout) still running
        # tests.kernel importable there for ``call``, its environment left as the test's (the
        # engines inherit it)
        self.quietly(f"import sys as _s; _s.path.append({ROOT!r}); del _s")
        if load_ext:
            self.quietly("%load_ext mlp_magic")

    # -- cells ------------------------------------------------------------------------------------

    def run_cell(self, code: str, timeout: float = 600, silent: bool = False,
                 echo: bool | None = None) -> CellRun:
        """Run one cell; return when the kernel is idle again (its reply and its iopub closed)."""
        return self._request(code, timeout, echo, silent=silent, store_history=not silent)

    def run_line_magic(self, name: str, line: str = "") -> CellRun:
        return self.run_cell(f"%{name} {line}")

    def run_cell_magic(self, name: str, line: str, cell: str) -> CellRun:
        return self.run_cell(f"%%{name} {line}\n{cell}")

    def _request(self, code: str, timeout: float, echo: bool | None, **options) -> CellRun:
        """One execute request, sent again while the kernel answers "aborted": ipykernel aborts
        what reaches it in the moment after a failed cell (its stop-on-error window, which it
        closes on its loop's next turn); a user's next cell comes later, this harness's at once
        (seen with ipykernel 6.23: a cell after a refused one never ran, and passed)."""
        self._hold()
        try:
            for _ in range(5):
                run = self._collect(self._execute(code, **options), timeout, echo)
                if run.status != "aborted":
                    return run
                time.sleep(0.2)
            raise AssertionError(f"the kernel aborted {code[:80]!r} five times (stop on error)")
        finally:
            self._in_use.release()

    def send(self, code: str) -> str:
        """Start a cell and return at once; ``wait(msg_id)`` collects it (the kernel is this
        test's cell's until then). Sent past the stop-on-error window (see ``_request``)."""
        self._request("", 30, False, silent=True, store_history=False)   # the window is closed then
        self._hold()
        return self._execute(code)

    def wait(self, msg_id: str, timeout: float = 600) -> CellRun:
        try:
            run = self._collect(msg_id, timeout)
        finally:
            self._in_use.release()
        assert run.status != "aborted", "the kernel aborted the cell sent (stop on error): it never ran"
        return run

    def interrupt(self) -> None:
        """What a frontend's stop button does: the kernel's interrupt (SIGINT to its process)."""
        self.manager.interrupt_kernel()

    def interrupt_after(self, seconds: float) -> threading.Timer:
        timer = threading.Timer(seconds, self.interrupt)
        timer.start()
        return timer

    def quietly(self, code: str, timeout: float = 120) -> CellRun:
        """Run code that is the test's, not the user's (no history, nothing echoed); raise its error."""
        run = self.run_cell(code, timeout=timeout, silent=True, echo=False)
        if run.error_in_exec is not None:
            raise run.error_in_exec
        return run

    # -- values -----------------------------------------------------------------------------------

    def eval(self, expression: str, timeout: float = 120):
        """The value of ``expression`` in the kernel's namespace, brought back by pickle."""
        return self.call(_evaluate, expression, timeout=timeout)

    def call(self, function, *args, timeout: float = 120, **kwargs):
        """``function(*args, **kwargs)`` run in the kernel (a module-level function: pickled by
        name), its value brought back by pickle; its error raised here."""
        payload = base64.b64encode(pickle.dumps((function, args, kwargs))).decode()
        expression = f"__import__('tests.kernel').kernel._in_kernel({payload!r})"
        run = self._request("", timeout, None, silent=True, store_history=False,
                            user_expressions={"r": expression})
        found = run.reply["user_expressions"]["r"]
        if found["status"] != "ok":
            raise _error_of(found["ename"], found["evalue"], found.get("traceback", []))
        ok, value = pickle.loads(base64.b64decode(ast.literal_eval(found["data"]["text/plain"])))
        if not ok:
            raise value
        return value

    # -- the kernel's life ------------------------------------------------------------------------

    def alive(self) -> bool:
        return self.manager.is_alive()

    def shutdown(self) -> None:
        try:
            self.client.stop_channels()
        finally:
            if self.manager.has_kernel:
                self.manager.shutdown_kernel(now=False)

    # -- inside ---------------------------------------------------------------------------------------

    def _follow_the_tests_environment(self) -> None:
        """The kernel's os.environ and working directory made this process's (a test's
        ``monkeypatch.setenv``/``chdir``), with one silent request when they changed."""
        now, cwd = {**os.environ, **self._pinned}, os.getcwd()
        changed = {k: v for k, v in now.items() if self._env.get(k) != v}
        gone = [k for k in self._env if k not in now]
        if not changed and not gone and cwd == self._cwd:
            return
        code = (f"import os as _o\n_o.environ.update({changed!r})\n"
                f"[_o.environ.pop(k, None) for k in {gone!r}]\n_o.chdir({cwd!r})\ndel _o")
        self._env, self._cwd = now, cwd
        self._drain()
        sent = self.client.execute(code, silent=True, store_history=False, allow_stdin=False)
        self._collect(sent, 60, echo=False)

    def _drain(self) -> None:
        """Messages that came between cells (a thread's print): kept in ``stray``, echoed."""
        while True:
            try:
                message = self.client.get_iopub_msg(timeout=0)
            except queue.Empty:
                return
            self.stray.append(message)
            CellRun().take(message, self.echo)

    def _hold(self) -> None:
        if not self._in_use.acquire(blocking=False):
            raise AssertionError("the kernel is busy with another request of this test (a cell runs): "
                                 "read what the panel reads (a World's record: worlds.RemoteWorld.state)")

    def _execute(self, code: str, **options) -> str:
        self._end_the_unfinished()
        self._follow_the_tests_environment()
        self._drain()
        return self.client.execute(code, allow_stdin=False, **options)

    def _end_the_unfinished(self) -> None:
        """A cell given up on (pytest's timeout raised while it ran) still holds the kernel: the
        next one (a test's ``finally: %mpirun --stop``) would wait behind it. Interrupted first,
        as a user would, and waited for."""
        msg_id, self._unfinished = self._unfinished, None
        if msg_id is None:
            return
        for _ in range(3):
            self.interrupt()
            try:
                self._collect(msg_id, 30, echo=False)
            except AssertionError:
                continue
            self._unfinished = None
            return
        raise AssertionError("the kernel still runs a cell given up on, after three interrupts")

    def _collect(self, msg_id: str, timeout: float, echo: bool | None = None) -> CellRun:
        try:
            return self._collect_until_idle(msg_id, timeout, echo)
        except BaseException:
            if self.alive():
                self._unfinished = msg_id
            raise

    def _collect_until_idle(self, msg_id: str, timeout: float, echo: bool | None) -> CellRun:
        echo = self.echo if echo is None else echo
        run, deadline, idle = CellRun(), time.monotonic() + timeout, False
        run.reply = None
        while not idle or run.reply is None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"the kernel did not finish the cell within {timeout} s: "
                                     f"{run.shown[-3000:]}")
            if not idle:
                idle = self._next_iopub(msg_id, run, min(left, 1.0), echo)
            else:
                self._next_reply(msg_id, run, min(left, 1.0))
            if not self.alive():
                raise KernelDied(f"the kernel died: {run.shown[-3000:]}")
        return run

    def _next_iopub(self, msg_id: str, run: CellRun, wait: float, echo: bool) -> bool:
        try:
            message = self.client.get_iopub_msg(timeout=wait)
        except queue.Empty:
            if run.reply is None:
                self._next_reply(msg_id, run, 0)
            return False
        if message["parent_header"].get("msg_id") != msg_id:
            self.stray.append(message)
            CellRun().take(message, self.echo)
            return False
        if message["msg_type"] == "status":
            return message["content"]["execution_state"] == "idle"
        run.take(message, echo)
        return False

    def _next_reply(self, msg_id: str, run: CellRun, wait: float) -> None:
        try:
            reply = self.client.get_shell_msg(timeout=wait)
        except queue.Empty:
            return
        if reply["parent_header"].get("msg_id") != msg_id:
            return
        content = reply["content"]
        run.reply, run.status = content, content["status"]
        run.execution_count = content.get("execution_count")
        if content["status"] == "error":
            run.error_in_exec = _error_of(content["ename"], content["evalue"], content.get("traceback", []))


def failed_ranks() -> dict:
    """In the kernel: {rank: "<status>: <last line>"} of the last cell's Failure (a RankFailure's
    results), {} for any other error."""
    import sys

    result = getattr(getattr(sys, "last_value", None), "result", None)
    said = {}
    for rank in result or ():   # RankResult records
        lines = [line for line in (rank.error or "").splitlines() if line.strip()]
        said[str(rank.rank)] = f"{rank.status}: {lines[-1] if lines else ''}"
    return said


def _evaluate(expression: str):
    """In the kernel: ``expression`` in the user's namespace."""
    from IPython import get_ipython

    return eval(expression, get_ipython().user_ns)


def _in_kernel(payload: str) -> str:
    """In the kernel: run a pickled call, pickle back (True, its value) or (False, its error)."""
    function, args, kwargs = pickle.loads(base64.b64decode(payload))
    try:
        outcome = (True, function(*args, **kwargs))
    except BaseException as error:   # brought back to the test, never lost in the kernel
        outcome = (False, error)
    try:
        return base64.b64encode(pickle.dumps(outcome)).decode()
    except Exception as why:
        refused = TypeError(f"cannot bring back {outcome[1]!r}: {why}")
        return base64.b64encode(pickle.dumps((False, refused))).decode()

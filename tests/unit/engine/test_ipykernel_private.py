"""The contract with the installed ipykernel (engine/ipykernel_private): each private name we use
exists with the shape we call it with, and on a real OutStream watching a real fd the takeover
gets every byte; where a name is gone, the engine keeps ipykernel's own behaviour and says what
it lacked. An upgrade that breaks one fails here, loudly, before any World loses output."""
from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
from types import SimpleNamespace

from mlp_magic.engine import ipykernel_private
from mlp_magic.engine.ipykernel_private import KERNEL_HOOKS, kernel_hooks, restore_all
from mlp_magic.engine.quiet import quieten

# what engine/quiet calls each hook with (its wrappers' own signatures)
SIGNATURES = {"_publish_status": ["status", "channel", "parent"],
              "finish_metadata": ["parent", "metadata", "reply_content"],
              "_publish_execute_input": ["code", "parent", "execution_count"],
              "get_parent": ["channel"]}


def test_the_engines_kernel_class_has_every_hook_with_its_parameters():
    from ipyparallel.engine.kernel import IPythonParallelKernel

    assert set(SIGNATURES) == set(KERNEL_HOOKS)
    for name, parameters in SIGNATURES.items():
        hook = getattr(IPythonParallelKernel, name)
        assert list(inspect.signature(hook).parameters)[1:] == parameters, name
    from jupyter_client.session import Session

    send = list(inspect.signature(Session.send).parameters)
    assert send[1:5] == ["stream", "msg_or_type", "content", "parent"]


def test_quieten_then_restore_puts_the_class_methods_back():
    class Kernel:
        def _publish_status(self, status, channel, parent=None): ...
        def finish_metadata(self, parent, metadata, reply_content): ...
        def _publish_execute_input(self, code, parent, execution_count): ...
        def get_parent(self, channel=None): ...

    class Session:
        def send(self, stream, msg_or_type, content=None, parent=None): ...

    kernel = Kernel()
    kernel.session = Session()
    assert quieten(kernel) is True and "_publish_status" in vars(kernel) and "send" in vars(kernel.session)
    assert restore_all() is True
    assert "_publish_status" not in vars(kernel) and "send" not in vars(kernel.session)
    assert restore_all() is False


def test_a_kernel_without_a_hook_is_named_in_what_is_missing(monkeypatch):
    monkeypatch.setattr(ipykernel_private, "_MISSING", {})
    kernel = SimpleNamespace(session=SimpleNamespace(send=print), **{n: print for n in KERNEL_HOOKS[1:]})
    assert kernel_hooks(kernel) is None
    assert ipykernel_private.missing() == {"Kernel._publish_status": "quiet replies (engine/quiet)"}


REAL_STREAM = r"""
import json, os, sys
import zmq
from ipykernel.iostream import IOPubThread, OutStream
from jupyter_client.session import Session
from mlp_magic.engine import fd_watch, ipykernel_private

out = sys.argv[1]
if len(sys.argv) > 2:
    ipykernel_private.FD_PIPE = (*ipykernel_private.FD_PIPE, sys.argv[2])
socket = zmq.Context.instance().socket(zmq.PUB)
socket.bind_to_random_port("tcp://127.0.0.1")
thread = IOPubThread(socket)
thread.start()
stream = OutStream(Session(), thread, "stdout", watchfd=True)
names = ("watch_fd_thread", *ipykernel_private.FD_PIPE[:4])
assert all(getattr(stream, name, None) is not None for name in names)
got = []
watcher = fd_watch.take_over(stream, got.append)
reader_alive = stream.watch_fd_thread.is_alive()
os.write(1, b"below python\n")
drained = watcher.drain() if watcher else None
with open(out, "w") as handle:
    json.dump({"taken": watcher is not None, "got": "".join(got), "drained": drained,
               "ipykernels_reader": reader_alive, "missing": ipykernel_private.missing()}, handle)
os._exit(0)
"""


def _on_a_real_stream(tmp_path, *extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    out = tmp_path / "seen.json"
    done = subprocess.run([sys.executable, "-c", REAL_STREAM, str(out), *extra], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(out.read_text())


def test_the_fd_reader_of_a_real_outstream_is_taken_over_and_drained(tmp_path):
    seen = _on_a_real_stream(tmp_path)
    assert seen == {"taken": True, "got": "below python\n", "drained": True, "ipykernels_reader": False,
                    "missing": {}}


def test_an_outstream_without_a_name_keeps_ipykernels_own_reader(tmp_path):
    seen = _on_a_real_stream(tmp_path, "_fid_v2")
    assert seen["taken"] is False and seen["ipykernels_reader"] is True
    assert seen["missing"] == {"OutStream._fid_v2": "fd 1/2 output drained at its cell's end "
                                                    "(engine/fd_watch)"}


def test_the_execute_handler_and_stop_on_error_are_where_run_every_cell_looks():
    """The contract: the kernel keeps its shell handlers in a dict filled at construction, calls
    them as (stream, idents, msg), and its execute handler reads ``stop_on_error`` (true unless
    the request says otherwise) to abort what is queued behind a failure."""
    from ipykernel.kernelbase import Kernel

    table, name = ipykernel_private.EXECUTE_HANDLER
    assert f"self.{table} = {{}}" in inspect.getsource(Kernel.__init__)
    assert name in Kernel.msg_types
    assert list(inspect.signature(Kernel.execute_request).parameters)[1:] == ["stream", "ident", "parent"]
    assert 'content.get("stop_on_error", True)' in inspect.getsource(Kernel.execute_request)
    assert f"handler = self.{table}.get(msg_type" in inspect.getsource(Kernel.dispatch_shell)


def test_every_execute_request_is_handled_without_stop_on_error_unless_it_says(monkeypatch):
    monkeypatch.setattr(ipykernel_private, "_MISSING", {})
    seen = []
    kernel = SimpleNamespace(shell_handlers={"execute_request": lambda *args: seen.append(args) or "done",
                                             "kernel_info_request": print})
    assert ipykernel_private.run_every_cell(kernel) is True
    assert ipykernel_private.run_every_cell(kernel) is True            # once: not wrapped twice
    handler = kernel.shell_handlers["execute_request"]
    assert handler("stream", ["id"], {"content": {"code": "1/0"}}) == "done"
    assert handler("stream", ["id"], {"content": {"code": "x", "stop_on_error": True}}) == "done"
    assert [args[2]["content"].get("stop_on_error") for args in seen] == [False, True]
    assert seen[0][:2] == ("stream", ["id"]) and kernel.shell_handlers["kernel_info_request"] is print
    assert ipykernel_private.missing() == {}


def test_a_kernel_without_the_handler_table_keeps_its_ways_and_says_so(monkeypatch):
    monkeypatch.setattr(ipykernel_private, "_MISSING", {})
    for kernel in (SimpleNamespace(), SimpleNamespace(shell_handlers={}), SimpleNamespace(shell_handlers=[])):
        assert ipykernel_private.run_every_cell(kernel) is False
    assert list(ipykernel_private.missing()) == ["Kernel.shell_handlers['execute_request']"]


def test_the_kernel_serves_our_control_handler_and_awaits_it():
    """breakpoints: a stopped rank's commands come on the control channel, to a handler of ours in
    the kernel's table, which may be a coroutine (it waits for pdb's answer without holding the
    control thread)."""
    from ipyparallel.engine.kernel import IPythonParallelKernel

    source = inspect.getsource(IPythonParallelKernel.process_control)
    assert "control_handlers" in source and "isawaitable" in source
    kernel = SimpleNamespace(control_handlers={})
    assert ipykernel_private.add_control_handler(kernel, "mlp_x", print) is True
    assert kernel.control_handlers == {"mlp_x": print}
    assert ipykernel_private.add_control_handler(SimpleNamespace(), "mlp_x", print) is False
    assert "Kernel.control_handlers" in ipykernel_private.missing()
    asked = SimpleNamespace(get_parent=lambda channel: {"channel": channel})
    assert ipykernel_private.shell_parent(asked) == {"channel": "shell"}
    assert ipykernel_private.shell_parent(SimpleNamespace()) is None
    assert "Kernel.get_parent" in ipykernel_private.missing()


def test_pdb_has_what_the_rank_debugger_overrides_and_calls():
    import bdb
    import pdb

    for name, parameters in {"interaction": ["frame", "traceback"], "get_stack": ["f", "t"],
                             "stop_here": ["frame"], "break_here": ["frame"], "break_anywhere": ["frame"],
                             "user_call": ["frame", "argument_list"],
                             "user_return": ["frame", "return_value"],
                             "set_continue": [], "format_stack_entry": ["frame_lineno", "lprefix"]}.items():
        assert list(inspect.signature(getattr(pdb.Pdb, name)).parameters)[1:] == parameters, name
    assert "curframe_locals" in inspect.getsource(pdb.Pdb.setup)
    assert list(inspect.signature(bdb.Bdb._set_stopinfo).parameters)[1:4] == ["stopframe", "returnframe",
                                                                              "stoplineno"]

"""%mlp_cluster is live (issue 34): in a real ipykernel, its kernel thread sends the ranks' states
on iopub while another cell runs (busy), and after it (idle); the thread ends with the view, and
with the World."""
from __future__ import annotations

import json
import time

import pytest

from tests.timing import hang_bound

pytestmark = pytest.mark.timeout(300)
SLEEP_S = 4


@pytest.fixture
def kernel():
    from jupyter_client.manager import start_new_kernel

    manager, client = start_new_kernel(kernel_name="python3", startup_timeout=hang_bound(60))
    try:
        yield client
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=False)   # the kernel's exit stops its World


def execute(client, code: str, seconds: float = 120) -> list:
    """Run ``code``; every iopub message of it and after it up to its idle, each with its arrival."""
    msg_id = client.execute(code)
    deadline, seen = time.monotonic() + hang_bound(seconds), []
    while time.monotonic() < deadline:
        msg = client.get_iopub_msg(timeout=max(0.1, deadline - time.monotonic()))
        seen.append((time.monotonic(), msg))
        if msg["msg_type"] == "error" and msg["parent_header"].get("msg_id") == msg_id:
            raise AssertionError("\n".join(msg["content"]["traceback"]))
        if (msg["msg_type"] == "status" and msg["parent_header"].get("msg_id") == msg_id
                and msg["content"]["execution_state"] == "idle"):
            return seen
    raise AssertionError("no end of %r within %s s" % (code, seconds))


def drain(client, seconds: float) -> list:
    """The iopub messages that come within ``seconds`` (the live thread's, between cells)."""
    deadline, seen = time.monotonic() + seconds, []
    while (left := deadline - time.monotonic()) > 0:
        try:
            seen.append((time.monotonic(), client.get_iopub_msg(timeout=left)))
        except Exception:   # queue.Empty: nothing more came
            break
    return seen


def rank_updates(seen: list, comm_ids: set) -> list:
    """(arrival, HTML) of each update of the rank-line widgets."""
    return [(at, msg["content"]["data"]["state"]["value"]) for at, msg in seen
            if msg["msg_type"] == "comm_msg" and msg["content"]["comm_id"] in comm_ids
            and msg["content"]["data"].get("method") == "update"
            and "value" in msg["content"]["data"]["state"]]


def printed(seen: list) -> str:
    return "".join(m["content"]["text"] for _, m in seen if m["msg_type"] == "stream")


def test_the_widget_shows_busy_while_a_cell_runs_and_idle_after(kernel):
    execute(kernel, "%load_ext mlp_magic")
    # What makes a trait set from a thread safe: ipykernel's iopub socket queues every message to
    # its own IO thread (a plain zmq socket used from two threads would corrupt its frames).
    socket = printed(execute(kernel, "print(type(get_ipython().kernel.iopub_socket).__name__)")).strip()
    assert socket == "BackgroundSocket"
    execute(kernel, "%%mpirun -np 4\npass", seconds=180)
    shown = execute(kernel, "view = %mlp_cluster --no-probe\nview")
    opened = {m["content"]["comm_id"]: m["content"]["data"]["state"] for _, m in shown
              if m["msg_type"] == "comm_open"}
    lines = {cid for cid, state in opened.items() if "mlp-rank-line" in str(state.get("value", ""))}
    assert lines, "no rank-line widget among %d comms" % len(opened)
    result = next(m for _, m in shown if m["msg_type"] == "execute_result")
    text = result["content"]["data"]["text/plain"]
    assert "ranks (live):" in text and "4 idle 0-3" in text
    assert text.rstrip("\n").splitlines()[-1].startswith(("dashboard: http", "no dashboard running"))
    assert "application/vnd.jupyter.widget-view+json" in result["content"]["data"]

    started = time.monotonic()
    during = execute(kernel, "%%%%mpirun --ranks 1\nimport time\ntime.sleep(%d)" % SLEEP_S, seconds=120)
    ended = during[-1][0]
    assert ended - started >= SLEEP_S
    busy = [at for at, value in rank_updates(during, lines) if "1 busy" in value and at < ended - 1.0]
    assert busy, "no busy state on iopub while the cell ran: %s" % rank_updates(during, lines)
    after = drain(kernel, 3.0)
    assert any("4 idle" in value for _, value in rank_updates(during + after, lines)
               if _ > busy[0])
    quiet = drain(kernel, 3.0)   # nothing changes: the thread sends nothing
    comm_bytes = sum(len(json.dumps(m, default=str)) for _, m in quiet if m["msg_type"] == "comm_msg")
    assert comm_bytes < 50_000 * 3
    print("4 ranks, nothing changing: %d bytes/s of comm_msg" % (comm_bytes / 3))
    cell_bytes = sum(len(json.dumps(m, default=str)) for _, m in during if m["msg_type"] == "comm_msg")
    print("4 ranks, a %d s cell: %d bytes of comm_msg in all" % (SLEEP_S, cell_bytes))

    names = "[t.name for t in __import__('threading').enumerate() if t.name.startswith('mlp-cluster-live')]"
    assert "mlp-cluster-live" in printed(execute(kernel, "print(%s)" % names))
    assert printed(execute(kernel, "view.close()\nprint(%s)" % names)).strip() == "[]"

    # A view of a World that stops: its thread draws the ranks dead and ends.
    execute(kernel, "view = %mlp_cluster --no-probe\nview")
    stopping = execute(kernel, "%%mpirun --stop\nimport time\ntime.sleep(2.5)\nprint(%s)" % names, seconds=60)
    assert printed(stopping).strip().splitlines()[-1] == "[]"
    assert any("dead" in str(m["content"]["data"].get("state", {}).get("value", ""))
               for _, m in stopping if m["msg_type"] == "comm_msg")

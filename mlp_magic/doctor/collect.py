"""Ask every host for its facts at once, under one deadline (fanout/hosts): over ssh, through a
live World's engines when one covers the hosts, and this machine in a process of its own.

Each host runs ``doctor/probe`` (its source handed to ``python -c``: nothing of ours needs to be
installed there) with its own deadline, a share of ours. What comes back is ``(facts, failures,
windows)``: {host: the probe's dict} of the hosts that answered, {host: why not} of the others
(``core/results.why_no_answer``: "unreachable: ...", "timeout: ...", "exit N: ..."), and
{host: (epoch sent, epoch answered)} for the clock check.
"""
from __future__ import annotations

import json
import os
import shlex
import sys
import time
from collections.abc import Iterable, Mapping

from mlp_magic.core.results import why_no_answer
from mlp_magic.doctor.pure.answer import answer_problem
from mlp_magic.errors import MlpMagicError
from mlp_magic.fanout.hosts import host_names, start
from mlp_magic.fanout.transports import Engines, Shell

PROBE_SHARE = 0.7       # of the deadline, for the probe's own work; the rest is ssh and start-up
CONNECT_SECONDS = 5.0
AT_ONCE = 256           # hosts asked at once (as stacks): a job's 64 hosts all start together
MAX_ANSWER_BYTES = 4 << 20
_PROBE_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "probe.py")


def probe_source() -> str:
    with open(_PROBE_PATH, encoding="utf-8") as handle:
        return handle.read()


def probe_command(options, workdir: str | None = None) -> str:
    """The shell command every host runs: the probe's source under the host's Python."""
    args = ["--timeout", "%g" % (options.timeout * PROBE_SHARE), "--workdir", workdir or os.getcwd()]
    for name in options.packages:
        args += ["--package", name]
    if options.no_import:
        args.append("--no-import")
    return shlex.join([options.python or sys.executable, "-c", probe_source(), *args])


def parse_answer(text: str):
    """The probe's JSON (its last line that is one: a login script may print first), or a str: why not."""
    for line in reversed((text or "").strip().splitlines()):
        if line.startswith("{"):
            try:
                data = json.loads(line)
            except (ValueError, RecursionError) as error:   # RecursionError: nested too deeply
                return f"bad answer: {error} (it starts {line[:60]!r})"
            if not isinstance(data, dict) or "probe" not in data:
                return "bad answer: not the probe's"
            problem = answer_problem(data)   # Infinity, 10**400, a list for a text: the checks' tracebacks
            return data if problem is None else f"bad answer: {problem}"
        if line.strip():
            break
    return f"bad answer: no JSON in {(text or '').strip()[:60]!r}"


class Answers:
    """What came back, sorted into facts, failures and windows."""

    def __init__(self, timeout: float):
        self.timeout = timeout
        self.facts, self.failures, self.windows = {}, {}, {}

    def add(self, results: Iterable, sent: float) -> None:
        for result in results:
            why = why_no_answer(result, self.timeout)
            answer = parse_answer(result.stdout) if why is None else why
            if isinstance(answer, dict):
                self.facts[result.host] = answer
                self.windows[result.host] = (sent, sent + (result.seconds or self.timeout) + 0.05)
            else:
                self.failures[result.host] = answer


def _transports(options, env, transport) -> tuple:
    """(to the other hosts, to this machine): a live World's engines to all of them, one call, if
    it covers them; else ssh, and this machine's own shell (a process of its own: the probe's
    imports never touch the caller's)."""
    if transport is not None:
        engines = Engines(transport)
        return engines, engines
    try:
        there = Shell(options.ssh, env, connect_timeout=CONNECT_SECONDS, at_once=AT_ONCE,
                      max_bytes=MAX_ANSWER_BYTES)
    except MlpMagicError as err:
        raise MlpMagicError(f"doctor {err}") from None
    return there, Shell(local=True, at_once=1, max_bytes=MAX_ANSWER_BYTES)


def collect(hosts: Iterable, options, env: Mapping | None = None, transport_for=None):
    """(hosts asked, Answers) for every host (names or topology Hosts); this machine once, under
    the first of its names. ``transport_for(names)``: allrun's transport through a live World
    that covers those hosts, or None (then ssh)."""
    deadline = time.monotonic() + options.timeout + 1.0
    hosts = list(hosts)
    transport = transport_for(host_names(hosts)) if transport_for else None
    there, here = _transports(options, env, transport)
    answers, sent = Answers(options.timeout), time.time()
    fan = start(hosts, probe_command(options), timeout=options.timeout, there=there, here=here)
    answers.add(fan.finish(deadline).values(), sent)
    return fan.asked, answers

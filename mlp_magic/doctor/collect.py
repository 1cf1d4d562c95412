"""Ask every host for its facts at once, under one deadline: over ssh (the allrun transport), through
a live World's engines when one covers the hosts, and this machine in a process of its own.

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

from mlp_magic import config
from mlp_magic.machine.names import stays_here, this_machine_names
from mlp_magic.core.results import why_no_answer
from mlp_magic.doctor.pure.answer import answer_problem
from mlp_magic.errors import MlpMagicError
from mlp_magic.ssh.underway import Underway, finish_all, follow_in_background

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

    def add(self, results: Iterable, sent: float) -> dict:
        for result in results:
            why = why_no_answer(result, self.timeout)
            answer = parse_answer(result.stdout) if why is None else why
            if isinstance(answer, dict):
                self.facts[result.host] = answer
                self.windows[result.host] = (sent, sent + (result.seconds or self.timeout) + 0.05)
            else:
                self.failures[result.host] = answer
        return {}


def _start_runner(targets: list, command: str, options, env, local: bool,
                  answers: Answers) -> Underway:
    from mlp_magic.ssh.spawn import Launch

    names, sent = [t.name for t in targets], time.time()
    try:
        launch = Launch(targets, command, ssh=config.ssh_command(options.ssh, env),
                        connect_timeout=min(CONNECT_SECONDS, options.timeout), local=local)
    except MlpMagicError as err:
        raise MlpMagicError(f"doctor {err}") from None
    runner, pending = follow_in_background(launch, timeout=options.timeout, max_bytes=MAX_ANSWER_BYTES,
                                           at_once=AT_ONCE, name="mlp-doctor")

    def finish(deadline: float) -> dict:
        pending.wait(deadline)
        if pending.error is not None:
            answers.failures.update({name: f"transport: {pending.error}" for name in names})
            return {}
        return answers.add(list(runner.results), sent)

    return Underway(finish, pending.stop)


def _start_via(names: list, command: str, options, transport, answers: Answers) -> Underway:
    """Through a live World's engines (one per host, no ssh): runs when the caller finishes."""
    def finish(deadline: float) -> dict:
        sent = time.time()
        return answers.add(transport(names, command, max(0.5, deadline - time.monotonic()), None), sent)

    return Underway(finish)


def collect(hosts: Iterable, options, env: Mapping | None = None, transport_for=None):
    """(hosts asked, Answers) for every host (names or topology Hosts); this machine once, under
    the first of its names. ``transport_for(names)``: allrun's transport through a live World
    that covers those hosts, or None (then ssh)."""
    from mlp_magic.ssh.argv import as_targets

    deadline = time.monotonic() + options.timeout + 1.0
    targets = as_targets(list(hosts))
    names = this_machine_names()
    local = [t for t in targets if stays_here(t.name, t.port, names)]
    remote = [t for t in targets if not stays_here(t.name, t.port, names)]
    transport = transport_for([t.name for t in targets]) if transport_for else None
    command, answers = probe_command(options), Answers(options.timeout)
    starts = []
    if transport is not None:   # the World reaches every host, this machine's too
        starts.append(lambda: _start_via([t.name for t in remote + local[:1]], command, options, transport,
                                         answers))
    else:
        if remote:
            starts.append(lambda: _start_runner(remote, command, options, env, False, answers))
        if local:
            starts.append(lambda: _start_runner(local[:1], command, options, env, True, answers))
    finish_all(starts, deadline)
    also_here = {t.name for t in local[1:]}
    asked = [t.name for t in targets if t.name not in also_here]
    for name in asked:
        if name not in answers.facts and name not in answers.failures:
            answers.failures[name] = f"timeout: no answer within {options.timeout:g} s"
    return asked, answers

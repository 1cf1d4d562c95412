"""Ask every host at once for its processes' stacks (fanout/hosts): ssh or a live World's engines
for the others, an in-process scan (no ssh, no new Python) for this machine, one deadline for all.

Each remote host runs ``mlp_magic.stacks.scan`` with this Python and this copy of mlp_magic (its
folder first on ``sys.path``: the hosts run the same image, as for the GPU probes),
and prints JSON lines (``stacks/pure/jobs.parse_scan`` reads them). A host that cannot be reached,
times out or answers nonsense becomes a HostScan with its ``error``: listed, never dropped.
"""
from __future__ import annotations

import shlex
import sys
import time
from collections.abc import Iterable, Mapping

from mlp_magic.location import PACKAGE_PARENT
from mlp_magic.core.proc_ranks import STACKS_SCANNER
from mlp_magic.core.results import why_no_answer
from mlp_magic.errors import MlpMagicError
from mlp_magic.fanout.hosts import names_elsewhere, start
from mlp_magic.fanout.transports import Engines, InThisProcess, Shell
from mlp_magic.machine.programs import find_pyspy
from mlp_magic.stacks import scan

# Each py-spy's own limit, as a share of the deadline: a wedged process comes back as that
# process's fault before its host is given up.
DUMP_SHARE = 0.5
CONNECT_SECONDS = 5.0
# Hosts asked at once: every host of a job up to this many (512 ranks are 64 hosts of 8); beyond,
# each further host starts as one ends, inside the same deadline. Thousands of ssh clients at
# once would only fight for this machine's cores and memory.
AT_ONCE = 256
MAX_ANSWER_BYTES = 64 << 20


def scan_command(options, python: str | None = None, pyspy: str | None = None) -> str:
    """The shell command each remote host runs."""
    args = ["--timeout", "%g" % (options.timeout * DUMP_SHARE)]
    if options.pids:
        args += ["--pid", ",".join(str(p) for p in options.pids)]
    if options.match:
        args += ["--match", options.match]
    if options.native:
        args.append("--native")
    if pyspy:
        args += ["--pyspy", pyspy]
    # -I -S: none of the host's PYTHON* settings or site-packages (the scanner needs the standard
    # library and this package only); -c, not -m: runpy's imports cost more than the scan's own.
    start = (f"import sys; sys.path.insert(0, {PACKAGE_PARENT!r}); "
             f"from {STACKS_SCANNER} import main; sys.exit(main())")
    return shlex.join([python or sys.executable, "-I", "-S", "-c", start, *args])


def _scan_here(options) -> InThisProcess:
    """This machine's scan in-process: no ssh, no new Python."""
    dumps = scan.Dumps()

    def answer(name: str) -> str:
        selection = scan.Selection(options.pids, options.match)
        return scan.as_text(scan.scan(selection, options.native, options.timeout * DUMP_SHARE, dumps=dumps))
    return InThisProcess(answer, "local scan", dumps.stop)   # late: its py-spys must not outlive the answer


def _other_hosts(options, env: Mapping | None, transport):
    """The transport to the other hosts: ``transport`` (a live World's engines) if there is one,
    else ssh. Every host's ssh starts at once up to ``AT_ONCE`` (the handshakes overlap the
    rest of the start), beyond that as others end."""
    if transport is not None:
        return Engines(transport)
    try:
        return Shell(options.ssh, env, connect_timeout=CONNECT_SECONDS, at_once=AT_ONCE,
                     max_bytes=MAX_ANSWER_BYTES)
    except MlpMagicError as err:   # no ssh client, or an --ssh that cannot be split
        raise MlpMagicError(f"stacks {err}") from None   # (its message starts with "--ssh:")


def collect(hosts: Iterable, options, env: Mapping | None = None, transport_for=None) -> list:
    """[HostScan] for every host (names, or topology Hosts), in the order given; this machine
    once, under the first of its names given (``-H localhost,$(hostname)``: one scan, not two
    copies of it counting each process twice). ``transport_for(names)``: a transport that reaches
    those hosts without ssh (allrun's signature: ``allrun/via_engines.WorldTransport``), or None."""
    deadline = time.monotonic() + options.timeout + 1.0
    hosts = list(hosts)
    elsewhere = names_elsewhere(hosts)
    transport = transport_for(elsewhere) if elsewhere and transport_for else None
    there = _other_hosts(options, env, transport)
    fan = start(hosts, scan_command(options, pyspy=find_pyspy()), timeout=options.timeout,
                there=there, here=_scan_here(options))
    found = fan.finish(deadline)
    from mlp_magic.stacks.pure.jobs import HostScan, parse_scan   # (its imports ran beside the handshakes)

    scans = []
    for name in fan.asked:
        why = why_no_answer(found[name], options.timeout)
        scans.append(parse_scan(name, found[name].stdout) if why is None else HostScan(name, error=why))
    return scans

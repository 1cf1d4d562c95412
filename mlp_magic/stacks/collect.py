"""Ask every host at once for its processes' stacks: the allrun transport for the others, an
in-process scan (no ssh, no new Python) for this machine, one deadline for all.

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

from mlp_magic import config
from mlp_magic.location import PACKAGE_PARENT
from mlp_magic.machine.deadline import in_background
from mlp_magic.machine.names import stays_here, this_machine_names
from mlp_magic.core.proc_ranks import STACKS_SCANNER
from mlp_magic.core.results import why_no_answer
from mlp_magic.errors import MlpMagicError
from mlp_magic.ssh.underway import Underway, finish_all, follow_in_background
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


def _start_local(names: list, options) -> Underway:
    selection, dumps = scan.Selection(options.pids, options.match), scan.Dumps()
    pending = in_background(lambda: scan.scan(selection, options.native, options.timeout * DUMP_SHARE,
                                              dumps=dumps), "mlp-stacks-local")

    def finish(deadline: float) -> dict:
        from mlp_magic.stacks.pure.jobs import HostScan, scan_from_lines

        lines = pending.result(deadline)
        if lines is None:
            dumps.stop()   # late: its py-spys must not outlive the answer
            why = (f"local scan: {pending.error!r}" if pending.error is not None
                   else f"timeout: no answer within {options.timeout:g} s")
            return {names[0]: HostScan(names[0], error=why)}
        return {names[0]: scan_from_lines(names[0], lines)}

    return Underway(finish, dumps.stop)


def _start_remote(targets: list, options, env: Mapping | None) -> Underway:
    """Every host's ssh starts now (before asyncio and the runner are imported, as the allrun
    command does: the handshakes overlap the rest of the start); the runner follows them. Over
    ``AT_ONCE`` hosts, the runner starts them, that many at a time."""
    from mlp_magic.ssh.spawn import Launch

    names = [t.name for t in targets]
    command = scan_command(options, pyspy=scan.find_pyspy())
    connect = min(CONNECT_SECONDS, options.timeout)
    try:
        launch = Launch(targets, command, ssh=config.ssh_command(options.ssh, env), connect_timeout=connect,
                        local=False)
    except MlpMagicError as err:   # no ssh client, or an --ssh that cannot be split
        raise MlpMagicError(f"stacks {err}") from None   # (its message starts with "--ssh:")
    runner, pending = follow_in_background(launch, timeout=options.timeout, max_bytes=MAX_ANSWER_BYTES,
                                           at_once=AT_ONCE, name="mlp-stacks-ssh")

    def finish(deadline: float) -> dict:
        from mlp_magic.stacks.pure.jobs import HostScan

        pending.wait(deadline)   # the late hosts are stopped meanwhile: their results say "interrupted"
        if pending.error is not None:
            return {name: HostScan(name, error=f"ssh transport: {pending.error}") for name in names}
        return _scans_of(list(runner.results), options)

    return Underway(finish, pending.stop)


def _start_via(targets: list, options, transport) -> Underway:
    """Through ``transport`` (a live World's engines, one per host: no ssh, a message round trip);
    it runs when the caller finishes, after this machine's own scan started."""
    command = scan_command(options, pyspy=scan.find_pyspy())

    def finish(deadline: float) -> dict:
        return _scans_of(transport([t.name for t in targets], command, options.timeout, None), options)

    return Underway(finish)


def _scans_of(results: list, options) -> dict:
    """{host: HostScan} of the hosts' answers (core/results.HostResult): a scan, or why none."""
    from mlp_magic.stacks.pure.jobs import HostScan, parse_scan   # (its imports ran beside the handshakes)

    found = {}
    for result in results:
        why = why_no_answer(result, options.timeout)
        found[result.host] = (parse_scan(result.host, result.stdout) if why is None
                              else HostScan(result.host, error=why))
    return found


def collect(hosts: Iterable, options, env: Mapping | None = None, transport_for=None) -> list:
    """[HostScan] for every host (names, or topology Hosts), in the order given; this machine
    once, under the first of its names given (``-H localhost,$(hostname)``: one scan, not two
    copies of it counting each process twice). ``transport_for(names)``: a transport that reaches
    those hosts without ssh (allrun's signature: ``allrun/via_engines.WorldTransport``), or None."""
    from mlp_magic.ssh.argv import as_targets

    deadline = time.monotonic() + options.timeout + 1.0
    targets = as_targets(list(hosts))
    names = this_machine_names()
    local = [t.name for t in targets if stays_here(t.name, t.port, names)]
    remote = [t for t in targets if not stays_here(t.name, t.port, names)]
    transport = transport_for([t.name for t in remote]) if remote and transport_for else None
    starts = []
    if transport is not None:
        starts.append(lambda: _start_via(remote, options, transport))
    elif remote:
        starts.append(lambda: _start_remote(remote, options, env))
    if local:
        starts.append(lambda: _start_local(local, options))
    found = finish_all(starts, deadline)
    from mlp_magic.stacks.pure.jobs import HostScan

    also_here = set(local[1:])   # this machine's other names: its one scan is under the first
    return [found.get(t.name) or HostScan(t.name, error="no answer")
            for t in targets if t.name not in also_here]

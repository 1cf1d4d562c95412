"""allrun runs nothing anywhere until every host name is known good.

A typo in a host list must run nothing on the other hosts, without a look-up process per host
in the usual case. ``Gate``: commands wait for its "go" while the handshakes run; a host is good
once the local resolver knows the name ssh will look up for it (read from the ssh configuration,
``config.hostname_for``), once its ssh connected, or once ssh failed for another reason than name
resolution; hosts still undecided after ``VERIFY_AFTER`` seconds are checked with ``ssh -G`` and
the resolver (``check_names``), which is also the check run before a --copy.
"""
from __future__ import annotations

import asyncio
import functools
import glob
import os
import re
import socket
import threading
from collections.abc import Callable

from mlp_magic import config as settings
from mlp_magic.errors import MlpMagicError
from mlp_magic.ssh import config
from mlp_magic.ssh.argv import Target, destination, find_program

VERIFY_AFTER = 1.0                # a host neither connected nor failed by then: check its name
_UNRESOLVED = re.compile(r"[Cc]ould not resolve hostname")


class Gate:
    """Commands wait for a "go" until every host name is known good, so that a typo in a host
    list runs nothing anywhere, without a look-up process per host in the usual case.

    A host is good once the local resolver knows the name ssh will look up for it (read from the
    ssh configuration, see ``ssh_config``; usually long before its handshake ends), once its ssh
    connected (the wrapper's marker arrived), or once ssh failed for another reason than name
    resolution. Hosts still undecided after VERIFY_AFTER seconds (a host that does not answer, a
    silent failure) are checked with ``ssh -G`` and the resolver.
    """

    def __init__(self, runner):
        self.runner = runner
        self.pending = set(range(len(runner.targets)))
        self.opened = asyncio.get_running_loop().create_future()
        self._verifier = asyncio.ensure_future(self._verify_later())
        loop = asyncio.get_running_loop()

        def cleared(indices: list) -> None:   # from the look-up thread
            try:
                loop.call_soon_threadsafe(self._clear, indices)
            except RuntimeError:
                pass   # the run is over
        look_up_names_locally(runner.targets, runner.ssh, cleared)

    def connected(self, index: int) -> None:
        self._clear([index])

    def exited(self, index: int, stderr: str) -> None:
        """ssh ended before the wrapper ran: a name it could not resolve refuses the run."""
        found = _UNRESOLVED.search(stderr)
        if found:
            name = self.runner.targets[index].name
            reason = stderr[found.start():].splitlines()[0].strip()
            self._refuse(MlpMagicError(f"unknown host {name!r}: {reason}"))
        elif stderr.strip():
            self._clear([index])  # refused, timed out, denied...: the name itself resolved

    def refusal(self) -> MlpMagicError | None:
        if self.opened.done() and not self.opened.cancelled():
            return self.opened.exception()
        return None

    def close(self) -> None:
        self._verifier.cancel()
        if not self.opened.done():
            self.opened.cancel()

    def _clear(self, indices) -> None:
        self.pending.difference_update(indices)
        if not self.pending and not self.opened.done():
            self.opened.set_result(True)
            self._verifier.cancel()

    def _refuse(self, error: MlpMagicError) -> None:
        if not self.opened.done():
            self.opened.set_exception(error)
        self._verifier.cancel()

    async def _verify_later(self) -> None:
        await asyncio.sleep(min(VERIFY_AFTER, self.runner.connect_timeout))
        undecided = sorted(self.pending)
        runner = self.runner
        try:
            await check_names([runner.targets[i] for i in undecided], runner.ssh, runner.connect_timeout)
        except MlpMagicError as error:
            self._refuse(error)
        else:
            self._clear(undecided)


async def _ssh_config_of(ssh: list[str], target: Target) -> dict:
    """``ssh -G`` of one host, run on the loop (many at once): what ssh's configuration says."""
    proc = await asyncio.create_subprocess_exec(
        *config.ssh_G_argv(ssh, destination(target)), stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate()
    if proc.returncode != 0:
        raise MlpMagicError(f"host {target.name!r}: ssh -G failed: {err.decode(errors='replace').strip()}")
    return config.parse_ssh_G(out.decode(errors="replace"))


def _is_address(name: str) -> bool:
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            socket.inet_pton(family, name.strip("[]"))
            return True
        except OSError:
            pass
    return False


def look_up_names_locally(targets: list, ssh: list[str], report: Callable[[list], None]) -> None:
    """In a daemon thread, ``report(indices)`` the hosts whose name, as the ssh configuration
    maps it, is an address or known to the local resolver (what ssh will do first). Names it
    cannot tell about are left out, never refused: their connection decides."""
    sources = config.config_sources(ssh)
    if sources is None:
        return
    files, options = sources

    def look_up() -> None:
        # Each config file is read, and each Include pattern globbed, once for all hosts.
        read, glob = functools.cache(_read_text), functools.cache(_sorted_glob)
        home = os.path.expanduser("~")
        names = {}
        for index, target in enumerate(targets):
            name = config.hostname_for(target.name, files, options, read=read, glob=glob, home=home)
            if name is not None:
                names[index] = name
        addresses = {index for index, name in names.items() if _is_address(name)}
        if addresses:
            report(sorted(addresses))
        for index, name in names.items():   # the resolver may be slow (DNS): one report each
            if index not in addresses and _resolves(name):
                report([index])

    # A thread of our own, not the loop's executor: asyncio.run would wait for a slow look-up.
    threading.Thread(target=look_up, name="allrun-names", daemon=True).start()


def _read_text(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None


def _sorted_glob(pattern: str) -> list[str]:
    return sorted(glob.glob(pattern))


def _resolves(name: str) -> bool:
    try:
        socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return False
    return True


async def _check_name(ssh: list[str], target: Target, timeout: float) -> None:
    found = await _ssh_config_of(ssh, target)
    hostname = found.get("hostname", target.name)
    if _is_address(hostname) or found.get("proxycommand", "none") != "none" \
            or found.get("proxyjump", "none") != "none":
        return  # nothing to resolve here (or a jump host resolves it)
    loop = asyncio.get_running_loop()
    try:
        await asyncio.wait_for(loop.getaddrinfo(hostname, None), timeout)
    except (OSError, asyncio.TimeoutError) as error:
        why = "no answer" if isinstance(error, asyncio.TimeoutError) else (error.strerror or str(error))
        alias = f" (HostName {hostname!r})" if hostname != target.name else ""
        raise MlpMagicError(f"unknown host {target.name!r}{alias}: cannot resolve it ({why})") from None


async def check_names(targets: list, ssh, timeout: float = 10.0) -> None:
    """Refuse (MlpMagicError) a host name that neither the ssh configuration nor the resolver
    knows; ``ssh -G`` per host (no connection), concurrently."""
    ssh = settings.ssh_command(ssh)
    if find_program(ssh[0]) is None:
        raise MlpMagicError(f"--ssh: cannot find the command {ssh[0]!r}")
    limit = asyncio.Semaphore(32)

    async def one(target):
        async with limit:
            await _check_name(ssh, target, timeout)
    results = await asyncio.gather(*(one(t) for t in targets), return_exceptions=True)
    for result in results:  # the first bad host in input order
        if isinstance(result, BaseException):
            raise result

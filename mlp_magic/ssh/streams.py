"""One host's process on the event loop: its output streams, its end, its input.

``Stream``: one host's stdout or stderr, split in lines for the live display (when one is
shown), kept in memory up to a cap, written whole to ``--outdir``; the remote wrapper's marker
lines (its command's start and end, ``ssh/pure/markers``) are taken out on the way. ``Child``:
a process started by ``launch.Launch``, followed on the running loop (pipes as StreamReaders,
its end through a pidfd: no thread per child).
"""
from __future__ import annotations

import asyncio
import os

from mlp_magic.ssh.pure.markers import cut_end_marker, started_pid
from mlp_magic.ssh.spawn import signal_group

CHUNK = 65536


class Stream:
    """One host's stdout or stderr: live lines out, a capped copy in memory, all to a file."""

    def __init__(self, host: str, name: str, on_output, max_bytes: int, path: str | None,
                 marker: bytes | None = None, end_marker: bytes | None = None):
        self.host, self.name, self.on_output = host, name, on_output
        self.max_bytes, self.marker, self.end_marker = max_bytes, marker, end_marker
        self.kept = bytearray()   # one buffer, not an object per line (floods are many lines)
        self.dropped = 0
        self.partial = b""
        self.held = b""   # what may be the start of the end marker, until the next chunk says
        self.saw_marker = False
        self.remote_pid: int | None = None   # the remote command's process group
        self.started = asyncio.Event()  # set when the marker arrives: the remote command runs
        self.end_status: int | None = None   # the remote command's exit status, once it ended
        self.ended = asyncio.Event()    # set when the end marker arrives
        self.file = open(path, "wb") if path else None

    def feed(self, data: bytes) -> None:
        if self.end_marker is not None and self.end_status is None:
            data, self.held, status = cut_end_marker(self.held + data, self.end_marker)
            if status is not None:
                self.end_status = status
                self.ended.set()
        if data:
            self._take(data)

    def _take(self, data: bytes) -> None:
        if self.on_output is None and (self.marker is None or self.saw_marker):
            # Nothing needs lines (no live display, no marker to find): keep the bytes as
            # they come, so a flood costs no per-line work.
            if self.partial:
                data, self.partial = self.partial + data, b""
            self._keep(data)
            return
        lines = (self.partial + data).split(b"\n")
        self.partial = lines.pop()
        for line in lines:
            self._line(line, b"\n")

    def close(self) -> None:
        if self.held:   # the output ended inside what looked like the end marker: it was output
            held, self.held = self.held, b""
            self._take(held)
        if self.partial:
            self._line(self.partial, b"")
            self.partial = b""
        if self.file:
            self.file.close()
            self.file = None

    def text(self) -> str:
        out = self.kept.decode("utf-8", errors="replace")
        if self.dropped:
            out += f"\n[mlp_magic: {self.dropped} more bytes not kept in memory]\n"
        return out

    def _line(self, line: bytes, end: bytes) -> None:
        if self.marker is not None and not self.saw_marker:
            pid = started_pid(line, self.marker)
            if pid is not None:
                self.saw_marker, self.remote_pid = True, pid
                self.started.set()
                return
        self._keep(line + end)
        if self.on_output is not None:
            self.on_output(self.host, self.name, line.decode("utf-8", errors="replace"))

    def _keep(self, data: bytes) -> None:
        if self.file:
            self.file.write(data)
        room = self.max_bytes - len(self.kept)
        if room > 0:
            self.kept += data[:room]
        self.dropped += max(0, len(data) - max(room, 0))


async def pump(reader: asyncio.StreamReader, stream: Stream) -> None:
    while True:
        data = await reader.read(CHUNK)
        if not data:
            break
        stream.feed(data)
    stream.close()


class Child:
    """A process started by Launch (``spawn.Spawned``), followed on the running loop: its stdout and
    stderr as StreamReaders, its end through a pidfd (no thread per child, unlike asyncio's own
    subprocesses before Python 3.12)."""

    def __init__(self, process):
        self.process, self.pid = process, process.pid
        self.stdout = self.stderr = None
        self.status_lost = False   # reaped by someone else (SIGCHLD ignored, a waitpid(-1) reaper)
        # Whether its remote command runs once the session starts: always, unless its wrapper
        # waits for "go" on stdin (a pipe) and none was written yet.
        self.released = process.stdin is None
        self._transports: list = []

    async def attach(self) -> None:
        self.stdout = await self._reader(self.process.stdout)
        self.stderr = await self._reader(self.process.stderr)

    async def _reader(self, pipe) -> asyncio.StreamReader:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=CHUNK, loop=loop)
        protocol = asyncio.StreamReaderProtocol(reader, loop=loop)
        transport, _ = await loop.connect_read_pipe(lambda: protocol, pipe)
        self._transports.append(transport)
        return reader

    async def wait(self) -> int:
        code = self._reap(os.WNOHANG)
        if code is not None:
            return code
        try:
            pidfd = os.pidfd_open(self.pid)
        except (AttributeError, OSError):   # no pidfd (not Linux, or before 5.3): look now and then
            delay = 0.001
            while (code := self._reap(os.WNOHANG)) is None:
                await asyncio.sleep(delay)
                delay = min(2 * delay, 0.05)
            return code
        loop = asyncio.get_running_loop()
        ended = loop.create_future()
        loop.add_reader(pidfd, lambda: ended.done() or ended.set_result(None))
        try:
            await ended   # readable once the process has ended, reaped or not
        finally:
            loop.remove_reader(pidfd)
            os.close(pidfd)
        return self._reap(0)

    def _reap(self, flags: int) -> int | None:
        """The exit status, or None while it runs. A child that someone else reaped is not a
        success (0); it is 255 here, "status lost", as asyncio's own watchers say."""
        if self.process.returncode is not None:
            return self.process.returncode
        try:
            pid, status = os.waitpid(self.pid, flags)
        except ChildProcessError:
            self.status_lost = True
            self.process.returncode = 255
            return 255
        if pid == 0:
            return None
        self.process.returncode = os.waitstatus_to_exitcode(status)
        return self.process.returncode

    def end_input(self, data: bytes = b"") -> None:
        """Write ``data`` (a few bytes into an empty pipe: never blocks) and close stdin, if open."""
        stdin = self.process.stdin
        if stdin is None or stdin.closed:
            return
        try:
            if data:
                stdin.write(data)
                self.released = True
        except (BrokenPipeError, ConnectionResetError):
            pass  # ssh already exited (e.g. unreachable): its result says so
        finally:
            stdin.close()

    def kill(self) -> None:
        """SIGKILL to its process group (ssh and, say, a ProxyCommand it started)."""
        if self.process.returncode is None:
            signal_group(self.pid, 9)

    def close_pipes(self) -> None:
        """Stop reading (its pipes may be held open by a ControlMaster it started)."""
        for transport in self._transports:
            transport.close()
        self.end_input()
        self._reap(os.WNOHANG)


async def reap_bounded(proc: Child, seconds: float = 1.0) -> None:
    """Reap a child just killed, so that a long-lived kernel keeps no zombie of it."""
    try:
        await asyncio.wait_for(proc.wait(), seconds)
    except asyncio.TimeoutError:
        pass


async def wait_bounded(future: asyncio.Future, seconds: float) -> None:
    try:
        await asyncio.wait_for(asyncio.shield(future), seconds)
    except asyncio.TimeoutError:
        pass

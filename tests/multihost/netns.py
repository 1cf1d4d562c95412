"""A multi-host test bed on one machine: network namespaces, each with its own address and sshd.

Host i is the namespace ``mlpt-w<i>`` with ``eth0`` = 10.77.0.(11+i)/24, a veth whose other end
sits in the bridge ``mlpt-br0`` (10.77.0.1 in the root namespace). Each host runs its own
Debian sshd, started as ``ip netns exec NS unshare --uts sh -c 'hostname workerN; exec sshd -D'``
so ``hostname`` differs per host, listening on that address only, key-only, root by key, with
its config, host key, pid file and log in a private temporary directory. The namespaces have no
default route: nothing but 10.77.0.0/24 is reachable from them. The hosts share this machine's
files, except one folder (``Testbed.local_mount``) where each sees its own, as on a node-local disk.

``ssh -F <testbed.ssh_config> workerN`` reaches host N. Needs root. Only one test bed exists at a
time on a machine (names and addresses are fixed), so ``up`` takes an exclusive lock file and
clears leftovers of an earlier run that was killed before its teardown.
"""
from __future__ import annotations

import fcntl
import os
import shutil
import socket
import subprocess
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass

from netns_cleanup import (  # the bed's teardown, also for beds a killed run left behind
    BED_DIR_PREFIX, BRIDGE, ETC_NETNS, PREFIX, _ip, clear_leftovers, kill_namespace_processes, live_cmdline,
    namespace_pids,
)

SUBNET = "10.77.0"
BRIDGE_ADDR = SUBNET + ".1"
FIRST_HOST_OCTET = 11
MAX_HOSTS = 64
SSHD = "/usr/sbin/sshd"
LOCK_PATH = "/run/lock/mlpt-testbed.lock" if os.path.isdir("/run/lock") else "/tmp/mlpt-testbed.lock"


class TestbedUnavailable(Exception):
    """The machine cannot host the test bed (not root, no ``ip netns``, no sshd)."""


def unavailable_reason() -> str | None:
    """Why the test bed cannot run here, or None when it can."""
    if os.geteuid() != 0:
        return "the multi-host test bed needs root (network namespaces)"
    if shutil.which("ip") is None:
        return "the multi-host test bed needs iproute2's `ip`"
    if not os.path.exists(SSHD):
        return f"the multi-host test bed needs Debian's openssh-server ({SSHD} missing)"
    for tool in ("ssh", "ssh-keygen", "unshare"):
        if shutil.which(tool) is None:
            return f"the multi-host test bed needs `{tool}`"
    probe = PREFIX + "probe"
    made = _ip("netns", "add", probe, check=False)
    _ip("netns", "del", probe, check=False)
    if made.returncode != 0:
        return f"`ip netns add` is not possible here: {made.stderr.strip()}"
    return None


@dataclass
class NamespaceHost:
    index: int
    name: str        # worker<i>: the ssh alias and the host's own hostname
    netns: str
    address: str
    workdir: str     # this host's sshd files
    sshd_pid: int | None = None

    @property
    def home(self) -> str:
        """root's home directory as seen on this host (each host has its own)."""
        return os.path.join(self.workdir, "home")

    @property
    def local(self) -> str:
        """This host's own files at the bed's ``local_mount`` (a node-local disk)."""
        return os.path.join(self.workdir, "local")

    @property
    def veth(self) -> str:
        return f"{PREFIX}v{self.index}"


class Testbed:
    """K namespace hosts with sshd; use as a context manager or call up()/down()."""

    def __init__(self, count: int, lock_wait: float = 240.0):
        if not 1 <= count <= MAX_HOSTS:
            raise ValueError(f"host count must be 1..{MAX_HOSTS}, got {count}")
        self.count = count
        self.lock_wait = lock_wait
        self.workdir = ""          # made by up(), once the lock is held
        self.hosts: list[NamespaceHost] = []
        self._lock_fd: int | None = None

    def _layout(self) -> None:
        self.workdir = tempfile.mkdtemp(prefix=os.path.basename(BED_DIR_PREFIX))
        self.ssh_config = os.path.join(self.workdir, "ssh_config")
        self.identity = os.path.join(self.workdir, "id_ed25519")
        self.known_hosts = os.path.join(self.workdir, "known_hosts")
        self.control_dir = os.path.join(self.workdir, "cm")
        self.hosts = [
            NamespaceHost(i, f"worker{i}", f"{PREFIX}w{i}", f"{SUBNET}.{FIRST_HOST_OCTET + i}",
                          os.path.join(self.workdir, f"worker{i}"))
            for i in range(self.count)
        ]

    # ------------------------------------------------------------------ public API

    def __enter__(self) -> "Testbed":
        self.up()
        return self

    def __exit__(self, *exc) -> None:
        self.down()

    @property
    def local_mount(self) -> str:
        """One path that shows each host its own files (``NamespaceHost.local``), as a node-local
        disk does; empty here, in the root namespace."""
        return os.path.join(self.workdir, "local")

    def host_names(self) -> list[str]:
        return [h.name for h in self.hosts]

    def ssh_command(self) -> list[str]:
        """The ssh client command line the tests hand to the project (``--ssh``)."""
        return ["ssh", "-F", self.ssh_config]

    def env(self) -> dict:
        """Environment for commands under test: a private ssh ControlPath directory."""
        return {"MLP_MAGIC_SSH_CONTROL_DIR": self.control_dir}

    def write_hostfile(self, path: str, slots: int = 1, use_addresses: bool = False) -> str:
        """An OpenMPI-style hostfile naming the hosts (aliases, or their addresses)."""
        with open(path, "w") as handle:
            for host in self.hosts:
                handle.write(f"{host.address if use_addresses else host.name} slots={slots}\n")
        return path

    def up(self) -> None:
        reason = unavailable_reason()
        if reason:
            raise TestbedUnavailable(reason)
        self._take_lock()
        try:
            clear_leftovers()
            self._layout()
            os.makedirs(self.control_dir, mode=0o700, exist_ok=True)
            self._make_client_files()
            self._make_network()
            for host in self.hosts:
                self._make_sshd_files(host)
                self.start_sshd(host.index)
        except BaseException:
            self.down()
            raise

    def down(self) -> None:
        """Tear everything down; safe to call twice and after a partial ``up``."""
        if self._lock_fd is None:
            return  # not ours: another process's bed may be up
        try:
            if self.workdir:
                self.close_ssh_masters()
            for host in self.hosts:
                kill_namespace_processes(host.netns)
                host.sshd_pid = None
            clear_leftovers()
        finally:
            self.workdir = ""
            self._release_lock()

    def release(self) -> None:
        """Leave the bed up for someone else to use (``scripts/testbed.py up``): drop the lock."""
        self._release_lock()

    @contextmanager
    def host_down(self, index: int):
        """``with bed.host_down(2): ...``: host 2's sshd is stopped inside, restarted after."""
        self.stop_sshd(index)
        try:
            yield self.hosts[index]
        finally:
            self.start_sshd(index)

    @contextmanager
    def host_blackholed(self, index: int):
        """``with bed.host_blackholed(3): ...``: packets to host 3 vanish inside (link down)."""
        self.set_link(index, up=False)
        try:
            yield self.hosts[index]
        finally:
            self.set_link(index, up=True)

    def stop_sshd(self, index: int) -> None:
        """Take host ``index`` down: its sshd and every session it holds (so reused ssh
        connections die too); the address stays up, so clients get "connection refused"."""
        host = self.hosts[index]
        kill_namespace_processes(host.netns)
        host.sshd_pid = None

    def start_sshd(self, index: int, wait: float = 10.0) -> None:
        host = self.hosts[index]
        log = open(os.path.join(host.workdir, "sshd.log"), "ab")
        # `ip netns exec` gives the host a mount namespace of its own: the bind mount stays there
        script = (f"hostname {host.name} && mount --bind {host.local} {self.local_mount} && "
                  f"exec {SSHD} -D -e -f {host.workdir}/sshd_config")
        proc = subprocess.Popen(
            ["ip", "netns", "exec", host.netns, "unshare", "--uts", "sh", "-c", script],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
        )
        log.close()
        host.sshd_pid = proc.pid
        self._wait_listening(host, proc, wait)

    def set_link(self, index: int, up: bool) -> None:
        """Black-hole a host (its veth down): connections to it hang until the connect timeout."""
        _ip("link", "set", self.hosts[index].veth, "up" if up else "down")

    def processes_on(self, index: int) -> list[tuple[int, str]]:
        """(pid, command line) of every live (not zombie) process in host ``index``'s namespace."""
        found = []
        for pid in namespace_pids(self.hosts[index].netns):
            line = live_cmdline(pid)
            if line is not None:
                found.append((pid, line))
        return found

    def close_ssh_masters(self) -> None:
        """End the ssh ControlMaster processes the tests left in the private control dir."""
        if not os.path.isdir(self.control_dir):
            return
        for name in os.listdir(self.control_dir):
            path = os.path.join(self.control_dir, name)
            subprocess.run(
                ["ssh", "-F", self.ssh_config, "-o", f"ControlPath={path}", "-O", "exit", "worker0"],
                stdin=subprocess.DEVNULL, capture_output=True, timeout=5,
            )

    # ------------------------------------------------------------------ internals

    def _take_lock(self) -> None:
        fd = os.open(LOCK_PATH, os.O_RDWR | os.O_CREAT, 0o600)
        deadline = time.monotonic() + self.lock_wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    os.close(fd)
                    raise TestbedUnavailable(
                        f"another test bed has held {LOCK_PATH} for {self.lock_wait:.0f} s")
                time.sleep(0.5)
        self._lock_fd = fd

    def _release_lock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing drops the flock
            self._lock_fd = None

    def _make_client_files(self) -> None:
        _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "mlpt-testbed", "-f", self.identity])
        open(self.known_hosts, "w").close()
        common = (
            "    User root\n"
            f"    IdentityFile {self.identity}\n"
            "    IdentitiesOnly yes\n"
            f"    UserKnownHostsFile {self.known_hosts}\n"
            "    GlobalKnownHostsFile /dev/null\n"
            "    StrictHostKeyChecking accept-new\n"
            "    BatchMode yes\n"
            "    LogLevel ERROR\n"
        )
        blocks = [f"Host {h.name}\n    HostName {h.address}\n{common}" for h in self.hosts]
        blocks.append(f"Host {SUBNET}.*\n{common}")
        with open(self.ssh_config, "w") as handle:
            handle.write("# mlp_magic multi-host test bed\n" + "\n".join(blocks))

    def _make_network(self) -> None:
        _ip("link", "add", BRIDGE, "type", "bridge")
        _ip("addr", "add", f"{BRIDGE_ADDR}/24", "dev", BRIDGE)
        _ip("link", "set", BRIDGE, "up")
        etc_hosts = "".join(f"{h.address} {h.name}\n" for h in self.hosts)
        for host in self.hosts:
            os.makedirs(host.workdir, mode=0o700, exist_ok=True)
            peer = f"{PREFIX}p{host.index}"
            _ip("netns", "add", host.netns)
            _ip("link", "add", host.veth, "type", "veth", "peer", "name", peer)
            _ip("link", "set", host.veth, "master", BRIDGE, "up")
            _ip("link", "set", peer, "netns", host.netns)
            _ip("-n", host.netns, "link", "set", peer, "name", "eth0")
            _ip("-n", host.netns, "addr", "add", f"{host.address}/24", "dev", "eth0")
            _ip("-n", host.netns, "link", "set", "eth0", "up")
            _ip("-n", host.netns, "link", "set", "lo", "up")
            # `ip netns exec` bind-mounts /etc/netns/NS/* over /etc: the hosts resolve each other.
            self._write_netns_etc(host, etc_hosts)

    def _write_netns_etc(self, host: NamespaceHost, etc_hosts: str) -> None:
        folder = os.path.join(ETC_NETNS, host.netns)
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "hosts"), "w") as handle:
            handle.write(f"127.0.0.1 localhost\n{etc_hosts}")
        with open(os.path.join(folder, "hostname"), "w") as handle:
            handle.write(host.name + "\n")
        # Each host its own root home, as separate containers have (and none of this machine's
        # ~/.bashrc, which Debian's bash sources for every ssh command).
        os.makedirs(host.home, mode=0o700, exist_ok=True)
        with open("/etc/passwd") as handle:
            entries = [line.split(":") for line in handle.read().splitlines() if line]
        for entry in entries:
            if entry[0] == "root" and len(entry) == 7:
                entry[5] = host.home
        with open(os.path.join(folder, "passwd"), "w") as handle:
            handle.write("".join(":".join(entry) + "\n" for entry in entries))

    def _make_sshd_files(self, host: NamespaceHost) -> None:
        os.makedirs(host.workdir, mode=0o700, exist_ok=True)
        os.makedirs(host.local, exist_ok=True)
        os.makedirs(self.local_mount, exist_ok=True)
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # sshd's privilege separation dir
        key = os.path.join(host.workdir, "host_ed25519")
        _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", host.name, "-f", key])
        shutil.copyfile(self.identity + ".pub", os.path.join(host.workdir, "authorized_keys"))
        config = f"""\
ListenAddress {host.address}:22
HostKey {key}
PidFile {host.workdir}/sshd.pid
AuthorizedKeysFile {host.workdir}/authorized_keys
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
UsePAM no
StrictModes no
UseDNS no
PrintMotd no
PrintLastLog no
MaxStartups 200:30:400
MaxSessions 200
LogLevel ERROR
Subsystem sftp internal-sftp
"""
        with open(os.path.join(host.workdir, "sshd_config"), "w") as handle:
            handle.write(config)

    def _wait_listening(self, host: NamespaceHost, proc: subprocess.Popen, wait: float) -> None:
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"sshd of {host.name} exited ({proc.returncode}): {self._sshd_log(host)}")
            try:
                with socket.create_connection((host.address, 22), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"sshd of {host.name} not listening on {host.address}:22 after {wait} s")

    @staticmethod
    def _sshd_log(host: NamespaceHost) -> str:
        try:
            with open(os.path.join(host.workdir, "sshd.log")) as handle:
                return handle.read()[-2000:]
        except OSError:
            return ""


def _run(argv: list[str], timeout: float = 20.0) -> None:
    subprocess.run(argv, check=True, capture_output=True, timeout=timeout)


def tear_down_any(lock_wait: float = 30.0) -> None:
    """Remove whatever test bed exists (``scripts/testbed.py down``), once no one holds the lock."""
    bed = Testbed(1, lock_wait=lock_wait)
    bed._take_lock()
    try:
        clear_leftovers()
    finally:
        bed._release_lock()

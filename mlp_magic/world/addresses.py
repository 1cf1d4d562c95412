"""Which address the controller should listen on, so that every host can reach it."""
from __future__ import annotations

import os
import socket
import subprocess

from .errors import MlpMagicError

LOOPBACK = "127.0.0.1"


def route_source_ip(destination: str) -> str | None:
    """The local address the kernel would use to reach ``destination`` (nothing is sent)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect((destination, 9))
            return probe.getsockname()[0]
    except OSError:
        return None


def resolve_host(name: str, ssh_command: list | None = None) -> str | None:
    """An IPv4 address for ``name``: DNS/hosts first, then the ssh client's own config
    (``ssh -G`` prints the HostName an alias maps to, which is how test beds and many
    clusters name their machines)."""
    try:
        return socket.getaddrinfo(name, None, socket.AF_INET)[0][4][0]
    except (OSError, IndexError, UnicodeError):
        pass
    if not ssh_command:
        return None
    try:
        done = subprocess.run([*ssh_command, "-G", name], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    for line in done.stdout.splitlines():
        key, _, value = line.partition(" ")
        if key == "hostname" and value and value != name:
            return resolve_host(value)
    return None


def _checked_listen_address(name: str, value: str) -> str:
    address = resolve_host(value.strip())
    if address is None:
        raise MlpMagicError(f"${name}: cannot resolve {value!r} to an IPv4 address")
    if address == "0.0.0.0":
        raise MlpMagicError(f"${name}: {value!r} would listen on every interface; "
                            "give this container's address on the job's network")
    return address


def controller_ip(host_names: list, ssh_command: list | None = None, env=None) -> str:
    """Listen where the hosts can reach us, never on every interface by default."""
    env = os.environ if env is None else env
    for name in ("MLP_MAGIC_CONTROLLER_IP", "MLP_HOST"):
        if env.get(name):
            return _checked_listen_address(name, env[name])
    for host in host_names:
        address = resolve_host(host, ssh_command)
        if address and not address.startswith("127."):
            source = route_source_ip(address)
            if source:
                return source
    raise MlpMagicError(
        f"cannot find a local address that reaches {', '.join(host_names)}; "
        "set $MLP_HOST (or $MLP_MAGIC_CONTROLLER_IP) to this container's address"
    )

"""Which address the controller should listen on, so that every host can reach it."""
from __future__ import annotations

import socket

from mlp_magic import config
from mlp_magic.engine.identity import route_source_ip
from mlp_magic.errors import MlpMagicError
from mlp_magic.ssh.config import read_ssh_G


def resolve_host(name: str, ssh_command: list | None = None) -> str | None:
    """An IPv4 address for ``name``: DNS/hosts first, then the ssh client's own config
    (``ssh -G`` prints the HostName an alias maps to, which is how test beds and many
    clusters name their machines)."""
    try:
        return socket.getaddrinfo(name, None, socket.AF_INET)[0][4][0]
    except (OSError, IndexError, UnicodeError):
        pass
    config_of_host = read_ssh_G(ssh_command, name) if ssh_command else None
    hostname = (config_of_host or {}).get("hostname")
    return resolve_host(hostname) if hostname and hostname != name else None


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
    setting = config.controller_address(env)
    if setting is not None:
        return _checked_listen_address(*setting)
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

"""TLS for the agents of a World across hosts: their connections carry cell output (``tail``)
and what runs on each GPU, readable on the network otherwise.

The kernel makes one self-signed certificate per World (``openssl``, an EC P-256 key, in a
0700 folder it removes at once) and hands certificate and key to each host's agent on the same
path as the agent's HMAC key: the World's encrypted channel to its engine, then the agent's
stdin. The agent loads them through a 0600 file in a 0700 folder it removes as soon as they are
read (the standard library loads a key from a file only). Every client pins that certificate:
it is the one authority it trusts, so no other agent, and nobody in between, is accepted. The
record keeps ``{"key": hex, "cert": PEM}`` in its private part (``protocol.secret_and_cert``).

Standard library only: the agent runs it.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile

AGENT_NAME = "mlp-magic-agent"   # the certificate's name; clients pin the certificate, not a name
OPENSSL_TIMEOUT_S = 30.0


def make_certificate() -> tuple:
    """(certificate PEM, key PEM) of a new self-signed certificate; OSError when ``openssl`` is
    missing or fails (the caller says so and goes on without TLS)."""
    openssl = shutil.which("openssl")
    if openssl is None:
        raise OSError("no openssl on PATH")
    folder = tempfile.mkdtemp(prefix="mlp-agent-tls-")   # 0700
    try:
        cert, key = os.path.join(folder, "cert.pem"), os.path.join(folder, "key.pem")
        done = subprocess.run([openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt",
                               "ec_paramgen_curve:prime256v1", "-nodes", "-days", "30",
                               "-subj", f"/CN={AGENT_NAME}", "-keyout", key, "-out", cert],
                              capture_output=True, text=True, timeout=OPENSSL_TIMEOUT_S, umask=0o077)
        if done.returncode != 0:
            raise OSError(f"openssl failed: {done.stderr.strip()[-200:]}")
        with open(cert) as cert_file, open(key) as key_file:
            return cert_file.read(), key_file.read()
    except subprocess.TimeoutExpired:
        raise OSError(f"openssl took more than {OPENSSL_TIMEOUT_S:g} s") from None
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def server_context(cert_pem: str, key_pem: str):
    """The agent's side (an ``ssl.SSLContext``): its certificate and key, loaded through a
    private file removed at once."""
    import ssl   # here: the commands that never open TLS keep ssl out (cli.run)

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    folder = tempfile.mkdtemp(prefix="mlp-agent-tls-")
    path = os.path.join(folder, "chain.pem")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(key_pem + "\n" + cert_pem)
        context.load_cert_chain(path)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return context


def client_context(cert_pem: str):
    """A client's side: the World's agent certificate is the only one trusted (pinned)."""
    import ssl

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = False   # agents are reached by address; the pinned certificate decides
    context.verify_mode = ssl.CERT_REQUIRED
    context.load_verify_locations(cadata=cert_pem)
    return context

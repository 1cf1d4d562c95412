"""Which name ssh will resolve for a host, read from its configuration (mlp_magic.ssh.config).

The pure reading is checked on its own, then against OpenSSH itself: ``ssh -G`` prints the
configuration ssh would use (no connection, no look-up), and every answer that is not "cannot
tell" must be the HostName it prints.
"""
from __future__ import annotations

import shutil
import subprocess

import pytest

from mlp_magic.ssh.config import config_sources, hostname_for

BED = """# a test bed
Host worker0
    HostName 10.77.0.11
    User root
Host worker1 worker2
    HostName=10.77.0.12
Host gpu-*  !gpu-bad
    HostName %h.cluster.local
Host *.lab
    HostName "%h%%x"
Host *
    ServerAliveInterval 5
"""


def lookup(name, files, text_of, options=(), home="/home/u"):
    return hostname_for(name, files, options, read=text_of.get,
                        glob=lambda pattern: sorted(p for p in text_of if _glob(pattern, p)), home=home)


def _glob(pattern, path):
    import fnmatch

    return fnmatch.fnmatch(path, pattern)


@pytest.mark.parametrize("name, expected", [
    ("worker0", "10.77.0.11"),
    ("WORKER0", "worker0"),             # patterns match the name as typed; HostName is lowercased
    ("worker2", "10.77.0.12"),
    ("gpu-7", "gpu-7.cluster.local"),
    ("gpu-bad", "gpu-bad"),             # a negated pattern: the block does not apply
    ("a.lab", "a.lab%x"),
    ("plain", "plain"),                 # no HostName: the name itself
])
def test_hostname_from_host_blocks(name, expected):
    assert lookup(name, [("/cfg", True)], {"/cfg": BED}) == expected


def test_the_first_value_wins_and_command_line_options_come_first():
    text = "Host w\n  HostName first\nHost *\n  HostName second\n"
    assert lookup("w", [("/cfg", True)], {"/cfg": text}) == "first"
    assert lookup("v", [("/cfg", True)], {"/cfg": text}) == "second"
    assert lookup("w", [("/cfg", True)], {"/cfg": text}, options=["HostName=10.0.0.9"]) == "10.0.0.9"


def test_includes_relative_to_the_users_or_the_system_folder():
    files = {
        "/home/u/.ssh/config": "Include conf.d/*.conf\nHost other\n  HostName nowhere\n",
        "/home/u/.ssh/conf.d/a.conf": "Host w\n  HostName 10.1.1.1\n",
        "/etc/ssh/ssh_config": "Include ssh_config.d/*.conf\n",
        "/etc/ssh/ssh_config.d/b.conf": "Host v\n  HostName 10.2.2.2\n",
    }
    sources = [("~/.ssh/config", True), ("/etc/ssh/ssh_config", False)]
    assert lookup("w", sources, files) == "10.1.1.1"
    assert lookup("v", sources, files) == "10.2.2.2"
    # an Include inside a Host block applies to that block's hosts only
    files["/home/u/.ssh/config"] = "Host x\n  Include conf.d/*.conf\n"
    assert lookup("w", sources, files) == "w"


@pytest.mark.parametrize("text", [
    "Match host w\n  HostName 10.0.0.1\n",
    "Host w\n  ProxyJump bastion\n",
    "Host *\n  ProxyCommand nc %h %p\n",
    "Host w\n  HostName %h.%d\n",          # a token only ssh knows
    "CanonicalizeHostname yes\n",
    "Include /loop\n",                     # includes itself: too deep
])
def test_what_only_ssh_can_tell_is_none(text):
    assert lookup("w", [("/loop", True)], {"/loop": text}) is None


def test_proxy_none_and_missing_files_are_fine():
    files = {"/cfg": "Host w\n  ProxyJump none\n  HostName 10.0.0.3\n"}
    assert lookup("w", [("/cfg", True), ("/absent", True)], files) == "10.0.0.3"


@pytest.mark.parametrize("argv, expected", [
    (["ssh"], ([("~/.ssh/config", True), ("/etc/ssh/ssh_config", False)], [])),
    (["/usr/bin/ssh", "-F", "/x/cfg", "-i", "key", "-T"], ([("/x/cfg", True)], [])),
    (["ssh", "-F/x/cfg", "-oHostName=h", "-o", "User=u", "-vv"],
     ([("/x/cfg", True)], ["HostName=h", "User=u"])),
    (["ssh", "-F", "none"], ([], [])),
    (["ssh", "-J", "bastion"], None),
    (["ssh", "bastion"], None),             # a host inside the ssh command
    (["ssh", "-F"], None),
    (["ssh", "-Z"], None),                  # an option unknown here
    (["kubectl-ssh"], None),                # not OpenSSH's client
    ([], None),
])
def test_config_sources(argv, expected):
    assert config_sources(argv) == expected


SSH = shutil.which("ssh")


@pytest.mark.skipif(SSH is None, reason="OpenSSH's client is not installed")
def test_agrees_with_ssh_itself(tmp_path):
    include = tmp_path / "inc.conf"
    include.write_text("Host inc-*\n    HostName 10.9.9.9\n")
    config = tmp_path / "config"
    config.write_text(BED.replace("Host *\n", f"Include {include}\nHost x-*\n    HostName %h.x\nHost *\n"))
    names = ["worker0", "Worker1", "GPU-4", "gpu-3", "gpu-bad", "a.lab", "inc-1", "x-2", "plain", "10.0.0.5"]
    sources = config_sources([SSH, "-F", str(config)])
    for name in names:
        ours = hostname_for(name, *sources, read=lambda p: open(p).read(),
                            glob=lambda p: sorted(__import__("glob").glob(p)), home=str(tmp_path))
        shown = subprocess.run([SSH, "-G", "-F", str(config), name], capture_output=True, text=True,
                               timeout=20, check=True).stdout
        theirs = next(line.split(" ", 1)[1] for line in shown.splitlines() if line.startswith("hostname "))
        assert ours == theirs, name

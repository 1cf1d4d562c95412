"""Bring the multi-host test bed up or down by hand (needs root).

    python scripts/testbed.py up 4     # 4 namespace hosts worker0..worker3 with sshd
    python scripts/testbed.py down     # remove it (and any leftover of a killed test run)

``up`` prints the ssh config to use, e.g.
    allrun --ssh "ssh -F /tmp/mlpt-bed-XXXX/ssh_config" -H worker[0-3] -- hostname
The pytest suite tears a hand-made bed down when it starts its own.
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "multihost"))
import netns  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="multi-host test bed: network namespaces with sshd")
    sub = parser.add_subparsers(dest="action", required=True)
    up = sub.add_parser("up", help="create K hosts")
    up.add_argument("count", type=int, nargs="?", default=4)
    sub.add_parser("down", help="remove the test bed")
    args = parser.parse_args(argv)
    reason = netns.unavailable_reason()
    if reason:
        print(f"testbed: {reason}", file=sys.stderr)
        return 1
    if args.action == "down":
        netns.tear_down_any()
        print("testbed: removed")
        return 0
    bed = netns.Testbed(args.count)
    bed.up()
    bed.release()
    for host in bed.hosts:
        print(f"{host.name}\t{host.address}\tnetns {host.netns}")
    print(f"ssh config: {bed.ssh_config}")
    print(f'export MLP_MAGIC_SSH="ssh -F {bed.ssh_config}" MLP_MAGIC_SSH_CONTROL_DIR={bed.control_dir}')
    print(f"try: allrun -H 'worker[0-{args.count - 1}]' -- hostname")
    return 0


if __name__ == "__main__":
    sys.exit(main())

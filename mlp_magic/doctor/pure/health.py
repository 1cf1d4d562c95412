"""The doctor's GPU and host checks (pure): every host's probe facts -> findings.

GPUs: the count against MLP_WORKER_GPU (else against the other hosts), the driver version, NVML
health (XID errors, uncorrected ECC, retired pages waiting, failed row remapping, throttling by
the hardware), MIG and persistence mode. Host: /dev/shm, ``ulimit -l`` and open files, the clock
(bounded by when the probe was sent and answered), free disk in the working folder, RDMA ports
and their state, GPUs far from their nearest NIC.
"""
from __future__ import annotations

from mlp_magic.doctor.pure.report import ERROR, INFO, MISSING, WARNING, Finding, Report, compare, hosts_text

GIB = 1 << 30
SHM_WARN = 1 * GIB           # NCCL's buffers live in /dev/shm; Docker's default is 64 MiB
SHM_ERROR = 256 << 20        # with GPUs, below this NCCL fails ("unhandled system error")
NOFILE_WARN = 65536
DISK_WARN = 1 * GIB
CLOCK_WARN_S = 1.0
# clocks event reasons that mean the hardware slows the GPU down: HW slowdown, SW/HW thermal,
# power brake (nvmlClocksEventReason*; 0x1 idle, 0x2 application clocks, 0x4 SW power cap: normal)
THROTTLE_BAD = {0x8: "hardware slowdown", 0x20: "software thermal slowdown",
                0x40: "hardware thermal slowdown",
                0x80: "power brake"}


def _group(report: Report, severity: str, check: str, title: str, found: dict, fix: str) -> None:
    """One finding per distinct text in {host: text} (hosts with the same text together)."""
    by_text: dict = {}
    for host, text in found.items():
        if text:
            by_text.setdefault(text, []).append(host)
    for text, hosts in by_text.items():
        report.add(Finding(severity, check, title, tuple(hosts), text, fix))


def _gpus_of(facts: dict) -> dict:
    return {host: f.get("gpus") for host, f in facts.items() if isinstance(f.get("gpus"), dict)}


def _per_gpu(gpus: dict, test) -> dict:
    """{host: "GPU 0: ..., GPU 3: ..."} of the GPUs for which ``test(gpu)`` gives a text."""
    found = {}
    for host, state in gpus.items():
        texts = [f"GPU {g.get('index')}: {t}" for g in state.get("gpus") or [] if (t := test(g))]
        if texts:
            found[host] = "; ".join(texts)
    return found


def _throttle(gpu: dict):
    bits = gpu.get("throttle")
    if not isinstance(bits, int):
        return None
    named = [name for bit, name in THROTTLE_BAD.items() if bits & bit]
    return ", ".join(named) if named else None


def gpu_count(report: Report, gpus: dict, expected: int | None) -> None:
    counts = {host: state.get("count", len(state.get("gpus") or [])) for host, state in gpus.items()}
    if expected is not None:
        wrong = {host: n for host, n in counts.items() if n != expected}
        for host, n in wrong.items():
            why = state_error(gpus[host])
            report.add(Finding(ERROR, "gpus", "GPU count", (host,),
                               f"{n} GPU{'s' if n != 1 else ''} seen, MLP_WORKER_GPU={expected}{why}",
                               "check the container's GPUs (nvidia-smi) and CUDA_VISIBLE_DEVICES; "
                               "a lost GPU needs the node drained"))
        if not wrong:
            report.add(compare("gpus", "GPU count", counts))
    else:
        report.add(compare("gpus", "GPU count", counts, fix="every host of a job should show the same GPUs"))


def state_error(state: dict) -> str:
    error = state.get("error")
    return f" ({error})" if error and error != "no GPUs" else ""


def gpus(report: Report, facts: dict, context) -> None:
    found = _gpus_of(facts)
    if not found:
        return
    gpu_count(report, found, context.expected_gpus)
    with_gpus = {h: s for h, s in found.items() if s.get("gpus")}
    if not with_gpus:
        return
    report.add(compare("gpus", "driver", {h: s.get("driver") for h, s in with_gpus.items()}, severity=WARNING,
                       fix="install one driver version everywhere"))
    report.add(compare("gpus", "GPU model", {h: ", ".join(sorted({g.get("name") or "?" for g in s["gpus"]}))
                                             for h, s in with_gpus.items()}, severity=WARNING))
    _group(report, ERROR, "gpus", "XID error",
           _per_gpu(with_gpus, lambda g: g.get("xid") and f"XID {g['xid']}"),
           "look up the XID (NVIDIA's XID catalogue); 79 (fallen off the bus) or 48/94/95 (ECC) need the "
           "node drained and the GPU reset")
    _group(report, ERROR, "gpus", "uncorrected ECC", _per_gpu(
        with_gpus, lambda g: g.get("ecc_uncorrected") and f"{g['ecc_uncorrected']} uncorrected ECC errors"),
        "reset the GPU (nvidia-smi -r) when idle; if they come back, drain the node")
    _group(report, WARNING, "gpus", "retired pages", _per_gpu(
        with_gpus, lambda g: (g.get("retired_pending") and "page retirement pending a reset") or
        (g.get("remap_failed") and "row remapping failed")), "reset the GPU when it is idle (nvidia-smi -r)")
    _group(report, WARNING, "gpus", "throttling", _per_gpu(with_gpus, _throttle),
           "check cooling and power (nvidia-smi -q -d PERFORMANCE); a slow GPU slows every rank")
    report.add(compare("gpus", "MIG mode", _per_host_modes(with_gpus, "mig"), severity=WARNING,
                       fix="set one MIG mode on every host (nvidia-smi -mig)"))
    report.add(compare("gpus", "persistence mode", _per_host_modes(with_gpus, "persistence"), severity=INFO,
                       fix="nvidia-smi -pm 1 on the hosts where it is off (faster start, steadier state)"))
    _group(report, ERROR, "gpus", "kernel XID log", {h: "; ".join(f.get("xid_log") or [])[:300]
                                                     for h, f in facts.items()},
           "the driver logged XID errors: see dmesg; drain the node if they are recent")


def _per_host_modes(with_gpus: dict, key: str) -> dict:
    def mode(value):
        return {None: "not reported", 0: "off", 1: "on"}.get(value, str(value))
    return {h: ",".join(sorted({mode(g.get(key)) for g in s["gpus"]})) for h, s in with_gpus.items()}


def _bytes(n) -> str:
    return f"{n / GIB:.1f} GiB" if n >= GIB else f"{n / (1 << 20):.0f} MiB"


def shm_and_limits(report: Report, hosts: dict, gpus: dict) -> None:
    def shm(host):
        total = (hosts[host].get("shm") or {}).get("total")
        return MISSING if total is None else total
    small = {h: shm(h) for h in hosts if isinstance(shm(h), int) and shm(h) < SHM_WARN}
    for host, total in small.items():
        severity = ERROR if total < SHM_ERROR and (gpus.get(host) or {}).get("gpus") else WARNING
        report.add(Finding(severity, "host", "/dev/shm", (host,), f"/dev/shm is {_bytes(total)}",
                           "give the container more (docker --shm-size=16g, or a larger emptyDir for "
                           "/dev/shm): NCCL keeps its buffers there"))
    report.add(compare("host", "/dev/shm size", {h: _bytes(shm(h)) if isinstance(shm(h), int) else shm(h)
                                                 for h in hosts if h not in small}, severity=INFO))
    memlock = {h: f.get("memlock") for h, f in hosts.items()}
    needy = ({h for h, f in hosts.items() if f.get("ib")},
             {h for h, s in gpus.items() if (s or {}).get("gpus")})
    limited = {h: v for h, v in memlock.items() if isinstance(v, int) and h in needy[0] | needy[1]}
    for severity, wanted in ((ERROR, needy[0]), (WARNING, needy[1] - needy[0])):
        _group(report, severity, "host", "ulimit -l",
               {h: f"locked memory is limited to {_bytes(v)}" for h, v in limited.items() if h in wanted},
               "set memlock unlimited (ulimit -l unlimited; docker --ulimit memlock=-1): RDMA and NCCL "
               "register their buffers")
    report.add(compare("host", "ulimit -l", {h: _bytes(v) if isinstance(v, int) else v
                                             for h, v in memlock.items() if h not in limited}, severity=INFO))
    nofile = {h: f.get("nofile") for h, f in hosts.items()}
    low = {h: v for h, v in nofile.items() if isinstance(v, int) and v < NOFILE_WARN and h in needy[1]}
    _group(report, WARNING, "host", "ulimit -n", {h: f"{v} open files at most" for h, v in low.items()},
           f"raise it (ulimit -n {NOFILE_WARN * 16}): each peer and each GPU takes descriptors")
    report.add(compare("host", "ulimit -n", {h: v for h, v in nofile.items() if h not in low}, severity=INFO))


def clock(report: Report, facts: dict, windows: dict) -> None:
    """A host's clock compared with this machine's, bounded by when its probe was sent and answered."""
    for host, data in facts.items():
        window, stamp = windows.get(host), data.get("time")
        if window is None or not isinstance(stamp, (int, float)):
            continue
        low, high = stamp - window[1], stamp - window[0]   # the offset lies in [low, high]
        off = low if low > 0 else high if high < 0 else 0.0
        if abs(off) > CLOCK_WARN_S:
            report.add(Finding(WARNING, "host", "clock", (host,),
                               f"its clock is {abs(off):.1f} s {'ahead of' if off > 0 else 'behind'} this "
                               f"machine's (at least)", "run NTP/chrony there: logs and timeouts disagree"))


def disk_and_rdma(report: Report, hosts: dict) -> None:
    for host, data in hosts.items():
        disk = data.get("disk") or {}
        if disk.get("error"):
            report.add(Finding(WARNING, "host", "working folder", (host,),
                               f"{disk.get('path')}: {disk['error']}",
                               "the job's working folder should exist on every host"))
        elif isinstance(disk.get("free"), int) and disk["free"] < DISK_WARN:
            report.add(Finding(WARNING, "host", "free disk", (host,),
                               f"{_bytes(disk['free'])} free in {disk.get('path')}", "free some space there"))
    ports = {h: data.get("ib") or [] for h, data in hosts.items()}
    if any(ports.values()):
        report.add(compare("host", "RDMA ports", {h: len(p) for h, p in ports.items()}, severity=WARNING,
                           fix="every host should show the same NICs (ibstat)"))
        _group(report, ERROR, "host", "RDMA link", {
            h: ", ".join(f"{p.get('device')}/{p.get('port')} {p.get('state')}" for p in ps
                         if "ACTIVE" not in str(p.get("state")))
            for h, ps in ports.items()}, "check the cable and the switch port (ibstat; ip link)")


def host_health(report: Report, facts: dict, context) -> None:
    hosts = {h: f.get("host") for h, f in facts.items() if isinstance(f.get("host"), dict)}
    shm_and_limits(report, hosts, _gpus_of(facts))
    clock(report, facts, context.windows)
    disk_and_rdma(report, hosts)
    far = {h: (s.get("affinity") or {}).get("far") for h, s in _gpus_of(facts).items()}
    _group(report, WARNING, "host", "GPU-NIC affinity", far,
           "pin ranks to the GPUs near a NIC, or set NCCL_IB_HCA per GPU (see mlp-magic topo)")


__all__ = ["gpus", "host_health", "hosts_text"]

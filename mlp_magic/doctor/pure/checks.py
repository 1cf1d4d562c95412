"""The doctor's checks: every host's facts (``doctor/probe``'s JSON) -> findings and shared facts (pure).

``check_hosts(facts, failures, context)`` fills a ``doctor/pure/report.Report``:
- reachability: each host that gave no answer (``core/results.why_no_answer``'s line), with the
  fix its kind calls for (host keys, ssh, Python);
- software: Python and each package's version (torch with its CUDA and NCCL, mpi4py with its
  MPI), a package missing or failing to import on some hosts;
- environment: every NCCL_*, UCX_*, OMPI_*, MASTER_* and CUDA_VISIBLE_DEVICES variable, set
  or not, per host (what differs per process, such as OMPI_COMM_WORLD_RANK, is left out);
- GPUs and host: ``doctor/pure/health``.
Only hosts that answered are compared; a host that did not is one reachability finding.
"""
from __future__ import annotations

import re

from mlp_magic.doctor.pure.report import (ERROR, INFO, MISSING, WARNING, Finding, Report, compare, hosts_text,
                                          shown)
from mlp_magic.core.records import Record, fresh

# Variables the launcher sets in each process it starts (some differ from process to process by
# design, the rest describe the launcher, not the host: a World's engines hold them, ssh does not):
# neither compared nor listed.
PER_PROCESS = re.compile(r"OMPI_(COMM_WORLD_|MCA_(orte|ess|pmix|ompi_(rank|size))|FIRST_RANKS|FILE_LOCATION|"
                         r"ARGV|COMMAND|UNIVERSE_SIZE|APP_CTX_|LIBDIR_LOC$|MCA_PREFIXES$|MCA_cpu_type$|"
                         r"TOOL_NAME$|VERSION$)")
STRICT_ENV = ("NCCL_", "UCX_")   # a difference in these hangs or slows collectives: an error
CORE_PACKAGES = ("torch", "mpi4py", "numpy", "mlp_magic")   # a version difference is an error
DEFAULT_PACKAGES = ("mlp_magic", "numpy", "ipykernel", "ipyparallel", "mpi4py", "torch")


class Context(Record):
    """What the checks need beyond the facts."""

    expected_gpus: int | None = None      # MLP_WORKER_GPU
    asked_packages: tuple = ()            # --package NAMEs
    windows: dict = fresh(dict)           # host -> (epoch sent, epoch answered): the clock check
    timeout: float = 10.0
    ranks_python: str = ""                # the interpreter the ranks run (--python, else the kernel's)
    path_pip: tuple = ()                  # (pip, the Python it is for) on PATH, where not the ranks'
    here: str = ""                        # this machine's name among the hosts (the notebook's)


def _unreachable_fix(why: str) -> str:
    lowered = why.lower()
    if "host key verification failed" in lowered or "identification has changed" in lowered:
        return "the host's key changed or is unknown: check it, then ssh-keygen -R HOST and connect once"
    if "permission denied" in lowered:
        return "ssh refused the key: check authorized_keys and the user (BatchMode: no password prompt)"
    if why.startswith("timeout"):
        return "the host answered nothing in time: is it overloaded or hung? raise --timeout to wait longer"
    if why.startswith("exit 255"):
        return ("ssh itself ended with 255 (its connection broke or was refused on the way): run again; "
                "if it stays, look at the host's load and its sshd log")
    if why.startswith("exit 127") or "not found" in lowered:
        return "no such Python on the host: install it, or name another with --python"
    if why.startswith("unreachable"):
        return "start sshd there, or check the name, the network and the port (ssh HOST true)"
    return "run the probe by hand on the host to see why (ssh HOST python3 -c 'print(1)')"


def reachability(report: Report, failures: dict) -> None:
    for host, why in failures.items():
        title = "unreachable" if why.startswith("unreachable") else "no answer"
        if why.startswith("exit 127") or "No such file or directory" in why:
            title = "no Python"
        elif why.startswith("exit 255"):
            title = "ssh failed"
        report.add(Finding(ERROR, "reachability", title, (host,), why, _unreachable_fix(why)))


def _package_value(entry):
    """What one host's package is, as compared: its version (or why there is none)."""
    if entry is None or not entry.get("installed"):
        return MISSING
    return entry.get("version") or "installed, version unknown"


def _broken(report: Report, name: str, facts: dict) -> None:
    broken = {host: f["packages"][name]["error"] for host, f in facts.items()
              if (f.get("packages") or {}).get(name, {}).get("installed") and
              f["packages"][name].get("error")}
    groups: dict = {}
    for host, error in broken.items():
        groups.setdefault(error, []).append(host)
    for error, hosts in groups.items():
        severity = WARNING if "deadline" in error else ERROR
        report.add(Finding(severity, "software", f"import {name}", tuple(hosts),
                           f"{name} is installed but `import {name}` fails: {error}",
                           "reinstall it there (pip install --force-reinstall), or raise --timeout "
                           "when it is only slow" if severity == WARNING else
                           f"reinstall {name} on {hosts_text(hosts)} (pip install --force-reinstall {name}); "
                           "where it imports elsewhere, compare PYTHONPATH and the packages it imports"))


def _missing_everywhere(report: Report, name: str, facts: dict, context: Context) -> bool:
    if any((f.get("packages") or {}).get(name, {}).get("installed") for f in facts.values()):
        return False
    if name in context.asked_packages:   # a note on the request (a misspelt name?), not the hosts' health
        report.add(Finding(INFO, "software", f"package {name}", tuple(facts),
                           f"{name} is not installed on any host (is the name right? it is looked up as the "
                           f"import name {name.replace('-', '_')!r} and the distribution {name!r})",
                           "check the spelling, or install it: %allrun pip install " + name))
    else:
        report.add(compare("software", name, {host: "not installed" for host in facts}))
    return True


def software(report: Report, facts: dict, context: Context) -> None:
    pythons = {h: f.get("python", {}).get("version") for h, f in facts.items()}
    report.add(compare("software", "Python", pythons,
                       fix="use the same image (or interpreter) on every host"))
    for name in DEFAULT_PACKAGES + tuple(p for p in context.asked_packages if p not in DEFAULT_PACKAGES):
        if _missing_everywhere(report, name, facts, context):
            continue
        # a host where the import fails is its own finding (_broken): its version, read from the
        # metadata and not the module, would only differ in form ("2.3.0" for "2.3.0+cu121")
        entries = {h: (f.get("packages") or {}).get(name) for h, f in facts.items()
                   if not ((f.get("packages") or {}).get(name) or {}).get("error")}
        severity = ERROR if name in CORE_PACKAGES else WARNING
        versions = {h: _package_value(e) for h, e in entries.items()}
        odd = len(set(versions.values())) > 1   # where each version comes from, when they differ
        report.add(compare("software", name, versions, severity=severity,
                           describe=(lambda v: _with_place(v, entries)) if odd else _version_text,
                           fix=f"install the same {name} everywhere (%allrun pip install {name}==VERSION), "
                               "and check PYTHONPATH on the odd hosts"))
        _broken(report, name, facts)
        for key, label in (("cuda", "torch CUDA build"), ("nccl", "torch NCCL"), ("mpi", "mpi4py's MPI")):
            extras = {h: (e or {}).get("extra", {}).get(key) for h, e in entries.items()
                      if e and key in (e.get("extra") or {})}
            if extras:
                report.add(compare("software", label, extras, fix="install one build everywhere"))


def _version_text(value) -> str:
    return "not installed" if value is MISSING else shown(value)


def _with_place(value, entries: dict) -> str:
    """A version with where it comes from when that is not the usual site-packages."""
    if value is MISSING:
        return "not installed"
    files = {(e or {}).get("file") for e in entries.values() if _package_value(e) == value}
    odd = sorted(f for f in files if f and "-packages" not in f)
    return shown(value) + (f" (from {odd[0]})" if len(odd) == 1 else "")


def pip_on_path(report: Report, context: Context) -> None:
    """The notebook's PATH finds a pip that is not the ranks' Python's (doctor/path_pip)."""
    if not context.path_pip:
        return
    pip, runs = context.path_pip
    what = f"for {runs}" if runs else "a launcher, not a script of the ranks' Python"
    report.add(Finding(WARNING, "software", "pip on PATH", (context.here,) if context.here else (),
                       f"`pip` on this machine's PATH is {pip} ({what}), not the ranks' Python "
                       f"({context.ranks_python}): `!pip install` installs where the ranks do not "
                       "import from",
                       "use %allrun pip install (or %pip install): both are the ranks' Python's; or put "
                       f"{context.ranks_python.rsplit('/', 1)[0]} first on PATH"))


def environment(report: Report, facts: dict) -> None:
    names = sorted({name for f in facts.values() for name in (f.get("env") or {})
                    if not PER_PROCESS.match(name)})
    for name in names:
        values = {host: (f.get("env") or {}).get(name, MISSING) for host, f in facts.items()}
        severity = ERROR if name.startswith(STRICT_ENV) else WARNING
        report.add(compare("environment", name, values, severity=severity,
                           fix=f"set {name} the same way on every host (or on none): the job's processes "
                               "inherit it from there"))


def check_hosts(hosts, facts: dict, failures: dict, context: Context | None = None) -> Report:
    """The report of one doctor run: ``facts`` {host: the probe's dict} of the hosts that
    answered, ``failures`` {host: why not} of the others; ``hosts``: all, in order."""
    from mlp_magic.doctor.pure.health import gpus, host_health

    context = context or Context()
    report = Report(tuple(hosts), answered=len(facts))
    reachability(report, failures)
    pip_on_path(report, context)
    if facts:
        for host, data in facts.items():
            for problem in data.get("problems") or []:
                report.add(Finding(WARNING, "probe", "check not done", (host,), problem,
                                   "run the doctor again with a longer --timeout"))
        software(report, facts, context)
        environment(report, facts)
        gpus(report, facts, context)
        host_health(report, facts, context)
    elif not failures:
        report.add(Finding(INFO, "reachability", "no host", (), "no host to check", ""))
    return report

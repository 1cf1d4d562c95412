"""What the doctor asks each host: one JSON document of its facts, read-only, within a deadline.

Runs on every host as ``python -c <this file's source> --timeout S [--package NAME ...]``, with the
host's own Python settings (its PYTHONPATH counts: it is what the job's processes see). It needs
the standard library only; mlp_magic's GPU sampler is used when the host can import it (else the
GPUs are "not checked"). Each part is guarded: a part that fails is a line under ``problems``.
The packages are imported in a child process of their own, one after the other (lightest first),
so that an import that crashes Python, hangs or raises names that package and no other; at the
deadline whatever is not known is said to be so, and the answer is printed in any case.

Nothing is changed on the host: files and limits are read, NVML is queried, packages imported.
"""
import json
import os
import subprocess
import sys
import threading
import time

VERSION = 1
ENV_PREFIXES = ("NCCL_", "UCX_", "OMPI_", "MASTER_")
ENV_NAMES = ("CUDA_VISIBLE_DEVICES",)
# (import name, distribution), lightest first: a slow torch must not hide the others
DEFAULT_PACKAGES = (("mlp_magic", "mlp_magic"), ("numpy", "numpy"), ("ipykernel", "ipykernel"),
                    ("ipyparallel", "ipyparallel"), ("mpi4py", "mpi4py"), ("torch", "torch"))
GPU_TICK = 0.25   # an XID arriving now is seen (NVML's event set); the rest is read at once
IMPORTS = r"""
import json, sys
def extra(name, module):
    if name == "torch":
        found = {"cuda": getattr(getattr(module, "version", None), "cuda", None)}
        try:
            found["nccl"] = ".".join(str(p) for p in module.cuda.nccl.version()) if found["cuda"] else None
        except Exception as error:
            found["nccl"] = "unknown (%s)" % type(error).__name__
        return found
    if name == "mpi4py":
        module.rc.initialize = module.rc.finalize = False
        from mpi4py import MPI
        return {"mpi": MPI.Get_library_version().replace("\0", "").strip().splitlines()[0][:120]}
    return {}
for name in sys.argv[1:]:
    print(json.dumps({"start": name}), flush=True)
    answer = {"name": name}
    try:
        module = __import__(name)
        version = getattr(module, "__version__", None)
        answer.update(version=version if isinstance(version, str) else None,
                      file=getattr(module, "__file__", None), extra=extra(name, module))
    except BaseException as error:
        text = str(error).strip().splitlines()
        answer["error"] = "%s: %s" % (type(error).__name__, text[0][:200]) if text else type(error).__name__
    print(json.dumps(answer), flush=True)
"""


def _dist_folders():
    """{normalised name: [version, ...]} from the ``NAME-VERSION.dist-info`` folders on sys.path,
    in path order (what importlib.metadata finds first), read from the folder names alone."""
    found = {}
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for name in names:
            if name.endswith(".dist-info") and "-" in name:
                dist, version = name[:-len(".dist-info")].split("-", 1)
                found.setdefault(dist.replace("-", "_").replace(".", "_").lower(), []).append(version)
    return found


def _metadata_version(distribution, folders):
    """The installed version (the first on sys.path); importlib.metadata only where the folders
    do not tell (eggs, odd names): its import alone costs a probe tens of milliseconds."""
    versions = folders.get(distribution.replace("-", "_").replace(".", "_").lower())
    if versions:
        return versions[0]
    try:
        from importlib import metadata
        return metadata.version(distribution)
    except Exception:
        return None


def _spec_file(name):
    """Where ``import name`` would come from, without running it; None when it would not."""
    try:
        from importlib.util import find_spec
        spec = find_spec(name)
    except Exception:
        return None
    return None if spec is None else (spec.origin or "namespace package")


def _torch_build(origin):
    """torch's CUDA build from its version.py, read as text (nothing imported)."""
    import re
    try:
        text = open(os.path.join(os.path.dirname(origin), "version.py")).read()
    except (OSError, TypeError):
        return {}
    found = re.search(r"^cuda\b[^=]*=\s*['\"]([^'\"]+)['\"]", text, re.M)
    return {"cuda": found.group(1)} if found else {}


def package_facts(packages):
    """{name: {"version", "file", "installed"}} from the metadata and the import system only."""
    found, folders = {}, _dist_folders()
    for name, distribution in packages:
        origin = _spec_file(name)
        version = _metadata_version(distribution, folders) if origin else None
        found[name] = {"version": version, "file": origin,
                       "installed": origin is not None}
        if name == "torch" and origin:
            found[name]["extra"] = _torch_build(origin)
    return found


def _read_imports(child, answers, current):
    """The child's messages; other lines (a package's own print on import, JSON or not) are
    passed over: an exception here would leave the child blocked on a full pipe."""
    for line in child.stdout:
        try:
            data = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if not isinstance(data, dict):
            continue
        if isinstance(data.get("start"), str):
            current[0] = data["start"]
        elif "start" not in data and _is_answer(data):
            answers[data["name"]] = data
            current[0] = None


def _is_answer(data):
    """Whether a message is the child's answer: its name, error, version, file and extras are
    texts (the doctor refuses a whole answer that holds a number or a list where they go)."""
    extra = data.get("extra") or {}
    values = [data.get("error"), data.get("version"), data.get("file")]
    values += list(extra.values()) if isinstance(extra, dict) else [0]
    return isinstance(data.get("name"), str) and all(v is None or isinstance(v, str) for v in values)


def import_packages(names, deadline):
    """Import each package in a child process: {name: answer}; a crash, a hang past the
    deadline, or a failed start is said on the package it happened to."""
    answers, current = {}, [None]
    try:
        child = subprocess.Popen([sys.executable, "-c", IMPORTS, *names], stdin=subprocess.DEVNULL,
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    except OSError as error:
        return {name: {"error": "cannot start Python to import it: %s" % error} for name in names}
    reader = threading.Thread(target=_read_imports, args=(child, answers, current), daemon=True)
    reader.start()
    reader.join(max(0.0, deadline - time.monotonic()))
    if reader.is_alive():
        child.kill()
        late = current[0]
        if late is not None:
            answers[late] = {"error": "import did not finish within the probe's deadline"}
    code = child.wait()
    reader.join(1.0)
    if code < 0 and current[0] is not None and current[0] not in answers:
        answers[current[0]] = {"error": "import crashed Python (signal %d)" % -code}
    return answers


def merge_packages(facts, imported):
    """The metadata's facts with what the import saw (its version and file win: that code runs)."""
    for name, answer in imported.items():
        entry = facts.setdefault(name, {"version": None, "file": None, "installed": True})
        if answer.get("error"):
            entry["error"] = answer["error"]
        else:
            entry["version"] = answer.get("version") or entry["version"]
            entry["file"] = answer.get("file") or entry["file"]
            entry["extra"] = answer.get("extra") or {}
            entry["installed"] = True
    for name, entry in facts.items():
        if entry["installed"] and name not in imported:
            entry.setdefault("error", "import not finished within the probe's deadline")
    return facts


def environment():
    return {name: value for name, value in os.environ.items()
            if name.startswith(ENV_PREFIXES) or name in ENV_NAMES}


def _statvfs(path):
    try:
        info = os.statvfs(path)
    except OSError as error:
        return {"path": path, "error": error.strerror or str(error)}
    return {"path": path, "total": info.f_blocks * info.f_frsize, "free": info.f_bavail * info.f_frsize}


def _limit(which):
    import resource
    soft = resource.getrlimit(which)[0]
    return "unlimited" if soft == resource.RLIM_INFINITY else soft


def _read(path):
    with open(path) as handle:
        return handle.read().strip()


def infiniband(root="/sys/class/infiniband"):
    """[{"device", "port", "state", "rate", "link_layer"}] of every RDMA port (IB or RoCE)."""
    ports = []
    for device in sorted(os.listdir(root)) if os.path.isdir(root) else []:
        folder = os.path.join(root, device, "ports")
        for port in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
            entry = {"device": device, "port": port}
            for name in ("state", "rate", "link_layer"):
                try:
                    entry[name] = _read(os.path.join(folder, port, name))
                except OSError:
                    entry[name] = None
            ports.append(entry)
    return ports


def host_facts(workdir):
    import resource
    return {"shm": _statvfs("/dev/shm"), "disk": _statvfs(workdir or os.getcwd()),
            "memlock": _limit(resource.RLIMIT_MEMLOCK), "nofile": _limit(resource.RLIMIT_NOFILE),
            "ib": infiniband()}


def _optional(nvml, name, *args):
    try:
        return getattr(nvml, name)(*args)
    except Exception:
        return None


def _gpu_state(nvml, index):
    """What the sampler does not read: MIG and persistence mode, retired pages, remapped rows."""
    handle = _optional(nvml, "nvmlDeviceGetHandleByIndex", index)
    mig = _optional(nvml, "nvmlDeviceGetMigMode", handle)
    pending = _optional(nvml, "nvmlDeviceGetRetiredPagesPendingStatus", handle)
    rows = _optional(nvml, "nvmlDeviceGetRemappedRows", handle)
    return {"mig": None if mig is None else int(mig[0] if isinstance(mig, (list, tuple)) else mig),
            "persistence": _optional(nvml, "nvmlDeviceGetPersistenceMode", handle),
            "retired_pending": None if pending is None else int(pending),
            "remap_failed": None if rows is None or len(rows) < 4 else int(rows[3])}


def no_gpu_here():
    """Nothing of NVIDIA's on this host (no device node, no nvidia-smi, no replay): then no NVML
    library is loaded at all."""
    import shutil
    return not (os.path.exists("/dev/nvidiactl") or os.environ.get("MLP_MAGIC_NVML_REPLAY")
                or shutil.which("nvidia-smi"))


def gpu_facts():
    """This host's GPUs through mlp_magic's sampler (NVML, or its replay in tests)."""
    if no_gpu_here():
        return {"source": "none", "error": "no GPUs", "driver": None, "gpus": [], "count": 0}
    try:
        from mlp_magic.gpu.sampler import open_sampler
    except Exception as error:
        return {"source": "none", "error": "not checked: mlp_magic's GPU sampler does not import here "
                                           "(%s)" % type(error).__name__}
    sampler = open_sampler()
    try:
        static = sampler.static()
        if static["gpus"]:
            sampler.wait_tick(GPU_TICK)
        sample = sampler.sample()
        names = ("util", "mem_used_mib", "temp_c", "power_w", "throttle", "xid", "ecc_uncorrected")
        for gpu, readings in zip(static["gpus"], sample["gpus"]):
            gpu.update(dict(zip(names, readings)), **_gpu_state(sampler.nvml, gpu["index"]))
        static["count"] = len(static["gpus"])
        return static
    finally:
        sampler.close()


def kernel_xids(limit=64):
    """The kernel log's "NVRM: Xid" lines, where it can be read (/dev/kmsg), without waiting."""
    try:
        fd = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    found = []
    try:
        while True:
            try:
                record = os.read(fd, 8192).decode(errors="replace")
            except BlockingIOError:
                break
            except OSError:
                continue   # a record overwritten while we read: go on with the next
            if not record:
                break
            if "NVRM: Xid" in record:
                found.append(record.split(";", 1)[-1].strip()[:200])
    finally:
        os.close(fd)
    return found[-limit:]


def affinity():
    """GPUs whose nearest NIC is across the socket, from the topology mlp_magic reads."""
    try:
        from mlp_magic.gpu.pure.hints import far_nic_hint
        from mlp_magic.gpu.probe import probe_local
    except Exception:
        return None
    gpus = probe_local(timeout=2.0)
    if not gpus.gpus or not gpus.nics:
        return None
    return {"nics": list(gpus.nics), "far": far_nic_hint(gpus)}


def gpus_and_affinity():
    found = gpu_facts()
    if found.get("gpus"):
        found["affinity"] = affinity()
    return found


def _in_thread(results, problems, key, work):
    def run():
        try:
            results[key] = work()
        except BaseException as error:
            problems.append("%s: %s: %s" % (key, type(error).__name__, str(error)[:200]))
    thread = threading.Thread(target=run, daemon=True, name="doctor-" + key)
    thread.start()
    return thread


def _options(argv):
    import argparse
    parser = argparse.ArgumentParser(prog="mlp_magic doctor probe")
    parser.add_argument("--timeout", type=float, default=8.0)
    parser.add_argument("--package", action="append", default=[])
    parser.add_argument("--workdir")
    parser.add_argument("--no-import", action="store_true")
    parser.add_argument("--no-gpus", action="store_true")
    return parser.parse_args(argv)


def probe(argv):
    """The facts of this host as a dict (``main`` prints it)."""
    options, started = _options(argv), time.monotonic()
    deadline = started + options.timeout
    packages = list(DEFAULT_PACKAGES) + [(name.replace("-", "_"), name) for name in options.package]
    facts = {"probe": VERSION, "hostname": os.uname().nodename, "time": time.time(),
             "python": {"executable": sys.executable, "version": sys.version.split()[0]},
             "env": environment(), "problems": []}
    results, problems = {}, facts["problems"]
    threads = [_in_thread(results, problems, "host", lambda: host_facts(options.workdir))]
    if not options.no_gpus:
        # one thread imports mlp_magic's GPU modules: two at once can meet in the import lock
        threads += [_in_thread(results, problems, "gpus", gpus_and_affinity),
                    _in_thread(results, problems, "xid_log", kernel_xids)]
    facts["packages"] = package_facts(packages)
    if not options.no_import:
        names = [name for name, _ in packages if facts["packages"][name]["installed"]]
        merge_packages(facts["packages"], import_packages(names, deadline - 0.2))
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
        if thread.is_alive():
            problems.append("%s: not finished within %g s" % (thread.name[len("doctor-"):], options.timeout))
    facts.update({key: value for key, value in results.items()})
    facts["seconds"] = round(time.monotonic() - started, 3)
    return facts


def main(argv=None):
    facts = probe(sys.argv[1:] if argv is None else argv)
    sys.stdout.write(json.dumps(facts) + "\n")
    sys.stdout.flush()
    os._exit(0)   # a thread still stuck in a driver call must not hold the answer back


if __name__ == "__main__":
    main()

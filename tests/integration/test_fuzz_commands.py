"""Fuzz the commands as a careless or hostile user types them (``mlp-magic``, ``allrun``), as real
processes: an exit status that means something (2 with one line on stderr for bad input), never a
traceback, never past a bound, and nothing left running in the command's session afterwards.

Hosts are this machine or names nobody resolves: nothing is contacted beyond loopback."""
from __future__ import annotations

import os
import subprocess
import sys

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mlp_magic.agent.leftovers import members
from tests.integration.test_allrun_local import local_env
from tests.timing import hang_bound
from tests.unit.fuzz_checks import JUNK

# A process's arguments cannot hold a NUL byte (execve refuses them before any program runs).
WORDS = JUNK.filter(lambda word: "\x00" not in word)
EXAMPLES = settings(max_examples=int(os.environ.get("MLP_FUZZ_COMMANDS", "25")), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
HOSTS = st.sampled_from(["localhost", "nosuchhost-mlpt", "local host", "-H", "", "'", "a;b", "w[0-", "$(id)"])
SECONDS = st.sampled_from(["0.5", "3", "0", "-1", "nan", "inf", "1e400", "x", "", "86401"])
FILES = st.sampled_from(["/dev/zero", "/etc/passwd", "/nonexistent", "/tmp", "-", ""])
COMMON = [st.just(["--json"]), st.tuples(st.just("--timeout"), SECONDS).map(list),
          st.tuples(st.just("-H"), HOSTS).map(list), st.tuples(st.just("--hostfile"), FILES).map(list),
          WORDS.map(lambda word: [word])]
VERBS = {
    "topo": [st.tuples(st.just("--host"), HOSTS).map(list),
             st.tuples(st.just("--from-file"), FILES).map(list)],
    "status": [st.just(["--no-probe"])],
    "stacks": [st.tuples(st.just("--pid"), st.sampled_from(["1", "0", "x", "99999999", "1,2"])).map(list),
               st.tuples(st.just("--match"), st.sampled_from(["train", "(", "", ".*"])).map(list),
               st.just(["--native"]), st.just(["--threads"])],
    "doctor": [st.tuples(st.just("--package"), st.sampled_from(["pip", "bad name", "no-such-pkg"])).map(list),
               st.tuples(st.just("--fraction"), st.sampled_from(["0.5", "2", "x"])).map(list)],
}


@st.composite
def mlp_magic_argv(draw):
    verb = draw(st.sampled_from(sorted(VERBS)))
    parts = draw(st.lists(st.one_of(*COMMON, *VERBS[verb]), max_size=4))
    argv = [verb] + [word for part in parts for word in part]
    if verb == "doctor":
        argv.append("--no-import")   # the packages' imports (torch) would make each example seconds long
    if verb in ("topo", "status", "doctor") and "--timeout" not in argv:
        argv += ["--timeout", "3"]
    return argv


# Never a real file to --copy (on this machine its destination is the file itself), and a stray
# word only as an option (a word that is not one starts the command: it would run).
NOT_FILES = st.sampled_from(["/nonexistent", "/tmp", "/dev/zero", ""])
ALLRUN_OPTIONS = [st.tuples(st.just("-H"), HOSTS).map(list), st.tuples(st.just("-t"), SECONDS).map(list),
                  st.tuples(st.just("-f"), st.sampled_from(["1", "0", "x", "64"])).map(list),
                  st.tuples(st.just("--copy"), NOT_FILES).map(list), st.just(["--json"]),
                  st.just(["--no-group"]),
                  st.tuples(st.just("--outdir"), st.sampled_from(["/proc/nope", "/etc/passwd"])).map(list),
                  WORDS.filter(bool).map(lambda word: ["--" + word])]   # a bare "--" starts the command
COMMANDS = st.sampled_from(["true", "echo hi", "exit 3", "sh -c 'sleep 60 & echo bg'", "printf '\\x00\\xff'",
                           ""])


@st.composite
def allrun_argv(draw):
    parts = draw(st.lists(st.one_of(*ALLRUN_OPTIONS), max_size=4))
    return [word for part in parts for word in part] + ["--", draw(COMMANDS)]


def run_isolated(argv: list, program: str) -> subprocess.CompletedProcess:
    """The command in a session of its own: what it leaves behind there is found afterwards."""
    process = subprocess.Popen([sys.executable, "-m", program, *argv], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, errors="replace", env=local_env(),
                               start_new_session=True, stdin=subprocess.DEVNULL)
    try:
        out, err = process.communicate(timeout=hang_bound(5.0))
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, 9)
        raise AssertionError(f"{argv} ran past its bound") from None
    left = members({process.pid})
    for pid in left:   # the background sleep of a command is allrun's to leave (as a terminal)
        os.kill(pid, 9)
    return subprocess.CompletedProcess(argv, process.returncode, out, err), left


def check(done, prog: str, statuses: tuple) -> None:
    assert "Traceback" not in done.stderr, (done.args, done.stderr[-2000:])
    assert done.returncode in statuses, (done.args, done.returncode, done.stderr[-500:])
    if done.returncode == 2:   # bad input: one line, naming the program, nothing on stdout
        assert done.stderr.count("\n") == 1 and done.stderr.startswith(prog), (done.args, done.stderr)
        assert len(done.stderr) < 600 and done.stdout == "", (done.args, done.stderr)


@EXAMPLES
@given(argv=mlp_magic_argv())
def test_the_mlp_magic_command(argv):
    done, left = run_isolated(argv, "mlp_magic.cli")
    check(done, "mlp-magic", (0, 1, 2))
    assert left == [], (argv, left)


@EXAMPLES
@given(argv=allrun_argv())
def test_the_allrun_command(argv):
    done, left = run_isolated(argv, "mlp_magic.allrun.command")
    check(done, "allrun", (0, 1, 2, 3, 255))
    if "sleep 60" not in argv[-1]:
        assert left == [], (argv, left)

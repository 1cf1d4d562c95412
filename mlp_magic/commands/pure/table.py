"""The verbs: one row each, shared by the magics and the ``mlp-magic`` / ``allrun`` commands.

A verb belongs to a magic (``%mpirun``'s ``--stop``), to a command (``mlp-magic topo``), or to
both (``%mlp_stacks`` and ``mlp-magic stacks``). It lists the options it takes (commands/options),
what may follow them, and its handlers by name, so that reading this table loads none of them.
A magic's verb is chosen by its flag (``--stop``), a script word, or the magic's form (a cell, a
line); an option another verb of the magic takes "does not go with" this one.
"""
from __future__ import annotations

from mlp_magic.commands.pure.options import (
    ALL_OUTPUTS, CONNECT_TIMEOUT, COPY, COPY_NAMES, DIFF, DOCTOR_TIMEOUT, EXCLUDE, FANOUT, FORCE, FRACTION,
    FRAME, FROM_FILE, FROM_RANK, HELP, HOST_LIST, IF, HOST_TIMEOUT, HOSTFILE, INTERVAL, JSON, KEEP,
    LINK_RANKS, LISTEN_HOST,
    LINKS, LINKS_BACKEND, LOG_DIR, MATCH, NATIVE, NO_FOLD, NO_GROUP, NO_IMPORT, NO_PROBE, NP, ONCE, OUT,
    OUTDIR, OVERSUBSCRIBE, PACKAGE, PIDS, PORT, PROBE_TIMEOUT, PYTHON, RANKS, RATE, REFRESH, RESTART, SIZE,
    SSH,
    STACKS_TIMEOUT, STATIC, STATUS_TIMEOUT, THREADS, TIMEOUT, TOPO_FILE, TOPO_HOST)
from mlp_magic.core.options import Option, Options, break_location, python_name
from mlp_magic.core.records import Record

LINE, CELL, BOTH = "line", "cell", "both"   # the magic forms a verb is written in


class Verb(Record, frozen=True):
    name: str = ""
    magic: str = ""             # the magic it belongs to ("mpirun"), or ""
    flag: object = None         # the Option naming it in the magic's line (--stop), None: the default
    form: str = LINE            # LINE (%mpirun), CELL (%%mpirun) or BOTH
    command: str = ""           # "stacks" for `mlp-magic stacks`; "allrun" for the allrun program
    options: tuple = ()         # taken in the notebook and in a terminal
    magic_options: tuple = ()   # in the notebook only (-o NAME)
    command_options: tuple = ()   # in a terminal only (--json, --help)
    rest: str = ""              # what follows the options: "", "command", "script", "expression", "id"
    run: str = ""               # "module:function", called (context, options) by the magic
    run_command: str = ""       # "module:function", called (options) by the command: its exit status
    summary: str = ""

    @property
    def label(self) -> str:
        """How messages name it: ``--stop``, ``a script``, ``%%mpirun``, ``mlp-magic stacks``."""
        if self.flag is not None:
            return self.flag.names[0]
        if self.rest == "script":
            return "a script"
        if not self.magic:
            return f"mlp-magic {self.command}"
        return f"%{'%' if self.form == CELL else ''}{self.magic}"


def _flag(name: str, kind=None, metavar: str = "") -> Option:
    return Option(names=(f"--{name}",), dest=f"verb:{name}", kind=kind, metavar=metavar)


WORLD = (NP, HOSTFILE, HOST_LIST, OVERSUBSCRIBE)
SHOWN = (NO_GROUP, DIFF, NO_FOLD, ALL_OUTPUTS, OUT, LOG_DIR)
CELL_OPTIONS = (*WORLD, RANKS, TIMEOUT, *SHOWN, RESTART, KEEP)
VALUES = (RANKS, OUT, TIMEOUT)
WORLDS = "mlp_magic.mpirun.verbs"

MPIRUN = (
    Verb(name="cell", magic="mpirun", form=CELL, options=CELL_OPTIONS, run=f"{WORLDS}:cell",
         summary="run the cell on every rank"),
    Verb(name="script", magic="mpirun", rest="script", options=CELL_OPTIONS,
         run="mlp_magic.debugging.verbs:script", summary="run a script on every rank, as mpiexec would"),
    Verb(name="post-mortem", magic="mpirun", flag=_flag("post-mortem"), form=CELL,
         options=(FRAME, RANKS, TIMEOUT, *SHOWN), run="mlp_magic.debugging.verbs:post_mortem",
         summary="run the cell in the frame that failed, on the ranks whose last cell failed"),
    Verb(name="profile", magic="mpirun", flag=_flag("profile"), form=CELL,
         options=(*WORLD, RANKS, TIMEOUT, RATE, NATIVE, *SHOWN), run="mlp_magic.profile.verbs:profile",
         summary="run the cell with every rank sampled (py-spy): where each group spent it, and the "
                 "straggler the others waited for"),
    Verb(name="where", magic="mpirun", flag=_flag("where"), options=(RANKS, TIMEOUT, *SHOWN),
         run="mlp_magic.debugging.verbs:where", summary="the failed ranks' tracebacks and locals"),
    Verb(name="status", magic="mpirun", flag=_flag("status"), run=f"{WORLDS}:status",
         summary="the World: its ranks, hosts and MPI"),
    Verb(name="stop", magic="mpirun", flag=_flag("stop"), run=f"{WORLDS}:stop", summary="stop the World"),
    Verb(name="restart", magic="mpirun", flag=_flag("restart"), options=WORLD, run=f"{WORLDS}:restart",
         summary="start the World again"),
    Verb(name="keep", magic="mpirun", flag=_flag("keep"), run=f"{WORLDS}:keep",
         summary="the World outlives this kernel (until MLP_MAGIC_KEEP_HOURS with no kernel)"),
    Verb(name="no-keep", magic="mpirun", flag=_flag("no-keep"), run=f"{WORLDS}:no_keep",
         summary="the World stops with this kernel again"),
    Verb(name="attach", magic="mpirun", flag=_flag("attach"), rest="id", options=(FORCE,),
         run=f"{WORLDS}:attach", summary="take up a running World of yours on this machine: --attach [ID]"),
    Verb(name="unblock", magic="mpirun", flag=_flag("unblock"), options=(RANKS,),
         run="mlp_magic.unblock.verbs:unblock",
         summary="end the hung torch.distributed collectives, keeping every rank's process and state"),
    Verb(name="respawn", magic="mpirun", flag=_flag("respawn"), options=(RANKS, COPY_NAMES, FROM_RANK),
         run="mlp_magic.respawn.verbs:respawn",
         summary="start the dead ranks again as the same ranks; the live ones keep their state (ULFM)"),
    Verb(name="stacks", magic="mpirun", flag=_flag("stacks"), options=(LOG_DIR,), run=f"{WORLDS}:stacks",
         summary="every rank's Python stack, merged"),
    Verb(name="compare", magic="mpirun", flag=_flag("compare", metavar="EXPR"), rest="expression",
         options=VALUES, run="mlp_magic.values.verbs:compare",
         summary="which ranks hold equal values of EXPR, and how the others differ"),
    Verb(name="break", magic="mpirun", flag=_flag("break", break_location, "FILE:LINE"), options=(RANKS, IF),
         run="mlp_magic.debugging.breaks:set_break",
         summary="stop the ranks at FILE:LINE (cell:LINE in cells) from the next cell on; --break clear"),
    Verb(name="pdb", magic="mpirun", flag=_flag("pdb", metavar="CMD"), form=BOTH, rest="expression",
         options=(RANKS, TIMEOUT), run="mlp_magic.debugging.stopped:pdb",
         summary="a pdb command on every rank stopped at a breakpoint (%%mpirun --pdb: Python in "
                 "their frames)"),
    Verb(name="pull", magic="mpirun", flag=_flag("pull", python_name, "NAME"), options=VALUES,
         run="mlp_magic.values.verbs:pull", summary="{rank: NAME} from the ranks"),
    Verb(name="push", magic="mpirun", flag=_flag("push", python_name, "NAME"), options=VALUES,
         run="mlp_magic.values.verbs:push", summary="the notebook's NAME to the ranks"),
)
LINE_DEFAULT, CELL_DEFAULT = "status", "cell"   # %mpirun alone, %%mpirun alone

ALLRUN = Verb(
    name="allrun", magic="allrun", form=BOTH, command="allrun", rest="command",
    options=(HOSTFILE, HOST_LIST, EXCLUDE, FANOUT, CONNECT_TIMEOUT, HOST_TIMEOUT, SSH, NO_GROUP, DIFF,
             OUTDIR, COPY, JSON),
    magic_options=(OUT,), command_options=(HELP,), run="mlp_magic.allrun.magic:allrun_verb",
    run_command="mlp_magic.allrun.command:main",
    summary="run a shell command once on every host of the job and show identical outputs once")
CLUSTER = Verb(name="cluster", magic="mlp_cluster",
               options=(HOSTFILE, HOST_LIST, REFRESH, STATIC, PROBE_TIMEOUT, NO_PROBE, TOPO_FILE),
               run="mlp_magic.cluster.widget:cluster_verb",
               summary="hosts, ranks and GPU topology as a widget, live while cells run")
STACKS = Verb(name="stacks", magic="mlp_stacks", command="stacks",
              options=(HOSTFILE, HOST_LIST, PIDS, MATCH, NATIVE, THREADS, STACKS_TIMEOUT, SSH, JSON),
              command_options=(HELP,), run="mlp_magic.stacks.command:in_notebook",
              run_command="mlp_magic.stacks.command:run_command",
              summary="every rank's Python stack (py-spy), all hosts at once, merged into one tree")
DOCTOR = Verb(name="doctor", magic="mlp_doctor", command="doctor",
              options=(HOSTFILE, HOST_LIST, PACKAGE, DOCTOR_TIMEOUT, SSH, PYTHON, NO_IMPORT, LINKS,
                       LINK_RANKS, FRACTION, SIZE, LINKS_BACKEND, JSON),
              command_options=(HELP,), run="mlp_magic.doctor.command:in_notebook",
              run_command="mlp_magic.doctor.command:run_command",
              summary="check every host of the job at once and name the odd one out")
COMMANDS = (
    Verb(name="topo", command="topo", options=(TOPO_HOST, FROM_FILE, JSON, PROBE_TIMEOUT, SSH),
         command_options=(HELP,), run_command="mlp_magic.cluster.cli:run_topo",
         summary="GPU/NIC link matrix (like nvidia-smi topo -m)"),
    Verb(name="status", command="status", options=(HOSTFILE, HOST_LIST, JSON, STATUS_TIMEOUT, SSH, NO_PROBE),
         command_options=(HELP,), run_command="mlp_magic.cluster.cli:run_status",
         summary="hosts, slots, ranks, reachability and GPUs"),
    STACKS,
    Verb(name="top", command="top", options=(HOSTFILE, HOST_LIST, ONCE, INTERVAL), command_options=(HELP,),
         run_command="mlp_magic.cluster.top:run_top",
         summary="the Worlds' ranks and every host's GPUs, live"),
    DOCTOR,
    Verb(name="worlds", command="worlds", options=(JSON,), command_options=(HELP,),
         run_command="mlp_magic.world.keep.found:run_worlds",
         summary="the Worlds on this machine: kernel alive or gone, ranks, hosts, kept"),
    Verb(name="stop", command="stop", rest="id", command_options=(HELP,),
         run_command="mlp_magic.world.keep.found:run_stop", summary="stop a World: stop ID"),
    Verb(name="dashboard", command="dashboard", options=(PORT, LISTEN_HOST), command_options=(HELP,),
         run_command="mlp_magic.panel.standalone:run_command",
         summary="the live cluster view as a web page, with no Jupyter server: one line, its URL"),
)


def verbs_of_magic(magic: str) -> tuple:
    return tuple(verb for verb in (*MPIRUN, ALLRUN, CLUSTER, STACKS, DOCTOR) if verb.magic == magic)


def command_verb(name: str):
    """The ``mlp-magic NAME`` verb, or None."""
    return next((verb for verb in COMMANDS if verb.command == name), None)


def options_for(verb: Verb, **values) -> Options:
    """The verb's options with their defaults, as if the user had given ``values`` (the panel's
    actions, tests, and code that calls a verb's handler directly)."""
    options = Options((*verb.options, *verb.magic_options, *verb.command_options), {})
    for name, value in values.items():
        setattr(options, name, value)
    return options

"""The IPython magics: thin wrappers that parse a line and hand over to the features' commands.

``%%mpirun`` -> ``world.command``; ``%allrun`` / ``%%allrun`` -> ``fanout.magic`` (through the
live World's engines when it covers the hosts, else ssh); ``%mlp_cluster`` -> ``cluster``;
``%mlp_stacks`` -> ``stacks.command`` (the same report as ``mlp-magic stacks``); ``%mlp_doctor`` ->
``doctor.command`` (the same report as ``mlp-magic doctor``).
"""
from __future__ import annotations

import functools
import os

from IPython.core.magic import Magics, line_cell_magic, line_magic, magics_class, no_var_expand

from mlp_magic.debugging import prepare as debug
from mlp_magic.errors import MlpMagicError, RankFailure
from mlp_magic.mpirun import verbs
from mlp_magic.mpirun.args import check_form, parse_mpirun_args
from mlp_magic.mpirun.run import run_cell
from mlp_magic.world.owner import WorldOwner


def _one_line_errors(method):
    """Bad input shows as one line: MlpMagicError renders without a traceback, and
    ``from None`` drops the chain of internal frames."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except MlpMagicError as err:
            raise err.with_traceback(None) from None

    return wrapper


@magics_class
class MlpMagics(Magics):
    def __init__(self, shell=None, **kwargs):
        super().__init__(shell=shell, **kwargs)
        self.owner = WorldOwner()   # this kernel's World

    @no_var_expand  # $VARS are ours to expand: os.environ first, then the notebook
    @line_cell_magic
    @_one_line_errors
    def mpirun(self, line: str, cell: str | None = None):
        """Run the cell on every rank: ``%%mpirun [-np N] [--hostfile F | -H HOSTS] [--ranks SPEC]
        [--timeout S] [--no-group] [--diff] [--all-outputs] [-o NAME] [--restart] [--log-dir DIR]``.

        ``%%mpirun --post-mortem [--frame K] [--ranks SPEC]``: the cell runs on the ranks whose last
        cell failed, inside the frame that failed (K=0: the innermost frame of user code).

        Line forms: ``%mpirun script.py [args...]`` (the script on every rank, as mpiexec would run
        it), ``%mpirun --where`` (the failed ranks' tracebacks and locals), ``--status``, ``--stop``,
        ``--restart [-np N]``, ``--stacks`` (every rank's Python stack, grouped); ``--compare EXPR``,
        ``--pull NAME``, ``--push NAME`` (values on the ranks: see ``_values``).
        """
        args = parse_mpirun_args(line, os.environ, self.shell.user_ns)
        if args.compare is not None or args.pull or args.push:
            if cell is not None:
                raise MlpMagicError("%%mpirun: --compare, --pull and --push are line forms "
                                    "(%mpirun --pull x)")
            return self._values(args)
        check_form(args, cell=cell is not None)
        if cell is None and not (args.script or args.where):
            answer = self._line_verb(args)
            if isinstance(answer, tuple):  # --stacks: text and HTML
                from IPython.display import display

                display({"text/plain": answer[0].strip(), "text/html": answer[1]}, raw=True)
            else:
                print(answer)
            return None
        args, code = debug.prepare(self.owner, args, cell, os.environ)
        try:
            result = run_cell(self.owner, args, code, os.environ)
        except RankFailure as failure:
            self._store(args.out, failure.result)
            raise
        self._store(args.out, result)
        return None

    @no_var_expand
    @line_cell_magic
    @_one_line_errors
    def allrun(self, line: str, cell: str | None = None):
        """Run a shell command once on every host: ``%allrun pip install x`` or ``%%allrun``.

        With a World up that covers the hosts, its engines run the command (no ssh)."""
        from mlp_magic.allrun.magic import allrun_magic
        from mlp_magic.allrun.options import parse_allrun_line
        from mlp_magic.allrun.plan import select_hosts
        from mlp_magic.allrun.via_engines import WorldTransport, covers

        transport = None
        world = self.owner.world
        if world is not None:
            options = parse_allrun_line(line, cell, os.environ, self.shell.user_ns)
            hosts, _ = select_hosts(options, os.environ)
            if covers(world, [h.name for h in hosts]):
                transport = WorldTransport(world)
        return allrun_magic(line, cell, self.shell.user_ns, transport=transport)

    @no_var_expand
    @line_magic
    @_one_line_errors
    def mlp_cluster(self, line: str = ""):
        """Show hosts, ranks and GPU topology as a widget: ``%mlp_cluster [--hostfile F | -H HOSTS]
        [--refresh S] [--timeout S] [--no-probe] [--topo-file HOST=FILE ...]``."""
        from mlp_magic.cluster.args import parse_cluster_args
        from mlp_magic.cluster.widget import cluster_view
        from mlp_magic.core.line_args import expand_vars

        return cluster_view(**parse_cluster_args(expand_vars(line, os.environ, self.shell.user_ns)))

    def _values(self, args):
        """``--compare``: the grouped comparison is printed (``-o NAME`` keeps the Comparison).
        ``--pull``: ``{rank: value}`` is the line's value (``d = %mpirun --pull x``), or goes
        to ``-o NAME``. ``--push``: a line saying what went where."""
        from mlp_magic.values.verbs import values_command

        answer = values_command(self.owner, args, self.shell.user_ns, os.environ)
        if args.pull and not args.out:
            return answer
        self._store(args.out, answer)
        if args.pull:
            print(f"{args.out} = {{rank: {args.pull}}} from {len(answer)} ranks")
        else:
            print(answer.text if args.compare is not None else answer)
        return None

    @no_var_expand
    @line_magic
    @_one_line_errors
    def mlp_stacks(self, line: str = ""):
        """Every rank's Python stack, of any job, merged into one tree: ``%mlp_stacks [--hostfile F |
        -H HOSTS] [--pid P,.. | --match RE] [--native] [--threads] [--timeout S] [--ssh CMD] [--json]``."""
        from mlp_magic.stacks.command import gather
        from mlp_magic.stacks.options import parse_stacks_line

        options = parse_stacks_line(line, os.environ, self.shell.user_ns)
        _show(gather(options, transport_for=_world_transport_for(self.owner.world)), options.json)

    @no_var_expand
    @line_magic
    @_one_line_errors
    def mlp_doctor(self, line: str = ""):
        """Check every host of the job at once and name the odd one out: ``%mlp_doctor [--hostfile F |
        -H HOSTS] [--package NAME ...] [--timeout S] [--ssh CMD] [--python PATH] [--no-import] [--links
        [--np N] [--fraction F] [--size MB]] [--json]``. Through the live World's engines when it covers
        the hosts, else ssh."""
        from mlp_magic.doctor.command import gather
        from mlp_magic.doctor.options import parse_doctor_line

        options = parse_doctor_line(line, os.environ, self.shell.user_ns)
        _show(gather(options, transport_for=_world_transport_for(self.owner.world)), options.json)

    def _line_verb(self, args):
        """``%mpirun --status | --stop | --restart | --stacks``: a line of text, or (for
        --stacks) a (text, html) pair."""
        if args.stacks:
            return verbs.stacks(self.owner, args)
        if args.stop:
            return verbs.stop(self.owner)
        if args.restart:
            return verbs.restart(self.owner, args, os.environ)
        return verbs.status(self.owner)

    def _store(self, name: str | None, value) -> None:
        """``-o NAME``: the run's Results in the notebook's namespace."""
        if name:
            self.shell.user_ns[name] = value


def _show(report, as_json: bool) -> None:
    """A report with ``text``, ``html`` and ``to_json()`` (stacks, doctor): JSON printed, else
    displayed as HTML with its text for terminals."""
    if as_json:
        import json

        print(json.dumps(report.to_json(), indent=1))
    else:
        from IPython.display import display

        display({"text/plain": report.text.rstrip(), "text/html": report.html}, raw=True)


def _world_transport_for(world):
    """For ``%mlp_stacks`` and ``%mlp_doctor``: the live World's engines reach the hosts it covers
    (no ssh), as for ``%allrun``; None without a World."""
    if world is None:
        return None
    from mlp_magic.allrun.via_engines import WorldTransport, covers

    return lambda names: WorldTransport(world) if covers(world, names) else None

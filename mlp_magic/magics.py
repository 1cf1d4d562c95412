"""The IPython magics: each line goes to commands/parse, which names a verb of commands/table, and
the verb's handler runs with this kernel's World owner.

``%%mpirun`` and ``%mpirun``'s line forms, ``%allrun`` / ``%%allrun``, ``%mlp_cluster``,
``%mlp_stacks`` (the report of ``mlp-magic stacks``) and ``%mlp_doctor`` (``mlp-magic doctor``'s).
"""
from __future__ import annotations

import functools
import os

from IPython.core.magic import Magics, line_cell_magic, line_magic, magics_class, no_var_expand

from mlp_magic.commands.pure.parse import allrun_in_line, choose_in_line
from mlp_magic.commands.context import Context, handler
from mlp_magic.commands.pure.table import ALLRUN
from mlp_magic.errors import MlpMagicError
from mlp_magic.panel.locate import dashboard_line
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

    def _run(self, magic: str, line: str, cell: str | None = None):
        choice = choose_in_line(magic, line, cell, os.environ, self.shell.user_ns)
        return handler(choice.verb.run)(self._context(cell), choice.options)

    def _context(self, cell: str | None = None) -> Context:
        return Context(self.owner, os.environ, self.shell.user_ns, cell)

    @no_var_expand  # $VARS are ours to expand: os.environ first, then the notebook
    @line_cell_magic
    @_one_line_errors
    def mpirun(self, line: str, cell: str | None = None):
        """Run the cell on every rank: ``%%mpirun [-np N] [--hostfile F | -H HOSTS] [--ranks SPEC]
        [--timeout S] [--no-group] [--diff] [--no-fold] [--all-outputs] [-o NAME] [--restart]
        [--log-dir DIR]``.

        ``%%mpirun --post-mortem [--frame K] [--ranks SPEC]``: the cell runs on the ranks whose last
        cell failed, inside the frame that failed (K=0: the innermost frame of user code).

        Line forms: ``%mpirun script.py [args...]`` (the script on every rank, as mpiexec would run
        it), ``%mpirun --where`` (the failed ranks' tracebacks and locals), ``--status``, ``--stop``,
        ``--restart [-np N]``, ``--stacks`` (every rank's Python stack, grouped); ``--compare EXPR``,
        ``--pull NAME``, ``--push NAME`` (values on the ranks). The verbs: commands/table.
        """
        return self._run("mpirun", line, cell)

    @no_var_expand
    @line_cell_magic
    @_one_line_errors
    def allrun(self, line: str, cell: str | None = None):
        """Run a shell command once on every host: ``%allrun pip install x`` or ``%%allrun``.

        With a World up that covers the hosts, its engines run the command (no ssh)."""
        options = allrun_in_line(line, cell, os.environ, self.shell.user_ns)
        return handler(ALLRUN.run)(self._context(cell), options)

    @no_var_expand
    @line_magic
    @_one_line_errors
    def mlp_cluster(self, line: str = ""):
        """Show hosts, ranks and GPU topology as a widget: ``%mlp_cluster [--hostfile F | -H HOSTS]
        [--refresh S] [--static] [--timeout S] [--no-probe] [--topo-file HOST=FILE ...]``: live (a
        kernel thread updates it while other cells run) unless ``--static``; its text face ends
        with the dashboard's URL."""
        view = self._run("mlp_cluster", line)
        if hasattr(view, "where_dashboard"):
            view.where_dashboard = dashboard_line
        return view

    @no_var_expand
    @line_magic
    @_one_line_errors
    def mlp_stacks(self, line: str = ""):
        """Every rank's Python stack, of any job, merged into one tree: ``%mlp_stacks [--hostfile F |
        -H HOSTS] [--pid P,.. | --match RE] [--native] [--threads] [--timeout S] [--ssh CMD] [--json]``."""
        return self._run("mlp_stacks", line)

    @no_var_expand
    @line_magic
    @_one_line_errors
    def mlp_doctor(self, line: str = ""):
        """Check every host of the job at once and name the odd one out: ``%mlp_doctor [--hostfile F |
        -H HOSTS] [--package NAME ...] [--timeout S] [--ssh CMD] [--python PATH] [--no-import] [--links
        [--np N] [--fraction F] [--size MB]] [--json]``. Through the live World's engines when it covers
        the hosts, else ssh."""
        return self._run("mlp_doctor", line)

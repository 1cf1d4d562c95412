"""``mlp-magic stacks`` / ``%mlp_stacks``: the Python stacks of any job's ranks, on every host at once.

``options`` (the command's and the magic's options), ``scan`` (runs on each host: finds the
processes, runs py-spy), ``collect`` (asks every host at once over the allrun transport),
``command`` (the report, the command and the magic). The merging and rendering are pure:
``core/proc_ranks`` and ``stacks/pure/`` (py-spy's output, frames, the tree, its rendering, the
report's sections).
"""

from mlp_magic.errors import MlpMagicError


class StacksFault(MlpMagicError):
    """Nothing could be read, for one reason with a known fix (its message names it)."""

"""``mlp-magic stacks`` / ``%mlp_stacks``: the Python stacks of any job's ranks, on every host at once.

``scan`` (runs on each host: finds the processes, runs py-spy), ``collect`` (asks every host at
once over the ssh transport or a World's engines), ``command`` (the report, for the command and
the magic: one verb of commands/pure/table), ``snapshot`` (a World's ranks, through faulthandler,
even blocked in C). The merging and rendering are pure: ``core/proc_ranks`` and ``stacks/pure/``.
Nothing is imported here: a rank's recorder (stacks/rank) loads this package.
"""

"""The verbs: one table (pure/table), shared by the magics and the ``mlp-magic`` and ``allrun``
commands, one parser of their lines (pure/parse over core/options), and what a handler gets."""

"""Scripts on ranks, ``--where`` and ``--post-mortem``."""

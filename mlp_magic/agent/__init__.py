"""The per-host agent: one small process per host of a World, beside its engines.

It reads the host's GPUs once a second (``gpu/sampler``), keeps ten minutes of them
(``gpu/pure/history``), and answers the server and ``mlp-magic top`` over TCP without the
kernel's help (a kernel stuck in a cell is when they need it most): the GPU stream, SIGINT to
its ranks, the tail of a rank's log. ``agent/rank/start`` starts it from a rank; it exits
when that rank dies. ``protocol`` is the wire format, ``server`` the TCP side, ``actions`` what
the ops do, ``feed`` the sampling loop, ``client`` the asyncio side the callers use.

Standard library, ``gpu/`` and ``core/`` only, threads rather than asyncio: it lives as long
as the World and must stay light.
"""

"""How long an unblock waits, in one place for the kernel (unblock/verbs, unblock/pure/report),
the server (panel/actions) and the ranks (unblock/rank/mpi_world). Imports nothing: a rank loads it
with mpi_world, and holds no module beyond what it needs (engine/__init__)."""
from __future__ import annotations

BOUND_S = 10.0   # how long the ranks have to come free, from the signal or the last one freed
# A freed rank's way out costs CPU (IPython formats its traceback through torch's frames: 0.3-0.4 s
# measured): where ranks share cores, they come out one after another, and the first only once
# most are nearly done (64 ranks on 2 cores: 12 s). The bound grows with the ranks a core holds.
FREE_CPU_S = 0.5
# A rank that shows no sign this long after the signal is signalled again (faulthandler skips a
# handler that starts while another of the process's writes a stack dump), and the idle ranks
# drive MPI's progress: the stuck call may wait on one of them (unblock/rank/mpi_world).
AGAIN_AFTER_S = 1.0

"""unblock/rank/side.unblock: a repeated ask of the same hang takes the way the first took."""
from __future__ import annotations

from mlp_magic.unblock.rank import mpi_world, side


def test_a_repeated_ask_after_a_gloo_cut_never_revokes_mpi(monkeypatch):
    """The second signal of one unblock may find a freed rank on its way out of the failed
    collective, in C without the GIL: it looked like an MPI call, and COMM_WORLD was revoked."""
    done = []
    monkeypatch.setattr(side, "_STATE", {})
    monkeypatch.setattr(mpi_world, "ulfm_ready", lambda: True)
    monkeypatch.setattr(mpi_world, "revoke_world", lambda: done.append("revoke") or True)
    monkeypatch.setattr(side, "cut_gloo_connections", lambda: done.append("cut"))
    monkeypatch.setattr(side, "abort_nccl_groups", lambda: done.append("abort"))
    spins = iter([False, True])   # the first ask: in a gloo wait; the second: spinning in C
    monkeypatch.setattr(side, "main_thread_spins_in_c", lambda: next(spins))
    side.unblock()
    side.unblock()
    assert done == ["cut", "abort", "cut", "abort"] and side.unblocked()
    side.regrouped()   # the group made again: the next hang is asked afresh
    monkeypatch.setattr(side, "main_thread_spins_in_c", lambda: True)
    side.unblock()
    assert done[-1] == "revoke"

"""``%mpirun --pull NAME`` and ``--push NAME``: move a value between the notebook and the ranks.

Pull: each rank serialises its value (GPU tensors copied to the CPU first, ``values/rank/transfer``)
and checks the size against the cap before anything is sent; the notebook gets ``{rank: value}``.
When the ranks could send more than half of the machine's available memory in all, their sizes
are asked first and a total that does not fit is refused.
Push: the notebook serialises once, checks the same cap, and one broadcast request carries the
value to every rank (the controller fans it out). Pull uses ipyparallel's serialisation; push
writes the value with cloudpickle, as ipyparallel does for functions, so the notebook's functions,
lambdas and closures travel by value, inside whatever holds them.
"""
from __future__ import annotations

from collections.abc import Mapping

from mlp_magic.values.pure.compare import size_text
from mlp_magic.core.ranges import by_message, fold_ranks
from mlp_magic.values.rank import transfer as on_rank
from mlp_magic.errors import MlpMagicError
from mlp_magic.client.job import call
from mlp_magic.client.remote_errors import Failed


def memory_budget() -> int:
    """What a pull may bring into the kernel in all: half of this machine's available memory."""
    import psutil

    return psutil.virtual_memory().available // 2


def _refuse_total_over_memory(world, name: str, ranks: list, cap: int, timeout: float | None) -> None:
    """Where every rank sending up to the cap could exhaust the kernel's memory (128 ranks x
    64 MB = 8 GB), ask the ranks for their sizes first: one small round trip, nothing sent."""
    budget = memory_budget()
    if len(ranks) * cap <= budget:
        return
    sizes = call(world, ranks, on_rank.size_of, name, timeout=timeout, what=f"%mpirun --pull {name}")
    total = sum(size for size in sizes.values() if isinstance(size, int))
    if total > budget:
        raise MlpMagicError(f"%mpirun --pull {name}: nothing pulled: {len(ranks)} ranks hold "
                            f"{size_text(total)} of it in all, over half of this machine's available memory "
                            f"({size_text(budget)}): pull fewer ranks (--ranks) or a part of the value")


def pull(world, name: str, ranks: list, cap: int, timeout: float | None = None) -> dict:
    """{rank: value} of ``name`` on ``ranks``; one MlpMagicError naming every rank that refused
    or whose value cannot be loaded here, or the total when it would not fit in memory."""
    _refuse_total_over_memory(world, name, ranks, cap, timeout)
    answers = call(world, ranks, on_rank.fetch, name, cap, timeout=timeout, what=f"%mpirun --pull {name}")
    values, problems = {}, {}
    for rank, answer in sorted(answers.items()):
        if isinstance(answer, (Failed, on_rank.Refused)):
            problems[rank] = answer.message
        else:
            try:
                values[rank] = _unpack(answer)
            except Exception as exc:
                problems[rank] = (f"its {answer.type_name} cannot be loaded in the notebook: "
                                  f"{type(exc).__name__}: {exc}")
    if problems:
        raise MlpMagicError(f"%mpirun --pull {name}: nothing pulled: {by_message(problems)}")
    return values


def _unpack(packed):
    from ipyparallel.serialize import deserialize_object

    return deserialize_object(list(packed.buffers))[0][0]   # the value travels in a 1-tuple


def push(world, name: str, namespace: Mapping, ranks: list, cap: int, timeout: float | None = None) -> str:
    """Send the notebook's ``name`` to ``ranks``; a line saying what was sent."""
    from ipyparallel.serialize import PrePickled

    if name not in namespace:
        raise MlpMagicError(f"%mpirun --push: name {name!r} is not defined in the notebook")
    value = namespace[name]
    parts = _by_value(name, value)
    size = sum(len(part) for part in parts)
    if size > cap:
        raise MlpMagicError(f"%mpirun --push {name}: {name} is {size_text(size)}, over the cap of "
                            f"{size_text(cap)} (MLP_MAGIC_PULL_CAP)")
    packed = PrePickled((parts,))   # serialised once, here, whatever the number of ranks
    answers = call(world, ranks, on_rank.store, name, packed, timeout=timeout, what=f"%mpirun --push {name}")
    problems = {rank: answer.message for rank, answer in answers.items() if isinstance(answer, Failed)}
    if problems:
        raise MlpMagicError(f"%mpirun --push {name}: not stored on every rank: {by_message(problems)}")
    return f"pushed {name} ({type(value).__qualname__}, {size_text(size)}) to ranks {fold_ranks(ranks)}"


def _by_value(name: str, value) -> list:
    """``value`` as cloudpickle writes it (what ipyparallel uses for functions): the notebook's
    functions, lambdas and closures, and what holds them, travel by value, not as a name in a
    ``__main__`` the ranks do not have; large buffers (numpy) out of band, protocol 5."""
    import pickle
    import sys

    import cloudpickle

    buffers: list = []
    try:
        head = cloudpickle.dumps(value, protocol=5, buffer_callback=buffers.append)
        return [head] + [bytes(buffer.raw()) for buffer in buffers]
    except Exception as exc:   # whatever a __reduce__ raises: one line naming it
        about = f"a {type(value).__qualname__} of {size_text(sys.getsizeof(value))} (its own size)"
        why = f"{type(exc).__name__}: {exc}" if isinstance(exc, (pickle.PicklingError, TypeError)) \
            else f"{type(exc).__name__} while pickling: {exc}"
        raise MlpMagicError(f"%mpirun --push {name}: {about} cannot be pickled: {why}") from None

"""``-o NAME`` keeps every rank's whole output: where the notebook showed only the start of a
stream (the rank's display cap), the rest comes from the rank's log, read by the rank itself.

Nothing is fetched for a cell that stayed under the cap: the rank's note at a capped stream's
end (output/pure/capped) is what names the streams to fetch and where their logs are.
"""
from __future__ import annotations

from mlp_magic import config
from mlp_magic.errors import MlpMagicError
from mlp_magic.output.pure.capped import capped_stream
from mlp_magic.output.rank.whole_log import Unread, whole_logs
from mlp_magic.client.job import call_each
from mlp_magic.client.remote_errors import Failed, grouped_causes
from mlp_magic.values.pure.compare import size_text
from mlp_magic.values.transfer import memory_budget

STREAMS = ("stdout", "stderr")
FETCH_TIMEOUT_S = 120.0


def keep_whole_output(world, result, name: str, notice=print) -> None:
    """Put each capped stream's whole text in ``result`` (in place). What cannot be fetched keeps
    the start the notebook showed, with its note, and one notice says which ranks and why."""
    capped = {}   # rank -> {stream: CappedStream}
    for rank_result in result.results:
        for stream in STREAMS:
            found = capped_stream(getattr(rank_result, stream))
            if found is not None:
                capped.setdefault(rank_result.rank, {})[stream] = found
    if not capped:
        return
    causes = _fetch_into(world, result, capped)
    if causes:
        host_of = {r.rank: r.host for r in result.results}.get
        notice(f"-o {name} keeps only the start of some ranks' output shown above (their logs hold "
               f"all): {grouped_causes(causes, host_of)}")


def _fetch_into(world, result, capped: dict) -> dict:
    """Fetch and store the whole streams; {rank: why not} for those left as shown."""
    total = sum(len(c.shown) + c.left_out for streams in capped.values() for c in streams.values())
    if total > memory_budget():
        why = f"{size_text(total)} in all, over half of this machine's available memory"
        return {rank: why for rank in capped}
    if world is None or not world.alive():
        return {rank: "the World stopped" for rank in capped}
    cap = config.pull_cap()
    arguments = {rank: ([c.path for c in streams.values()], cap) for rank, streams in capped.items()}
    try:
        answers = call_each(world, arguments, whole_logs, timeout=FETCH_TIMEOUT_S,
                            what="-o: reading the ranks' logs")
    except MlpMagicError as err:
        return {rank: str(err) for rank in capped}
    by_rank, causes = {r.rank: r for r in result.results}, {}
    for rank, streams in capped.items():
        answer = answers.get(rank)
        if isinstance(answer, Failed):
            causes[rank] = answer.message
            continue
        for (stream, _), text in zip(streams.items(), answer):
            if isinstance(text, Unread):
                causes[rank] = text.message
            else:
                setattr(by_rank[rank], stream, text)
    return causes

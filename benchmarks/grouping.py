"""Grouping + folding + rendering benchmark: 512 ranks x 2,000 lines, against ClusterShell's MsgTree.

Run: ``python benchmarks/grouping.py`` (options: --ranks, --lines, --repeat).
Goal (issue 2): group_results + render_groups_text + render_groups_html in <= 1 s, with peak
memory (the inputs included) <= 3x the raw output size. The peer, measured in the same run on
the same lines, is what ``clush -b`` does: MsgTree.add() per line, walk(), fold the keys.
Goal (issue 13): folding (group_results + fold_groups + both renderers) of 512 ranks x 2,000
lines where every line of every rank differs in its numbers, in <= 1 s and <= 3x the raw output
at peak; the 512-rank loss print shown in <= 5 lines. The peer on that input shows one message
per rank (it cannot fold); its time and the lines it shows are printed beside ours.
The last line printed is one JSON object with the figures.
"""
from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mlp_magic.output.pure.fold.groups import fold_groups  # noqa: E402
from mlp_magic.output.pure.grouping import group_results  # noqa: E402
from mlp_magic.output.pure.html import render_groups_html  # noqa: E402
from mlp_magic.output.pure.text import render_groups_text  # noqa: E402
from mlp_magic.core.results import ERROR, OK, TIMEOUT, RankResult  # noqa: E402

RANKS_PER_HOST = 8
WORST_CASE_FIGURES = ("groups", "seconds", "seconds_with_diff", "memory_ratio", "memory_ratio_with_diff")
TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "<cell>", line 12, in <module>\n'
    "    loss.backward()\n"
    "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
)


def training_lines(count: int) -> list[str]:
    """Log lines of a plausible training loop, every one different."""
    return [f"step {i:05d} | loss {2.5 / (1 + i * 0.01):.6f} | lr 3.0e-04 | tokens/s {51234.5 + i % 97:.1f}\n"
            for i in range(count)]


def build_results(ranks: int, lines: int) -> list[RankResult]:
    """Mostly identical ranks; a group of 4 and 4 single ranks differing; 3 errors; 1 timeout.

    Every rank's stdout is its own string object, as it is when it arrives from an engine.
    """
    base = training_lines(lines)
    middle = lines // 2

    def with_line_changed(index: int, text: str) -> str:
        return "".join(base[:index] + [text] + base[index + 1:])

    results = [RankResult(rank=r, host=f"worker{r // RANKS_PER_HOST}", stdout="".join(base))
               for r in range(ranks)]
    for r in (100, 101, 102, 103):
        results[r].stdout = with_line_changed(middle, "warning: gradient overflow, skipping step\n")
    for r in (200, 300, 400, ranks - 1):
        results[r].stdout = with_line_changed(middle + r % 7, f"rank {r}: NaN in layer {r % 12}\n")
    for r in (17, 18, 19):
        results[r].stdout = "".join(base[: lines * 3 // 4])
        results[r].status, results[r].error = ERROR, TRACEBACK
    results[450].stdout, results[450].status = "".join(base[: lines * 9 // 10]), TIMEOUT
    assert all(r.status in (OK, ERROR, TIMEOUT) for r in results)
    return results


def raw_size(results: list[RankResult]) -> int:
    return sum(len(r.stdout.encode()) + len(r.stderr.encode()) + len(r.error.encode()) for r in results)


def ours(results: list[RankResult], diff: bool = False) -> tuple[int, int]:
    groups = group_results(results)
    text = render_groups_text(groups, diff=diff)
    html = render_groups_html(groups, diff=diff)
    return len(groups), len(text) + len(html)


def median_seconds(function, make_input, repeat: int) -> float:
    """Median time of ``function(input)``, each run on freshly built input (untimed).

    Fresh strings matter: Python caches a string's hash, so a second run on the same
    objects would skip the hashing that a real cell's output costs.
    """
    times = []
    for _ in range(repeat):
        data = make_input()
        gc.collect()
        start = time.perf_counter()
        function(data)
        times.append(time.perf_counter() - start)
        del data
    return statistics.median(times)


def peak_memory(function) -> tuple[int, int]:
    """(peak traced bytes including what is already allocated, extra bytes above that)."""
    gc.collect()
    before, _ = tracemalloc.get_traced_memory()
    tracemalloc.reset_peak()
    function()
    _, peak = tracemalloc.get_traced_memory()
    return peak, peak - before


def load_peer():
    try:
        import ClusterShell
        from ClusterShell.MsgTree import MsgTree
        from ClusterShell.RangeSet import RangeSet
    except ImportError as error:
        return None, f"ClusterShell cannot be imported ({error}); pip install ClusterShell to measure it"
    return (MsgTree, RangeSet), f"ClusterShell.MsgTree {ClusterShell.__version__}"


def peer_lines(results: list[RankResult]) -> list[tuple[int, list[bytes]]]:
    """The same output as clush receives it: lines of bytes per key (not timed)."""
    return [(r.rank, (r.stdout + r.stderr + r.error).encode().splitlines()) for r in results]


def peer(classes, lines_by_rank) -> tuple[int, int, int]:
    """clush -b: add every line, walk the tree, fold each message's keys, build the text.

    Returns (messages, characters, lines shown)."""
    MsgTree, RangeSet = classes
    tree = MsgTree()
    for rank, lines in lines_by_rank:
        for line in lines:
            tree.add(rank, line)
    out = []
    for message, keys in tree.walk():
        folded = RangeSet.fromlist([str(k) for k in keys])
        out.append(f"---------------- {folded} ({len(keys)}) ----------------\n")
        out.append(message.message().decode())
    text = "".join(out)
    return len(out) // 2, len(text), text.count("\n")


def all_ranks_differ(ranks: int, lines: int) -> list[RankResult]:
    """The worst case: every rank names itself in its first line, so nothing groups."""
    results = build_results(ranks, lines)
    for result in results:
        result.stdout = f"I am rank {result.rank}\n" + result.stdout
    return results


def numbers_differ(ranks: int, lines: int) -> list[RankResult]:
    """Folding's input: every line of every rank differs from the same line of every other rank
    in its numbers (its own loss, throughput and rank, in no order of rank); rank 0 also prints a
    header. Fixed-width formats, as training logs print them."""
    results = []
    for rank in range(ranks):
        spread = (rank * 7919) % ranks      # a rank's place in the losses, unrelated to its number
        text = "".join(
            f"step {i:05d} | loss {2.5 / (1 + i * 0.01) + ((spread + i) % ranks) * 1e-5:.6f}"
            f" | lr 3.0e-04 | tokens/s {51234.5 + (i * 7 + rank * 13) % 997:.1f} | rank {rank}\n"
            for i in range(lines))
        header = f"training on {ranks} ranks, {lines} steps\n" if rank == 0 else ""
        host = f"worker{rank // RANKS_PER_HOST}"
        results.append(RankResult(rank=rank, host=host, stdout=header + text))
    return results


def loss_print(ranks: int) -> list[RankResult]:
    """The issue's one print on every rank, one of them nan: ``step 10 loss {..} rank {rank}``."""
    return [RankResult(rank=r, host=f"worker{r // RANKS_PER_HOST}",
                       stdout=f"step 10 loss {'nan' if r == 37 else f'{0.5 + r / 1000:.4f}'} rank {r}\n")
            for r in range(ranks)]


def folded(results: list[RankResult]) -> tuple[int, int, int]:
    """(groups, lines of text shown, characters rendered) of group + fold + text + html."""
    groups = fold_groups(group_results(results))
    text = render_groups_text(groups)
    html = render_groups_html(groups)
    return len(groups), text.count("\n"), len(text) + len(html)


def measure_fold(make_input, repeat: int) -> dict:
    tracemalloc.start()
    results = make_input()
    raw_bytes = raw_size(results)
    peak_bytes, extra_bytes = peak_memory(lambda: folded(results))
    tracemalloc.stop()
    group_count, shown_lines, rendered_chars = folded(results)
    results = None
    return {
        "groups": group_count,
        "shown_lines": shown_lines,
        "rendered_chars": rendered_chars,
        "seconds": round(median_seconds(folded, make_input, repeat), 4),
        "peak_bytes": peak_bytes,
        "extra_bytes": extra_bytes,
        "raw_bytes": raw_bytes,
        "memory_ratio": round(peak_bytes / raw_bytes, 3),
    }


def report_fold(figures: dict, peer_figures: dict, loss_lines: int, ranks: int, lines: int,
                repeat: int) -> None:
    print(f"fold (every line differs in its numbers): {ranks} ranks x {lines} lines,"
          f" {figures['raw_bytes'] / 1e6:.1f} MB raw output, {figures['groups']} group(s),"
          f" {figures['shown_lines']:,} lines shown")
    print(f"  group + fold + text + html: median {figures['seconds'] * 1000:.1f} ms of {repeat}"
          f" (goal <= 1000), peak memory incl. inputs {figures['memory_ratio']:.2f}x raw (goal <= 3)")
    if peer_figures:
        print(f"  peer on the same input: {peer_figures['messages']} messages,"
              f" {peer_figures['shown_lines']:,} lines shown, median {peer_figures['seconds'] * 1000:.1f} ms")
    print(f"  the {ranks}-rank loss print, one rank nan: {loss_lines} lines shown (goal <= 5)")


def fold_section(args, classes) -> dict:
    """Measure and print folding (issue 13); the figures for the JSON line."""
    fold_input = lambda: numbers_differ(args.ranks, args.lines)  # noqa: E731
    fold = measure_fold(fold_input, args.repeat)
    fold_peer = measure_peer(classes, fold_input, args.repeat) if classes is not None else {}
    _, loss_lines, _ = folded(loss_print(args.ranks))
    report_fold(fold, fold_peer, loss_lines, args.ranks, args.lines, args.repeat)
    goal = {"seconds": 1.0, "memory_ratio": 3.0, "loss_print_lines": 5}
    return {
        **{k: v for k, v in fold.items() if k != "rendered_chars"},
        "peer_seconds": fold_peer.get("seconds"),
        "peer_shown_lines": fold_peer.get("shown_lines"),
        "ratio_vs_peer": round(fold["seconds"] / fold_peer["seconds"], 5) if fold_peer else None,
        "loss_print_lines": loss_lines,
        "goal": goal,
        "meets_goal": (fold["seconds"] <= goal["seconds"] and fold["memory_ratio"] <= goal["memory_ratio"]
                       and loss_lines <= goal["loss_print_lines"]),
    }


def measure_ours(make_input, repeat: int) -> dict:
    """Time (median, fresh input each run) and peak memory of group + text + html, plain and --diff."""
    tracemalloc.start()
    results = make_input()
    raw_bytes = raw_size(results)
    peak_bytes, extra_bytes = peak_memory(lambda: ours(results))
    peak_diff_bytes, _ = peak_memory(lambda: ours(results, diff=True))
    tracemalloc.stop()
    group_count, rendered_chars = ours(results)
    results = None  # free the input before the timed runs
    return {
        "groups": group_count,
        "rendered_chars": rendered_chars,
        "seconds": round(median_seconds(ours, make_input, repeat), 4),
        "seconds_with_diff": round(median_seconds(lambda data: ours(data, diff=True), make_input, repeat), 4),
        "peak_bytes": peak_bytes,
        "extra_bytes": extra_bytes,
        "raw_bytes": raw_bytes,
        "memory_ratio": round(peak_bytes / raw_bytes, 3),
        "memory_ratio_with_diff": round(peak_diff_bytes / raw_bytes, 3),
    }


def measure_peer(classes, make_input, repeat: int) -> dict:
    make_lines = lambda: peer_lines(make_input())  # noqa: E731
    messages, _, shown_lines = peer(classes, make_lines())
    tracemalloc.start()
    lines_by_rank = make_lines()
    _, extra_bytes = peak_memory(lambda: peer(classes, lines_by_rank))
    tracemalloc.stop()
    lines_by_rank = None
    seconds = median_seconds(lambda data: peer(classes, data), make_lines, repeat)
    return {"messages": messages, "seconds": round(seconds, 4), "extra_bytes": extra_bytes,
            "shown_lines": shown_lines}


def report(name: str, figures: dict, ranks: int, lines: int, repeat: int) -> None:
    print(f"{name}: {ranks} ranks x {lines} lines, {figures['raw_bytes'] / 1e6:.1f} MB raw output,"
          f" {figures['groups']} groups, {figures['rendered_chars'] / 1e6:.2f} M characters rendered"
          " (text + html)")
    print(f"  group + text + html: median {figures['seconds'] * 1000:.1f} ms of {repeat},"
          f" with --diff {figures['seconds_with_diff'] * 1000:.1f} ms")
    print(f"  peak memory incl. inputs: {figures['memory_ratio']:.2f}x raw"
          f" (extra {figures['extra_bytes'] / 1e6:.1f} MB),"
          f" with --diff {figures['memory_ratio_with_diff']:.2f}x raw")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=512)
    parser.add_argument("--lines", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    typical_input = lambda: build_results(args.ranks, args.lines)  # noqa: E731

    typical = measure_ours(typical_input, args.repeat)
    report("typical (most ranks identical)", typical, args.ranks, args.lines, args.repeat)
    worst = measure_ours(lambda: all_ranks_differ(args.ranks, args.lines), args.repeat)
    report("worst case (every rank differs)", worst, args.ranks, args.lines, args.repeat)

    classes, peer_name = load_peer()
    peer_figures, ratio = {}, None
    if classes is None:
        print(f"peer: {peer_name}")
    else:
        peer_figures = measure_peer(classes, typical_input, args.repeat)
        ratio = typical["seconds"] / peer_figures["seconds"]
        print(f"peer: {peer_name} on the typical input: {peer_figures['messages']} messages,"
              f" median {peer_figures['seconds'] * 1000:.1f} ms,"
              f" extra memory {peer_figures['extra_bytes'] / 1e6:.1f} MB")
        print(f"ratio: ours / peer = {ratio:.4f} ({1 / ratio:.0f}x faster)")

    fold_figures = fold_section(args, classes)

    figures = {
        "benchmark": "grouping",
        "ranks": args.ranks,
        "lines_per_rank": args.lines,
        **{k: v for k, v in typical.items() if k != "rendered_chars"},
        "peer": peer_name,
        "peer_seconds": peer_figures.get("seconds"),
        "peer_extra_bytes": peer_figures.get("extra_bytes"),
        "ratio_vs_peer": None if ratio is None else round(ratio, 5),
        "worst_case_all_differ": {k: worst[k] for k in WORST_CASE_FIGURES},
        "goal": {"seconds": 1.0, "memory_ratio": 3.0},
        "meets_goal": typical["seconds"] <= 1.0 and typical["memory_ratio"] <= 3.0,
        "fold": fold_figures,
    }
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())

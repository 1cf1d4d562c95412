"""Grouping + rendering benchmark: 512 ranks x 2,000 lines, against ClusterShell's MsgTree.

Run: ``python benchmarks/grouping.py`` (options: --ranks, --lines, --repeat).
Goal (issue 2): group_results + render_groups_text + render_groups_html in <= 1 s, with peak
memory (the inputs included) <= 3x the raw output size. The peer, measured in the same run on
the same lines, is what ``clush -b`` does: MsgTree.add() per line, walk(), fold the keys.
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

from mlp_magic.core.grouping import group_results  # noqa: E402
from mlp_magic.core.render_html import render_groups_html  # noqa: E402
from mlp_magic.core.render_text import render_groups_text  # noqa: E402
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


def peer(classes, lines_by_rank) -> tuple[int, int]:
    """clush -b: add every line, walk the tree, fold each message's keys, build the text."""
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
    return len(out) // 2, len(text)


def all_ranks_differ(ranks: int, lines: int) -> list[RankResult]:
    """The worst case: every rank names itself in its first line, so nothing groups."""
    results = build_results(ranks, lines)
    for result in results:
        result.stdout = f"I am rank {result.rank}\n" + result.stdout
    return results


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
    messages, _ = peer(classes, make_lines())
    tracemalloc.start()
    lines_by_rank = make_lines()
    _, extra_bytes = peak_memory(lambda: peer(classes, lines_by_rank))
    tracemalloc.stop()
    lines_by_rank = None
    seconds = median_seconds(lambda data: peer(classes, data), make_lines, repeat)
    return {"messages": messages, "seconds": round(seconds, 4), "extra_bytes": extra_bytes}


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
    }
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())

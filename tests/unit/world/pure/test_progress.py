"""The progress line of a starting World and the report of a failed start (pure)."""
from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from mlp_magic.core.ranges import expand_hosts
from mlp_magic.world.pure.progress import (host_counts, missing_report, progress_line, rank_log_lines,
                                           untagged_tail)

WORKERS = [f"worker{r // 8}" for r in range(128)]   # 16 hosts x 8 ranks


def test_the_line_reads_per_host():
    registered = set(range(96)) | {96, 104, 112, 120}    # worker[0-11] full, one rank on the rest
    line = progress_line(WORKERS, registered, 23.4)
    assert line == "starting 128 ranks: 100 registered (worker[0-11] complete, worker[12-15] 1/8) 23 s"


def test_a_local_world_and_a_world_with_many_kinds_of_partial_hosts():
    assert progress_line(["localhost"] * 4, [], 0.2) == "starting 4 ranks: 0 registered (localhost 0/4) 0 s"
    registered = {r for r in range(128) if r % 8 < (r // 8) % 6}   # hosts with 0..5 of 8
    line = progress_line(WORKERS, registered, 5)
    assert line.count("/8") == 3 and "more hosts partly registered" in line


@given(st.lists(st.sampled_from(["a1", "a2", "b", "c7"]), min_size=1, max_size=40), st.data())
def test_counts_add_up_and_every_host_is_accounted_for(hosts_by_rank, data):
    registered = data.draw(st.sets(st.integers(min_value=0, max_value=len(hosts_by_rank) - 1)))
    counts = host_counts(hosts_by_rank, registered)
    assert sum(total for _, total in counts.values()) == len(hosts_by_rank)
    assert sum(have for have, _ in counts.values()) == len(registered)
    line = progress_line(hosts_by_rank, registered, 1)
    assert f"{len(registered)} registered" in line
    named = set()
    for part in re.findall(r"([\w\[\],-]+) (?:complete|\d+/\d+)", line):
        named.update(expand_hosts(part))
    hidden = re.search(r"(\d+) more hosts", line)
    assert len(named) + (int(hidden.group(1)) if hidden else 0) == len(counts)


LOG = """\
2026-11-23 10:00:00.000 [rank 1] [IPEngine] WARNING | Not using CurveZMQ security
2026-11-23 10:00:00.100 [rank 10] [IPEngine] WARNING | Not using CurveZMQ security
Traceback (most recent call last):
ModuleNotFoundError: No module named 'ipyparallel'
2026-11-23 10:00:05.000 [rank 1] [IPEngine] CRITICAL | Registration timed out after 5.0 seconds
"""


def test_each_rank_is_quoted_by_its_own_tag_only():
    assert rank_log_lines(LOG, 1) == [
        "2026-11-23 10:00:00.000 [rank 1] [IPEngine] WARNING | Not using CurveZMQ security",
        "2026-11-23 10:00:05.000 [rank 1] [IPEngine] CRITICAL | Registration timed out after 5.0 seconds"]
    assert rank_log_lines(LOG, 10, limit=1) == [LOG.splitlines()[1]]
    assert rank_log_lines(LOG, 2) == []
    assert untagged_tail(LOG) == ["Traceback (most recent call last):",
                                  "ModuleNotFoundError: No module named 'ipyparallel'"]


def test_the_failure_names_the_missing_ranks_their_hosts_their_lines_and_what_to_try():
    registered = set(range(128)) - {1, 10, 11, 127}
    report = missing_report(WORKERS, registered, "no new rank for 158 s", LOG, ["fewer ranks (-np)"])
    lines = report.splitlines()
    assert lines[0] == ("124 of 128 ranks registered (no new rank for 158 s); "
                        "missing: ranks 1,10-11,127 on worker[0-1,15]")
    assert lines[1].startswith("  rank 1 (worker0): ") and "Registration timed out" in lines[1]
    assert lines[2].startswith("  rank 10 (worker1): ") and "CurveZMQ" in lines[2]
    assert lines[3] == "  rank 11 (worker1): logged nothing"
    assert "rank 127" not in "\n".join(lines[1:])   # three ranks quoted, not every missing one
    assert "launcher: Traceback (most recent call last): | ModuleNotFoundError" in report
    assert lines[-1] == "  try: fewer ranks (-np)"

"""Folding outputs that differ in numbers: groups, aligned lines, summaries, outliers, round trip."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mlp_magic.output.pure.fold import columns as fold_columns, shapes as fold_shapes
from mlp_magic.output.pure.fold.groups import FoldedGroup, fold_groups
from mlp_magic.output.pure.fold.numbers import mask_line
from mlp_magic.output.pure.fold.summary import MAX_LISTED_VALUES, summarise
from mlp_magic.output.pure.grouping import OutputGroup, group_results
from mlp_magic.output.pure.text import render_groups_text
from mlp_magic.core.results import ERROR, OK, TIMEOUT, HostResult, RankResult


def loss_print(ranks: int) -> list[RankResult]:
    """The issue's example: every rank prints its own loss and rank."""
    return [RankResult(r, f"worker{r // 8}", stdout=f"step 10 loss {0.5 + r / 1000:.4f} rank {r}\n")
            for r in range(ranks)]


def shown(results, **kwargs) -> list:
    return fold_groups(group_results(results), **kwargs)


def exact_text(result) -> str:
    """What the exact group of this result shows: stdout, stderr, traceback on their own lines."""
    return group_results([result])[0].text


def test_the_64_rank_loss_print_folds_to_one_line():
    results = loss_print(64)
    groups = shown(results)
    assert len(groups) == 1 and isinstance(groups[0], FoldedGroup)
    assert [line.text for line in groups[0].lines] == ["step 10 loss {0.5000..0.5630 ~0.5310} rank {rank}"]
    text = render_groups_text(groups)
    assert text.splitlines() == ["---------------- ranks 0-63 (64) on worker[0-7] ----------------",
                                 "step 10 loss {0.5000..0.5630 ~0.5310} rank {rank}"]
    assert len(render_groups_text(group_results(results)).splitlines()) == 128   # before: a block per rank


def test_a_nan_rank_is_named_under_its_line():
    results = loss_print(16)
    results[7].stdout = "step 10 loss nan rank 7\n"
    text = render_groups_text(shown(results))
    assert "  ! rank 7: loss nan" in text.splitlines()
    assert len(text.splitlines()) == 3


def test_a_line_only_rank_0_prints_does_not_stop_the_rest_folding():
    results = loss_print(8)
    results[0].stdout = "=== training 8 ranks ===\n" + results[0].stdout + "done\n"
    group, = shown(results)
    assert [(line.keys, line.text) for line in group.lines] == [
        ((0,), "=== training 8 ranks ==="),
        (None, "step 10 loss {0.5000,0.5010,0.5020,0.5030,0.5040,0.5050,0.5060,0.5070} rank {rank}"),
        ((0,), "done"),
    ]
    assert "[rank 0] === training 8 ranks ===" in render_groups_text([group])


def test_identical_outputs_stay_the_exact_groups_they_were():
    results = [RankResult(r, "h", stdout="same\n") for r in range(4)]
    exact = group_results(results)
    assert fold_groups(exact) == exact
    results.append(RankResult(4, "h", stdout="other words\n"))
    groups = shown(results)
    assert all(isinstance(g, OutputGroup) for g in groups)
    assert [g.keys for g in groups] == [(0, 1, 2, 3), (4,)]


def test_exact_groups_fold_with_their_member_counts():
    results = [RankResult(r, "h", stdout=f"value {r % 2}\n") for r in range(6)]
    group, = shown(results)
    assert group.keys == tuple(range(6)) and len(group.exact) == 2
    assert group.lines[0].text == "value {0,1}"


def test_tracebacks_with_different_numbers_are_one_group():
    results = [RankResult(r, "h") for r in range(6)]
    for r in (1, 3, 5):
        results[r].status = ERROR
        results[r].error = (f"Traceback (most recent call last):\n  File \"<cell>\", line {3 + r % 2}\n"
                            f"IndexError: index {100 + r} is out of bounds for size 64\n")
    groups = shown(results)
    assert [(g.keys, g.status) for g in groups] == [((0, 2, 4), OK), ((1, 3, 5), ERROR)]
    assert groups[1].lines[-1].text == "IndexError: index {101,103,105} is out of bounds for size 64"


def test_different_statuses_and_unrelated_outputs_never_fold():
    results = loss_print(4)
    results[1].status = TIMEOUT
    results[2].stdout = "a completely different message 2\nwith two lines\n"
    groups = shown(results)
    assert [g.keys for g in groups] == [(0, 3), (1,), (2,)]


def test_local_and_node_rank_are_recognised_when_given():
    results = [RankResult(r, f"w{r // 4}", stdout=f"device cuda:{r % 4} node {r // 4}\n") for r in range(8)]
    follows = {"local_rank": {r: r % 4 for r in range(8)}, "node_rank": {r: r // 4 for r in range(8)}}
    assert shown(results, follows=follows)[0].lines[0].text == "device cuda:{local_rank} node {node_rank}"
    assert shown(results)[0].lines[0].text == "device cuda:{0,1,2,3} node {0,1}"


def test_a_number_the_same_on_every_rank_is_shown_not_named_after_a_map_that_is_constant_too():
    """One host: node_rank is 0 everywhere, and a constant 0 in the text is no more its than
    any other constant's ("epoch {node_rank}" was shown for a tqdm bar's "epoch 0")."""
    bar = "e 0: 100%|█| 30/30 [00:01<00:00, {:.2f}it/s]\n"
    results = [RankResult(r, "h", stdout="done\n", stderr=bar.format(19.5 + r / 10)) for r in (0, 1, 3)]
    follows = {"local_rank": {r: r for r in range(4)}, "node_rank": {r: 0 for r in range(4)}}
    assert [line.text for line in shown(results, follows=follows)[0].lines] == [
        "done", "e 0: 100%|█| 30/30 [00:01<00:00, {19.50,19.60,19.80}it/s]"]


def test_hex_ids_fold_though_each_output_is_scanned_alone():
    results = [RankResult(r, "h", stdout=f"<Model object at 0x7f{r:04x}1a>\n") for r in range(5)]
    group, = shown(results)
    assert group.lines[0].text == "<Model object at {0x7f00001a,0x7f00011a,0x7f00021a,0x7f00031a,0x7f00041a}>"


def test_output_holding_the_mask_character_is_shown_exactly():
    results = loss_print(3)
    results[1].stdout = "binary \0 junk 1\n"
    groups = shown(results)
    assert [type(g).__name__ for g in groups] == ["FoldedGroup", "OutputGroup"]
    assert groups[1].stdout == "binary \0 junk 1\n"


def test_hosts_fold_too_without_rank_fields():
    results = [HostResult(f"worker{i}", stdout=f"free {1000 + i} MiB\n") for i in range(4)]
    results.append(HostResult("worker9", stdout="free 1004 MiB\n", status="failed", exit_code=2))
    groups = shown(results)
    assert [g.keys for g in groups] == [("worker0", "worker1", "worker2", "worker3"), ("worker9",)]
    assert groups[0].lines[0].text == "free {1000,1001,1002,1003} MiB"
    assert groups[0].label == "worker[0-3] (4)"


def test_fields_that_follow_the_rank_are_checked_where_they_sit(monkeypatch):
    """Ranks of one shape: the rank field is compared in place (startswith), never cut out."""
    results = [RankResult(r, "h", stdout="".join(f"step {i} of rank {r} loss {(r * 7 + i) % 10}.5\n"
                                                 for i in range(3))) for r in range(10, 40)]
    results[5].stdout = results[5].stdout.replace("of rank 15", "of rank 16", 1)   # one line lies
    cut = []
    original = fold_shapes.Shape.rows

    def rows(self, first, end, selected):
        cut.append(selected)
        return original(self, first, end, selected)

    monkeypatch.setattr(fold_shapes.Shape, "rows", rows)
    group, = shown(results)
    assert [line.text for line in group.lines] == [
        "step 0 of rank {10..39} loss {0.5..9.5 ~4.5}",     # rank 15 printed 16: not the rank
        "step 1 of rank {rank} loss {0.5..9.5 ~4.5}",
        "step 2 of rank {rank} loss {0.5..9.5 ~4.5}",
    ]
    starts = group.lines[0].sources[0][0].token_starts
    assert all(starts[1] + 1 not in picked for picked in cut if picked is not None)   # line 1's rank


def test_zero_padded_ranks_are_a_range():
    results = [RankResult(r, "h", stdout=f"rank {r:03d} ready\n") for r in range(12)]
    assert shown(results)[0].lines[0].text == "rank {000..011} ready"


def test_line_versions_list_each_output_once():
    results = loss_print(4)
    group, = shown(results)
    expected = [((r,), f"step 10 loss {0.5 + r / 1000:.4f} rank {r}") for r in range(4)]
    assert group.versions(group.lines[0]) == expected


def test_small_chunks_give_the_same_summaries(monkeypatch):
    results = [RankResult(r, "h", stdout="".join(f"step {i} loss {i * r / 7:.3f} rank {r}\n"
                                                 for i in range(30))) for r in range(12)]
    expected = [line.text for line in shown(results)[0].lines]
    monkeypatch.setattr(fold_columns, "CHUNK_TOKENS", 5)
    assert [line.text for line in shown(results)[0].lines] == expected


def test_long_unaligned_middles_are_not_diffed():
    """difflib is quadratic: beyond ALIGN_LIMIT the middle is not aligned (and nothing breaks)."""
    a = "".join(f"alpha {i}\n" for i in range(300)) + "".join(f"beta {i}\n" for i in range(300))
    b = "".join(f"beta {i}\n" for i in range(300)) + "".join(f"alpha {i}\n" for i in range(300))
    results = [RankResult(0, "h", stdout=a), RankResult(1, "h", stdout=b),
               RankResult(2, "h", stdout=a + "x\n")]
    groups = shown(results)
    for group in groups:
        for key in group.keys:
            text = group.expand(key) if isinstance(group, FoldedGroup) else group.text
            assert text == exact_text(results[key])


# ---------------------------------------------------------------- properties
LINES = ["step {} loss {} rank {}", "epoch {} done", "=== header {} ===", "warning: lr {}", "plain words",
         "Traceback line {}", "", "grad_norm {} at 0x{}"]
NUMBER = st.one_of(st.integers(-3, 600).map(str),
                   st.sampled_from(["nan", "-inf", "1e-3", "0.5000", "3.2E+05"]),
                   st.floats(0, 10, allow_nan=False).map(lambda v: f"{v:.4f}"))


@st.composite
def rank_outputs(draw):
    """Ranks whose outputs share lines with different numbers, plus lines only some print."""
    count = draw(st.integers(1, 12))
    skeleton = draw(st.lists(st.sampled_from(LINES), min_size=0, max_size=6))
    results = []
    for rank in range(count):
        lines = [line for line in skeleton if draw(st.integers(0, 9)) > 0]   # some ranks skip a line
        if draw(st.booleans()):
            lines.insert(draw(st.integers(0, len(lines))), draw(st.sampled_from(LINES)))
        text = "\n".join(line.format(*(draw(NUMBER) for _ in range(line.count("{}")))) for line in lines)
        ending = draw(st.sampled_from(["\n", ""])) if text else ""
        status = draw(st.sampled_from([OK, OK, OK, ERROR]))
        error = f"ValueError: bad {draw(NUMBER)}\n" if status == ERROR else ""
        results.append(RankResult(rank, f"w{rank // 4}", status=status, stdout=text + ending, error=error))
    return results


@given(rank_outputs())
@settings(max_examples=300, deadline=None)
def test_folding_keeps_every_rank_once_and_expands_to_exact_outputs(results):
    groups = shown(results)
    keys = [k for g in groups for k in g.keys]
    assert sorted(keys) == [r.rank for r in results]                     # never loses or repeats a rank
    for group in groups:
        assert {results[k].status for k in group.keys} == {group.status}
        if not isinstance(group, FoldedGroup):
            assert all(exact_text(results[k]) == group.text for k in group.keys)
            continue
        for key in group.keys:
            assert group.expand(key) == exact_text(results[key])         # the round trip
        for line in group.lines:                                         # never invents a line
            for versions_keys, text in group.versions(line):
                for key in versions_keys:
                    assert text in exact_text(results[key]).split("\n")
            printing = line.keys or group.keys
            assert sorted(k for ks, _ in group.versions(line) for k in ks) == sorted(printing)


@given(rank_outputs())
@settings(max_examples=100, deadline=None)
def test_outliers_name_only_ranks_that_print_the_line(results):
    for group in shown(results):
        if isinstance(group, FoldedGroup):
            for line in group.lines:
                for _, outlier in line.outliers():
                    assert set(outlier.keys) <= set(line.keys or group.keys)


@given(rank_outputs(), st.sampled_from([1, 7, 1 << 18]))
@settings(max_examples=200, deadline=None)
def test_each_field_summary_is_what_its_tokens_give(results, chunk):
    """The column machinery (shapes, constants, rows, chunks) against summarising each field from
    the members' own lines, one by one."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fold_columns, "CHUNK_TOKENS", chunk)
        groups = shown(results)
    for group in groups:
        if not isinstance(group, FoldedGroup):
            continue
        for line in group.lines:
            printed = sorted((k, mask_line(text)[1]) for keys, text in group.versions(line) for k in keys)
            for field, got in enumerate(line.fields):
                tokens = tuple(tokens[field] for _, tokens in printed)
                keys = tuple(k for k, _ in printed)
                follows = [("rank", tuple(map(str, keys)))]
                assert got == summarise(tokens, keys, follows=follows), (line.template, tokens)


@pytest.mark.parametrize("ranks", [512])
def test_the_512_rank_loss_print_is_at_most_5_lines(ranks):
    results = loss_print(ranks)
    results[300].stdout = "step 10 loss nan rank 300\n"
    text = render_groups_text(shown(results))
    assert len(text.splitlines()) <= 5
    assert "  ! rank 300: loss nan" in text


@given(st.sampled_from([4, MAX_LISTED_VALUES - 1, MAX_LISTED_VALUES, MAX_LISTED_VALUES + 1, 64, 512]),
       st.integers(1, 3))
@settings(max_examples=60, deadline=None)
def test_the_loss_print_shows_every_value_up_to_the_threshold_in_a_bounded_number_of_lines(ranks, camps):
    """Each rank prints its loss (its own) and its epoch (one of a few camps): the loss is listed
    while the ranks are few, a range beyond; the epoch is always listed; one group, one line."""
    results = [RankResult(r, f"worker{r // 8}",
                          stdout=f"epoch {3 + r % camps} loss {0.5 + r / 1000:.4f} rank {r}\n")
               for r in range(ranks)]
    lines = render_groups_text(shown(results)).splitlines()
    assert len(lines) == 2
    epochs = "{" + ",".join(str(3 + c) for c in range(camps)) + "}" if camps > 1 else "3"
    losses = [f"{0.5 + r / 1000:.4f}" for r in range(ranks)]
    loss = "{" + ",".join(losses) + "}" if ranks <= MAX_LISTED_VALUES else \
        f"{{{losses[0]}..{losses[-1]} ~{losses[(ranks - 1) // 2]}}}"
    assert lines[1] == f"epoch {epochs} loss {loss} rank {{rank}}"

"""Rank ranges and host node sets: folding, expanding, and clear errors for bad text."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mlp_magic.core.ranges import MAX_RANKS, expand_hosts, fold_hosts, fold_ranks, parse_ranks
from mlp_magic.errors import MlpMagicError

# ---------------------------------------------------------------- ranks


@pytest.mark.parametrize("ranks, folded", [
    ([], ""),
    ([3], "3"),
    ([0, 1, 2, 3, 5], "0-3,5"),
    ([5, 3, 2, 1, 0, 3, 0], "0-3,5"),
    ([0, 1], "0-1"),
    ([0, 2, 4], "0,2,4"),
    (range(0, 14), "0-13"),
    ([*range(14), 15], "0-13,15"),
    (iter([10, 11, 12, 100]), "10-12,100"),
])
def test_fold_ranks(ranks, folded):
    assert fold_ranks(ranks) == folded


@pytest.mark.parametrize("bad", [-1, 1.5, "3", True])
def test_fold_ranks_rejects_non_ranks(bad):
    with pytest.raises(MlpMagicError, match="rank"):
        fold_ranks([0, bad])


@pytest.mark.parametrize("spec, world_size, ranks", [
    ("0,2-3", None, [0, 2, 3]),
    ("0,2-3", 4, [0, 2, 3]),
    ("0-3,5", None, [0, 1, 2, 3, 5]),
    ("all", 4, [0, 1, 2, 3]),
    (" ALL ", 2, [0, 1]),
    ("3,1,1,2-3", None, [1, 2, 3]),
    (" 0-1 ", None, [0, 1]),
    ("0 , 2", 3, [0, 2]),
    ("all,1", 3, [0, 1, 2]),
])
def test_parse_ranks(spec, world_size, ranks):
    assert parse_ranks(spec, world_size) == ranks


@pytest.mark.parametrize("spec, world_size, message", [
    ("9", 4, "--ranks: 9 is out of range 0-3"),
    ("2-9", 4, "--ranks: 2-9 is out of range 0-3"),
    ("0", 0, "--ranks: 0 is out of range (there are no ranks)"),
    ("3-1", None, "--ranks: range 3-1 goes backwards (write 1-3)"),
    ("x", None, "--ranks: 'x' is not a rank or a range like 2-5"),
    ("0,x", None, "--ranks: 'x' in '0,x' is not a rank or a range like 2-5"),
    ("-1", 4, "--ranks: '-1' is not a rank or a range like 2-5"),
    ("0,,1", None, "--ranks: an empty item in '0,,1' is not a rank or a range like 2-5"),
    ("", 4, "--ranks: empty rank list"),
    ("all", None, "--ranks: 'all' needs a known number of ranks"),
    (f"0-{MAX_RANKS}", None, f"covers more than {MAX_RANKS} ranks"),
    ("1" * 40, None, "is not a rank"),
])
def test_parse_ranks_errors_name_the_piece(spec, world_size, message):
    with pytest.raises(MlpMagicError) as caught:
        parse_ranks(spec, world_size)
    assert message in str(caught.value)


def test_parse_ranks_option_name_is_configurable():
    with pytest.raises(MlpMagicError, match=r"^--exclude-ranks: 7 is out of range 0-1$"):
        parse_ranks("7", 2, option="--exclude-ranks")


def test_parse_ranks_rejects_non_text():
    with pytest.raises(MlpMagicError, match="expected text"):
        parse_ranks(3)  # type: ignore[arg-type]


@given(st.lists(st.integers(min_value=0, max_value=5000), max_size=60))
def test_parse_of_fold_gives_sorted_unique_ranks(ranks):
    folded = fold_ranks(ranks)
    expected = sorted(set(ranks))
    assert (parse_ranks(folded) if folded else []) == expected


@given(st.lists(st.integers(min_value=0, max_value=200), min_size=1, max_size=60))
def test_fold_is_minimal(ranks):
    """Each piece is a maximal run: no two pieces could be joined."""
    pieces = fold_ranks(ranks).split(",")
    bounds = [tuple(map(int, p.split("-"))) if "-" in p else (int(p), int(p)) for p in pieces]
    for (_, end), (start, _) in zip(bounds, bounds[1:]):
        assert start > end + 1


@given(st.text(max_size=40), st.one_of(st.none(), st.integers(min_value=0, max_value=64)))
@settings(max_examples=300)
def test_parse_ranks_raises_only_mlp_magic_error(spec, world_size):
    try:
        ranks = parse_ranks(spec, world_size)
    except MlpMagicError as error:
        assert str(error).startswith("--ranks: ")
        return
    assert ranks == sorted(set(ranks))
    if world_size is not None:
        assert all(0 <= r < world_size for r in ranks)


@given(st.text(alphabet="0123456789,- all", max_size=30), st.integers(min_value=0, max_value=64))
@settings(max_examples=300)
def test_parse_ranks_on_near_valid_text(spec, world_size):
    try:
        parse_ranks(spec, world_size)
    except MlpMagicError:
        pass


# ---------------------------------------------------------------- hosts


@pytest.mark.parametrize("spec, names", [
    ("worker[0-3,7],gpu[01-03],login1",
     ["worker0", "worker1", "worker2", "worker3", "worker7", "gpu01", "gpu02", "gpu03", "login1"]),
    ("gpu[08-11]", ["gpu08", "gpu09", "gpu10", "gpu11"]),
    ("n[098-101]", ["n098", "n099", "n100", "n101"]),
    ("n[9-10]", ["n9", "n10"]),
    ("n[007]", ["n007"]),
    ("rack[1-2]-n[01-02]", ["rack1-n01", "rack1-n02", "rack2-n01", "rack2-n02"]),
    ("w[1-2].ib", ["w1.ib", "w2.ib"]),
    ("b,a,b", ["b", "a"]),
    ("w[2,0-1]", ["w2", "w0", "w1"]),
    (" a , b ,", ["a", "b"]),
    ("", []),
    ("localhost", ["localhost"]),
])
def test_expand_hosts(spec, names):
    assert expand_hosts(spec) == names


@pytest.mark.parametrize("spec, message", [
    ("worker[3-1]", "host list 'worker[3-1]': range 3-1 goes backwards"),
    ("w[", "host list 'w[': unclosed '['"),
    ("w[a]", "host list 'w[a]': 'a' is not a number or a range like 0-3"),
    ("w[1-]", "host list 'w[1-]': '1-' is not a number"),
    ("w]", "host list 'w]': ']' without '['"),
    ("w[]", "host list 'w[]': empty brackets in 'w[]'"),
    ("w[[1]]", "host list 'w[[1]]': nested '['"),
    ("a,b c", "host list 'a,b c': 'b c' contains whitespace"),
    ("w[0-999999999]", "names more than"),
    ("w[0-999],x[0-999],y[0-999],z[0-999]," * 30, "names more than"),
])
def test_expand_hosts_errors_name_the_text(spec, message):
    with pytest.raises(MlpMagicError) as caught:
        expand_hosts(spec)
    assert message in str(caught.value)


def test_error_messages_shorten_long_text():
    with pytest.raises(MlpMagicError) as caught:
        expand_hosts("x" * 5000 + "[")
    assert len(str(caught.value)) < 200


@pytest.mark.parametrize("names, folded", [
    (["worker0", "worker1", "worker3"], "worker[0-1,3]"),
    (["worker0", "worker1", "worker2", "worker3", "worker7", "login1"], "worker[0-3,7],login1"),
    (["worker1", "login", "worker0"], "worker[0-1],login"),
    (["gpu%02d" % i for i in range(1, 17)], "gpu[01-16]"),
    (["gpu10", "gpu11", "gpu09"], "gpu[09-11]"),
    (["n9", "n10"], "n[9-10]"),
    (["n9", "n09"], "n9,n09"),
    (["n099", "n100", "n101"], "n[099-101]"),
    (["a1.ib", "a2.ib", "a1.eth"], "a[1-2].ib,a1.eth"),
    (["rack1-n01", "rack1-n02", "rack2-n01"], "rack1-n[01-02],rack2-n01"),
    (["localhost"], "localhost"),
    (["w1", "w1", "w2"], "w[1-2]"),
    ([], ""),
])
def test_fold_hosts(names, folded):
    assert fold_hosts(names) == folded


@pytest.mark.parametrize("bad", ["a,b", "w[1]", "a b", "", None])
def test_fold_hosts_rejects_names_that_cannot_fold(bad):
    with pytest.raises(MlpMagicError, match="host name"):
        fold_hosts(["ok1", bad])


_NAME_PART = st.text(alphabet="abcxyz-._", min_size=1, max_size=4)
_HOST_NAMES = st.builds(
    lambda prefix, number, width, suffix: f"{prefix}{number:0{width}d}{suffix}",
    _NAME_PART, st.integers(min_value=0, max_value=120), st.integers(min_value=0, max_value=4),
    st.one_of(st.just(""), _NAME_PART),
)
_ANY_NAMES = st.lists(st.one_of(_HOST_NAMES, _NAME_PART, st.text(alphabet="ab01-", min_size=1, max_size=6)),
                      max_size=40)


@given(_ANY_NAMES)
@settings(max_examples=400)
def test_expand_of_fold_gives_each_name_once(names):
    expanded = expand_hosts(fold_hosts(names))
    assert sorted(expanded) == sorted(set(names))


@given(_ANY_NAMES)
@settings(max_examples=200)
def test_fold_is_stable(names):
    folded = fold_hosts(names)
    assert fold_hosts(expand_hosts(folded)) == folded


def _top_level_items(folded: str) -> list[str]:
    items, depth, current = [], 0, ""
    for char in folded:
        depth += {"[": 1, "]": -1}.get(char, 0)
        if char == "," and not depth:
            items.append(current)
            current = ""
        else:
            current += char
    return items + [current] if folded else []


@given(_ANY_NAMES)
def test_fold_orders_groups_by_first_appearance(names):
    first_seen = {name: index for index, name in reversed(list(enumerate(names)))}
    items = _top_level_items(fold_hosts(names))
    group_starts = [min(first_seen[n] for n in expand_hosts(item)) for item in items]
    assert group_starts == sorted(group_starts)


@given(st.text(max_size=40))
@settings(max_examples=400)
def test_expand_hosts_raises_only_mlp_magic_error(spec):
    try:
        names = expand_hosts(spec)
    except MlpMagicError as error:
        assert str(error).startswith("host list")
        return
    assert len(names) == len(set(names))


@given(st.text(alphabet="w0123456789[],- ", max_size=30))
@settings(max_examples=400)
def test_expand_hosts_on_near_valid_text(spec):
    try:
        expand_hosts(spec)
    except MlpMagicError:
        pass


@given(st.lists(st.text(max_size=8), max_size=10))
def test_fold_hosts_raises_only_mlp_magic_error(names):
    try:
        fold_hosts(names)
    except MlpMagicError as error:
        assert str(error).startswith("host name")


def test_rank_words():
    from mlp_magic.core.ranges import rank_words

    assert rank_words([3]) == "rank 3" and rank_words([0, 1, 2, 7]) == "ranks 0-2,7"
    assert rank_words(iter([5])) == "rank 5"


def test_by_message_names_the_ranks_of_each_message_once():
    from mlp_magic.core.ranges import by_message

    assert by_message({2: "timed out", 0: "timed out", 5: "no such name"}) == (
        "ranks 0,2: timed out; rank 5: no such name")
    # an object's address differs on every rank, the message does not
    assert by_message({1: "cannot pickle <function <lambda> at 0x7f3a2b1c>",
                       3: "cannot pickle <function <lambda> at 0x7f99aa00>"}) == (
        "ranks 1,3: cannot pickle <function <lambda> at 0x...>")
    assert by_message({}) == ""


@given(st.dictionaries(st.integers(0, 511), st.sampled_from(["a", "b", "c"]), min_size=1))
def test_by_message_names_every_rank_once(problems):
    from mlp_magic.core.ranges import by_message

    text = by_message(problems)
    named = []
    for part in text.split("; "):
        words, _, message = part.partition(": ")
        named += [(rank, message) for rank in parse_ranks(words.split(" ", 1)[1])]
    assert sorted(named) == sorted(problems.items())

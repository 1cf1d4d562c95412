"""Folded groups rendered: text lines with summaries and outliers, HTML with highlights and <details>."""
from __future__ import annotations

import re

import nbformat
from nbconvert import HTMLExporter

from mlp_magic.output.pure.fold.groups import fold_groups
from mlp_magic.output.pure.grouping import group_results
from mlp_magic.output.pure.fold.render import MAX_HTML_LINES, MAX_OUTLIERS_SHOWN
from mlp_magic.output.pure.html import render_groups_html
from mlp_magic.output.pure.text import render_groups_text
from mlp_magic.core.results import RankResult

from tests.unit.output.pure.test_render import parse

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def losses(ranks: int, nan_ranks=(), lines: int = 1, header: bool = False) -> list:
    results = []
    for r in range(ranks):
        text = "".join(f"step {i} loss {'nan' if r in nan_ranks else f'{0.5 + r / 1000:.4f}'} rank {r}\n"
                       for i in range(lines))
        head = "<b>hdr</b> & co\n" if header and r == 0 else ""
        results.append(RankResult(r, "localhost", stdout=head + text))
    return fold_groups(group_results(results))


def test_text_names_each_distinct_outlying_token_with_its_ranks():
    bad = {0: "nan", 6: "nan", 12: "nan", 2: "-inf", 4: "inf"}
    results = [RankResult(r, "h", stdout=f"loss {bad.get(r, '0.5')}\n") for r in range(64)]
    text = render_groups_text(fold_groups(group_results(results)))
    assert text.splitlines()[1:] == ["loss 0.5", "  ! ranks 0,6,12: loss nan", "  ! rank 2: loss -inf",
                                     "  ! rank 4: loss inf"]


def test_text_lists_at_most_a_few_outliers_per_line():
    results = [RankResult(r, "h", stdout=f"loss {0.5 if r % 32 else 100 + r}\n") for r in range(512)]
    text = render_groups_text(fold_groups(group_results(results)))
    shown = [line for line in text.splitlines() if line.startswith("  !")]
    assert len(shown) == MAX_OUTLIERS_SHOWN + 1
    assert shown[0] == "  ! rank 0: loss 100"
    assert shown[-1] == f"  ! and {16 - MAX_OUTLIERS_SHOWN} more outlying values"


def test_text_colours_fields_and_outliers_only_when_asked():
    groups = losses(8, nan_ranks=(3,))
    plain = render_groups_text(groups)
    coloured = render_groups_text(groups, color=True)
    assert "\x1b" not in plain and ANSI.sub("", coloured) == plain
    assert "\x1b[31m  ! rank 3: loss nan\x1b[0m" in coloured and "\x1b[36m{rank}\x1b[0m" in coloured


def test_html_highlights_fields_expands_lines_and_escapes():
    html = render_groups_html(losses(4, nan_ranks=(2,), header=True))
    checker = parse(html)
    assert 'data-folded="1"' in html and "<script" not in html
    assert "&lt;b&gt;hdr&lt;/b&gt; &amp; co" in html and "<b>" not in html
    assert checker.tags.count("details") == 1          # the line with varying numbers opens
    summary = re.search(r"<summary[^>]*>(.*?)</summary>", html).group(1)
    assert re.sub("<[^>]+>", "", summary) == "step 0 loss {0.5000,0.5010,0.5030} rank {rank}"
    assert '<span style="background:rgba(0,131,143,0.14);border-radius:2px">{rank}</span>' in summary
    versions = re.search(r"</summary><div[^>]*>(.*?)</div></details>", html, re.S).group(1)
    assert versions.split("\n") == ["[0] step 0 loss 0.5000 rank 0", "[1] step 0 loss 0.5010 rank 1",
                                    "[2] step 0 loss nan rank 2", "[3] step 0 loss 0.5030 rank 3"]
    assert '<div style="color:#c62828">  ! rank 2: loss nan</div>' in html


def test_html_marks_a_constant_nan_as_bad():
    results = [RankResult(r, "h", stdout=f"loss nan rank {r}\n") for r in range(4)]
    html = render_groups_html(fold_groups(group_results(results)))
    assert "color:#c62828;font-weight:600;border-radius:2px\">nan</span>" in html


def test_html_expansion_has_a_budget_and_says_so():
    groups = losses(64, lines=30)
    full = render_groups_html(groups)
    small = render_groups_html(groups, max_chars_per_group=6000)
    assert full.count("<summary") == 30 + 0 and "each rank's own line is shown" not in full
    assert small.count("<details><summary style=\"cursor:pointer\">") < 30
    assert "each rank's own line is shown for the first" in small
    parse(small)


def test_html_long_folded_groups_show_a_preview():
    groups = losses(4, lines=60)
    html = render_groups_html(groups)
    parse(html)
    assert "40 more folded lines</summary>" in html


def test_html_of_a_huge_folded_group_is_bounded_and_says_what_it_left_out():
    """64 ranks x 5,000 lines differing in numbers: HTML for the first MAX_HTML_LINES only."""
    groups = losses(64, lines=MAX_HTML_LINES + 3000)
    html = render_groups_html(groups)
    parse(html)
    assert "3,000 more folded lines are not shown here" in html
    assert f"step {MAX_HTML_LINES - 1} loss" in html and f"step {MAX_HTML_LINES} loss" not in html
    assert len(html) < 3_000_000
    assert len(render_groups_text(groups).splitlines()) > MAX_HTML_LINES + 3000   # the text keeps all


def test_folded_html_survives_nbconvert():
    html = render_groups_html(losses(16, nan_ranks=(5,), header=True))
    notebook = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("%%mpirun\nprint(loss)")
    cell.outputs = [nbformat.v4.new_output("display_data", data={"text/html": html, "text/plain": "groups"})]
    notebook.cells.append(cell)
    body, _ = HTMLExporter().from_notebook_node(notebook)
    assert html in body
    parse(body[body.index('<div class="mlp-magic-groups">'):body.index(html) + len(html)])

"""Text and HTML renderers of grouped outputs: headers, statuses, diffs, caps, escaping, nbconvert."""
from __future__ import annotations

import re
from html.parser import HTMLParser

import nbformat
import pytest
from nbconvert import HTMLExporter

from mlp_magic.output.pure.grouping import group_results
from mlp_magic.output.pure.html import COLLAPSE_OVER_LINES, render_groups_html
from mlp_magic.output.pure.text import CAPPED_NOTE, cap_text, render_groups_text
from mlp_magic.core.results import DIED, ERROR, FAILED, TIMEOUT, UNREACHABLE, HostResult, RankResult

ANSI = re.compile(r"\x1b\[[0-9;]*m")
LOG = "".join(f"step {i} loss {1 / (i + 1):.4f}\n" for i in range(60))


def rank_groups():
    results = [RankResult(r, f"worker{r // 4}", stdout="hello\n") for r in range(8)]
    results[5].status, results[5].error = ERROR, "Traceback (most recent call last):\nValueError: bad\n"
    results[6].stdout = "hello\nrank 6 is different\n"
    return group_results(results)


def host_groups():
    results = [HostResult(f"worker{i}", stdout="Successfully installed x-1.0\n") for i in range(7)]
    results.append(HostResult("worker7", status=FAILED, exit_code=3,
                              stderr="ERROR: no matching distribution\n"))
    results.append(HostResult("worker8", status=UNREACHABLE, exit_code=None,
                              stderr="ssh: No route to host\n"))
    results.append(HostResult("worker9", status=TIMEOUT, exit_code=None, stdout="Collecting x\n"))
    return group_results(results)


# ---------------------------------------------------------------- text


def test_text_is_a_header_per_group_then_its_text():
    assert render_groups_text(rank_groups()) == (
        "---------------- ranks 0-4,7 (6) on worker[0-1] ----------------\n"
        "hello\n"
        "---------------- rank 5 on worker1 [error] ----------------\n"
        "hello\n"
        "Traceback (most recent call last):\n"
        "ValueError: bad\n"
        "---------------- rank 6 on worker1 ----------------\n"
        "hello\n"
        "rank 6 is different\n"
    )


def test_text_host_headers_show_exit_status_unreachable_and_timeout():
    text = render_groups_text(host_groups())
    headers = [line for line in text.splitlines() if line.startswith("-" * 16)]
    assert headers == [
        "---------------- worker[0-6] (7) ----------------",
        "---------------- worker7 (1) [exit 3] ----------------",
        "---------------- worker8 (1) [unreachable] ----------------",
        "---------------- worker9 (1) [timeout] ----------------",
    ]
    assert "ERROR: no matching distribution\n" in text and "ssh: No route to host\n" in text


def test_text_has_no_escape_codes_unless_color_is_asked():
    groups = host_groups()
    assert "\x1b" not in render_groups_text(groups)
    colored = render_groups_text(groups, color=True)
    assert ANSI.sub("", colored) == render_groups_text(groups)
    assert "\x1b[1m\x1b[32m---------------- worker[0-6] (7)" in colored
    assert "\x1b[1m\x1b[31m---------------- worker7 (1) [exit 3]" in colored


def test_text_diff_shows_minority_groups_as_diffs_against_the_majority():
    text = render_groups_text(rank_groups(), diff=True)
    assert text == (
        "---------------- ranks 0-4,7 (6) on worker[0-1] ----------------\n"
        "hello\n"
        "---------------- rank 5 on worker1 [error] ----------------\n"
        "(same stdout/stderr as ranks 0-4,7 (6) on worker[0-1])\n"
        "Traceback (most recent call last):\n"
        "ValueError: bad\n"
        "---------------- rank 6 on worker1 ----------------\n"
        "--- ranks 0-4,7 (6) on worker[0-1]\n"
        "+++ rank 6 on worker1\n"
        "@@ -1 +1,2 @@\n"
        " hello\n"
        "+rank 6 is different\n"
    )
    colored = render_groups_text(rank_groups(), diff=True, color=True)
    assert "\x1b[32m+rank 6 is different\x1b[0m" in colored
    assert ANSI.sub("", colored) == text


def test_text_diff_with_a_single_group_is_the_plain_text():
    groups = group_results([RankResult(r, "h", stdout="same\n") for r in range(3)])
    assert render_groups_text(groups, diff=True) == render_groups_text(groups)


def test_empty_output_and_capped_display_are_said():
    results = [RankResult(0, "h"), RankResult(1, "h", stdout="x\n", truncated=True)]
    text = render_groups_text(group_results(results))
    assert text == (
        "---------------- rank 0 on h ----------------\n"
        "(no output)\n"
        "---------------- rank 1 on h ----------------\n"
        f"x\n{CAPPED_NOTE}\n"
    )
    assert render_groups_text([]) == ""


def test_text_caps_each_group_keeping_head_and_tail():
    text = render_groups_text(group_results([RankResult(0, "h", stdout=LOG)]), max_chars_per_group=200)
    body = text.split("\n", 1)[1]
    assert body.startswith("step 0 loss 1.0000\n") and body.endswith("step 59 loss 0.0167\n")
    marker = re.search(
        r"\[\.\.\. ([\d,]+) characters \(([\d,]+) lines\) cut here; the log has every byte \.\.\.\]", body)
    assert marker, body
    shown = body.replace(marker.group(0) + "\n", "")
    assert len(shown) + int(marker.group(1).replace(",", "")) == len(LOG)
    assert shown.count("\n") + int(marker.group(2)) == LOG.count("\n")
    assert len(body) < 200 + len(marker.group(0)) + 2


@pytest.mark.parametrize("limit", [1, 2, 7, 50, 999])
def test_cap_text_accounts_for_every_character(limit):
    text = "no newlines at all " * 20 + "\n" + LOG
    capped = cap_text(text, limit)
    marker = re.search(r"\[\.\.\. ([\d,]+) characters \(([\d,]+) lines\) cut here.*\.\.\.\]\n", capped)
    cut = int(marker.group(1).replace(",", ""))
    head, tail = capped[:marker.start()], capped[marker.end():]
    if not text.startswith(head):  # the marker always starts on its own line
        head = head[:-1]
    assert text.startswith(head) and text.endswith(tail)
    assert len(head) + cut + len(tail) == len(text)
    assert text[len(head):len(text) - len(tail)].count("\n") == int(marker.group(2))
    assert len(head) + len(tail) <= max(limit, 2)


def test_cap_text_leaves_short_text_alone():
    assert cap_text(LOG, len(LOG)) is LOG


# ---------------------------------------------------------------- html


class _Checker(HTMLParser):
    """Checks tags nest properly and collects the text inside <pre> elements."""

    VOID = {"br", "hr", "img", "meta", "link", "input"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.tags: list[str] = []
        self.pre_texts: list[str] = []
        self.headers: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag not in self.VOID:
            self.stack.append(tag)
        if tag == "pre":
            self.pre_texts.append("")

    def handle_endtag(self, tag):
        assert self.stack and self.stack[-1] == tag, f"</{tag}> closes {self.stack[-1:]}"
        self.stack.pop()

    def handle_data(self, data):
        if "pre" in self.stack:
            self.pre_texts[-1] += data


def parse(html: str) -> _Checker:
    checker = _Checker()
    checker.feed(html)
    checker.close()
    assert checker.stack == [], checker.stack
    return checker


def test_html_is_well_formed_self_contained_and_escaped():
    nasty = '<script>alert("x")</script> & <b>bold</b> \'q\'\n'
    results = [RankResult(0, "h<1>", stdout=nasty, stderr="<err>\n"), RankResult(1, "h<1>", status=DIED)]
    html = render_groups_html(group_results(results))
    checker = parse(html)
    assert "script" not in checker.tags and "b" not in checker.tags and "style" not in checker.tags
    assert checker.pre_texts == [nasty + "<err>\n", "(no output)"]
    assert "h&lt;1&gt;" in html and "<script>" not in html
    assert "\x1b" not in html


def test_html_groups_have_status_colours_and_badges():
    html = render_groups_html(host_groups())
    statuses = re.findall(r'data-status="(\w+)"', html)
    assert statuses == ["ok", "failed", "unreachable", "timeout"]
    blocks = html.split('<div class="mlp-magic-group"')[1:]
    assert "border-left:4px solid #2e7d32" in blocks[0]
    assert "border-left:4px solid #c62828" in blocks[1] and ">exit 3</span>" in blocks[1]
    assert "border-left:4px solid #6a1b9a" in blocks[2] and ">unreachable</span>" in blocks[2]
    assert "border-left:4px solid #ef6c00" in blocks[3] and ">timeout</span>" in blocks[3]
    assert ">worker[0-6] (7)</div>" in blocks[0]


def test_html_collapses_long_groups_into_details():
    long_text = "".join(f"line {i}\n" for i in range(COLLAPSE_OVER_LINES + 10))
    groups = group_results([RankResult(0, "h", stdout=long_text), RankResult(1, "h", stdout="short\n")])
    html = render_groups_html(groups)
    checker = parse(html)
    assert html.count("<details>") == 1
    preview, full, short = checker.pre_texts
    assert preview == "".join(f"line {i}\n" for i in range(20))
    assert full == long_text and short == "short\n"
    assert f"all {COLLAPSE_OVER_LINES + 10} lines ({len(long_text):,} characters)" in html


def test_html_preview_spans_pieces():
    results = [RankResult(0, "h", stdout="a\nb", stderr="".join(f"e{i}\n" for i in range(60)))]
    checker = parse(render_groups_html(group_results(results)))
    assert checker.pre_texts[0] == "a\nb\n" + "".join(f"e{i}\n" for i in range(18))


def test_html_diff_colours_added_and_removed_lines():
    html = render_groups_html(rank_groups(), diff=True)
    checker = parse(html)
    assert '<span style="color:#2e7d32">+rank 6 is different</span>' in html
    assert "+++ rank 6 on worker1" in checker.pre_texts[2]
    assert checker.pre_texts[0] == "hello\n"


def test_html_caps_like_the_text():
    html = render_groups_html(group_results([RankResult(0, "h", stdout=LOG)]), max_chars_per_group=200)
    assert "characters (" in html and "cut here; the log has every byte" in html
    assert "step 0 loss" in html and "step 59 loss" in html and "step 30 loss" not in html


def test_html_survives_nbconvert():
    html = render_groups_html(host_groups(), diff=True)
    notebook = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("%allrun pip install x")
    cell.outputs = [nbformat.v4.new_output("display_data", data={"text/html": html, "text/plain": "groups"})]
    notebook.cells.append(cell)
    body, _ = HTMLExporter().from_notebook_node(notebook)
    assert html in body
    exported = parse(body[body.index('<div class="mlp-magic-groups">'):body.index(html) + len(html)])
    assert "+ERROR: no matching distribution" in exported.pre_texts[1]


def test_html_long_diff_is_coloured_in_the_preview_too():
    base = "".join(f"line {i}\n" for i in range(60))
    results = [RankResult(r, "h", stdout=base) for r in range(3)]
    results[2].stdout = "".join(f"other {i}\n" for i in range(60))
    html = render_groups_html(group_results(results), diff=True)
    _, majority_and_diff_preview, full_diff = html.split("<details>")
    diff_preview = majority_and_diff_preview.split("</details>")[1]
    assert '<span style="color:#c62828">-line 0</span>' in diff_preview
    assert '<span style="color:#2e7d32">+other 59</span>' in full_diff
    parse(html)

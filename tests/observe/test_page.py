"""The trace page as text: how records, the title and file names are put into the template.

The page in a real browser is tested in ``test_trace_page.py``; these tests need none.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from hookloop import Agent, tool
from hookloop.observe import JsonLinesTracePlugin, read_trace, render_trace_page, write_trace_page
from hookloop.observe._page import _asset
from hookloop.testing import ScriptedModel, tool_call

_DATA = re.compile(r'<script type="application/json" id="trace-data">(.*?)</script>', re.S)
_TITLE = re.compile(r"<title>(.*?)</title>", re.S)
RECORD = {"v": 1, "seq": 0, "t": 0.0, "event": "x", "agent": "a", "chat": None, "data": {}}


def test_no_recorded_text_or_title_is_read_as_template() -> None:
    markers = "{{title}} {{style}} {{script}} {{data}}"
    record = {**RECORD, "agent": markers, "data": {"text": markers}}
    page = render_trace_page([record], title=markers)
    (title,) = _TITLE.findall(page)
    assert html.unescape(title) == markers
    (data,) = _DATA.findall(page)
    assert json.loads(data) == [record]
    assert page.count(_asset("_page.js")) == 1
    assert page.count(_asset("_page.css")) == 1


def test_a_trace_file_named_like_a_template_marker_keeps_its_name(tmp_path: Path) -> None:
    source = tmp_path / "{{script}}.jsonl"
    source.write_text(json.dumps(RECORD) + "\n")
    page = write_trace_page(source, tmp_path / "page.html").read_text(encoding="utf-8")
    (title,) = _TITLE.findall(page)
    assert html.unescape(title) == "hookloop trace: {{script}}.jsonl"
    assert page.count(_asset("_page.js")) == 1
    assert read_trace(source) == [RECORD]


def page_records(page: str) -> list[dict[str, Any]]:
    """The records a page holds, put back as its script puts them back."""
    (data,) = _DATA.findall(page)
    assert "</" not in data
    assert "://" not in page
    return read_trace([json.dumps(record) for record in json.loads(data)])


def test_both_ways_to_a_page_inline_what_the_records_share_once(tmp_path: Path) -> None:
    strange = {"$ref": "m0", "$id": "x", "$refs": ["m0", "m1"], "$$": "</script>", "k": "https://x"}

    @tool
    def odd() -> dict[str, object]:
        """Return data whose keys look like references."""
        return strange

    lines: list[str] = []
    answer = "all done " * 50
    agent = Agent(
        ScriptedModel([*(tool_call("odd", {}, id=f"c{i}") for i in range(20)), answer]),
        tools=[odd],
        max_iterations=25,
    )
    agent.use(JsonLinesTracePlugin(lines.append))
    agent.chat_sync("go")
    records = read_trace(lines)
    rendered = render_trace_page(records)
    written = write_trace_page(lines, tmp_path / "page.html").read_text(encoding="utf-8")
    assert page_records(rendered) == page_records(written) == records
    assert (
        next(r for r in records if r["event"] == "on_tool_call_result")["data"]["result"] == strange
    )
    size = sum(map(len, lines))
    assert len(written) < size + len(_asset("_page.js")) + len(_asset("_page.css")) + 2_000
    assert len(rendered) < 1.1 * len(written)
    assert written.count(answer) == rendered.count(answer) == 1  # said once, referred to after


@given(text=st.text(st.characters(exclude_categories=())), key=st.text(max_size=5))
def test_the_page_inlines_any_record_text_so_that_it_reads_back_the_same(
    text: str, key: str
) -> None:
    record = {"v": 2, "seq": 0, "t": 0.0, "event": "x", "agent": "a", "chat": None,
              "data": {key: text, "url": "https://example.com/</script><b>&"}}  # fmt: skip
    page = render_trace_page([record])
    assert page_records(page) == [record]
    page.encode()  # always valid UTF-8 (a lone surrogate is escaped)

"""The trace page as text: how records, the title and file names are put into the template.

The page in a real browser is tested in ``test_trace_page.py``; these tests need none.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

from hookloop.observe import read_trace, render_trace_page, write_trace_page
from hookloop.observe._page import _asset

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

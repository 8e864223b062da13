"""The trace page in real headless Chromium, with the network off.

Chromium is the system's (Debian's ``chromium``; ``scripts/test-services`` installs it when
missing, or name one with ``HOOKLOOP_TEST_CHROMIUM``), driven by playwright, which never
downloads a browser here. Every page is opened from a file with every request refused and
recorded: the only request allowed is the page's own file. Screenshots go to
``test-artifacts/`` at the repository root (git ignores it); their paths are printed.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

import pytest

from hookloop import Agent, ContextOverflowError
from hookloop._builtin_tools import calculator
from hookloop._cli import main
from hookloop.context import Compaction
from hookloop.hooks import FirstChunkContext
from hookloop.observe import JsonLinesTracePlugin, read_trace, render_trace_page
from hookloop.testing import FakeClock, ScriptedModel
from tests.models._provider_server import ProviderServer, Reply
from tests.observe._trace_runs import (
    ANSWER,
    PROMPT,
    TASK,
    busy_run,
    compacted_run,
    many_events,
    priced_run,
)

playwright = pytest.importorskip("playwright.sync_api")

_T = TypeVar("_T")

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
HOOKLOOP = Path(sys.executable).with_name("hookloop")


def _chromium() -> str:
    found = os.environ.get("HOOKLOOP_TEST_CHROMIUM") or next(
        filter(None, map(shutil.which, ("chromium", "chromium-browser"))), None
    )
    if found:
        return found
    message = (
        "no chromium: run `scripts/test-services start` (it installs it) "
        "or set HOOKLOOP_TEST_CHROMIUM"
    )
    if os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no"):
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="module")
def browser() -> Iterator[playwright.Browser]:
    executable = _chromium()
    with playwright.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=executable, headless=True)
        yield launched
        launched.close()


class Opened:
    """A page opened offline: what it requested, and what it logged or threw."""

    def __init__(self, browser: playwright.Browser, path: Path) -> None:
        self.url = path.resolve().as_uri()
        self.requests: list[str] = []
        self.problems: list[str] = []
        self.context = browser.new_context(offline=True, viewport={"width": 1280, "height": 720})
        self.context.route("**/*", self._route)
        self.page = self.context.new_page()
        self.page.on("request", lambda request: self.requests.append(request.url))
        self.page.on("pageerror", lambda error: self.problems.append(str(error)))
        self.page.on("console", lambda message: self.problems.append(message.text))
        self.page.goto(self.url)

    def _route(self, route: playwright.Route) -> None:
        if route.request.url == self.url:
            route.continue_()
        else:
            route.abort()

    def rows(self) -> list[str]:
        """The visible rows' first lines, as shown (the twisty excluded)."""
        heads = self.page.locator("[role=treeitem] > .row .head:visible")
        return [" ".join(text.split()) for text in heads.all_inner_texts()]

    def focused(self) -> str:
        return str(
            self.page.evaluate("document.activeElement.querySelector('.head').innerText.trim()")
        )

    def details(self) -> dict[str, str]:
        terms = self.page.locator("#details dt").all_inner_texts()
        values = self.page.locator("#details dd").all_inner_texts()
        return dict(zip(terms, values, strict=True))

    def close(self) -> None:
        self.context.close()


@pytest.fixture
def open_page(browser: playwright.Browser) -> Iterator[object]:
    opened: list[Opened] = []

    def open_(path: Path) -> Opened:
        page = Opened(browser, path)
        opened.append(page)
        return page

    yield open_
    for page in opened:
        assert page.requests == [page.url], "the page asked for something besides itself"
        assert page.problems == [], "the page logged or threw"
        page.close()


def screenshot(page: Opened, name: str) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / name
    page.page.screenshot(path=path, full_page=True)
    print(f"screenshot: {path}")
    return path


def off_the_loop(fn: Callable[[], _T]) -> _T:
    """``fn()`` in a thread of its own: playwright's sync API keeps an event loop running
    in this one, and a traced chat (``chat_sync``) needs a thread without one."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(fn).result()


def busy_lines(*, content: bool = True) -> list[str]:
    return off_the_loop(lambda: busy_run(content=content))


def page_of(tmp_path: Path, lines: list[str], name: str = "page.html") -> Path:
    path = tmp_path / name
    path.write_text(render_trace_page(read_trace(lines)))
    return path


def busy_page(tmp_path: Path, *, content: bool = True) -> Path:
    return page_of(tmp_path, busy_lines(content=content), "busy.html")


def without(lines: list[str], *events: str) -> list[str]:
    """The trace's lines but those of ``events``: a trace made before they were recorded."""
    return [line for line in lines if json.loads(line)["event"] not in events]


BUSY_ROWS = [
    f"chat assistant {PROMPT}",
    "model call 1 scripted-large",
    'tool add ({"a": 17, "b": 23})',
    'tool divide ({"a": 1, "b": 0})',
    'tool shell ({"command": "rm -rf /"}) short-circuited by a hook',
    "model call 2 scripted-large",
    'tool researcher ({"task": "Capital of France? See https:…)',
    f"sub-agent researcher {TASK}",
    "model call 1 scripted",
    "on_delegation task Capital of France? See https://example.…, result Paris., "
    "agent_name researcher",
    "model call 3 scripted-large",
]


def test_the_page_holds_no_url_and_loads_with_the_network_off(tmp_path: Path, open_page) -> None:
    path = busy_page(tmp_path)
    html = path.read_text()
    for marker in ("http:", "https:", "://", "src=", "href=", "url(", "@import"):
        assert marker not in html
    assert html.count("</script>") == 2  # the data's "</" is escaped
    page = open_page(path)
    assert page.page.evaluate("window.hookloopTrace.records") == len(busy_lines())


def test_the_timeline_shows_each_model_call_tool_call_and_the_nested_sub_agent(
    tmp_path: Path, open_page
) -> None:
    page = open_page(busy_page(tmp_path))
    assert page.rows() == BUSY_ROWS
    summary = page.page.locator("#summary").inner_text()
    assert summary == (
        "49 events · 2 chats · 4 model calls · 4 tool calls · 2 failures · "
        "610 tokens in / 77 out · cost unknown · 1.50 s"
    )
    subs = page.page.locator("[role=treeitem] > .row .sub:visible").all_inner_texts()
    assert subs[1].startswith("calls add, divide, shell 2 attempts · 120 in / 40 out")
    assert subs[3].startswith("ToolExecutionError: tool 'divide' failed: ZeroDivisionError")
    assert subs[4].startswith("→ refused: shell is not allowed hooks: deny_shell")
    window = page.page.locator(".k-model .window").first
    assert window.get_attribute("aria-label") == "120 of 8192 tokens of the context window"
    screenshot(page, "trace-page-busy.png")


def test_a_click_or_enter_shows_the_details_with_request_and_response(
    tmp_path: Path, open_page
) -> None:
    page = open_page(busy_page(tmp_path))
    page.page.locator(".k-tool .head", has_text="tool shell").click()
    assert page.details() == {
        "started": "1.50 s",
        "took": "0.0 ms",
        "outcome": "→ refused: shell is not allowed",
        "call id": "c3",
        "arguments": '{"command": "rm -rf /"}',
        "hooks": "deny_shell",
        "result": "refused: shell is not allowed",
    }
    page.page.locator(".k-model .head", has_text="model call 3").click()
    details = page.page.locator("#details")
    assert page.details()["request tokens"] == "260 (reported)"
    assert page.details()["context window"] == "8192 tokens (3.2% used)"
    sections = details.locator("h3").all_inner_texts()
    assert sections == ["REQUEST (7 MESSAGES, 4 TOOLS)", "RESPONSE"]
    assert details.locator(".msg").last.inner_text() == f"ASSISTANT\n{ANSWER}"
    assert details.locator(".msg").first.inner_text() == f"USER\n{PROMPT}"


def test_without_captured_content_the_details_say_so(tmp_path: Path, open_page) -> None:
    page = open_page(busy_page(tmp_path, content=False))
    page.page.locator(".k-tool .head", has_text="tool add").click()
    assert page.details()["arguments"] == "(not captured: 18 characters)"
    assert PROMPT not in page.page.content()
    # The wait's reason is the failed attempt's error type, which every trace keeps.
    open_first_model_call(page)
    page.page.locator(".k-wait .head").click()
    assert (page.details()["reason"], page.details()["strategy"]) == (
        "RateLimitError",
        "default-retry",
    )


def open_first_model_call(page: Opened) -> list[str]:
    """Open the first model call's row; the rows of its attempts and waits."""
    page.page.locator(".k-model .head", has_text="model call 1").first.locator(".twisty").click()
    return page.rows()[2:5]


def test_a_wait_is_what_the_retry_strategy_reported_in_on_backoff_wait(
    tmp_path: Path, open_page
) -> None:
    page = open_page(busy_page(tmp_path))
    assert open_first_model_call(page) == [
        "attempt 1 scripted-large",
        "wait 1.50 s before attempt 2",
        "attempt 2 scripted-large",
    ]
    wait = page.page.locator("[role=treeitem].k-wait > .row")
    assert wait.locator(".sub").inner_text() == "RateLimitError · Retry-After 1.50 s 1.50 s"
    wait.click()
    assert page.details() == {
        "started": "0.0 ms",
        "took": "1.50 s",
        "outcome": "RateLimitError · Retry-After 1.50 s",
        "waited": "1.50 s",
        "reason": "RateLimitError",
        "error": "RateLimitError: slow down (status=429, retry_after=1.5s)",
        "Retry-After": "1.50 s",
        "strategy": "default-retry",
    }
    assert page.page.locator("#details summary").inner_text() == "Records (1)"
    page.page.locator(".k-model .head", has_text="model call 1").first.click()
    assert page.details()["backoff waits"] == "1.50 s before attempt 2 (RateLimitError)"
    sections = page.page.locator("#details h3").all_inner_texts()
    assert sections == ["REQUEST (1 MESSAGE, 4 TOOLS)", "RESPONSE"]


def test_without_on_backoff_wait_the_wait_is_the_time_between_the_attempts(
    tmp_path: Path, open_page
) -> None:
    page = open_page(page_of(tmp_path, without(busy_lines(), "on_backoff_wait")))
    assert open_first_model_call(page) == [
        "attempt 1 scripted-large",
        "wait 1.50 s before attempt 2",
        "attempt 2 scripted-large",
    ]
    page.page.locator(".k-wait .head").click()
    assert page.details() == {
        "started": "0.0 ms",
        "took": "1.50 s",
        "measured": "the time between the attempts (no strategy reported it)",
    }


def test_the_keyboard_moves_opens_closes_and_selects(tmp_path: Path, open_page) -> None:
    page = open_page(busy_page(tmp_path))
    keys = page.page.keyboard
    keys.press("Tab")
    assert page.focused() == f"chat assistant {PROMPT}"
    outline = page.page.evaluate(
        "getComputedStyle(document.activeElement.querySelector('.row')).outlineStyle"
    )
    assert outline == "solid"  # a visible focus ring
    keys.press("ArrowDown")
    assert page.focused() == "model call 1 scripted-large"
    model = page.page.locator("[role=treeitem].k-model").first
    assert model.get_attribute("aria-expanded") == "false"
    keys.press("ArrowRight")
    assert model.get_attribute("aria-expanded") == "true"
    keys.press("ArrowRight")
    assert page.focused() == "attempt 1 scripted-large"
    keys.press("ArrowDown")
    assert page.focused() == "wait 1.50 s before attempt 2"
    keys.press("Enter")
    assert page.page.locator("#details h2").inner_text() == "wait 1.50 s before attempt 2"
    assert page.details()["reason"] == "RateLimitError"
    keys.press("ArrowLeft")
    assert page.focused() == "model call 1 scripted-large"
    keys.press("ArrowLeft")
    assert model.get_attribute("aria-expanded") == "false"
    keys.press("End")
    assert page.focused() == "model call 3 scripted-large"
    keys.press(" ")
    assert page.page.locator("[aria-selected=true] .head").inner_text().startswith("model call 3")
    assert page.page.locator("[role=treeitem][tabindex='0']").count() == 1  # roving tabindex


def test_a_sub_agent_collapses_and_opens(tmp_path: Path, open_page) -> None:
    page = open_page(busy_page(tmp_path))
    page.page.locator(".k-chat .head", has_text="sub-agent researcher").click()
    page.page.keyboard.press("ArrowLeft")
    assert page.rows() == [row for row in BUSY_ROWS if row != "model call 1 scripted"]
    page.page.locator(".k-chat .head", has_text="sub-agent researcher").locator(".twisty").click()
    assert page.rows() == BUSY_ROWS


def trimmed_run() -> list[str]:
    lines: list[str] = []
    answers = [
        f"Answer {i}, long enough to fill a small context window, {'and more ' * 3}."
        for i in range(3)
    ]
    agent = Agent(ScriptedModel(answers, context_window=120), name="small")
    agent.use(JsonLinesTracePlugin(lines.append))
    for i in range(3):
        agent.chat_sync(f"Question {i}: say something that takes room in the window.")
    return lines


TRIMMED_ROWS = [
    "chat small Question 0: say something that takes room in the window.",
    "model call 1 scripted",
    "chat small Question 1: say something that takes room in the window.",
    "model call 1 scripted",
    "chat small Question 2: say something that takes room in the window.",
    "model call 1 scripted",
]


def test_a_trim_is_a_context_row_of_its_chat_with_its_figures(tmp_path: Path, open_page) -> None:
    page = open_page(page_of(tmp_path, off_the_loop(trimmed_run)))
    assert page.rows() == [
        *TRIMMED_ROWS,
        "context trimmed: 5 → 3 messages, 104 → 61 tokens",  # from on_trim
    ]
    row = page.page.locator("[role=treeitem].k-context > .row")
    assert row.locator(".sub").inner_text() == "budget 87 tokens of a 120-token window"
    row.click()
    details = page.details()
    assert details == {
        "started": details["started"],
        "took": "0.0 ms",
        "reason": "window",
        "model call": "1, attempt 1",
        "messages": "5 → 3",
        "tokens (messages)": "104 → 61",
        "budget": "87 tokens",
        "context window": "120 tokens",
    }
    # The messages on_pre_compress announced just before: the oldest question and answer.
    assert page.page.locator("#details h3").all_inner_texts() == ["NEWLY LEFT OUT (2 MESSAGES)"]
    texts = page.page.locator("#details .msg").all_inner_texts()
    assert [t.split("\n")[0] for t in texts] == ["USER", "ASSISTANT"]
    assert texts[0].endswith("Question 0: say something that takes room in the window.")
    assert page.page.locator("#details summary").inner_text() == "Records (2)"


def overflowed_run() -> list[str]:
    lines: list[str] = []
    refusal = ContextOverflowError("too long", request_tokens=200, limit_tokens=100)
    model = ScriptedModel([f"First answer, {'words ' * 40}", refusal, "Second answer."])
    agent = Agent(model, name="over")
    ticks = itertools.count()  # each record a millisecond after the last: attempts are apart
    agent.use(JsonLinesTracePlugin(lines.append, clock=lambda: next(ticks) / 1000))
    agent.chat_sync(f"Question one {'words ' * 40}")
    agent.chat_sync("Question two")
    return lines


def test_a_request_trimmed_after_an_overflow_is_retried_without_a_wait(
    tmp_path: Path, open_page
) -> None:
    page = open_page(page_of(tmp_path, off_the_loop(overflowed_run)))
    rows = page.rows()
    assert rows[2:] == [
        "chat over Question two",
        "model call 1 scripted",
        "context trimmed after an overflow: 3 → 1 messages, 143 → 7 tokens",  # on_trim
        "context trimmed: 3 → 1 messages, 143 → 7 tokens",  # the window, for attempt 2
    ]
    page.page.locator(".k-model .head").nth(1).locator(".twisty").click()
    # The window retried at once: no strategy waited, and no wait is made up.
    assert page.rows()[4:6] == ["attempt 1 scripted", "attempt 2 scripted"]


def test_messages_left_out_that_no_policy_reported_still_show(tmp_path: Path, open_page) -> None:
    # A trace without on_trim rows (made before they existed, or a policy of your own that
    # fires only on_pre_compress): the row says what left, without figures.
    page = open_page(page_of(tmp_path, without(off_the_loop(trimmed_run), "on_trim")))
    assert page.rows() == [*TRIMMED_ROWS, "context 2 messages left out"]
    page.page.locator(".k-context .head").click()
    assert page.page.locator("#details h3").all_inner_texts() == ["LEFT OUT (2 MESSAGES)"]


def test_a_compaction_is_a_context_row_with_the_messages_it_summarised(
    tmp_path: Path, open_page
) -> None:
    page = open_page(page_of(tmp_path, off_the_loop(compacted_run)))
    rows = page.rows()
    assert rows[0].startswith("chat long Fruit question 0: ")
    assert rows[-3].startswith("chat long Fruit question 4: ")
    assert rows[-2:] == [
        "model call 1 scripted",
        # from on_compaction, with how many stored messages the summary replaced
        "context old turns summarised (5 stored messages): 9 → 5 messages, 707 → 308 tokens",
    ]
    assert [row for row in rows if row.startswith("context")] == [rows[-1]]
    row = page.page.locator("[role=treeitem].k-context > .row")
    assert row.locator(".sub").inner_text() == "1000-token window"
    row.click()
    details = page.details()
    assert details == {
        "started": details["started"],
        "took": "0.0 ms",
        "tier": "summary",
        "model call": "1, attempt 1",
        "messages": "9 → 5",
        "tokens (request, estimated)": "707 → 308",
        "context window": "1000 tokens",
    }
    # on_pre_compress fires once the summary is committed, after on_compaction: it joins it.
    assert page.page.locator("#details h3").all_inner_texts() == ["SUMMARISED (5 MESSAGES)"]
    assert page.page.locator("#details summary").inner_text() == "Records (2)"


def windowed_then_compacted_run() -> list[str]:
    """Nine chats a window trims, then a compaction attached summarises in the tenth."""
    lines: list[str] = []
    answers = [f"Reply {i}. " + "words " * 30 for i in range(10)]
    agent = Agent(ScriptedModel(answers, context_window=1000), name="long", retry=None)
    agent.use(JsonLinesTracePlugin(lines.append))
    for i in range(9):
        agent.chat_sync(f"Fruit question {i}: {'apples and pears ' * 20}")
    summarizer = ScriptedModel(["The user asked about fruit."], name="summarizer")
    agent.use(Compaction(compact_threshold=0.5, keep_recent=0.2, summarizer=summarizer))
    agent.chat_sync(f"Fruit question 9: {'apples and pears ' * 20}")
    return lines


def test_a_window_and_a_summary_in_one_request_each_say_what_they_did(
    tmp_path: Path, open_page
) -> None:
    page = open_page(page_of(tmp_path, off_the_loop(windowed_then_compacted_run)))
    rows = page.rows()
    assert rows[-3:] == [
        "model call 1 scripted",
        "context old turns summarised (17 stored messages): 7 → 3 messages, 535 → 170 tokens",
        "context trimmed: 19 → 7 messages, 1408 → 532 tokens",  # the window, in its steps
    ]
    page.page.locator(".k-context .head", has_text="summarised").last.click()
    assert page.page.locator("#details h3").all_inner_texts() == ["SUMMARISED (17 MESSAGES)"]
    page.page.locator(".k-context .head", has_text="trimmed: 19").click()
    assert page.page.locator("#details h3").all_inner_texts() == []


def streamed_run() -> list[str]:
    lines: list[str] = []
    clock = FakeClock()
    agent = Agent(ScriptedModel(["Hello there!"]), name="streamer")
    agent.use(JsonLinesTracePlugin(lines.append, clock=clock))

    def latency(ctx: FirstChunkContext) -> None:  # the first chunk takes 250 ms to arrive
        clock.now += 0.25

    agent.add_hook("on_first_chunk", latency)

    async def chat() -> None:
        async with agent.chat_stream("Hi") as events:
            async for _ in events:
                pass

    asyncio.run(chat())
    return lines


def test_a_streamed_model_call_shows_its_time_to_first_chunk(tmp_path: Path, open_page) -> None:
    page = open_page(page_of(tmp_path, off_the_loop(streamed_run)))
    assert page.rows() == ["chat streamer Hi", "model call 1 scripted"]  # no on_first_chunk row
    page.page.locator(".k-model .head").click()
    details = page.details()
    assert details["time to first chunk"] == "250.0 ms"  # from on_first_chunk
    assert details["took"] == "250.0 ms"
    page.page.locator(".k-chat > .row .head").click()
    assert "time to first chunk" not in page.details()


def two_agents_in_one_file() -> list[str]:
    lines: list[str] = []
    a = Agent(ScriptedModel(["A."]), name="a", session_id="s-a")
    b = Agent(ScriptedModel(["B."]), name="b")
    a.use(JsonLinesTracePlugin(lines.append))
    b.use(JsonLinesTracePlugin(lines.append))
    a.switch_session_sync("s-a2")  # outside any chat
    a.chat_sync("to a")
    b.chat_sync("to b")
    return lines


def test_two_agents_sharing_a_file_keep_their_chats_apart(tmp_path: Path, open_page) -> None:
    path = tmp_path / "two.html"
    path.write_text(render_trace_page(read_trace(off_the_loop(two_agents_in_one_file))))
    page = open_page(path)
    assert page.rows() == [
        "outside a chat a",
        "on_session_switch new_session_id s-a2, parent_session_id s-a, reset false, "
        "previous_session_id s-a",
        "chat a to a",
        "model call 1 scripted",
        "chat b to b",
        "model call 1 scripted",
    ]
    assert page.page.locator("#summary").inner_text().startswith("19 events · 2 chats · ")


def test_a_thousand_event_trace_renders_every_row(tmp_path: Path, open_page) -> None:
    lines = off_the_loop(lambda: many_events(1000))
    path = tmp_path / "many.html"
    path.write_text(render_trace_page(read_trace(lines)))
    page = open_page(path)
    stats = page.page.evaluate("window.hookloopTrace")
    chats = len({json.loads(line)["chat"] for line in lines if json.loads(line)["chat"]})
    assert stats["records"] == len(lines) >= 1000
    assert page.page.locator(".k-chat").count() == chats
    assert stats["rows"] == page.page.locator("[role=treeitem]").count()


def _hookloop(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # A placeholder key and a closed port: no test here reaches a provider.
    env = {
        **os.environ,
        "OPENAI_API_KEY": "sk-placeholder",
        "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
    }
    return subprocess.run(
        [str(HOOKLOOP), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_trace_view_writes_the_page_of_a_recorded_file(tmp_path: Path, open_page) -> None:
    (tmp_path / "run.jsonl").write_text("\n".join(busy_lines()) + "\n")
    done = _hookloop("trace", "view", "run.jsonl", "-o", "page.html", cwd=tmp_path)
    assert (done.returncode, done.stdout) == (0, "")
    assert done.stderr == f"trace page: open {(tmp_path / 'page.html').as_uri()} in a browser\n"
    page = open_page(tmp_path / "page.html")
    assert page.rows() == BUSY_ROWS
    assert page.page.title() == "hookloop trace: run.jsonl"
    done = _hookloop("trace", "view", "run.jsonl", cwd=tmp_path)  # the default: run.html
    assert done.returncode == 0
    assert (tmp_path / "run.html").is_file()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("trace", "view", "missing.jsonl"), "hookloop: missing.jsonl: cannot be read: "),
        (("trace", "view", "bad.jsonl"), "hookloop: bad.jsonl, line 1: not JSON: "),
        (("trace", "view", "bad.jsonl", "-o", "no/such/dir.html"), "hookloop: bad.jsonl"),
        (("run", "--trace-file", "no/such/dir.jsonl", "Hi"), "hookloop: cannot write the trace: "),
        (("run", "--trace-html", "no/such/dir.html", "Hi"), "hookloop: cannot write the trace: "),
    ],
)
def test_bad_trace_arguments_are_one_line_and_exit_2(
    tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    (tmp_path / "bad.jsonl").write_text("not json\n")
    model = ("--model", "openai:gpt-4o") if args[0] == "run" else ()
    done = _hookloop(*args, *model, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(message), done.stderr
    assert done.stderr.count("\n") == 1, done.stderr


def test_a_failed_run_still_writes_its_page_showing_the_failure(
    server: ProviderServer, tmp_path: Path, open_page, capsys: pytest.CaptureFixture[str]
) -> None:
    page_path = tmp_path / "failed.html"
    server.add(Reply.json({"error": {"message": "Incorrect API key provided"}}, status=401))
    argv = ["run", "--model", f"{server.url}/v1#m", "--trace-html", str(page_path), "Hi"]
    assert off_the_loop(lambda: main(argv)) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"trace page: open {page_path.as_uri()} in a browser\n")
    assert "hookloop: AuthenticationError: Incorrect API key provided" in err
    page = open_page(page_path)
    assert page.rows() == ["chat agent Hi", "model call 1 m"]
    subs = page.page.locator("[role=treeitem] > .row .sub").all_inner_texts()
    assert subs[0].startswith("failed · 1 model call · 0 tool calls")
    assert subs[1].startswith("AuthenticationError: Incorrect API key provided")
    page.page.locator(".k-chat .head").first.click()
    assert page.details()["error"].startswith("AuthenticationError: Incorrect API key provided")


def test_a_real_local_model_run_is_traced_into_a_page(tmp_path: Path, open_page) -> None:
    # The call is forced and its arguments follow the grammar; the words the small model
    # writes are its own choice, so only their presence is asserted.
    done = _hookloop(
        "run",
        "--model",
        "local",
        "--tool-choice",
        "calculator",
        "--trace-file",
        "run.jsonl",
        "--trace-html",
        "run.html",
        "What is 17 * 23? Use the calculator.",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()
    assert done.stderr.endswith(
        f"trace page: open {(tmp_path / 'run.html').as_uri()} in a browser\n"
    )
    events = [r["event"] for r in read_trace(tmp_path / "run.jsonl")]
    assert events[0] == "on_chat_start"
    assert events[-1] == "on_chat_done"
    page = open_page(tmp_path / "run.html")
    rows = page.rows()
    assert rows[:2] + rows[3:] == [
        "chat agent What is 17 * 23? Use the calculator.",
        "model call 1 local",
        "model call 2 local",
    ]
    shown = re.fullmatch(r"tool calculator \((\{.*\})\)", rows[2])
    assert shown is not None, rows[2]
    expression = json.loads(shown.group(1))["expression"]
    page.page.locator(".k-tool .head").click()
    assert float(page.details()["result"]) == pytest.approx(
        calculator.function(expression=expression)
    )
    page.page.locator(".k-model .head", has_text="model call 1").click()
    window = page.details()["context window"]
    assert re.fullmatch(r"\d+ tokens \(\d+\.\d% used\)", window), window
    screenshot(page, "trace-page-local-model.png")


def test_the_run_s_cost_is_on_the_page_and_each_model_call_s_in_its_row(
    tmp_path: Path, open_page
) -> None:
    page = open_page(page_of(tmp_path, off_the_loop(priced_run)))
    summary = page.page.locator("#summary").inner_text()
    assert "220 tokens in / 15 out · $0.00025 · " in summary
    subs = page.page.locator(".k-model > .row .sub:visible").all_inner_texts()
    assert [sub.split(" · ")[-1].split()[0] for sub in subs] == ["$0.00012", "$0.00013"]
    page.page.locator(".k-model .head", has_text="model call 1").click()
    assert page.details()["cost"] == "$0.00012"
    page.page.locator(".k-chat .head").first.click()
    assert (page.details()["tokens"], page.details()["cost"]) == ("220 in / 15 out", "$0.00025")


def test_an_unknown_cost_shows_as_unknown_never_as_zero(tmp_path: Path, open_page) -> None:
    page = open_page(busy_page(tmp_path))  # its models have no price
    assert " · cost unknown · " in page.page.locator("#summary").inner_text()
    page.page.locator(".k-model .head", has_text="model call 3").click()
    assert page.details()["cost"] == "cost unknown"

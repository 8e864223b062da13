"""The chat page in real headless Chromium against a real server: nothing but the server.

Chromium is the system's (``scripts/test-services`` installs it; ``HOOKLOOP_TEST_CHROMIUM``
names another), driven by playwright, which downloads nothing. Every request that is not to
the server is refused and recorded. Send a message and see the streamed answer, approve a
call, reload the page and see the same conversation.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from hookloop import Agent
from hookloop.testing import ScriptedModel, ScriptStep, text_response, tool_call
from tests.observe.test_trace_page import _chromium
from tests.serve._support import Served, add, delete, served

playwright = pytest.importorskip("playwright.sync_api")

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
WAIT = 30_000  # ms: only a failure guard


def _agent() -> Agent:
    script = [
        tool_call("add", {"a": 2, "b": 3}, id="c1"),
        ScriptStep(response=text_response("The sum is 5."), chunk_size=3),
        tool_call("delete", {"path": "/tmp/x"}, id="d1"),
        "Deleted it.",
        tool_call("delete", {"path": "/tmp/y"}, id="d2"),
        "Kept it.",
    ]
    return Agent(ScriptedModel(script), tools=[add, delete])


@pytest.fixture(scope="module")
def browser() -> Iterator[playwright.Browser]:
    with playwright.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=_chromium(), headless=True)
        yield launched
        launched.close()


class Opened:
    """The page of a server, with every request that leaves the server refused and recorded."""

    def __init__(self, browser: playwright.Browser, server: Served, **context: object) -> None:
        self.origin = server.url
        self.elsewhere: list[str] = []
        self.problems: list[str] = []
        self.context = browser.new_context(viewport={"width": 1100, "height": 800}, **context)
        self.context.route("**/*", self._route)
        self.page = self.context.new_page()
        self.page.on("pageerror", lambda error: self.problems.append(str(error)))
        self.page.on("console", self._console)

    def _console(self, message: playwright.ConsoleMessage) -> None:
        # A new thread is unknown to the server (404), which the page expects; Chromium logs
        # every failed load.
        if message.type in ("error", "warning") and not message.text.startswith(
            "Failed to load resource: the server responded with a status of 404"
        ):
            self.problems.append(message.text)

    def _route(self, route: playwright.Route) -> None:
        if route.request.url.startswith(self.origin + "/"):
            route.continue_()
        else:
            self.elsewhere.append(route.request.url)
            route.abort()

    def texts(self, selector: str) -> list[str]:
        return [" ".join(t.split()) for t in self.page.locator(selector).all_inner_texts()]


@pytest.fixture
def opened(browser: playwright.Browser) -> Iterator[list[Opened]]:
    pages: list[Opened] = []
    yield pages
    for page in pages:
        assert page.elsewhere == [], "the page asked for something besides its server"
        assert page.problems == [], "the page logged or threw"
        page.context.close()


def test_send_stream_approve_and_reload(browser: playwright.Browser, opened: list[Opened]) -> None:
    with served(_agent) as server:
        shown = Opened(browser, server)
        opened.append(shown)
        page = shown.page
        page.goto(server.url + "/?thread=page-1")
        page.locator("#message").fill("What is 2 + 3?")
        page.keyboard.press("Enter")  # the keyboard sends
        page.locator(".msg.assistant", has_text="The sum is 5.").wait_for(timeout=WAIT)
        assert shown.texts(".tool") == ['add({"a": 2, "b": 3}) 5']
        page.locator("#spent", has_text="tokens:").wait_for(timeout=WAIT)
        assert page.locator("#trace").get_attribute("href") == "api/threads/page-1/trace"
        assert page.locator("#trace").is_visible()

        page.locator("#message").fill("Delete /tmp/x")
        page.locator("#send").click()
        approve = page.locator("#approvals button.approve")
        approve.wait_for(timeout=WAIT)
        assert shown.texts("#approvals code") == ['delete({"path": "/tmp/x"})']
        page.wait_for_function("document.activeElement.classList.contains('approve')")
        page.keyboard.press("Enter")  # the focused Approve button
        page.locator(".msg.assistant", has_text="Deleted it.").wait_for(timeout=WAIT)
        assert page.locator("#approvals").is_hidden()

        page.locator("#message").fill("Delete /tmp/y")
        page.keyboard.press("Enter")
        page.locator("#approvals button.deny").click(timeout=WAIT)
        page.locator("#approvals input").fill("keep it")
        page.keyboard.press("Enter")
        page.locator(".msg.assistant", has_text="Kept it.").wait_for(timeout=WAIT)

        before = shown.texts("#log > *")
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=ARTIFACTS / "chat-page.png", full_page=True)
        page.reload()
        page.locator(".msg.assistant", has_text="Kept it.").wait_for(timeout=WAIT)
        assert shown.texts("#log > *") == before
        assert before == [
            "What is 2 + 3?",
            'add({"a": 2, "b": 3}) 5',
            "The sum is 5.",
            "Delete /tmp/x",
            'delete({"path": "/tmp/x"}) deleted /tmp/x',
            "Deleted it.",
            "Delete /tmp/y",
            'delete({"path": "/tmp/y"}) denied: keep it',
            "Kept it.",
        ]
        with shown.context.expect_page(timeout=WAIT) as opening:
            page.locator("#trace").click()  # the thread's trace page, in a new tab
        trace = opening.value
        trace.wait_for_load_state()
        assert trace.title() == "hookloop thread page-1"


def test_a_call_still_waiting_shows_again_after_a_reload(
    browser: playwright.Browser, opened: list[Opened]
) -> None:
    with served(_agent, token="s3cret") as server:
        shown = Opened(browser, server)
        opened.append(shown)
        page = shown.page
        page.goto(server.url + "/?thread=page-2#token=s3cret")
        page.locator("#message").fill("add")
        page.keyboard.press("Enter")
        page.locator(".msg.assistant", has_text="The sum is 5.").wait_for(timeout=WAIT)
        page.locator("#message").fill("Delete /tmp/x")
        page.keyboard.press("Enter")
        page.locator("#approvals button.edit").click(timeout=WAIT)
        page.reload()  # the token stays for the tab; the call still waits
        page.locator("#approvals button.edit").click(timeout=WAIT)
        page.locator("#approvals textarea").fill('{"path": "/tmp/z"}')
        page.locator("#approvals button", has_text="Run with these").click()
        page.locator(".msg.assistant", has_text="Deleted it.").wait_for(timeout=WAIT)
        assert 'delete({"path": "/tmp/x"}) deleted /tmp/z' in shown.texts("#log > *")

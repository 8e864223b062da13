"""``hookloop chat`` in a real pseudo-terminal: typing, Ctrl-C mid-answer, Ctrl-C and Ctrl-D.

The model is a real HTTP server speaking the OpenAI wire format; the answer that Ctrl-C
stops is a stream that stalls after its first words, so the test never races the model.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterator

import pexpect
import pytest

from tests.models._provider_server import ProviderServer, Reply

TIMEOUT = 60  # generous: the machine is shared; nothing here waits this long when it passes


def chunk(delta: dict[str, object], finish: str | None = None) -> dict[str, object]:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [choice]}  # fmt: skip


def stalling(first: str, rest: str) -> Reply:
    """A stream that sends ``first``, then waits far longer than any test before ``rest``."""
    opening = f"data: {json.dumps(chunk({'role': 'assistant', 'content': first}))}\n\n"
    events = [chunk({"role": "assistant", "content": first}), chunk({"content": rest}, "stop")]
    return Reply.sse(events, stall_after=len(opening.encode()), stall=600)


@pytest.fixture
def chat(server: ProviderServer) -> Iterator[pexpect.spawn]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    child = pexpect.spawn(
        sys.executable,
        ["-m", "hookloop", "chat", "--model", f"{server.url}/v1#m", "--no-tools"],
        env=env,
        encoding="utf-8",
        timeout=TIMEOUT,
    )
    try:
        child.expect_exact("you> ")
        yield child
    finally:
        child.close(force=True)


def test_ctrl_c_stops_the_answer_and_keeps_the_conversation(
    server: ProviderServer, chat: pexpect.spawn
) -> None:
    server.add(
        stalling("Once upon", " a time, and on and on."),
        Reply.sse([chunk({"role": "assistant", "content": "Short one."}, "stop")]),
    )
    chat.sendline("Tell me a long story.")
    chat.expect_exact("model> Once upon")
    chat.sendintr()  # Ctrl-C while the answer streams
    chat.expect_exact("(stopped)")
    chat.expect_exact("you> ")  # back at the prompt, still running
    chat.sendline("A short one, then.")
    chat.expect_exact("model> Short one.")
    chat.expect_exact("you> ")
    chat.sendeof()  # Ctrl-D leaves
    chat.expect(pexpect.EOF)
    chat.close()
    assert chat.exitstatus == 0
    second = server.received[1].body["messages"]
    assert second[0] == {"role": "user", "content": "Tell me a long story."}
    assert second[-1] == {"role": "user", "content": "A short one, then."}


def test_ctrl_c_at_the_prompt_leaves(chat: pexpect.spawn) -> None:
    chat.sendintr()
    chat.expect(pexpect.EOF)
    chat.close()
    assert chat.exitstatus == 0
    assert "Traceback" not in (chat.before or "")


def test_ctrl_d_at_the_prompt_leaves(server: ProviderServer, chat: pexpect.spawn) -> None:
    server.add(Reply.sse([chunk({"role": "assistant", "content": "Hello."}, "stop")]))
    chat.sendline("Hi")
    chat.expect_exact("model> Hello.")
    chat.expect_exact("you> ")
    chat.sendeof()
    chat.expect(pexpect.EOF)
    chat.close()
    assert chat.exitstatus == 0


def test_trace_lines_never_share_a_line_with_the_answer_or_the_prompt(
    server: ProviderServer,
) -> None:
    server.add(
        Reply.sse(
            [chunk({"role": "assistant", "content": "Hel"}), chunk({"content": "lo."}, "stop")]
        )
    )
    child = pexpect.spawn(
        sys.executable,
        ["-m", "hookloop", "chat", "--model", f"{server.url}/v1#m", "--no-tools", "--trace"],
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        encoding="utf-8",
        timeout=TIMEOUT,
    )
    try:
        child.expect_exact("you> ")
        child.sendline("Hi")
        child.expect_exact("you> ")
        screen = (child.before or "").split("\r\n")
        child.sendeof()
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    trace = re.compile(r"^ *\d+\.\d ms  [a-z_]+ +\S")
    assert screen[0] == "Hi"  # the terminal's echo of the typed line
    assert screen[-1] == ""  # the prompt starts a line of its own
    answer = [line for line in screen[1:-1] if not trace.match(line)]
    assert answer == ["model> Hello."]
    assert any("on_chat_done" in line for line in screen)


GREETINGS = ("Hello! Who are you?", "hi", "Thanks!", "Good morning.")


def test_chat_with_the_local_model_shows_the_tool_call_and_the_answer() -> None:
    child = pexpect.spawn(
        sys.executable,
        ["-m", "hookloop", "chat"],  # the bundled local model, the calculator offered
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        encoding="utf-8",
        timeout=300,  # loading and answering on a loaded machine
    )
    try:
        child.expect_exact("you> ")
        child.sendline("What is 17 * 23? Use the calculator.")
        child.expect_exact('  calculator({"expression": "17 * 23"}) -> 391\r\n')
        child.expect_exact("model> The answer is 391.\r\n")
        child.expect_exact("you> ")
        for greeting in GREETINGS:  # after an arithmetic turn, in the same conversation
            child.sendline(greeting)
            child.expect_exact("you> ")
            printed = child.before or ""  # everything after the line was sent: echo, answer
            assert "calculator(" not in printed  # offered, not forced: no tool call
            assert "function" not in printed.lower()
            assert "model> " in printed
        child.sendeof()
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0

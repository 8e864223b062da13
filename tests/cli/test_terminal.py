"""``hookloop chat`` in a real pseudo-terminal: typing, Ctrl-C mid-answer, Ctrl-C and Ctrl-D,
and the y/n/e prompt for each call that needs approval (``_approval_terminal.py``).

The model is a real HTTP server speaking the OpenAI wire format; the answer that Ctrl-C
stops is a stream that stalls after its first words, so the test never races the model.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest

from tests.cli._approval_terminal import PROMPT, approval_chat
from tests.models._provider_server import ProviderServer, Reply, answer

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
    assert answer[0] == "model> Hello."
    assert answer[1].startswith("(spent 1 request, ")  # the session's spend, a line of its own
    assert len(answer) == 2
    assert any("on_chat_done" in line for line in screen)


GREETINGS = ("Hello! Who are you?", "hi", "Thanks!", "Good morning.")


def test_chat_with_the_local_model_shows_the_tool_call_and_the_answer() -> None:
    child = pexpect.spawn(
        sys.executable,
        # The bundled local model, the calculator offered; the greetings' answers cut at 48
        # tokens (the first say whether they are words; some would run to 256).
        ["-m", "hookloop", "chat", "--max-tokens", "48"],
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


# --- approval prompts ------------------------------------------------------------------------


def test_hookloop_chat_asks_y_n_e_for_each_call_that_needs_approval(
    server: ProviderServer, tmp_path: Path
) -> None:
    calls = (
        ("call_a", "delete_file", '{"path": "a"}'),
        ("call_b", "delete_file", '{"path": "b"}'),
        ("call_c", "delete_file", '{"path": "c"}'),
    )
    server.add(
        answer("chat.completions", calls=calls, stream=True),
        answer("chat.completions", "Deleted a and c2; kept b."),
    )
    with approval_chat(server, tmp_path) as child:
        child.sendline("Tidy up.")
        child.expect_exact('  delete_file({"path": "a"}) needs approval\r\n')
        child.expect_exact("  run it? [y]es, [n]o, [e]dit: ")
        child.sendline("y")
        child.expect_exact('  delete_file({"path": "b"}) needs approval\r\n')
        child.expect_exact("  run it? [y]es, [n]o, [e]dit: ")
        child.sendline("n")
        child.expect_exact("  why not? ")
        child.sendline("b is still needed")
        child.expect_exact('  delete_file({"path": "c"}) needs approval\r\n')
        child.expect_exact("  run it? [y]es, [n]o, [e]dit: ")
        child.sendline("e")
        child.expect_exact("  arguments as JSON: ")
        child.sendline("[1]")
        child.expect_exact("  edit() needs a JSON object of arguments, got '[1]'\r\n")
        child.expect_exact("  run it? [y]es, [n]o, [e]dit: ")
        child.sendline("e")
        child.expect_exact("  arguments as JSON: ")
        child.sendline('{"path": "c2"}')
        child.expect_exact("  delete_file -> deleted a\r\n")
        child.expect_exact("  delete_file ! denied: b is still needed\r\n")
        child.expect_exact("  delete_file -> deleted c2\r\n")
        child.expect_exact("model> Deleted a and c2; kept b.\r\n")
        child.expect_exact("you> ")
        child.sendeof()
        child.expect(pexpect.EOF)
    assert child.exitstatus == 0
    sent = server.received[1].body["messages"]
    assert [(m["tool_call_id"], m["content"]) for m in sent if m["role"] == "tool"] == [
        ("call_a", "deleted a"),
        ("call_b", "denied: b is still needed"),
        ("call_c", "deleted c2"),
    ]


def test_ctrl_c_at_the_decision_prompt_of_hookloop_chat_leaves(
    server: ProviderServer, tmp_path: Path
) -> None:
    server.add(
        answer(
            "chat.completions", calls=(("call_a", "delete_file", '{"path": "a"}'),), stream=True
        ),
        answer("chat.completions", "not asked"),
    )
    with approval_chat(server, tmp_path) as child:
        child.sendline("Tidy up.")
        child.expect_exact("  run it? [y]es, [n]o, [e]dit: ")
        child.sendintr()
        child.expect(pexpect.EOF)
    assert child.exitstatus == 0
    assert len(server.received) == 1  # nothing decided, nothing sent


def test_hookloop_chat_shows_a_raising_predicate_in_one_line_and_asks_again_for_a_bad_edit(
    server: ProviderServer, tmp_path: Path
) -> None:
    calls = (
        ("call_a", "risky", '{"path": "a"}'),
        ("call_b", "delete_file", '{"path": "b"}'),
    )
    server.add(
        answer("chat.completions", calls=calls, stream=True),
        answer("chat.completions", "Done."),
    )
    with approval_chat(server, tmp_path, "risky", "delete_file") as child:
        child.sendline("Go.")
        child.expect_exact('  risky({"path": "a"}) needs approval\r\n')
        before = child.before or ""
        child.expect_exact(PROMPT)
        child.sendline("y")
        child.expect_exact(PROMPT)
        child.sendline("e")
        child.expect_exact("  arguments as JSON: ")
        child.sendline('{"path": 5}')
        child.expect_exact(
            "  the edit of call 'call_b' is refused: invalid arguments for tool "
            "'delete_file': path: Input should be a valid string\r\n"
        )
        child.expect_exact(PROMPT)
        child.sendline("e")
        child.expect_exact("  arguments as JSON: ")
        child.sendline('{"path": "b2"}')
        child.expect_exact("model> Done.\r\n")
        child.expect_exact("you> ")
        child.sendeof()
        child.expect(pexpect.EOF)
    assert child.exitstatus == 0
    sent = server.received[1].body["messages"]
    assert "Traceback" not in before
    assert [line for line in before.splitlines() if "requires_approval" in line] == [
        "requires_approval() of tool 'risky' raised ZeroDivisionError: integer division or "
        "modulo by zero; asking for approval"
    ]
    assert [(m["tool_call_id"], m["content"]) for m in sent if m["role"] == "tool"] == [
        ("call_a", "risked a"),
        ("call_b", "deleted b2"),
    ]

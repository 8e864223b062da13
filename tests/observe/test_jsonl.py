"""The JSON-lines trace: every event-table row recorded, stages, sub-agents, content, reading."""

from __future__ import annotations

import asyncio
import dataclasses
import io
import json
import subprocess
import sys
import tracemalloc
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hookloop import (
    Agent,
    ChatCancelledError,
    ToolCall,
    ToolMessage,
    TraceFileError,
    Usage,
    UsageError,
    UserMessage,
    hooks,
    tool,
)
from hookloop._tools import exception_text
from hookloop.context._tokens import count_request, counter_for_model
from hookloop.hooks._dispatch import notify
from hookloop.hooks._events import EVENT_TABLE, EventSpec
from hookloop.models import ProviderRequest, ProviderResponse
from hookloop.observe import TRACE_FORMAT, JsonLinesTracePlugin, read_trace, write_trace_page
from hookloop.sessions import dump_messages
from hookloop.testing import FunctionModel, ScriptedModel, text_response, tool_call, tool_calls
from tests.models._provider_server import ProviderServer, Reply
from tests.observe._golden import FIXTURE, golden_runs
from tests.observe._trace_runs import ANSWER, EPOCH, PROMPT, TASK, busy_run, compacted_run


def records(lines: list[str]) -> list[dict[str, object]]:
    """The records as read back: what a trace wrote once is put back where it was named."""
    return read_trace(lines)


def steps(lines: list[str]) -> list[tuple[object, ...]]:
    """(event, stage, chat, agent) of each record, in order."""
    return [(r["event"], r["stage"], r["chat"], r["agent"]) for r in records(lines)]


def tool_call_stages(got: list[dict[str, object]], call_id: str) -> list[tuple[object, object]]:
    """(stage, hooks) of the pre_tool_call records of one call: its before, and its after."""
    before = [
        r
        for r in got
        if r["event"] == "pre_tool_call"
        and r["stage"] == "before"
        and r["data"]["call"]["id"] == call_id  # type: ignore[index]
    ]
    after = [r for r in got if r["stage"] == "after" and r["of"] in {b["seq"] for b in before}]
    return [(r["stage"], r["hooks"]) for r in before + after]


def test_every_row_of_the_event_table_gets_a_recording_handler() -> None:
    agent = Agent(ScriptedModel(["Hi."]))
    agent.use(JsonLinesTracePlugin(io.StringIO()))
    mine = {
        event: [h.label for h in hs if h.label.startswith("JsonLinesTracePlugin.")]
        for event, hs in agent.hooks.handlers.items()
    }
    expected = {
        spec.name: [f"JsonLinesTracePlugin.{spec.name}"]
        * (2 if (spec.kind == "interceptor" or spec.settable) and not spec.sync_only else 1)
        for spec in EVENT_TABLE.values()
    }
    assert mine == expected


def test_known_runs_are_traced_byte_for_byte_as_the_pinned_lines(tmp_path: Path) -> None:
    # A retry, parallel calls, a short-circuit, a sub-agent, errors, a compaction, handlers
    # that reshape requests, long and non-ASCII texts, with and without content and error
    # texts, to a function and to a file: the lines the code before issue 22 item 4 wrote.
    pinned = json.loads(FIXTURE.read_text(encoding="utf-8"))
    got = golden_runs(tmp_path)
    assert list(got) == list(pinned)
    for name, lines in got.items():
        for number, (line, expected) in enumerate(zip(lines, pinned[name], strict=True)):
            assert line == expected, f"{name}, line {number}"


@dataclasses.dataclass(slots=True, kw_only=True)
class _CacheHitContext:  # an event no release has (yet)
    seconds: float
    reason: str
    call: ToolCall


async def test_a_row_added_to_the_event_table_later_is_recorded_without_a_change(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spec = EventSpec(
        name="on_cache_hit",
        context=_CacheHitContext,
        kind="observer",
        returns="-",
        stops="-",
        trace=lambda c, t: "",
    )
    monkeypatch.setitem(hooks.EVENT_TABLE, spec.name, spec)  # type: ignore[attr-defined]
    lines: list[str] = []
    agent = Agent(ScriptedModel(["Hi."]), name="a", session_id="s1")
    agent.use(JsonLinesTracePlugin(lines.append, clock=lambda: 5.0, wall=lambda: EPOCH))
    call = ToolCall(name="add", arguments='{"a": 1}', id="c9")
    await notify(
        agent.hooks.handlers["on_cache_hit"],
        _CacheHitContext(seconds=1.5, reason="rate limited", call=call),
    )
    assert records(lines) == [
        {
            "v": TRACE_FORMAT,
            "seq": 0,
            "t": 0.0,
            "ts": "2026-09-21T14:13:20.000Z",
            "event": "on_cache_hit",
            "stage": None,
            "of": None,
            "agent": "a",
            "session": "s1",
            "chat": None,
            "parent": None,
            "path": ["a"],
            "hooks": None,
            "data": {
                "seconds": 1.5,
                "reason": "rate limited",
                "call": {"name": "add", "id": "c9", "arguments": '{"a": 1}'},
            },
        }
    ]


def test_a_plain_chat_is_recorded_event_by_event_with_whole_records() -> None:
    lines: list[str] = []
    now = iter([10.0, 10.25, 10.5, 10.5, 11.0, 11.0, 11.0, 11.0, 11.5])
    agent = Agent(ScriptedModel(["Hello!"], context_window=1000), name="greeter", session_id="s1")
    agent.use(JsonLinesTracePlugin(lines.append, clock=lambda: next(now), wall=lambda: EPOCH))
    response = agent.chat_sync(UserMessage(content="Hi", id="u1"))
    # pre_request and after_model_call have the default policies' handlers besides the
    # trace's: a "before" and an "after" each. on_response has none: one record, no stage.
    assert steps(lines) == [
        ("on_chat_start", None, "c1", "greeter"),
        ("on_message", None, "c1", "greeter"),
        ("pre_request", "before", "c1", "greeter"),
        ("pre_request", "after", "c1", "greeter"),
        ("after_model_call", "before", "c1", "greeter"),
        ("after_model_call", "after", "c1", "greeter"),
        ("on_response", None, "c1", "greeter"),
        ("on_message", None, "c1", "greeter"),
        ("on_chat_done", None, "c1", "greeter"),
    ]
    got = records(lines)
    assert [r["seq"] for r in got] == list(range(9))
    assert [r["t"] for r in got] == [0.0, 0.25, 0.5, 0.5, 1.0, 1.0, 1.0, 1.0, 1.5]
    assert [(r["hooks"], r["of"]) for r in got[6:]] == [([], None), (None, None), (None, None)]
    assert got[0] == {
        "v": TRACE_FORMAT,
        "seq": 0,
        "t": 0.0,
        "ts": "2026-09-21T14:13:20.000Z",
        "event": "on_chat_start",
        "stage": None,
        "of": None,
        "agent": "greeter",
        "session": "s1",
        "chat": "c1",
        "parent": None,
        "path": ["greeter"],
        "hooks": None,
        "data": {"message": {"role": "user", "content": "Hi", "id": "u1"}},
    }
    request = {
        "model": "scripted",
        "system": None,
        "messages": [{"role": "user", "content": "Hi", "id": "u1"}],
        "tools": [],
        "settings": {
            "temperature": None,
            "max_tokens": None,
            "tool_choice": "auto",
            "extra": {},
            "cache_key": None,  # the session's, for a model that sends one
        },
        "output_format": None,
        "tokens": got[2]["data"]["request"]["tokens"],  # type: ignore[index]
    }
    assert isinstance(request["tokens"], int)
    assert request["tokens"] > 0
    model = {"class": "ScriptedModel", "name": "scripted", "window": 1000}
    assert got[2]["data"] == {
        "iteration": 0,
        "request": request,
        "attempt": 1,
        "model": model,
        "replace_history": None,
        "left_out": [],
        "stream": False,
    }
    assert got[2]["hooks"] == ["SlidingWindow._trim"]  # the default context policy
    assert got[3]["data"] == {"changed": []}
    assert got[3]["of"] == 2
    assert got[4]["data"] == {
        "iteration": 0,
        "attempt": 1,
        "request": request,
        "response": {
            "content": "Hello!",
            "tool_calls": [],
            "finish_reason": "stop",
            "usage": None,
            "model": None,
            "id": None,
        },
        "error": None,
        "model": model,
        "retry": False,
        "replace_history": None,
        "left_out": [],
    }
    assert got[-1]["data"]["response"]["message"] == {  # type: ignore[index]
        "role": "assistant",
        "content": "Hello!",
        "tool_calls": [],
        "id": response.message.id,
    }


def test_the_busy_run_records_retries_short_circuits_errors_and_the_sub_agent() -> None:
    got = records(busy_run())
    by_event = [(r["event"], r["stage"], r["chat"]) for r in got]
    # The retry: the attempt failed at t=0; the strategy waited 1.5 s inside its handler.
    first_after = [r for r in got if r["event"] == "after_model_call"][:2]
    assert [(r["stage"], r["t"]) for r in first_after] == [("before", 0.0), ("after", 1.5)]
    assert first_after[0]["data"]["error"] == {  # type: ignore[index]
        "error_type": "RateLimitError",
        "text": "slow down (status=429, retry_after=1.5s)",
        "status": 429,
        "body": None,
        "retry_after": 1.5,
        "model": None,
    }
    assert first_after[1]["data"] == {"changed": ["retry"], "retry": True}
    # The hook that short-circuits shell: a "before" record naming it, and no "after".
    assert tool_call_stages(got, "c3") == [("before", ["deny_shell"])]
    assert tool_call_stages(got, "c1") == [("before", ["deny_shell"]), ("after", None)]
    first_call = next(r for r in got if r["event"] == "pre_tool_call")
    assert first_call["data"] == {
        "call": {"name": "add", "id": "c1", "arguments": '{"a": 17, "b": 23}'},
        "tool": {"class": "Tool", "name": "add"},
        "scope": {"class": "Scope", "name": "default"},
    }
    error = next(r for r in got if r["event"] == "on_tool_call_error")
    assert error["data"]["error"]["error_type"] == "ToolExecutionError"  # type: ignore[index]
    # The sub-agent: its own chat, under the parent's chat and tool call.
    sub = [r for r in got if r["chat"] == "c2"]
    assert [r["event"] for r in sub] == [
        "on_chat_start",
        "on_message",
        "pre_request",
        "after_model_call",
        "on_response",
        "on_message",
        "on_chat_done",
    ]
    assert {(r["agent"], json.dumps(r["parent"]), tuple(r["path"]), r["session"]) for r in sub} == {
        ("researcher", '{"chat": "c1", "call": "c4"}', ("assistant", "researcher"), None)
    }
    assert sub[0]["data"]["message"]["content"] == TASK  # type: ignore[index]
    assert ("on_delegation", None, "c1") in by_event
    assert by_event[-1] == ("on_chat_done", None, "c1")
    assert got[-1]["data"]["response"]["message"]["content"] == ANSWER  # type: ignore[index]
    assert "on_subagent_event" not in {r["event"] for r in got}


def test_without_content_no_text_of_the_conversation_is_written() -> None:
    lines = busy_run(content=False)
    text = "\n".join(lines)
    for secret in (PROMPT, TASK, ANSWER, "rm -rf /", "refused: shell", "Paris", '"a": 17'):
        assert secret not in text
    got = records(lines)
    assert got[0]["data"] == {
        "message": {
            "role": "user",
            "content": {"chars": len(PROMPT)},
            "id": got[0]["data"]["message"]["id"],
        }  # type: ignore[index]
    }
    call = next(r for r in got if r["event"] == "pre_tool_call")["data"]["call"]  # type: ignore[index]
    assert call == {"name": "add", "id": "c1", "arguments": {"chars": 18}}
    # What names things stays: tool names, ids, models, the error's type and text.
    assert "scripted-large" in text
    assert "ToolExecutionError" in text
    assert "researcher" in text
    # The figures of the new rows too, the retry strategy's name, and the wait's reason (an
    # error type, as the error's own type is): content is left out, not what names things.
    wait = next(r for r in got if r["event"] == "on_backoff_wait")["data"]
    assert {key: value for key, value in wait.items() if key != "error"} == {  # type: ignore[union-attr]
        "iteration": 0,
        "attempt": 1,
        "seconds": 1.5,
        "reason": "RateLimitError",
        "retry_after": 1.5,
        "strategy": "default-retry",
    }


def test_without_content_a_trim_keeps_its_reason() -> None:
    lines: list[str] = []
    answers = [
        f"Answer {i}, long enough to fill a small window, {'and more ' * 3}." for i in range(3)
    ]
    agent = Agent(ScriptedModel(answers, context_window=120), name="small")
    agent.use(JsonLinesTracePlugin(lines.append, content=False))
    for i in range(3):
        agent.chat_sync(f"Question {i}: say something that takes room in the window.")
    trims = [r["data"] for r in records(lines) if r["event"] == "on_trim"]
    assert [trim["reason"] for trim in trims] == ["window"]  # type: ignore[index]
    assert "Question" not in "\n".join(lines)


def test_without_content_a_compaction_keeps_its_tier_and_figures() -> None:
    got = records(compacted_run(content=False))
    assert [r["data"] for r in got if r["event"] == "on_compaction"] == [
        {
            "iteration": 0,
            "attempt": 1,
            "tier": "summary",
            "messages_before": 9,
            "messages_after": 5,
            "tokens_before": 707,
            "tokens_after": 308,
            "window": 1000,
        }
    ]


def test_a_cancelled_chat_ends_with_on_chat_abort_and_the_next_chat_is_a_new_one() -> None:
    lines: list[str] = []
    agent = Agent(ScriptedModel(["never", "Second."]), name="a")
    agent.add_hook("pre_request", lambda ctx: agent.cancel("stop") and None)
    agent.use(JsonLinesTracePlugin(lines.append))
    with pytest.raises(ChatCancelledError):
        agent.chat_sync("first")
    assert [(e, c) for e, _, c, _ in steps(lines)][-1] == ("on_chat_abort", "c1")
    assert records(lines)[-1]["data"] == {"reason": "stop"}


async def test_a_streamed_chat_is_recorded_like_a_plain_one() -> None:
    plain: list[str] = []
    streamed: list[str] = []
    for lines, stream in ((plain, False), (streamed, True)):
        agent = Agent(ScriptedModel(["Hello there!"]), name="a", session_id="s")
        agent.use(JsonLinesTracePlugin(lines.append, clock=lambda: 0.0, wall=lambda: EPOCH))
        if stream:
            async with agent.chat_stream(UserMessage(content="Hi", id="u")) as events:
                async for _ in events:
                    pass
        else:
            await agent.chat(UserMessage(content="Hi", id="u"))
    # The same records, and on_first_chunk once the request went out.
    first_chunk = ("on_first_chunk", None, "c1", "a")
    sent = steps(plain).index(("pre_request", "after", "c1", "a")) + 1
    assert steps(streamed) == [*steps(plain)[:sent], first_chunk, *steps(plain)[sent:]]
    assert records(streamed)[sent]["data"] == {
        "iteration": 0,
        "attempt": 1,
        "model": {"class": "ScriptedModel", "name": "scripted", "window": None},
    }


async def test_parallel_chats_of_two_agents_keep_their_chat_ids_apart() -> None:
    lines: list[str] = []
    plugin_a = JsonLinesTracePlugin(lines.append)
    plugin_b = JsonLinesTracePlugin(lines.append)
    a = Agent(ScriptedModel(["A."]), name="a")
    b = Agent(ScriptedModel(["B."]), name="b")
    a.use(plugin_a)
    b.use(plugin_b)
    await asyncio.gather(a.chat("x"), b.chat("y"))
    assert {(r["agent"], r["chat"]) for r in records(lines)} == {("a", "c1"), ("b", "c1")}


def test_one_plugin_serves_one_agent() -> None:
    plugin = JsonLinesTracePlugin(io.StringIO())
    Agent(ScriptedModel(["x"])).use(plugin)
    with pytest.raises(UsageError, match="already attached to agent 'agent'"):
        Agent(ScriptedModel(["x"]), name="other").use(plugin)


def test_a_bad_target_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="a trace target is a path, a text stream or a function"):
        JsonLinesTracePlugin(42)  # type: ignore[arg-type]


def test_a_path_target_is_written_and_read_back(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    path.write_text("old content\n")
    with JsonLinesTracePlugin(path) as plugin:
        agent = Agent(ScriptedModel(["Hello!"]))
        agent.use(plugin)
        agent.chat_sync("Hi")
    lines = path.read_text().splitlines()
    assert read_trace(path) == records(lines)
    assert len(lines) == 9


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            "{}\n",
            r"run\.jsonl, line 1: trace format None cannot be read; "
            r"this hookloop reads 1, 2 and 3$",
        ),
        (
            '{"v": 4}\n',
            r"line 1: trace format 4 cannot be read; this hookloop reads 1, 2 and 3 \(written by ",
        ),
        ('{"v": true}\n', "line 1: trace format True cannot be read"),
        ("\n[1]\n", "line 2: not a trace record"),
        ('{"v": 1, "seq": 0}\n', "line 1: not a trace record: no t, event, agent, chat, data"),
        ("not json\n", "line 1: not JSON"),
        ("\n\n", r"run\.jsonl: holds no trace records"),
        (b"\xff\xfe", "run.jsonl: cannot be read"),
    ],
)
def test_a_file_that_is_not_a_trace_is_refused_naming_the_line(
    tmp_path: Path, content: str | bytes, message: str
) -> None:
    path = tmp_path / "run.jsonl"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    with pytest.raises(TraceFileError, match=message) as caught:
        read_trace(path)
    assert isinstance(caught.value, UsageError)
    assert caught.value.path == str(path)


def test_a_missing_file_is_refused() -> None:
    with pytest.raises(TraceFileError, match=r"no-such\.jsonl: cannot be read"):
        read_trace("no-such.jsonl")


texts = st.text(st.characters(codec="utf-8"), min_size=1).filter(str.strip)


@given(prompt=texts, answer=texts)
def test_any_text_round_trips_through_a_trace_line(prompt: str, answer: str) -> None:
    lines: list[str] = []
    agent = Agent(ScriptedModel([answer]))
    agent.use(JsonLinesTracePlugin(lines.append))
    agent.chat_sync(prompt)
    assert all("\n" not in line and line.encode() for line in lines)
    got = read_trace(lines)
    assert got[0]["data"]["message"]["content"] == prompt
    assert got[-1]["data"]["response"]["message"]["content"] == answer


def test_a_lone_surrogate_is_written_escaped_and_read_back() -> None:
    out = io.StringIO()
    agent = Agent(ScriptedModel(["half an emoji: \ud83d"]))
    agent.use(JsonLinesTracePlugin(out))
    agent.chat_sync("Hi")
    text = out.getvalue()
    text.encode()  # valid UTF-8 (escaped)
    assert read_trace(text.splitlines())[-1]["data"]["response"]["message"]["content"] == (
        "half an emoji: \ud83d"
    )


def _chunk(content: str, finish: str | None = None) -> dict[str, object]:
    choice = {"index": 0, "delta": {"content": content}, "finish_reason": finish}
    return {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [choice]}  # fmt: skip


def test_hookloop_chat_records_each_answer_as_a_chat_of_its_own(
    server: ProviderServer, tmp_path: Path
) -> None:
    server.add(
        Reply.sse([_chunk("Hel"), _chunk("lo", "stop")]),
        Reply.sse([_chunk("Again", "stop")]),
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "hookloop",
            "chat",
            "--model",
            f"{server.url}/v1#m",
            "--no-tools",
            "--trace-file",
            "chat.jsonl",
        ],
        input="Hi\nAnd?\n/exit\n",
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    got = read_trace(tmp_path / "chat.jsonl")
    ends = [
        (r["chat"], r["data"]["response"]["message"]["content"])
        for r in got
        if r["event"] == "on_chat_done"
    ]
    assert ends == [("c1", "Hello"), ("c2", "Again")]
    starts = [
        (r["chat"], r["data"]["message"]["content"]) for r in got if r["event"] == "on_chat_start"
    ]
    assert starts == [("c1", "Hi"), ("c2", "And?")]


async def test_parallel_and_nested_sub_agents_name_the_tool_call_they_run_under() -> None:
    gamma = Agent(ScriptedModel(["deep"]), name="gamma")
    alpha = Agent(
        ScriptedModel([tool_call("gamma", {"task": "go deeper"}, id="a1"), "alpha done"]),
        name="alpha",
        tools=[gamma.as_tool()],
    )
    beta = Agent(ScriptedModel(["beta done"]), name="beta")
    both = tool_calls(
        ToolCall(name="alpha", arguments='{"task": "one"}', id="c1"),
        ToolCall(name="beta", arguments='{"task": "two"}', id="c2"),
    )
    root = Agent(
        ScriptedModel([both, "all done"]), name="root", tools=[alpha.as_tool(), beta.as_tool()]
    )
    lines: list[str] = []
    root.use(JsonLinesTracePlugin(lines.append))
    await root.chat("go")
    starts = {
        r["agent"]: (r["chat"], r["parent"], r["path"])
        for r in records(lines)
        if r["event"] == "on_chat_start"
    }
    alpha_chat = starts["alpha"][0]
    assert starts == {
        "root": ("c1", None, ["root"]),
        "alpha": (alpha_chat, {"chat": "c1", "call": "c1"}, ["root", "alpha"]),
        "beta": (starts["beta"][0], {"chat": "c1", "call": "c2"}, ["root", "beta"]),
        "gamma": (
            starts["gamma"][0],
            {"chat": alpha_chat, "call": "a1"},
            ["root", "alpha", "gamma"],
        ),
    }
    assert sorted(chat for chat, _, _ in starts.values()) == ["c1", "c2", "c3", "c4"]
    # Every record of a sub-agent's chat carries its agent and parent.
    for r in records(lines):
        chat, parent, path = starts[r["agent"]]  # type: ignore[index]
        assert (r["chat"], r["parent"], r["path"]) == (chat, parent, path)


# Every code point, the line and paragraph separators and lone surrogates above all.
_SPECIAL = ["\u2028", "\u2029", "\x85", "\r", "\n", "\x0b", "\x1c", "\ud83d", "\ude00", "\x00"]
anything = st.text(
    st.one_of(st.sampled_from(_SPECIAL), st.characters(exclude_categories=())), min_size=1
)


@tool
def echo(text: str) -> str:
    """Return the text."""
    return text


@tool
def fail(text: str) -> str:
    """Raise with the text."""
    raise ValueError(text)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(texts=st.lists(anything, min_size=8, max_size=8))
def test_any_text_in_any_recorded_field_reads_back_from_the_file(
    tmp_path: Path, texts: list[str]
) -> None:
    system, prompt, answer, label, session, model_name, argument, error = texts
    prompt = prompt if prompt.strip() else f"?{prompt}"  # a blank prompt is refused
    system = system if system.strip() else f"?{system}"  # a blank system prompt is none
    calls = tool_calls(
        ToolCall(name="echo", arguments=json.dumps({"text": argument}), id="e1"),
        ToolCall(name="fail", arguments=json.dumps({"text": error}), id="f1"),
    )
    model = ScriptedModel([calls, answer], name=model_name)
    agent = Agent(model, name="a", session_id=session, system_prompt=system, tools=[echo, fail])

    def hook(ctx: object) -> None:
        return None

    hook.__qualname__ = label  # a handler's label is recorded too
    agent.add_hook("pre_tool_call", hook)
    errors: list[Exception] = []
    agent.add_hook("on_tool_call_error", lambda ctx: errors.append(ctx.error))
    path = tmp_path / "any.jsonl"
    with JsonLinesTracePlugin(path) as plugin:
        agent.use(plugin)
        agent.chat_sync(prompt)
    got = read_trace(path)
    assert path.read_bytes().decode("utf-8").count("\n") == len(got)  # one line per record
    start = got[0]
    assert start["session"] == session
    assert start["data"]["message"]["content"] == prompt
    request = next(r for r in got if r["event"] == "pre_request")["data"]["request"]
    assert (request["system"], request["model"]) == (system, model_name)
    before = next(r for r in got if r["event"] == "pre_tool_call" and r["stage"] == "before")
    assert before["hooks"] == [label]
    # What the tools made of the text (a lone surrogate may not be valid JSON arguments):
    # every message as the history holds it, every error as the hooks saw it.
    said = [r["data"]["message"] for r in got if r["event"] == "on_message"]
    assert said == dump_messages(agent.history.messages)
    failed = [
        r["data"]["error"]["text"]
        for r in got
        if r["event"] == "on_tool_call_error" and r["stage"] == "before"
    ]
    assert failed == [exception_text(e) for e in errors]
    calls = [
        r["data"]["call"] for r in got if r["event"] == "pre_tool_call" and r["stage"] == "before"
    ]
    assert [json.loads(c["arguments"]) for c in calls] == [{"text": argument}, {"text": error}]
    assert got[-1]["data"]["response"]["message"]["content"] == answer


@tool
def fetch(page: int) -> str:
    """Fetch a page."""
    return f"page {page}: " + "lorem ipsum dolor sit amet " * 37  # about 1 KB


def fetching_agent(calls: int, seen: list[ProviderRequest] | None = None) -> Agent:
    """One chat of ``calls`` tool calls, each result about 1 KB, then an answer."""

    def answer(request: ProviderRequest) -> ProviderResponse:
        if seen is not None:
            seen.append(request)
        done = sum(isinstance(m, ToolMessage) for m in request.messages)
        if done == calls:
            return text_response("done")
        return tool_call("fetch", {"page": done}, id=f"c{done}")

    model = FunctionModel(answer, context_window=10_000_000)
    return Agent(model, tools=[fetch], max_iterations=calls + 1, retry=None, name="fetcher")


def test_each_message_is_written_once_and_each_request_refers_to_them() -> None:
    lines: list[str] = []
    sent: list[ProviderRequest] = []
    agent = fetching_agent(5, sent)
    agent.use(JsonLinesTracePlugin(lines.append))
    agent.chat_sync("fetch five pages")
    text = "\n".join(lines)
    for page in range(5):  # the tool's result, then its tool message: the same text, once
        assert text.count(f"page {page}: lorem") == 1
    assert text.count("fetch five pages") == 1
    assert text.count("Fetch a page.") == 1  # the tool's definition, in the first request
    raw = [json.loads(line) for line in lines]
    last = next(r for r in reversed(raw) if r["event"] == "pre_request" and r["stage"] == "before")
    last = last["data"]["request"]
    assert last["messages"] == [{"$refs": ["m0", "m10"]}]  # 11 messages, one run
    assert last["tools"] == [{"$ref": "t0"}]
    # Read back, every request holds the messages the model was sent, in full.
    requests = [
        r["data"]["request"]
        for r in read_trace(lines)
        if r["event"] == "pre_request" and r["stage"] == "before"
    ]
    assert [r["messages"] for r in requests] == [dump_messages(r.messages) for r in sent]
    assert all(r["tools"][0]["description"] == "Fetch a page." for r in requests)
    counter = counter_for_model("function")  # each message counted once, the sums the same
    assert [r["tokens"] for r in requests] == [count_request(r, counter=counter) for r in sent]


def test_requests_that_drop_or_add_messages_read_back_as_they_were_sent() -> None:
    # The encoder takes a request's runs from the previous request when that one's messages
    # start it: a request that drops its first messages, or carries one no earlier record
    # wrote, must still read back as the messages it held.
    lines: list[str] = []
    built: list[ProviderRequest] = []  # by the loop
    made: list[ProviderRequest] = []  # by the handler

    def reshape(ctx: hooks.PreRequestContext) -> ProviderRequest | None:
        built.append(ctx.request)
        messages = ctx.request.messages
        if ctx.iteration % 3 == 1:  # a window: the oldest messages left out
            messages = messages[2:]
        elif ctx.iteration % 3 == 2:  # a note no record wrote before, then the rest
            messages = (UserMessage(content=f"note {ctx.iteration}"), *messages)
        else:
            return None
        made.append(dataclasses.replace(ctx.request, messages=messages))
        return made[-1]

    agent = fetching_agent(6)
    agent.add_hook("pre_request", reshape)
    agent.use(JsonLinesTracePlugin(lines.append))
    agent.chat_sync("fetch six pages")
    got = read_trace(lines)
    stage = {
        key: [
            r["data"]["request"]
            for r in got
            if r["event"] == "pre_request" and r["stage"] == key and "request" in r["data"]
        ]
        for key in ("before", "after")
    }
    counter = counter_for_model("function")
    for records, sent in ((stage["before"], built), (stage["after"], made)):
        assert len(records) == len(sent) > 2
        assert [r["messages"] for r in records] == [dump_messages(r.messages) for r in sent]
        assert [r["tokens"] for r in records] == [count_request(r, counter=counter) for r in sent]


@dataclasses.dataclass(kw_only=True)
class _Odd:  # fields named as the writer's own names, values of every kind the writer tells
    obj: object = None
    self: int = 0
    x: bool = False
    k: str = ""
    e: list[object] = dataclasses.field(default_factory=list)
    by_type: float = 0.0
    f0: object = None


def test_a_dataclass_is_written_field_by_field_whatever_its_fields_are_named() -> None:
    from hookloop.observe._encode import Encoder

    odd = _Odd(obj={"$ref": 1}, self=-7, x=True, k="say", e=[], by_type=0.5, f0=_Odd(k="in"))
    inner = {"obj": None, "self": 0, "x": False, "k": "in", "e": [], "by_type": 0.0, "f0": None}
    said = {"$$ref": 1}, -7, True, "say", [], 0.5, inner
    names = ("obj", "self", "x", "k", "e", "by_type", "f0")
    assert json.loads(Encoder(content=True).value(odd)) == dict(zip(names, said, strict=True))
    hidden = json.loads(Encoder(content=False).value(odd))
    assert hidden["k"] == {"chars": 3}  # content: its length only
    assert hidden["f0"]["k"] == {"chars": 2}
    assert hidden["self"] == -7


def test_a_class_s_name_is_never_code_in_the_writer_made_for_it() -> None:
    # The writer is made from source text: a name with a newline in it stays a name.
    from hookloop.observe._encode import Encoder

    evil = dataclasses.make_dataclass("Evil\n    raise SystemExit('ran')", [("a", int)])
    broken = dataclasses.make_dataclass("Broken\n)", [("a", int)])
    encoder = Encoder(content=True)
    assert json.loads(encoder.value({"x": evil(a=1)})) == {"x": {"a": 1}}
    assert json.loads(encoder.value(broken(a=2))) == {"a": 2}


def test_a_request_s_settings_are_written_as_sent_even_when_equal_to_the_last() -> None:
    # 1 and 1.0, True and 1 compare equal; the provider gets what the request holds.
    from hookloop import ModelSettings
    from hookloop.observe._encode import Encoder

    encoder = Encoder(content=True)
    messages = (UserMessage(content="hi"),)
    sent = [
        ModelSettings(temperature=1, extra={"seed": True}),
        ModelSettings(temperature=1.0, extra={"seed": 1}),
    ]
    written = [
        json.loads(
            encoder.value(ProviderRequest(model="m", system="s", messages=messages, settings=kept))
        )["settings"]
        for kept in sent
    ]
    assert [(w["temperature"], w["extra"]["seed"]) for w in written] == [(1, True), (1.0, 1)]
    assert [type(w["temperature"]) for w in written] == [int, float]


def test_a_message_first_written_inside_a_request_is_referred_to_by_the_next() -> None:
    # A message no on_message record wrote (one a handler put in) is written in full in the
    # first request that holds it; the next request that starts with that one's messages
    # refers to it, never writes it again.
    from hookloop.observe._encode import Encoder

    encoder = Encoder(content=True)
    note, question = UserMessage(content="a note"), UserMessage(content="a question")
    first = ProviderRequest(model="m", system=None, messages=(note,))
    second = dataclasses.replace(first, messages=(note, question))
    one, two = json.loads(encoder.value(first)), json.loads(encoder.value(second))
    assert one["messages"][0]["$id"] == "m0"
    assert two["messages"][0] == {"$ref": "m0"}
    assert two["messages"][1]["$id"] == "m1"


def test_a_chat_of_500_tool_calls_is_a_few_megabytes_and_so_is_its_page(tmp_path: Path) -> None:
    trace = tmp_path / "long.jsonl"
    with JsonLinesTracePlugin(trace) as plugin:
        agent = fetching_agent(500)
        agent.use(plugin)
        agent.chat_sync("fetch 500 pages")
    size = trace.stat().st_size
    assert 500 * 1_000 < size <= 5_000_000  # written whole once each: linear in the chat
    tracemalloc.start()
    try:
        page = write_trace_page(trace, tmp_path / "long.html")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert page.stat().st_size <= 1.5 * size
    assert peak <= size  # the page is written line by line, never whole in memory
    records = read_trace(trace)
    assert sum(r["event"] == "on_tool_call_result" for r in records) == 500  # one each


def test_a_trace_of_format_1_still_reads_and_shows(tmp_path: Path) -> None:
    # Written by the hookloop before format 2: whole messages everywhere, no references; a
    # key that starts with "$" is the data's own.
    message = {"role": "user", "content": "Hi", "id": "u1"}
    old = [
        {"v": 1, "seq": 0, "t": 0.0, "ts": "2026-09-21T14:13:20.000Z", "event": "on_chat_start",
         "stage": None, "of": None, "agent": "a", "session": "s", "chat": "c1",
         "parent": None, "path": ["a"], "hooks": None, "data": {"message": message}},
        {"v": 1, "seq": 1, "t": 0.0, "ts": "2026-09-21T14:13:20.000Z", "event": "on_memory_write",
         "stage": None, "of": None, "agent": "a", "session": "s", "chat": "c1",
         "parent": None, "path": ["a"], "hooks": None, "data": {"metadata": {"$ref": "x"}}},
    ]  # fmt: skip
    path = tmp_path / "old.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in old))
    assert read_trace(path) == old
    page = write_trace_page(path, tmp_path / "old.html").read_text(encoding="utf-8")
    assert '"metadata": {"$ref": "x"}' in page  # the line as written


def test_a_trace_of_format_2_still_reads_and_shows(tmp_path: Path) -> None:
    # Written by the hookloop before format 3: references, and an "after" record for every
    # "before" whose event ran to its end, with nothing changed when no handler could.
    message = {"role": "user", "content": "Hi", "id": "u1"}
    head = {"ts": "2026-09-21T14:13:20.000Z", "agent": "a", "session": "s", "chat": "c1",
            "parent": None, "path": ["a"]}  # fmt: skip
    written = [
        {"v": 2, "seq": 0, "t": 0.0, "event": "on_chat_start", "stage": None, "of": None,
         "hooks": None, "data": {"message": {"$id": "m0", **message}}},
        {"v": 2, "seq": 1, "t": 0.1, "event": "pre_request", "stage": "before", "of": None,
         "hooks": [], "data": {"iteration": 0, "request": {"$id": "r0", "messages": [
             {"$ref": "m0"}], "tokens": 5}}},
        {"v": 2, "seq": 2, "t": 0.1, "event": "pre_request", "stage": "after", "of": 1,
         "hooks": None, "data": {"changed": []}},
    ]  # fmt: skip
    path = tmp_path / "v2.jsonl"
    path.write_text("".join(json.dumps({**r, **head}) + "\n" for r in written))
    got = read_trace(path)
    assert [(r["v"], r["event"], r["stage"], r["of"]) for r in got] == [
        (2, "on_chat_start", None, None),
        (2, "pre_request", "before", None),
        (2, "pre_request", "after", 1),
    ]
    assert got[1]["data"]["request"] == {"messages": [message], "tokens": 5}
    page = write_trace_page(path, tmp_path / "v2.html").read_text(encoding="utf-8")
    assert '"messages": [{"$ref": "m0"}]' in page  # the line as written


def test_data_keys_that_look_like_references_read_back_as_they_were() -> None:
    value = {"$ref": "m0", "$id": "m1", "$refs": ["m0", "m1"], "$$x": 1, "k": [{"$ref": "t0"}]}

    @tool
    def schema() -> dict[str, object]:
        """Return a JSON schema."""
        return value

    lines: list[str] = []
    agent = Agent(ScriptedModel([tool_call("schema", {}), "ok"]), tools=[schema])
    agent.use(JsonLinesTracePlugin(lines.append))
    agent.chat_sync("go")
    result = next(r for r in read_trace(lines) if r["event"] == "on_tool_call_result")
    assert result["data"]["result"] == value


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"message": {"$ref": "m3"}}, "line 1: refers to 'm3', which no earlier line wrote"),
        ({"messages": [{"$refs": ["m0", "m2"]}]}, "line 1: refers to 'm0', which no earlier"),
        ({"messages": [{"$refs": ["m2", "t4"]}]}, "line 1: 'm2' to 't4' is not a run"),
        ({"message": {"$ref": 7}}, 'line 1: a reference is an id like "m7", got 7'),
    ],
)
def test_a_reference_to_nothing_is_refused_naming_the_line(
    tmp_path: Path, data: dict[str, object], message: str
) -> None:
    record = {"v": 2, "seq": 0, "t": 0.0, "event": "x", "agent": "a", "chat": None, "data": data}
    path = tmp_path / "run.jsonl"
    path.write_text(json.dumps(record) + "\n")
    with pytest.raises(TraceFileError, match=message):
        read_trace(path)
    page = tmp_path / "run.html"
    page.write_text("the page of an earlier run")
    with pytest.raises(TraceFileError, match=message):
        write_trace_page(path, page)
    assert page.read_text() == "the page of an earlier run"  # checked before it is opened


def test_two_agents_writing_one_file_number_what_they_write_apart() -> None:
    lines: list[str] = []
    a = Agent(ScriptedModel(["A."]), name="a")
    b = Agent(ScriptedModel(["B."]), name="b")
    a.use(JsonLinesTracePlugin(lines.append))
    b.use(JsonLinesTracePlugin(lines.append))
    a.chat_sync("to a")
    b.chat_sync("to b")
    ends = {
        r["agent"]: r["data"]["response"]["message"]["content"]
        for r in read_trace(lines)
        if r["event"] == "on_chat_done"
    }
    assert ends == {"a": "A.", "b": "B."}
    starts = {
        r["agent"]: r["data"]["message"]["content"]
        for r in read_trace(lines)
        if r["event"] == "on_chat_start"
    }
    assert starts == {"a": "to a", "b": "to b"}


def test_error_text_false_leaves_errors_texts_out_and_keeps_their_types() -> None:
    kept = "\n".join(busy_run(content=False))
    assert "division by zero" in kept  # errors' texts quote the conversation by default
    lines = busy_run(content=False, error_text=False)
    text = "\n".join(lines)
    for said in ("division by zero", "slow down", "rm -rf", PROMPT, ANSWER):
        assert said not in text
    errors = [r["data"]["error"] for r in records(lines) if r["event"] == "on_backoff_wait"]
    assert errors == [
        {
            "error_type": "RateLimitError",
            "text": {"chars": len("slow down (status=429, retry_after=1.5s)")},
            "status": 429,
            "body": None,
            "retry_after": 1.5,
            "model": None,
        }
    ]


def test_a_record_that_cannot_be_written_ends_the_recording_not_the_chat(
    caplog: pytest.LogCaptureFixture,
) -> None:
    written: list[str] = []

    def disk_full(line: str) -> None:
        if len(written) == 3:
            raise OSError(28, "No space left on device")
        written.append(line)

    plugin = JsonLinesTracePlugin(disk_full)
    agent = Agent(ScriptedModel(["Hello!", "Again."]))
    agent.use(plugin)
    assert agent.chat_sync("Hi").text == "Hello!"
    assert agent.chat_sync("Hi again").text == "Again."
    assert isinstance(plugin.failure, OSError)
    assert len(written) == 3  # what came before the failure; nothing after it
    warnings = [r for r in caplog.records if r.levelname == "WARNING"]
    assert [r.getMessage() for r in warnings] == [
        "the trace could not be written, recording stopped: [Errno 28] No space left on device"
    ]


def test_a_cost_is_recorded_as_a_number_with_all_its_digits_without_content() -> None:
    lines: list[str] = []
    usage = Usage(input_tokens=3, output_tokens=1, cost=Decimal("0.000012345678901234"))
    agent = Agent(ScriptedModel([text_response("Hi", usage=usage)]))
    agent.use(JsonLinesTracePlugin(lines.append, content=False))
    agent.chat_sync("Hello")
    done = records(lines)[-1]
    assert done["event"] == "on_chat_done"
    assert '"cost":0.000012345678901234' in lines[-1]
    assert done["data"]["response"]["usage"]["cost"] == pytest.approx(1.2345678901234e-5)  # type: ignore[index]

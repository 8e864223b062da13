"""Runs to trace, shared by the JSON-lines and trace-page tests: deterministic and offline.

``busy_run`` is one chat with everything the page shows: a rate-limited attempt retried
after a 1.5 s wait (a fake clock: nothing really waits), three parallel tool calls (a
result, an error, one a hook short-circuits), a sub-agent delegated to as a tool, and a
final answer. ``compacted_run`` is five chats whose history the fifth summarises.
``many_events`` repeats chats until a trace holds at least ``n`` events.
"""

from __future__ import annotations

import io

from hookloop import Agent, PreToolCallContext, Tool, ToolCall, ToolReturn, Usage, tool
from hookloop._errors import RateLimitError
from hookloop.context import Compaction
from hookloop.limits import ModelPrice
from hookloop.models._base import ProviderResponse
from hookloop.observe import JsonLinesTracePlugin
from hookloop.retry import DefaultRetryStrategy
from hookloop.retry._backoff import Backoff
from hookloop.testing import FakeClock, ScriptedModel

PROMPT = "What is 17 + 23, and what is the capital of France?"
TASK = "Capital of France? See https://example.com/france"
ANSWER = "17 + 23 = 40, and the capital is Paris."
EPOCH = 1_790_000_000.0  # 2026-09-21T14:13:20Z


@tool
def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b


@tool
def divide(a: float, b: float) -> float:
    """Divide a by b."""
    return a / b


@tool
def shell(command: str) -> str:
    """Run a shell command."""
    raise AssertionError("a hook refuses every shell call")


def deny_shell(ctx: PreToolCallContext) -> ToolReturn | None:
    if ctx.call.name == "shell":
        return ToolReturn("refused: shell is not allowed")
    return None


def _calls(*calls: tuple[str, str, str], tokens: tuple[int, int]) -> ProviderResponse:
    return ProviderResponse(
        tool_calls=tuple(ToolCall(name=n, arguments=a, id=i) for i, n, a in calls),
        finish_reason="tool_calls",
        usage=Usage(input_tokens=tokens[0], output_tokens=tokens[1]),
    )


def busy_agent(
    clock: FakeClock, *, session_id: str = "s-busy", tools: tuple[Tool, ...] | None = None
) -> Agent:
    """The busy run's agent; ``tools``: in place of add, divide and shell."""
    researcher = Agent(
        ScriptedModel(
            [ProviderResponse(content="Paris.", usage=Usage(input_tokens=30, output_tokens=2))],
            context_window=4096,
        ),
        name="researcher",
        session_id="s-researcher",
    )
    model = ScriptedModel(
        [
            RateLimitError("slow down", status=429, retry_after=1.5),
            _calls(
                ("c1", "add", '{"a": 17, "b": 23}'),
                ("c2", "divide", '{"a": 1, "b": 0}'),
                ("c3", "shell", '{"command": "rm -rf /"}'),
                tokens=(120, 40),
            ),
            _calls(("c4", "researcher", f'{{"task": "{TASK}"}}'), tokens=(200, 20)),
            ProviderResponse(content=ANSWER, usage=Usage(input_tokens=260, output_tokens=15)),
        ],
        name="scripted-large",
        context_window=8192,
    )
    agent = Agent(
        model,
        name="assistant",
        tools=[*(tools or (add, divide, shell)), researcher.as_tool()],
        retry=DefaultRetryStrategy(sleep=clock.sleep, clock=clock, backoff=Backoff(jitter="none")),
        session_id=session_id,
    )
    agent.add_hook("pre_tool_call", deny_shell)
    return agent


def busy_run(*, content: bool = True, error_text: bool = True) -> list[str]:
    """The lines of the busy run's trace."""
    clock = FakeClock()
    out = io.StringIO()
    agent = busy_agent(clock)
    wall = lambda: EPOCH + clock()  # noqa: E731
    agent.use(
        JsonLinesTracePlugin(out, content=content, error_text=error_text, clock=clock, wall=wall)
    )
    assert agent.chat_sync(PROMPT).text == ANSWER
    return out.getvalue().splitlines()


def many_events(n: int) -> list[str]:
    """The lines of a trace of busy runs, one after another, with at least ``n`` records."""
    lines: list[str] = []
    while len(lines) < n:
        clock = FakeClock()
        agent = busy_agent(clock)
        agent.use(JsonLinesTracePlugin(lines.append, clock=clock, wall=lambda: EPOCH))
        agent.chat_sync(PROMPT)
    return lines


def compacted_run(*, content: bool = True) -> list[str]:
    """The lines of five chats; before the fifth, a compaction summarises the first three."""
    lines: list[str] = []
    summarizer = ScriptedModel(["The user asked about fruit."], name="summarizer")
    policy = Compaction(compact_threshold=0.6, keep_recent=0.3, summarizer=summarizer)
    model = ScriptedModel([f"Reply {i}." for i in range(5)], context_window=1000)
    agent = Agent(model, name="long", retry=None, context=policy)
    agent.use(JsonLinesTracePlugin(lines.append, content=content))
    for i in range(5):
        agent.chat_sync(f"Fruit question {i}: {'apples and pears ' * 30}")
    return lines


def priced_run() -> list[str]:
    """A chat on a priced model ($1 / $2 per million tokens): a tool call, then the answer."""
    clock = FakeClock()
    out = io.StringIO()
    model = ScriptedModel(
        [
            _calls(("c1", "add", '{"a": 1, "b": 2}'), tokens=(100, 10)),
            ProviderResponse(content="3", usage=Usage(input_tokens=120, output_tokens=5)),
        ],
        name="priced",
    )
    agent = Agent(
        model, tools=[add], prices={"priced": ModelPrice(input_per_mtok=1, output_per_mtok=2)}
    )
    agent.use(JsonLinesTracePlugin(out, clock=clock, wall=lambda: EPOCH + clock()))
    assert agent.chat_sync("1 + 2?").text == "3"
    return out.getvalue().splitlines()

"""Every figure of performance round 3 (issue 22) in one run, each against its aim.

    python bench/round3.py                  # a table: figure, value, aim, met or not
    python bench/round3.py --json           # the same as one JSON object
    python bench/round3.py --peers FILE     # with the peers' figures of one peer-harness run
    python bench/round3.py --memory-lines 30  # what an idle agent holds, by line (tracemalloc)

The headline is what a user gets: ``Agent()`` with its defaults (the default retry strategy
and ``SlidingWindow``), per model iteration, in the peer harness's scenario A: one agent with
a system prompt and one async ``add`` tool, a zero-latency model that counts the tool results
of its request and calls ``add`` until it has ten, then answers (11 iterations); the same
agent for every chat, its history cleared before each. Every other figure is measured the
same way, in rounds: each round times every configuration once, back to back, and a ratio
is taken within a round; the figure printed is the median over the rounds.

- ``floor``: the least a Python loop spends doing the same work, measured the way the peer
  harness's ``floor.py`` measures it (build a request, await a model that counts the tool
  results and builds its answer, append it, validate the arguments with pydantic, await the
  tool, append its result). The bare loop (``context=None, retry=None``) runs on a model that
  does the same work (``FloorModel``).
- ``hooks``: ``Agent()`` defaults with 10 plugins, each an async no-op handler on every chat
  event; ``handler_us_per_fire`` is what one handler call adds, over the fires counted.
- ``window_ratio_100k_to_100``: a turn with 100k stored messages against one with 100
  (``bench/loop.py``'s curve, ``SlidingWindow`` on).
- ``window_ratio_100k_to_full``: a turn with 100k stored messages against one with 1,000, a
  history that already fills the window (8,000 tokens): both send a request of the same size,
  so this is what the history's length alone costs (no aim of the issue; the figure above also
  holds the step from a request of 130 messages to a full window's 400).
- memory: 1,000 idle agents made as the harness's scenario C makes them (``Agent()``
  defaults, each importing 100 messages of about 50 words, every tenth answer a tool call
  and its result), RSS in a fresh interpreter; ``histories`` is the same messages without
  agents, ``text`` the messages' strings alone (the same strings, no message objects).
- ``--peers``: a ``results-*.json`` of ``../shared/bench-peers/run.sh``; hookloop's figures
  then are that run's, against the fastest peer of the same run.

The observability plugins' cost (the round's item 4) is measured where those plugins are:
``bench/loop.py`` (``otel_plugin_us_per_iteration``) and the trace benches.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import random
import statistics
import subprocess
import sys
import time
import tracemalloc
import typing
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

import pydantic

import loop
from hookloop import Agent, HookEvent, ToolCall, ToolMessage, tool
from hookloop.models import Model, ProviderRequest, ProviderResponse
from hookloop.testing import text_response, tool_call

TOOL_CALLS = 10
ITERATIONS = TOOL_CALLS + 1
SYSTEM_PROMPT = "You are a helpful assistant. Use the add tool when asked to add numbers."
USER_PROMPT = "Please add some numbers for me."
# Every chat event (the scope events fire outside chats, inside a synchronous call).
CHAT_EVENTS = [
    e for e in typing.get_args(HookEvent) if e not in ("on_scope_register", "on_scope_unregister")
]

# (figure, JSON key, aim, "max" when the figure must stay at most the aim, "min" at least)
AIMS: list[tuple[str, str, float, str]] = [
    ("Agent() defaults against context=None", "defaults_ratio", 1.2, "max"),
    ("  the same, 100k stored messages against 100", "window_ratio_100k_to_100", 1.2, "max"),
    ("the bare loop against the floor", "floor_ratio", 2.0, "max"),
    ("10 no-op plugins on every event against none", "hooks_ratio", 2.0, "max"),
    ("an async no-op handler, per fire (us)", "handler_us_per_fire", 0.2, "max"),
    ("idle agent with 100 messages over its text (KB)", "agent_kb_over_text", 10.0, "max"),
    ("fastest peer against Agent() defaults", "peers_ratio_defaults", 50.0, "min"),
    ("fastest peer against 10 hook plugins", "peers_ratio_hooks", 20.0, "min"),
]


class CountingModel(Model):
    """The harness's model: stateless, it answers from the tool results in the request."""

    name = "counting"  # not an OpenAI name: the default history estimates tokens

    async def request(self, request: ProviderRequest) -> ProviderResponse:
        n = sum(1 for m in request.messages if isinstance(m, ToolMessage))
        if n < TOOL_CALLS:
            return tool_call("add", {"a": n, "b": 1}, id=f"call_{n}")
        return text_response("The final answer is 10.")


class FloorModel(Model):
    """floor.py's model: counts the tool results and builds its small answer, nothing else."""

    name = "floor"

    async def request(self, request: ProviderRequest) -> ProviderResponse:
        n = sum(1 for m in request.messages if isinstance(m, ToolMessage))
        if n < TOOL_CALLS:
            call = ToolCall(name="add", arguments='{"a": 1, "b": 2}', id=f"c{n}")
            return ProviderResponse(tool_calls=(call,))
        return ProviderResponse(content="done")


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


class NoopPlugin:
    """One async no-op handler on every chat event, as the harness's A2 plugins."""

    def __init__(self, index: int, fires: dict[str, int] | None = None) -> None:
        self.name = f"noop-{index}"
        self._fires = fires

    def init_agent(self, agent: Any) -> None:  # an AgentHost (Any: older code measured too)
        for event in CHAT_EVENTS:
            agent.add_hook(event, self._count if self._fires is not None else self._noop)

    async def _noop(self, ctx: object) -> None:
        return None

    async def _count(self, ctx: object) -> None:
        assert self._fires is not None
        self._fires["all"] = self._fires.get("all", 0) + 1


def make(config: str, fires: dict[str, int] | None = None) -> Agent:
    if config == "bare":
        return Agent(FloorModel(), system_prompt="s", tools=[add], context=None, retry=None)
    plugins = [NoopPlugin(i, fires) for i in range(10)] if config == "hooks" else []
    extra: dict[str, Any] = {"context": None} if config == "context_none" else {}
    return Agent(
        CountingModel(), system_prompt=SYSTEM_PROMPT, tools=[add], plugins=plugins, **extra
    )


# --- the floor, measured as ../shared/bench-peers/floor.py measures it ---------------------


@dataclass(slots=True, kw_only=True)
class _Msg:
    role: str
    content: str = ""
    tool_calls: tuple[tuple[str, str, str], ...] = ()
    tool_call_id: str = ""


@dataclass(slots=True, kw_only=True)
class _Req:
    system: str
    messages: list[_Msg]
    tools: tuple[str, ...]


async def _floor_model(request: _Req) -> _Msg:
    n = sum(1 for m in request.messages if m.role == "tool")
    if n < TOOL_CALLS:
        return _Msg(role="assistant", tool_calls=((f"c{n}", "add", '{"a": 1, "b": 2}'),))
    return _Msg(role="assistant", content="done")


async def _floor_add(a: int, b: int) -> int:
    return a + b


_ARGUMENTS = pydantic.TypeAdapter(dict[str, int])


async def _floor_chat(text: str) -> list[_Msg]:
    messages = [_Msg(role="user", content=text)]
    while True:
        request = _Req(system="s", messages=list(messages), tools=("add",))
        answer = await _floor_model(request)
        messages.append(answer)
        if not answer.tool_calls:
            return messages
        for call_id, _, arguments in answer.tool_calls:
            result = await _floor_add(**_ARGUMENTS.validate_json(arguments))
            messages.append(_Msg(role="tool", content=json.dumps(result), tool_call_id=call_id))


# --- timing --------------------------------------------------------------------------------


def _chats(config: str) -> Callable[[], Coroutine[Any, Any, object]]:
    if config == "floor":
        return lambda: _floor_chat("hi")
    agent = make(config)

    async def chat() -> object:
        agent.history.clear_history()  # every chat starts empty; the system prompt stays
        return await agent.chat(USER_PROMPT)

    return chat


def per_iteration_us(config: str, runs: int) -> float:
    """Median time of one chat over its 11 iterations, after 20 warm-up chats."""
    chat = _chats(config)
    event_loop = asyncio.new_event_loop()
    try:
        for _ in range(20):
            event_loop.run_until_complete(chat())
        gc.collect()
        samples = []
        for _ in range(runs):
            start = time.perf_counter_ns()
            event_loop.run_until_complete(chat())
            samples.append(time.perf_counter_ns() - start)
    finally:
        event_loop.close()
    return statistics.median(samples) / ITERATIONS / 1_000


def fires_per_iteration() -> float:
    fires: dict[str, int] = {}
    asyncio.run(make("hooks", fires).chat(USER_PROMPT))
    return fires["all"] / ITERATIONS


CONFIGS = ("defaults", "context_none", "bare", "floor", "hooks")


def speed(rounds: int, runs: int) -> dict[str, Any]:
    per_round: list[dict[str, float]] = []
    for _ in range(rounds):
        figures = {config: per_iteration_us(config, runs) for config in CONFIGS}
        figures["defaults_ratio"] = figures["defaults"] / figures["context_none"]
        figures["floor_ratio"] = figures["bare"] / figures["floor"]
        figures["hooks_ratio"] = figures["hooks"] / figures["defaults"]
        per_round.append(figures)
    out: dict[str, Any] = {
        key: statistics.median(r[key] for r in per_round) for key in per_round[0]
    }
    out = {f"{k}_us_per_iteration" if k in CONFIGS else k: v for k, v in out.items()}
    out["hook_fires_per_iteration"] = fires = fires_per_iteration()
    out["handler_us_per_fire"] = statistics.median(
        (r["hooks"] - r["defaults"]) / fires for r in per_round
    )
    return out


def window_ratios(runs: int, history_runs: int) -> dict[str, float]:
    async def curve() -> tuple[float, float, float]:
        small = await loop.history_us(100, runs, window=True)
        full = await loop.history_us(1_000, runs, window=True)
        large = await loop.history_us(100_000, history_runs, window=True)
        return small, full, large

    small, full, large = asyncio.run(curve())
    return {"window_ratio_100k_to_100": large / small, "window_ratio_100k_to_full": large / full}


# --- memory, in a fresh interpreter ----------------------------------------------------------

_WORDS = [
    "agent",
    "model",
    "token",
    "budget",
    "context",
    "window",
    "message",
    "history",
    "tool",
    "call",
    "result",
    "system",
    "prompt",
    "user",
    "assistant",
    "runtime",
    "hook",
    "lifecycle",
    "latency",
    "memory",
    "stream",
    "event",
    "loop",
    "framework",
    "python",
    "async",
    "request",
    "response",
    "schema",
    "validation",
    "trimming",
    "sliding",
    "summary",
    "checkpoint",
    "session",
    "state",
    "graph",
    "node",
    "edge",
    "retry",
    "timeout",
    "cache",
    "prompt",
    "answer",
    "question",
    "number",
    "value",
    "list",
    "item",
]


def conversation(seed: int, size: int = 100) -> list[Any]:
    """``size`` messages of about 50 words; every tenth answer is a tool call and its result."""
    from hookloop import AssistantMessage, UserMessage

    rng = random.Random(seed)

    def words() -> str:
        return " ".join(rng.choice(_WORDS) for _ in range(50))

    out: list[Any] = []
    turn = 0
    while len(out) < size:
        out.append(UserMessage(content=words()))
        turn += 1
        if turn % 10 == 0:
            call = ToolCall(
                name="add", arguments=json.dumps({"a": turn, "b": 1}), id=f"call_{turn:07d}"
            )
            out.append(AssistantMessage(tool_calls=(call,)))
            out.append(ToolMessage(tool_call_id=call.id, tool_name="add", content=words()))
        out.append(AssistantMessage(content=words()))
    return out[:size]


def _strings(message: Any) -> list[str]:
    """The strings a message holds besides its id: its text, tool names, arguments, call ids."""
    found = [message.content] if isinstance(message.content, str) else []
    if isinstance(message, ToolMessage):
        found += [message.tool_name, message.tool_call_id]
    for call in getattr(message, "tool_calls", ()):
        found += [call.name, call.arguments, call.id]
    return found


def _rss_kb() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def memory_child(kind: str, sessions: int) -> float:
    """RSS per session of ``sessions`` agents (or histories, or texts), in KB."""
    made = make("defaults")
    made.history.import_history(conversation(10**6))  # warm: imports, lazy caches
    del made
    gc.collect()
    before = _rss_kb()
    holder: list[object] = []
    for i in range(sessions):
        messages = conversation(i)
        if kind == "agents":
            agent = make("defaults")
            agent.history.import_history(messages)
            holder.append(agent)
        elif kind == "histories":
            holder.append(messages)
        else:  # the same strings alone: the messages (objects, ids) go
            holder.append([s for m in messages for s in _strings(m)])
        del messages
    gc.collect()
    return (_rss_kb() - before) / sessions


def memory_lines(sessions: int, top: int) -> None:
    """What each idle agent holds beyond its messages, by tracemalloc: in all and by line.

    The messages are made before tracing starts, so what is traced is the agents alone:
    each made and given its 100 messages as ``memory_child`` does, in this interpreter.
    """
    made = make("defaults")
    made.history.import_history(conversation(10**6))  # warm: imports, lazy caches
    del made
    conversations = [conversation(i) for i in range(sessions)]
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    holder: list[Agent] = []
    for messages in conversations:
        agent = make("defaults")
        agent.history.import_history(messages)
        holder.append(agent)
    del conversations  # made before tracing: the lists the agents copied go untraced
    gc.collect()
    lines = tracemalloc.take_snapshot().compare_to(before, "lineno")
    tracemalloc.stop()
    total = sum(line.size_diff for line in lines) / sessions
    print(f"an idle agent with 100 messages holds {total:.0f} bytes besides them (tracemalloc)")
    for line in [line for line in lines if line.size_diff >= sessions][:top]:  # a byte each
        where = line.traceback[0]
        path = where.filename.split("/src/")[-1].split("/bench/")[-1]
        print(
            f"  {line.size_diff / sessions:7.1f} B {line.count_diff / sessions:5.2f} blocks  "
            f"{path}:{where.lineno}"
        )


def memory(sessions: int) -> dict[str, float]:
    figures: dict[str, float] = {}
    for kind in ("agents", "histories", "text"):
        out = subprocess.run(
            [sys.executable, __file__, "--memory-child", kind, "--sessions", str(sessions)],
            capture_output=True,
            text=True,
            check=True,
        )
        figures[f"{kind}_kb_rss"] = float(out.stdout.strip())
    figures["agent_kb_over_text"] = figures["agents_kb_rss"] - figures["text_kb_rss"]
    figures["agent_kb_over_histories"] = figures["agents_kb_rss"] - figures["histories_kb_rss"]
    return figures


# --- the peers -----------------------------------------------------------------------------


def peers(path: str) -> dict[str, Any]:
    """Per-iteration medians of scenario A and A2 for every framework of one harness run."""
    with open(path, encoding="utf-8") as file:
        rows = json.load(file)["results"]
    found: dict[str, dict[str, list[float]]] = {}
    for row in rows:
        if row.get("scenario") in ("A", "A2"):
            by = found.setdefault(row["framework"], {})
            by.setdefault(row["scenario"], []).append(row["median_us_per_iteration"])
    medians = {fw: {s: statistics.median(v) for s, v in by.items()} for fw, by in found.items()}
    ours = medians.pop("hookloop")
    fastest = {s: min((m[s], fw) for fw, m in medians.items() if s in m) for s in ("A", "A2")}
    return {
        "peers": medians,
        "peers_hookloop_defaults_us": ours["A"],
        "peers_hookloop_hooks_us": ours["A2"],
        "peers_fastest_defaults": {"framework": fastest["A"][1], "us": fastest["A"][0]},
        "peers_fastest_hooks": {"framework": fastest["A2"][1], "us": fastest["A2"][0]},
        "peers_ratio_defaults": fastest["A"][0] / ours["A"],
        "peers_ratio_hooks": fastest["A2"][0] / ours["A2"],
    }


def measure(args: argparse.Namespace) -> dict[str, Any]:
    figures = speed(args.rounds, args.runs)
    figures.update(window_ratios(args.history_runs * 5, args.history_runs))
    figures.update(memory(args.sessions))
    if args.peers:
        figures.update(peers(args.peers))
    figures["load_average"] = os.getloadavg()[0]
    figures["python"] = sys.version.split()[0]
    return figures


def report(figures: dict[str, Any]) -> None:
    print(
        f"hookloop performance round 3 (Python {figures['python']}, load average "
        f"{figures['load_average']:.1f}; figures per model iteration, medians of rounds)"
    )
    print(
        f"  Agent() defaults: {figures['defaults_us_per_iteration']:.1f} us "
        f"(context=None {figures['context_none_us_per_iteration']:.1f} us, "
        f"10 hook plugins {figures['hooks_us_per_iteration']:.1f} us)"
    )
    print(
        f"  bare loop {figures['bare_us_per_iteration']:.1f} us, floor "
        f"{figures['floor_us_per_iteration']:.1f} us; {figures['hook_fires_per_iteration']:.0f} "
        "handler fires per iteration with the plugins"
    )
    print(
        f"  idle agent with 100 messages {figures['agents_kb_rss']:.1f} KB RSS; the messages "
        f"alone {figures['histories_kb_rss']:.1f} KB, their strings alone "
        f"{figures['text_kb_rss']:.1f} KB"
    )
    if "peers_fastest_defaults" in figures:
        print(
            f"  peer run: hookloop {figures['peers_hookloop_defaults_us']:.1f} / "
            f"{figures['peers_hookloop_hooks_us']:.1f} us, fastest peer "
            f"{figures['peers_fastest_defaults']['framework']} "
            f"{figures['peers_fastest_defaults']['us']:.0f} / "
            f"{figures['peers_fastest_hooks']['us']:.0f} us"
        )
    for label, key, aim, sense in AIMS:
        value = figures.get(key)
        if value is None:
            print(f"  {label:<50} {'-':>8}        (give --peers FILE to measure it)")
            continue
        met = value <= aim if sense == "max" else value >= aim
        bound = "<=" if sense == "max" else ">="
        print(f"  {label:<50} {value:8.2f}  aim {bound} {aim:g}: {'met' if met else 'NOT MET'}")
        if key == "window_ratio_100k_to_100":
            label = "  and against 1,000 (a full window, same request)"
            print(
                f"  {label:<50} {figures['window_ratio_100k_to_full']:8.2f}  (history length alone)"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of every configuration")
    parser.add_argument("--runs", type=int, default=200, help="chats per figure and round")
    parser.add_argument("--history-runs", type=int, default=10, help="chats on 100k messages")
    parser.add_argument("--sessions", type=int, default=1000, help="idle agents to measure")
    parser.add_argument("--peers", help="a results-*.json of the peer harness")
    parser.add_argument(
        "--memory-lines",
        type=int,
        metavar="N",
        help="only what an idle agent holds besides its messages: the total and its N top lines",
    )
    parser.add_argument("--memory-child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_child:
        print(memory_child(args.memory_child, args.sessions))
        return
    if args.memory_lines is not None:
        memory_lines(args.sessions, args.memory_lines)
        return
    figures = measure(args)
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    report(figures)


if __name__ == "__main__":
    main()

"""Context management figures: trim time, the estimate's error, memory per idle session.

    python bench/context.py            # a readable table
    python bench/context.py --json     # one JSON object with the same figures

- ``trim_ms``: trimming a history of 1k, 10k and 100k messages (every tenth assistant
  message a tool call with its result) to a 4,000-token budget. ``cold``: the messages were
  never counted (a fresh counter). ``warm``: ``ChatHistory.get_trimmed_history()`` on a
  history whose counts are known, as in an agent between two requests.
- ``estimate_error_pct``: how far :class:`EstimateCounter`'s total is from the exact
  o200k_base count over a corpus of prose, code and JSON messages
  (``estimate_error_detail_pct`` adds the median and the worst single message).
- ``session_kb_100_messages``: memory held by one idle agent with a 100-message history.
- ``agent_kb_100_messages_rss`` / ``agent_kb_100_messages_tracemalloc``: the same, measured
  the way peer frameworks are measured: 1,000 agents, each importing 100 messages made for
  it, the growth of the process's resident memory (RSS) and of what tracemalloc traces,
  divided by 1,000. Each is measured in a fresh process.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import subprocess
import sys
import time
import tracemalloc
from typing import Any

from hookloop import (
    Agent,
    AssistantMessage,
    ChatHistory,
    Message,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from hookloop.context import CachingCounter, EstimateCounter, TiktokenCounter, trim_to_budget
from hookloop.testing import ScriptedModel

BUDGET = 4_000
SIZES = (1_000, 10_000, 100_000)

PROSE = [
    "Could you look up the order status for customer 4521 and tell me when it ships?",
    "The shipment left the Rotterdam warehouse on Tuesday and should arrive by Friday.",
    "Summarise the attached report in three bullet points for the board meeting.",
    "Revenue grew 12% quarter over quarter, driven mostly by the enterprise segment.",
    "Ich habe die Rechnung geprüft; die Beträge stimmen mit der Bestellung überein.",
]
CODE = 'def total(items):\n    return sum(i["price"] * i["qty"] for i in items if i.get("qty"))\n'
JSON = json.dumps({"order_id": 4521, "status": "shipped", "items": [{"sku": "A-17", "qty": 3}]})


def make_history(n: int) -> list[Message]:
    """``n`` messages: user / assistant turns, every tenth assistant message a tool call."""
    out: list[Message] = []
    assistant_count = 0
    while len(out) < n:
        i = len(out)
        out.append(UserMessage(content=f"{PROSE[i % len(PROSE)]} ({i})"))
        assistant_count += 1
        if assistant_count % 10 == 0:
            call = ToolCall(name="lookup_order", arguments=JSON)
            out.append(AssistantMessage(tool_calls=(call,)))
            out.append(ToolMessage(tool_call_id=call.id, tool_name=call.name, content=JSON))
        out.append(
            AssistantMessage(content=f"{PROSE[(i + 1) % len(PROSE)]} {CODE if i % 7 == 0 else ''}")
        )
    out = out[:n]
    if isinstance(out[-1], AssistantMessage) and out[-1].tool_calls:
        out.pop()  # its result was cut off
    return out


def best_ms(fn: Any, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return min(times)


def trim_figures(repeat: int) -> dict[str, dict[str, float]]:
    figures: dict[str, dict[str, float]] = {}
    for n in SIZES:
        messages = make_history(n)

        def cold(messages: list[Message] = messages) -> None:
            trim_to_budget(messages, BUDGET, counter=CachingCounter(EstimateCounter()))

        history = ChatHistory(max_context_tokens=BUDGET + 200)
        history.import_history(messages)
        history.get_trimmed_history()  # counts known, pairing checked: the steady state
        figures[str(n)] = {
            "cold": best_ms(cold, repeat),
            "warm": best_ms(history.get_trimmed_history, repeat * 3),
        }
    return figures


def estimate_error() -> dict[str, float] | None:
    try:
        exact = TiktokenCounter("o200k_base")
        exact.count_text("probe")
    except Exception as exc:  # the tokens extra is missing
        print(f"(no exact tokenizer: {exc}; skipping the estimate's error)", file=sys.stderr)
        return None
    estimate = EstimateCounter()
    corpus = make_history(2_000)
    exact_counts = [exact.count_message(m) for m in corpus]
    estimated = [estimate.count_message(m) for m in corpus]
    total_exact, total_estimated = sum(exact_counts), sum(estimated)
    worst = max(abs(e - x) / x for e, x in zip(estimated, exact_counts, strict=True) if x)
    return {
        "total": abs(total_estimated - total_exact) / total_exact * 100,
        "worst_message": worst * 100,
        "median_message": statistics.median(
            abs(e - x) / x * 100 for e, x in zip(estimated, exact_counts, strict=True) if x
        ),
    }


def session_kb(sessions: int = 200) -> float:
    """Memory of one idle agent holding 100 messages, averaged over many."""
    histories = [make_history(100) for _ in range(sessions)]
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    agents = []
    for messages in histories:
        agent = Agent(ScriptedModel([]), retry=None)
        agent.history.import_history(messages)
        agents.append(agent)
    gc.collect()
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    grown = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    # The messages themselves were made before the snapshot; count them too.
    message_bytes = _deep_size(histories[0])
    return (grown / sessions + message_bytes) / 1024


AGENTS = 1_000


def _rss_kb() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc/self/status (Linux only)")


def _make_agents(count: int) -> list[Agent]:
    agents = []
    for _ in range(count):
        agent = Agent(ScriptedModel([]), retry=None)
        agent.history.import_history(make_history(100))
        agents.append(agent)
    return agents


def agent_kb(how: str) -> float:
    """KB per idle agent with 100 imported messages, over 1,000 agents (rss or tracemalloc)."""
    _make_agents(5)  # imports and caches warmed up before the measurement
    gc.collect()
    if how == "rss":
        before = _rss_kb()
        agents = _make_agents(AGENTS)
        gc.collect()
        grown = float(_rss_kb() - before)
    else:
        tracemalloc.start()
        before_bytes = tracemalloc.get_traced_memory()[0]
        agents = _make_agents(AGENTS)
        gc.collect()
        grown = (tracemalloc.get_traced_memory()[0] - before_bytes) / 1024
        tracemalloc.stop()
    assert len(agents) == AGENTS
    return grown / AGENTS


def agent_kb_fresh(how: str) -> float:
    """:func:`agent_kb` in a fresh interpreter, so earlier figures leave nothing behind."""
    out = subprocess.run(
        [sys.executable, __file__, "--agent-kb", how], check=True, capture_output=True, text=True
    )
    return float(out.stdout)


def _deep_size(messages: list[Message]) -> int:
    seen: set[int] = set()

    def size(obj: object) -> int:
        if id(obj) in seen or isinstance(obj, (int, float, bool, type(None))):
            return 0
        seen.add(id(obj))
        total = sys.getsizeof(obj)
        if isinstance(obj, (tuple, list)):
            total += sum(size(x) for x in obj)
        elif hasattr(obj, "__slots__"):
            total += sum(size(getattr(obj, s)) for s in obj.__slots__ if hasattr(obj, s))
        return total

    return sum(size(m) for m in messages)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--repeat", type=int, default=5, help="runs per trim figure (best of)")
    parser.add_argument("--agent-kb", choices=["rss", "tracemalloc"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.agent_kb:
        print(agent_kb(args.agent_kb))
        return
    trim = trim_figures(args.repeat)
    error = estimate_error()
    figures: dict[str, Any] = {
        "trim_ms": trim,
        "estimate_error_pct": error["total"] if error is not None else None,
        "estimate_error_detail_pct": error,
        "session_kb_100_messages": session_kb(),
        "agent_kb_100_messages_rss": agent_kb_fresh("rss"),
        "agent_kb_100_messages_tracemalloc": agent_kb_fresh("tracemalloc"),
        "budget_tokens": BUDGET,
        "python": sys.version.split()[0],
    }
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    print(f"hookloop context figures (budget {BUDGET} tokens, Python {figures['python']})")
    for n, row in trim.items():
        per = row["warm"] / int(n) * 1e6
        cold, warm = row["cold"], row["warm"]
        print(
            f"  trim {int(n):>7,} messages   cold {cold:9.2f} ms   warm {warm:8.3f} ms"
            f"   ({per:.0f} ns/message warm)"
        )
    if error is not None:
        print(
            f"  estimate vs exact o200k: total {error['total']:.1f}% off, median message "
            f"{error['median_message']:.1f}%, worst message {error['worst_message']:.1f}%"
        )
    print(f"  idle session with 100 messages: {figures['session_kb_100_messages']:.1f} KB")
    print(
        f"  idle agent with 100 messages, 1,000 agents: "
        f"{figures['agent_kb_100_messages_rss']:.1f} KB (RSS), "
        f"{figures['agent_kb_100_messages_tracemalloc']:.1f} KB (tracemalloc)"
    )
    print("  for scale: peers trim 100k messages in 47-288 ms and hold 60-160 KB per session")


if __name__ == "__main__":
    main()

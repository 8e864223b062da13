"""What a hostile or careless client sends, over real HTTP: none of it breaks the server."""

from __future__ import annotations

import json

import httpx2

from hookloop import Agent
from hookloop.testing import ScriptedModel, tool_call
from tests.serve._support import GUARD, add, post_agui, run_input, served, types

# Python's str.splitlines() (so httpx's iter_lines and many SSE clients) breaks lines at these,
# where SSE breaks only at CR and LF: raw in a data line, they cut a JSON text in two.
SEPARATORS = "a\u2028b\u2029c\x85d"


def test_unicode_line_separators_never_split_an_sse_frame() -> None:
    def build() -> Agent:
        script = [tool_call("add", {"a": 1, "b": 2, "note": SEPARATORS}, id="c1"), SEPARATORS]
        return Agent(ScriptedModel(script), tools=[add])

    run_id = "run" + SEPARATORS
    with served(build) as s, httpx2.Client(base_url=s.url, timeout=GUARD) as client:
        status, events = post_agui(client, run_input("t", run_id, SEPARATORS))
        assert status == 200
        assert types(events)[-1] == "RUN_FINISHED"
        assert events[0].data["runId"] == run_id
        args = "".join(e.data["delta"] for e in events if e.type == "TOOL_CALL_ARGS")
        assert json.loads(args)["note"] == SEPARATORS
        text = "".join(e.data["delta"] for e in events if e.type == "TEXT_MESSAGE_CONTENT")
        assert text == SEPARATORS
        # the JSON API reads the same events back unchanged
        read = client.get(f"/api/runs/{run_id}/events").json()["events"]
        assert [e["event"] for e in read] == [e.data for e in events]

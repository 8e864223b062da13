"""The examples in examples/ run, and print what the README and docs say they print."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run(script: str) -> str:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / script)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stderr == ""
    return done.stdout


def without_timings(text: str) -> list[str]:
    return [re.sub(r"^(\s*\d+\.\d|\.\.\.) ms", "<t>", line) for line in text.splitlines()]


def test_quickstart_prints_what_the_readme_shows() -> None:
    readme = (ROOT / "README.md").read_text()
    shown = readme.split("prints (`examples/quickstart.py`; `...` stands for the timings")[1]
    shown = shown.split("```\n", 1)[1]
    shown = shown.split("```")[0]
    assert without_timings(run("quickstart.py")) == without_timings(shown)


def test_quickstart_code_in_the_readme_is_the_example_file() -> None:
    readme = (ROOT / "README.md").read_text()
    code = readme.split("for your own tests:\n\n```python\n")[1].split("```")[0]
    assert code == (ROOT / "examples" / "quickstart.py").read_text()


def test_hooks_tour_shows_every_chat_hook_event_and_a_valid_history() -> None:
    out = run("hooks_tour.py")
    for event in [
        "on_scope_register",
        "on_chat_start",
        "on_message",
        "pre_request",
        "after_model_call",
        "on_response",
        "pre_tool_call",
        "on_tool_call_result",
        "on_tool_call_error",
        "on_chat_done",
        "on_chat_abort",
    ]:
        assert f"  {event} " in out, event
    assert "ToolValidationError" in out
    assert "the user did not allow deleting files" in out
    assert '"reporter_email":"<redacted>"' in out
    assert "chat() raised ChatCancelledError" in out
    assert "answer: 17 x 23 = 391" in out


def test_the_readme_shows_the_command_make_demo_runs() -> None:
    readme = (ROOT / "README.md").read_text()
    makefile = (ROOT / "Makefile").read_text()
    demo = makefile.split("\ndemo:")[1].split("\n")[1].strip()
    assert demo.startswith("$(BIN)/hookloop run ")
    shown = demo.replace("$(BIN)/", ".venv/bin/").replace(" --model local", "")
    assert f"```sh\n{shown}\n```" in readme

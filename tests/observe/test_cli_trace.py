"""``hookloop run --trace-file / --trace-html`` and ``trace view``: a trace is never lost.

Whatever the text, the locale, the way the run ends or the files named, the answer is
printed, the exit code is the run's, and what was recorded is written (or one line says why
not). The model is a real OpenAI-compatible HTTP server on loopback; signals and locales are
tried on real processes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hookloop._cli import main
from hookloop.observe import read_trace
from tests.models._provider_server import ProviderServer, Reply, answer
from tests.observe.test_page import page_records

HOOKLOOP = [sys.executable, "-m", "hookloop"]
SEPARATORS = "line\u2028paragraph\u2029next\x85line"


def run_args(server: ProviderServer, *args: str) -> list[str]:
    return ["run", "--model", f"{server.url}/v1#m", "--no-tools", *args]


def hookloop(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [*HOOKLOOP, *args], cwd=cwd, env=env, capture_output=True, timeout=120, check=False
    )


def test_any_text_reaches_stdout_the_trace_and_the_page(
    server: ProviderServer, tmp_path: Path
) -> None:
    said = f"{SEPARATORS} half an emoji \ud83d café ☕"
    server.add(answer("chat.completions", said))
    done = hookloop(
        *run_args(server, "--trace-file", "run.jsonl", "--trace-html", "run.html", "Hi"),
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    # Standard output is UTF-8 here: what it cannot hold (a lone surrogate) is escaped.
    assert done.stdout.decode() == said.replace("\ud83d", "\\ud83d") + "\n"
    trace = read_trace(tmp_path / "run.jsonl")
    page = page_records((tmp_path / "run.html").read_text(encoding="utf-8"))
    assert page == trace
    assert trace[-1]["event"] == "on_chat_done"
    assert trace[-1]["data"]["response"]["message"]["content"] == said


def test_under_a_locale_that_is_not_utf_8_the_files_are_utf_8(
    server: ProviderServer, tmp_path: Path
) -> None:
    said = "café ☕"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LC_", "PYTHONIO"))}
    env.update(LANG="C", LC_ALL="C", PYTHONUTF8="0")
    server.add(answer("chat.completions", said))
    done = hookloop(
        *run_args(server, "--trace-file", "run.jsonl", "--trace-html", "run.html", "Hi"),
        cwd=tmp_path,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == b"caf\\xe9 \\u2615\n"  # ASCII out: escaped, never lost
    trace = read_trace(tmp_path / "run.jsonl")
    assert trace[-1]["data"]["response"]["message"]["content"] == said
    page = (tmp_path / "run.html").read_bytes().decode("utf-8")
    assert page_records(page) == trace


def test_a_trace_that_cannot_be_written_is_one_more_line(
    server: ProviderServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    server.add(answer("chat.completions", "Hello!"))
    assert main(run_args(server, "--trace-file", "/dev/full", "Hi")) == 0
    out, err = capsys.readouterr()
    assert out == "Hello!\n"
    assert err == "hookloop: the trace could not be written: [Errno 28] No space left on device\n"


def test_a_page_that_cannot_be_written_is_one_more_line(
    server: ProviderServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    server.add(answer("chat.completions", "Hello!"))
    assert main(run_args(server, "--trace-html", "/dev/full", "Hi")) == 0
    out, err = capsys.readouterr()
    assert out == "Hello!\n"
    assert err == (
        "hookloop: the trace page could not be written: [Errno 28] No space left on device\n"
    )
    # A failed run keeps its exit code and its own line; the page's is one more.
    server.add(Reply.json({"error": {"message": "Incorrect API key"}}, status=401))
    assert main(run_args(server, "--trace-html", "/dev/full", "Hi")) == 1
    out, err = capsys.readouterr()
    assert out == ""
    page, run = err.splitlines()
    assert (
        page == "hookloop: the trace page could not be written: [Errno 28] No space left on device"
    )
    assert run.startswith("hookloop: AuthenticationError: Incorrect API key")


@pytest.mark.parametrize(
    ("signum", "option", "code"),
    [(signal.SIGTERM, "--trace-html", 143), (signal.SIGHUP, "--trace-file", 129)],
)
def test_sigterm_and_sighup_write_what_was_recorded(
    server: ProviderServer, tmp_path: Path, signum: int, option: str, code: int
) -> None:
    target = tmp_path / ("run.html" if option == "--trace-html" else "run.jsonl")
    server.add(answer("chat.completions", "too late", delay=60))  # the model never answers
    process = subprocess.Popen(
        [*HOOKLOOP, *run_args(server, option, str(target), "Hi")],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while not server.received and time.monotonic() < deadline:
            time.sleep(0.05)  # until the request is in flight
        assert server.received, "the request never came"
        process.send_signal(signum)
        out, err = process.communicate(timeout=60)
    finally:
        process.kill()
        process.wait()
    assert process.returncode == code, err
    assert out == b""
    if option == "--trace-html":
        assert err.decode() == f"trace page: open {target.as_uri()} in a browser\n"
        records = page_records(target.read_text(encoding="utf-8"))
    else:
        assert err == b""
        records = read_trace(target)
    events = [r["event"] for r in records]
    assert events[:3] == ["on_chat_start", "on_message", "pre_request"]
    assert events[-1] == "on_chat_abort"


def test_the_trace_and_the_page_may_not_be_one_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    os.chdir(tmp_path)
    assert main(["run", "--trace-file", "same.html", "--trace-html", "./same.html", "Hi"]) == 2
    assert capsys.readouterr().err == (
        "hookloop: --trace-file and --trace-html name the same file (./same.html)\n"
    )
    assert not (tmp_path / "same.html").exists()


def test_an_unwritable_trace_file_leaves_an_earlier_page_as_it_was(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = tmp_path / "page.html"
    page.write_text("the page of an earlier run")
    args = ["--trace-file", str(tmp_path / "no" / "such.jsonl"), "--trace-html", str(page), "Hi"]
    assert main(["run", *args]) == 2
    assert capsys.readouterr().err.startswith("hookloop: cannot write the trace: [Errno 2] ")
    assert page.read_text() == "the page of an earlier run"


def test_trace_view_never_writes_over_its_trace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "run.html"  # a trace, named like a page
    record = {"v": 2, "seq": 0, "t": 0.0, "event": "x", "agent": "a", "chat": None, "data": {}}
    trace.write_text(json.dumps(record) + "\n")
    before = trace.read_bytes()
    assert main(["trace", "view", str(trace)]) == 2
    assert capsys.readouterr().err == (
        f"hookloop: the default page (TRACE with .html) is the trace itself ({trace}): "
        "name the page with -o FILE\n"
    )
    assert main(["trace", "view", str(trace), "-o", str(trace)]) == 2
    assert capsys.readouterr().err.startswith("hookloop: -o names the trace itself")
    assert trace.read_bytes() == before
    assert main(["trace", "view", str(trace), "-o", str(tmp_path / "page.html")]) == 0

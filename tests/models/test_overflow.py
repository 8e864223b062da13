"""Overflow classification: the seed's keywords, and the errors every documented provider sends.

Each file in ``tests/fixtures/overflow/`` is one overflow error a provider or server really
sends (where it was found is in its ``source``). Each is replayed over real HTTP through the
official client of its API and must come out as :class:`~hookloop.ContextOverflowError`, and
:func:`~hookloop.models.is_context_overflow` must say so of its text too.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hookloop import (
    Agent,
    AssistantMessage,
    BadRequestError,
    ContextOverflowError,
    RateLimitError,
    UserMessage,
)
from hookloop.context import ContextHooks, ContextOnErrorResult
from hookloop.models import ProviderRequest, is_context_overflow
from hookloop.models._overflow import OVERFLOW_KEYWORDS
from hookloop.models._provider_errors import error_fields, provider_error
from hookloop.testing import ScriptedModel
from tests.models._provider_server import (
    ProviderServer,
    Reply,
    answer,
)

FIXTURES = Path(__file__).parents[1] / "fixtures" / "overflow"
CASES = sorted(FIXTURES.glob("*.json"))
REQUEST = ProviderRequest(model="m", system=None, messages=(UserMessage(content="Hello"),))

SEED_KEYWORDS = (
    "maximum context length",
    "context length exceeded",
    "maximum tokens",
    "token limit",
    "too many tokens",
    "context window",
    "tokens exceed",
    "prompt is too long",
    "exceeds the maximum",
)


def load(path: Path) -> dict[str, Any]:
    case: dict[str, Any] = json.loads(path.read_text())
    return case


# --- item 1: the seed's nine keywords ------------------------------------------------------


def test_the_default_detector_has_exactly_the_seeds_keywords() -> None:
    assert OVERFLOW_KEYWORDS == SEED_KEYWORDS


@pytest.mark.parametrize("keyword", SEED_KEYWORDS)
@pytest.mark.parametrize("case", [str.lower, str.upper, str.title], ids=["lower", "upper", "title"])
def test_every_seed_keyword_is_an_overflow_in_any_case(
    keyword: str, case: Callable[[str], str]
) -> None:
    text = f"Request failed: {case(keyword)} (model m)"
    assert is_context_overflow(RuntimeError(text))
    assert is_context_overflow(BadRequestError(text, status=400))
    error = provider_error(status=400, body={"error": {"message": text}})
    assert type(error) is ContextOverflowError


@pytest.mark.parametrize("keyword", SEED_KEYWORDS)
async def test_context_hooks_on_error_runs_for_every_seed_keyword(keyword: str) -> None:
    seen: list[str] = []

    def on_error(**kwargs: Any) -> ContextOnErrorResult:
        seen.append(kwargs["error"].message)
        return ContextOnErrorResult(retry=True, messages=kwargs["messages"][-1:])

    failure = BadRequestError(f"The request failed: {keyword}.", status=400)
    agent = Agent(
        ScriptedModel([failure, "recovered"]),
        retry=None,
        context=None,
        plugins=[ContextHooks(on_error=on_error, max_retries=1)],
    )

    assert (await agent.chat("Hello")).text == "recovered"
    assert seen == [f"The request failed: {keyword}."]


@pytest.mark.parametrize(
    "error",
    [
        RateLimitError("Too many tokens: rate limit of 30000 tokens per minute", status=429),
        RuntimeError("Rate limit reached on tokens per min (TPM): too many tokens"),
        RuntimeError("token limit per day reached; try again tomorrow"),
    ],
    ids=["rate-limit-error", "tokens-per-minute-text", "tokens-per-day-text"],
)
def test_a_rate_limit_is_never_an_overflow(error: Exception) -> None:
    assert not is_context_overflow(error)


def test_a_rate_limit_in_a_stream_is_never_an_overflow() -> None:
    body = {
        "error": {
            "type": "rate_limit_error",
            "message": "This request would exceed the token limit of 40,000 input tokens "
            "per minute",
        }
    }
    assert type(provider_error(status=None, body=body)) is RateLimitError


# --- item 2: the overflow errors of every documented provider ------------------------------


def test_every_documented_provider_has_a_recorded_overflow() -> None:
    providers = {load(path)["provider"].split(" ")[0] for path in CASES}
    assert providers >= {
        "OpenAI",
        "Anthropic",
        "vLLM",
        "llama.cpp",
        "Ollama",
        "LM",  # LM Studio
        "OpenRouter",
        "Groq",
        "TGI",
        "Bedrock",
    }
    for path in CASES:
        assert set(load(path)) == {"provider", "api", "source", "status", "body"}, path.name


@pytest.mark.parametrize("path", CASES, ids=[path.stem for path in CASES])
async def test_every_recorded_overflow_is_a_context_overflow_error(
    path: Path, server: ProviderServer, make_model: Callable[[str], Any]
) -> None:
    case = load(path)
    server.add(Reply.json(case["body"], status=case["status"]))
    model = make_model(case["api"])

    with pytest.raises(ContextOverflowError) as raised:
        await model.request(REQUEST)

    error = raised.value
    assert error.status == case["status"]
    assert error.message == error_fields(case["body"])[2]  # the body as the client gives it
    assert is_context_overflow(error)
    assert is_context_overflow(RuntimeError(json.dumps(case["body"])))


@pytest.mark.parametrize("name", ["anthropic_input_and_max_tokens", "anthropic_prompt_too_long"])
async def test_a_default_agent_recovers_from_a_real_anthropic_overflow(
    name: str, server: ProviderServer, make_model: Callable[[str], Any]
) -> None:
    case = load(FIXTURES / f"{name}.json")
    server.add(Reply.json(case["body"], status=case["status"]), answer("messages", "Recovered"))
    agent = Agent(make_model("messages"), retry=None)
    agent.history.import_history(
        [
            message
            for n in range(6)
            for message in (
                UserMessage(content=f"old question {n} " + "words " * 300),
                AssistantMessage(content=f"old answer {n} " + "words " * 300),
            )
        ]
    )

    response = await agent.chat("What now?")

    assert response.text == "Recovered"
    first, second = (received.body["messages"] for received in server.received)
    assert len(second) < len(first)
    assert second[-1] == first[-1]
    assert second[-1]["content"] == [{"type": "text", "text": "What now?"}]
    assert len(agent.messages) == 14


@pytest.mark.parametrize(
    ("name", "request_tokens", "limit_tokens"),
    [
        ("anthropic_input_and_max_tokens", 197626, 200000),
        ("anthropic_prompt_too_long", 208736, 200000),
        ("openai_context_length_exceeded", 8227, 8192),
        ("llamacpp_exceeds_available_context", 5000, 4096),
    ],
)
def test_overflow_numbers_are_read_off_the_error(
    name: str, request_tokens: int, limit_tokens: int
) -> None:
    case = load(FIXTURES / f"{name}.json")
    error = provider_error(status=case["status"], body=case["body"])
    assert isinstance(error, ContextOverflowError)
    assert (error.request_tokens, error.limit_tokens) == (request_tokens, limit_tokens)


NOT_OVERFLOW = [
    pytest.param(
        "chat.completions",
        {
            "error": {
                "message": "Invalid value for 'temperature': must be <= 2.",
                "type": "invalid_request_error",
                "param": "temperature",
                "code": "invalid_value",
            }
        },
        id="openai-bad-value",
    ),
    pytest.param(
        "messages",
        {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": 'messages: roles must alternate between "user" and "assistant"',
            },
        },
        id="anthropic-roles",
    ),
    pytest.param(
        "chat.completions",
        {
            "error": {
                "message": "'tool_choice' is only allowed when 'tools' are specified",
                "type": "invalid_request_error",
                "param": "tool_choice",
                "code": None,
            }
        },
        id="groq-tool-choice",
    ),
    pytest.param(
        "chat.completions",
        {"error": "Input validation error: `temperature` must be strictly positive"},
        id="tgi-temperature",
    ),
]


@pytest.mark.parametrize(("api", "body"), NOT_OVERFLOW)
async def test_other_bad_requests_stay_bad_requests(
    api: str, body: dict[str, Any], server: ProviderServer, make_model: Callable[[str], Any]
) -> None:
    server.add(Reply.json(body, status=400))

    with pytest.raises(BadRequestError) as raised:
        await make_model(api).request(REQUEST)

    assert type(raised.value) is BadRequestError
    assert not is_context_overflow(raised.value)


def test_overflow_classification_lives_in_the_models_layer() -> None:
    from hookloop.context import _sliding_window
    from hookloop.models import _overflow, _provider_errors

    assert is_context_overflow.__module__ == "hookloop.models"
    assert _overflow.is_context_overflow is is_context_overflow
    assert _sliding_window.is_context_overflow is is_context_overflow
    assert _provider_errors.is_overflow_text is _overflow.is_overflow_text
    # The models layer does not reach up into context/ (it did for the overflow markers).
    for path in (Path(_overflow.__file__).parent).glob("*.py"):
        assert "..context" not in path.read_text(), path.name

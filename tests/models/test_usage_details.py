"""Usage details and the response id, read from each provider's wire format.

The official clients talk to the local provider server; the usage the adapters report keeps
cached and reasoning tokens where the provider says, and adding usages adds every field.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hookloop import InvalidMessageError, Usage
from hookloop._messages import UserMessage
from hookloop.models._base import ProviderRequest
from tests.models._provider_server import (
    ProviderServer,
    Reply,
    adapter,
    whole_answer,
)

REQUEST = ProviderRequest(model="m", system=None, messages=(UserMessage(content="hi"),))


async def ask(api: str, server: ProviderServer, body: dict[str, Any]) -> Any:
    server.add(Reply.json(body))
    model = adapter(api, server)
    try:
        return await model.request(REQUEST)
    finally:
        await model.aclose()


async def test_openai_cached_and_reasoning_tokens_are_kept(server: ProviderServer) -> None:
    body = whole_answer("chat.completions", "ok", usage=(100, 40))
    body["usage"]["prompt_tokens_details"] = {"cached_tokens": 64}
    body["usage"]["completion_tokens_details"] = {"reasoning_tokens": 25}

    response = await ask("chat.completions", server, body)

    assert (response.id, response.usage) == (
        "chatcmpl-1",
        Usage(input_tokens=100, output_tokens=40, cached_input_tokens=64, reasoning_tokens=25),
    )


async def test_responses_cached_and_reasoning_tokens_are_kept(server: ProviderServer) -> None:
    body = whole_answer("responses", "ok", usage=(100, 40))
    body["usage"]["input_tokens_details"] = {"cached_tokens": 50}
    body["usage"]["output_tokens_details"] = {"reasoning_tokens": 30}

    response = await ask("responses", server, body)

    assert (response.id, response.usage) == (
        "resp_1",
        Usage(input_tokens=100, output_tokens=40, cached_input_tokens=50, reasoning_tokens=30),
    )


async def test_anthropic_cache_reads_are_input_tokens_and_reported_apart(
    server: ProviderServer,
) -> None:
    body = whole_answer("messages", "ok", usage=(10, 5))
    body["usage"]["cache_read_input_tokens"] = 90

    response = await ask("messages", server, body)

    assert (response.id, response.usage) == (
        "msg_1",
        Usage(input_tokens=100, output_tokens=5, cached_input_tokens=90),
    )


async def test_without_details_the_usage_is_as_before(server: ProviderServer) -> None:
    response = await ask("chat.completions", server, whole_answer("chat.completions", usage=(3, 2)))

    assert response.usage == Usage(input_tokens=3, output_tokens=2)


counts = st.integers(min_value=0, max_value=10**9)
usages = st.builds(
    Usage,
    input_tokens=counts,
    output_tokens=counts,
    cached_input_tokens=counts,
    reasoning_tokens=counts,
)


@given(usages, usages)
def test_adding_usages_adds_every_field(a: Usage, b: Usage) -> None:
    total = a + b

    assert (
        total.input_tokens,
        total.output_tokens,
        total.cached_input_tokens,
        total.reasoning_tokens,
    ) == (
        a.input_tokens + b.input_tokens,
        a.output_tokens + b.output_tokens,
        a.cached_input_tokens + b.cached_input_tokens,
        a.reasoning_tokens + b.reasoning_tokens,
    )


def test_a_detail_that_is_not_an_int_is_refused() -> None:
    with pytest.raises(InvalidMessageError, match=r"Usage.reasoning_tokens must be an int"):
        Usage(reasoning_tokens="3")  # type: ignore[arg-type]

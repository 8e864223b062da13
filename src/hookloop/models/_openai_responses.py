"""OpenAI's Responses API through the official client, behind the same model protocol.

Each request sends the whole conversation as input items (``store=False`` by default, so
nothing is kept on OpenAI's side and the agent's history stays the one source of truth).
Tool calls are ``function_call`` items correlated by ``call_id``; results go back as
``function_call_output`` items. Needs the ``openai`` extra.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from .._errors import InvalidResponseError, ProviderConnectionError
from .._extras import import_extra
from .._messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
)
from ._base import (
    FinishReason,
    Model,
    ProviderRequest,
    ProviderResponse,
    StreamEnd,
    StreamPart,
    TextDelta,
    ToolCallDelta,
)
from ._client import (
    DEFAULT_TIMEOUT,
    CallLimits,
    CallTimer,
    LoopClient,
    SplitPairs,
    encodable,
    is_host,
    sent_cache_key,
    translated_errors,
)
from ._openai import image_url, openai_client
from ._provider_errors import provider_error

if TYPE_CHECKING:
    import openai

__all__ = ["OpenAIResponsesModel", "responses_input"]


class OpenAIResponsesModel(Model):
    """A model behind OpenAI's Responses API.

    Args:
        name: The model's name, e.g. ``"gpt-5"``.
        base_url: Another API root; ``None`` for OpenAI's (or ``OPENAI_BASE_URL``).
        api_key: The key; ``None`` reads ``OPENAI_API_KEY`` for OpenAI's own API and
            ``HOOKLOOP_API_KEY`` for any other server (as :class:`~hookloop.models.OpenAIModel`).
        context_window: The model's context window in tokens, when you know it.
        timeout: Seconds one call may wait for the server in all: the whole answer, or the
            whole of a stream.
        stream_idle_timeout: Seconds a stream may go without sending anything; ``None``
            for no bound beyond ``timeout``.
        store: Let OpenAI keep the responses (``store=True``); off by default.
        client: A ready ``openai.AsyncOpenAI`` to use instead.
        prompt_cache_key: Send each request's ``cache_key`` (the agent's session id,
            hashed) as ``prompt_cache_key``, which routes a session's requests to the same
            prompt cache: ``None`` (the default) sends it to OpenAI's own API only, since some
            compatible servers reject fields they do not know; ``True`` or ``False`` decide
            for any server. A ``prompt_cache_key`` in ``settings.extra`` wins.

    Raises:
        MissingExtraError: The ``openai`` extra is not installed.
        UsageError: No key for OpenAI's own API, or a timeout that is not positive.
    """

    native_output = True

    def __init__(
        self,
        name: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        context_window: int | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        stream_idle_timeout: float | None = None,
        store: bool = False,
        client: openai.AsyncOpenAI | None = None,
        prompt_cache_key: bool | None = None,
    ) -> None:
        self._sdk = import_extra("openai", extra="openai", by=type(self).__name__)
        self.name = name
        self.context_window = context_window
        self.store = store
        self._limits = CallLimits(timeout, stream_idle_timeout)
        self._clients = LoopClient(
            lambda: openai_client(api_key=api_key, base_url=base_url, timeout=timeout), client
        )
        if prompt_cache_key is None:
            prompt_cache_key = is_host(str(self._clients.first.base_url), "api.openai.com")
        self.prompt_cache_key = prompt_cache_key

    provider_name = "openai"

    @property
    def base_url(self) -> str:
        """The API root requests go to."""
        return str(self._clients.first.base_url)

    def __repr__(self) -> str:
        return f"OpenAIResponsesModel({self.name!r})"

    async def aclose(self) -> None:
        """Close the HTTP client this model made for this loop (a client you passed stays open)."""
        await self._clients.close()

    async def request(self, request: ProviderRequest) -> ProviderResponse:
        """Send one request and return the whole answer.

        Raises:
            ProviderError: The matching class of hookloop's error tree.
        """
        timer = CallTimer(self._limits, self.name)
        with translated_errors(self._sdk, self.name, reading=False):
            client = await self._clients.get()
            response = await timer.wait(client.responses.create(**self._body(request)))
        with translated_errors(self._sdk, self.name):
            return _parse_response(response, self.name)

    async def stream(self, request: ProviderRequest) -> AsyncIterator[StreamPart]:
        """Send one request and yield the answer as it arrives.

        Raises:
            ProviderError: The matching class of hookloop's error tree; a stream that ends
                without ``response.completed`` raises
                :class:`~hookloop.ProviderConnectionError`.
        """
        body = self._body(request)
        body["stream"] = True
        final: ProviderResponse | None = None
        pairs = SplitPairs()
        timer = CallTimer(self._limits, self.name)
        with translated_errors(self._sdk, self.name, reading=False):
            client = await self._clients.get()
            events = await timer.wait(client.responses.create(**body))
        with translated_errors(self._sdk, self.name):
            async with events:  # closes the connection if the consumer stops early
                async for event in timer.parts(aiter(events)):
                    kind = event.type
                    if kind in ("response.output_text.delta", "response.refusal.delta"):
                        if text := pairs.text(event.delta):
                            yield TextDelta(text=text)
                    elif (
                        kind == "response.output_item.added" and event.item.type == "function_call"
                    ):
                        item = event.item
                        yield ToolCallDelta(
                            index=event.output_index,
                            id=item.call_id,
                            name=item.name,
                            arguments=item.arguments or "",
                        )
                    elif kind == "response.function_call_arguments.delta":
                        yield ToolCallDelta(index=event.output_index, arguments=event.delta)
                    elif kind in ("response.completed", "response.incomplete", "response.failed"):
                        final = _parse_response(event.response, self.name)
                    elif kind == "error":
                        body = {"type": event.code, "message": event.message, "param": event.param}
                        raise provider_error(status=None, body=body, model=self.name)
        if final is None:
            raise ProviderConnectionError(
                "the stream ended before the model finished its answer", model=self.name
            )
        if rest := pairs.rest():
            yield TextDelta(text=rest)
        yield StreamEnd(
            finish_reason=final.finish_reason, usage=final.usage, model=final.model, id=final.id
        )

    def _body(self, request: ProviderRequest) -> dict[str, Any]:
        settings = request.settings
        body: dict[str, Any] = {
            "model": request.model or self.name,
            "input": responses_input(request.messages),
            "store": self.store,
        }
        if request.system:
            body["instructions"] = request.system
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": dict(tool.parameters),
                    "strict": tool.strict,
                }
                for tool in request.tools
            ]
            choice = settings.tool_choice
            body["tool_choice"] = (
                choice
                if choice in ("auto", "none", "required")
                else {"type": "function", "name": choice}
            )
        if settings.temperature is not None:
            body["temperature"] = settings.temperature
        if settings.max_tokens is not None:
            body["max_output_tokens"] = settings.max_tokens
        if (output := request.output_format) is not None:
            schema = {"name": output.name, "schema": dict(output.schema), "strict": True}
            body["text"] = {"format": {"type": "json_schema", **schema}}
        if key := sent_cache_key(request, self.prompt_cache_key):
            body["prompt_cache_key"] = key
        if settings.extra:
            body["extra_body"] = dict(settings.extra)
        return encodable(body)


def responses_input(messages: tuple[Message, ...]) -> list[dict[str, Any]]:
    """The conversation as Responses API input items."""
    items: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, UserMessage):
            content: Any = message.content
            if not isinstance(content, str):
                content = [
                    {"type": "input_text", "text": part.text}
                    if isinstance(part, TextPart)
                    else {"type": "input_image", "image_url": image_url(part)}
                    for part in content
                ]
            items.append({"role": "user", "content": content})
        elif isinstance(message, AssistantMessage):
            if message.content:
                items.append({"role": "assistant", "content": message.content})
            items.extend(
                {
                    "type": "function_call",
                    "call_id": call.id,
                    "name": call.name,
                    "arguments": call.arguments,
                }
                for call in message.tool_calls
            )
        elif isinstance(message, ToolMessage):
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": message.tool_call_id,
                    "output": message.content,
                }
            )
        elif isinstance(message, SystemMessage):
            items.append({"role": "developer", "content": message.content})
    return items


def _parse_response(response: Any, model: str) -> ProviderResponse:
    if response.status == "failed":
        raise provider_error(status=None, body=_error_body(response), model=model)
    if response.output is None:
        raise InvalidResponseError("the response has no output", model=model)
    texts: list[str] = []
    calls: list[ToolCall] = []
    refused = False
    for item in response.output:
        if item.type == "message":
            for part in item.content:
                if part.type == "output_text":
                    texts.append(part.text)
                elif part.type == "refusal":
                    texts.append(part.refusal)
                    refused = True
        elif item.type == "function_call":
            if not item.name or not item.call_id:
                raise InvalidResponseError("a function_call item has no name or call_id")
            arguments = item.arguments or "{}"
            calls.append(ToolCall(name=item.name, arguments=arguments, id=item.call_id))
    finish: FinishReason = "content_filter" if refused else ("tool_calls" if calls else "stop")
    if response.status == "incomplete":
        reason = getattr(response.incomplete_details, "reason", None)
        finish = "content_filter" if reason == "content_filter" else "length"
    usage = response.usage
    return ProviderResponse(
        content="".join(texts),
        tool_calls=tuple(calls),
        finish_reason=finish,
        usage=_usage(usage) if usage is not None else None,
        model=response.model,
        id=response.id or None,
    )


def _error_body(response: Any) -> object:
    error = response.error
    if error is None:
        return {"message": "the response failed"}
    return {"type": getattr(error, "code", None), "message": getattr(error, "message", "")}


def _usage(usage: Any) -> Usage:
    cached = getattr(getattr(usage, "input_tokens_details", None), "cached_tokens", 0)
    reasoning = getattr(getattr(usage, "output_tokens_details", None), "reasoning_tokens", 0)
    return Usage(
        input_tokens=usage.input_tokens or 0,
        output_tokens=usage.output_tokens or 0,
        cached_input_tokens=int(cached or 0),
        reasoning_tokens=int(reasoning or 0),
    )

"""Anthropic's Messages API through the official ``anthropic`` client.

The adapter maps hookloop's conversation onto Anthropic's rules: the system prompt is a
parameter, tool results travel as ``tool_result`` blocks in a user turn, turns alternate
(consecutive user messages, such as a compaction summary before a new question, are merged;
an assistant message with nothing in it is left out), and ``max_tokens`` is required. The
client's own retries are off. Needs the ``anthropic`` extra.

Prompt caching: every request carries ``cache_control`` breakpoints on its stable prefix
(:func:`cache_breakpoints`), so a conversation's calls read what the call before wrote.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import AsyncIterator, Mapping
from types import ModuleType
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from .._errors import InvalidResponseError, ProviderConnectionError, UsageError
from .._extras import extra_needed
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
    arguments_object,
    encodable,
    is_host,
    key_for,
    system_text,
    translated_errors,
)

if TYPE_CHECKING:
    import anthropic

__all__ = [
    "ANTHROPIC_URL",
    "DEFAULT_MAX_TOKENS",
    "MAX_BREAKPOINTS",
    "AnthropicModel",
    "CacheTTL",
    "anthropic_messages",
    "cache_breakpoints",
]

ANTHROPIC_URL = "https://api.anthropic.com"
"""Anthropic's own API root: the only place ``ANTHROPIC_API_KEY`` is sent."""

DEFAULT_MAX_TOKENS = 4096
"""``max_tokens`` sent when the settings name none (Anthropic requires one)."""

MAX_BREAKPOINTS = 4
"""The most ``cache_control`` breakpoints Anthropic accepts in one request."""

CacheTTL: TypeAlias = Literal["5m", "1h"]
"""How long Anthropic keeps a prompt-cache entry after its last use."""

_STOP: Mapping[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}


class AnthropicModel(Model):
    """A Claude model behind Anthropic's Messages API.

    Args:
        name: The model's name, e.g. ``"claude-sonnet-4-5"``.
        api_key: The key, sent to ``base_url`` whatever it is. ``None`` reads
            ``ANTHROPIC_API_KEY`` for Anthropic's own API (``https://api.anthropic.com``)
            and ``HOOKLOOP_API_KEY`` for any other server; a server with neither gets a
            placeholder. No other credential of the environment is used.
        base_url: Another API root (a proxy or gateway); ``None`` for Anthropic's (or
            ``ANTHROPIC_BASE_URL``).
        context_window: The model's context window in tokens, when you know it.
        timeout: Seconds one call may wait for the server in all: the whole answer, or the
            whole of a stream.
        stream_idle_timeout: Seconds a stream may go without sending anything; ``None``
            for no bound beyond ``timeout``.
        client: A ready ``anthropic.AsyncAnthropic`` to use instead.
        cache: Prompt caching: ``"5m"`` (the default) or ``"1h"``, how long a cache entry
            lives after its last use, or ``None`` for no caching. Each request marks its
            stable prefix with breakpoints (:func:`cache_breakpoints`); Anthropic bills a
            cache write at 1.25x the input price (2x for ``"1h"``) and a read at 0.1x, so
            one read within the time pays for the write, and an agent's calls follow each
            other within seconds. ``"1h"`` is for conversations that pause longer than
            five minutes between calls (a person thinking, an approval). See
            ``docs/providers.md``, "Prompt caching".

    Raises:
        MissingExtraError: The ``anthropic`` extra is not installed.
        UsageError: No key for Anthropic's own API (and no ``client``), a timeout that
            is not positive, or a ``cache`` that is not ``"5m"``, ``"1h"`` or ``None``.
    """

    def __init__(
        self,
        name: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        context_window: int | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        stream_idle_timeout: float | None = None,
        client: anthropic.AsyncAnthropic | None = None,
        cache: CacheTTL | None = "5m",
    ) -> None:
        if cache not in ("5m", "1h", None):
            raise UsageError(f"cache must be '5m', '1h' or None, got {cache!r}")
        self.cache: CacheTTL | None = cache
        with extra_needed("anthropic", by=type(self).__name__):
            import anthropic
        self._sdk: ModuleType = anthropic
        self.name = name
        self.context_window = context_window
        self._limits = CallLimits(timeout, stream_idle_timeout)
        url = base_url or os.environ.get("ANTHROPIC_BASE_URL") or ANTHROPIC_URL
        key = key_for(
            url, given=api_key, own_host="api.anthropic.com", own_variable="ANTHROPIC_API_KEY"
        )
        if key is None and client is None and is_host(url, "api.anthropic.com"):
            raise UsageError("Anthropic needs an API key: set ANTHROPIC_API_KEY or pass api_key=")
        # Always an explicit key: given none, the client would read ANTHROPIC_API_KEY,
        # ANTHROPIC_AUTH_TOKEN or a profile from the environment and send it to any host.
        self._clients = LoopClient(
            lambda: anthropic.AsyncAnthropic(
                api_key=key or "not-needed", base_url=url, timeout=timeout, max_retries=0
            ),
            client,
        )

    provider_name = "anthropic"

    def __repr__(self) -> str:
        return f"AnthropicModel({self.name!r})"

    @property
    def base_url(self) -> str:
        """The API root requests go to."""
        return str(self._clients.first.base_url)

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
            message = await timer.wait(client.messages.create(**self._body(request)))
        with translated_errors(self._sdk, self.name):
            return _parse_message(message)

    async def stream(self, request: ProviderRequest) -> AsyncIterator[StreamPart]:
        """Send one request and yield the answer as it arrives.

        Raises:
            ProviderError: The matching class of hookloop's error tree, also for an error
                event inside the stream (``overloaded_error`` arrives that way); a stream
                that ends before ``message_stop`` raises
                :class:`~hookloop.ProviderConnectionError`.
        """
        body = self._body(request)
        body["stream"] = True
        usage = Usage()
        model: str | None = None
        response_id: str | None = None
        stop: FinishReason | None = None
        finished = False
        unargued: set[int] = set()  # tool_use blocks that have not streamed any input yet
        pairs = SplitPairs()
        timer = CallTimer(self._limits, self.name)
        with translated_errors(self._sdk, self.name, reading=False):
            client = await self._clients.get()
            events = await timer.wait(client.messages.create(**body))
        with translated_errors(self._sdk, self.name):
            async with events:  # closes the connection if the consumer stops early
                async for event in timer.parts(aiter(events)):
                    kind = event.type
                    if kind == "message_start":
                        model = event.message.model
                        response_id = event.message.id or None
                        usage = _usage(event.message.usage)
                    elif kind == "content_block_start":
                        block = event.content_block
                        if block.type == "text" and (text := pairs.text(block.text)):
                            yield TextDelta(text=text)
                        elif block.type == "tool_use":
                            unargued.add(event.index)
                            yield ToolCallDelta(index=event.index, id=block.id, name=block.name)
                    elif kind == "content_block_delta":
                        delta = event.delta
                        if delta.type == "text_delta" and (text := pairs.text(delta.text)):
                            yield TextDelta(text=text)
                        elif delta.type == "input_json_delta" and delta.partial_json:
                            unargued.discard(event.index)
                            yield ToolCallDelta(index=event.index, arguments=delta.partial_json)
                    elif kind == "content_block_stop" and event.index in unargued:
                        # A tool_use block that streamed no input has an empty object.
                        unargued.discard(event.index)
                        yield ToolCallDelta(index=event.index, arguments="{}")
                    elif kind == "message_delta":
                        if event.delta.stop_reason is not None:
                            stop = _STOP.get(event.delta.stop_reason, "stop")
                        if event.usage is not None:
                            usage = _merge_usage(usage, event.usage)
                    elif kind == "message_stop":
                        finished = True
        if not finished:
            raise ProviderConnectionError(
                "the stream ended before the model finished its answer", model=self.name
            )
        if rest := pairs.rest():
            yield TextDelta(text=rest)
        yield StreamEnd(finish_reason=stop, usage=usage, model=model, id=response_id)

    def _body(self, request: ProviderRequest) -> dict[str, Any]:
        if request.output_format is not None:
            raise UsageError(
                "AnthropicModel has no JSON-schema output mode (output_mode='native'); "
                "use output_mode='tool' or 'prompted'"
            )
        settings = request.settings
        body: dict[str, Any] = {
            "model": request.model or self.name,
            "messages": anthropic_messages(request.messages),
            "max_tokens": settings.max_tokens or DEFAULT_MAX_TOKENS,
        }
        system = system_text(request)
        if system:
            body["system"] = system
        if request.tools:
            body["tools"] = [
                {
                    "name": tool.name,
                    "description": tool.description,
                    "input_schema": dict(tool.parameters),
                }
                for tool in request.tools
            ]
            body["tool_choice"] = _tool_choice(settings.tool_choice)
        # The 2.x client has no sampling keywords; they travel in the body as the API has them.
        extra = dict(settings.extra)
        if settings.temperature is not None:
            extra.setdefault("temperature", settings.temperature)
        if extra:
            body["extra_body"] = extra
        if self.cache is not None:
            cache_breakpoints(body, self.cache)
        return encodable(body)


def anthropic_messages(messages: tuple[Message, ...]) -> list[dict[str, Any]]:
    """The conversation as alternating Anthropic turns of content blocks.

    Tool results become ``tool_result`` blocks of a user turn; neighbouring messages of the
    same role are merged into one turn, tool results first; empty assistant messages are
    left out (Anthropic rejects empty text blocks). System messages inside the conversation
    are sent as the system prompt instead (see :func:`~hookloop.models._client.system_text`).
    """
    turns: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, SystemMessage):
            continue
        role, blocks = _blocks(message)
        if not blocks:
            continue
        if turns and turns[-1]["role"] == role:
            previous = turns[-1]["content"]
            if role == "user" and blocks[0]["type"] == "tool_result":
                # Results must open the turn: put them before any text already there.
                position = sum(1 for block in previous if block["type"] == "tool_result")
                previous[position:position] = blocks
            else:
                previous.extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    return turns


def cache_breakpoints(body: dict[str, Any], ttl: CacheTTL) -> int:
    """Mark the stable prefix of a Messages API ``body`` for the prompt cache, in place.

    Anthropic caches a request's prefix up to each block marked with ``cache_control``, and
    a later request reads the longest marked prefix it shares (looking back some 20 blocks
    from each of its own breakpoints). The marks, in the API's order of the prefix, at most
    :data:`MAX_BREAKPOINTS`:

    1. the last tool definition (the tools change least);
    2. the system prompt (sent as one text block to carry the mark);
    3. the last block of the turn before the newest answer: where the previous call of the
       conversation ended, so its entry is read back even when the answer and its tool
       results added more blocks than the look-back reaches;
    4. the last block of the newest turn: the whole request, which the next call extends.

    Returns how many breakpoints were placed.
    """
    control = {"type": "ephemeral", "ttl": ttl}
    marks = 0
    if tools := body.get("tools"):
        tools[-1] = {**tools[-1], "cache_control": control}
        marks += 1
    if system := body.get("system"):
        body["system"] = [{"type": "text", "text": system, "cache_control": control}]
        marks += 1
    turns = body["messages"]
    for index in (len(turns) - 3, len(turns) - 1):
        if index >= 0 and turns[index]["content"] and marks < MAX_BREAKPOINTS:
            turns[index]["content"][-1]["cache_control"] = control
            marks += 1
    return marks


def _blocks(message: Message) -> tuple[str, list[dict[str, Any]]]:
    if isinstance(message, UserMessage):
        if isinstance(message.content, str):
            text = message.content
            return "user", [{"type": "text", "text": text}] if text else []
        blocks: list[dict[str, Any]] = []
        for part in message.content:
            if isinstance(part, TextPart):
                if part.text:
                    blocks.append({"type": "text", "text": part.text})
            elif part.url is not None:
                blocks.append({"type": "image", "source": {"type": "url", "url": part.url}})
            else:
                source = {"type": "base64", "media_type": part.media_type, "data": part.data}
                blocks.append({"type": "image", "source": source})
        return "user", blocks
    if isinstance(message, AssistantMessage):
        # Anthropic rejects text blocks that are empty or only whitespace.
        text = message.content
        blocks = [{"type": "text", "text": text}] if text.strip() else []
        blocks.extend(
            {"type": "tool_use", "id": call.id, "name": call.name, "input": arguments_object(call)}
            for call in message.tool_calls
        )
        return "assistant", blocks
    if isinstance(message, ToolMessage):
        block: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": message.tool_call_id,
            "content": message.content,
        }
        if message.is_error:
            block["is_error"] = True
        return "user", [block]
    return "user", []


def _tool_choice(choice: str) -> dict[str, Any]:
    if choice == "auto":
        return {"type": "auto"}
    if choice == "required":
        return {"type": "any"}
    if choice == "none":
        return {"type": "none"}
    return {"type": "tool", "name": choice}


def _usage(usage: Any) -> Usage:
    return Usage(
        input_tokens=_input_tokens(usage),
        output_tokens=int(getattr(usage, "output_tokens", 0)),
        cached_input_tokens=int(getattr(usage, "cache_read_input_tokens", 0) or 0),
        cache_write_tokens=int(getattr(usage, "cache_creation_input_tokens", 0) or 0),
    )


def _input_tokens(usage: Any) -> int:
    # Cached prompt tokens are reported apart from input_tokens; they are input all the same.
    total = int(getattr(usage, "input_tokens", 0) or 0)
    for field in ("cache_creation_input_tokens", "cache_read_input_tokens"):
        total += int(getattr(usage, field, 0) or 0)
    return total


def _merge_usage(start: Usage, delta: Any) -> Usage:
    # message_delta's usage is cumulative; its input fields are present only sometimes.
    if not getattr(delta, "input_tokens", None):
        return dataclasses.replace(
            start, output_tokens=int(delta.output_tokens or 0) or start.output_tokens
        )
    whole = _usage(delta)
    return dataclasses.replace(
        whole,
        output_tokens=whole.output_tokens or start.output_tokens,
        cached_input_tokens=whole.cached_input_tokens or start.cached_input_tokens,
        cache_write_tokens=whole.cache_write_tokens or start.cache_write_tokens,
    )


def _parse_message(message: Any) -> ProviderResponse:
    if message.content is None:
        raise InvalidResponseError("the response has no content", body=repr(message))
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in message.content:
        if block.type == "text":
            texts.append(block.text)
        elif block.type == "tool_use":
            if not block.name:
                raise InvalidResponseError("a tool_use block has no name", body=repr(message))
            arguments = json.dumps(block.input or {}, ensure_ascii=False)
            calls.append(ToolCall(name=block.name, arguments=arguments, id=block.id))
    stop = _STOP.get(message.stop_reason or "", "tool_calls" if calls else "stop")
    return ProviderResponse(
        content="".join(texts),
        tool_calls=tuple(calls),
        finish_reason=stop,
        usage=_usage(message.usage) if message.usage is not None else None,
        model=message.model,
        id=message.id or None,
    )

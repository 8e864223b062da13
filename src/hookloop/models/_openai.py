"""OpenAI Chat Completions, and every server that speaks it, through the official client.

``OpenAIModel("gpt-4o-mini")`` talks to OpenAI; with ``base_url=`` the same adapter talks to
any OpenAI-compatible server (vLLM, Ollama, llama.cpp's server, LM Studio, OpenRouter,
Groq). The client's own retries are off: retrying is the agent's retry strategy's job, where
hooks can see and steer it. Needs the ``openai`` extra (``pip install 'hookloop[openai]'``).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any, Literal, cast

from .._errors import InvalidResponseError, ProviderConnectionError, UsageError
from .._extras import extra_needed, import_extra
from .._messages import (
    AssistantMessage,
    ImagePart,
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
    key_for,
    sent_cache_key,
    translated_errors,
)
from ._provider_errors import provider_error

if TYPE_CHECKING:
    import openai

__all__ = [
    "OPENAI_URL",
    "OpenAIModel",
    "image_url",
    "openai_client",
    "openai_messages",
    "openai_tools",
]

OPENAI_URL = "https://api.openai.com/v1"
"""OpenAI's own API root: the only place ``OPENAI_API_KEY`` is sent."""

_FINISH: Mapping[str, FinishReason] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "content_filter",
}


class OpenAIModel(Model):
    """A model behind the OpenAI Chat Completions API.

    Args:
        name: The model's name, e.g. ``"gpt-4o-mini"``, or what a compatible server calls it.
        base_url: The API root of a compatible server, e.g. ``"http://localhost:11434/v1"``;
            ``None`` for OpenAI (or ``OPENAI_BASE_URL``).
        api_key: The key, sent to ``base_url`` whatever it is. ``None`` reads
            ``OPENAI_API_KEY`` for OpenAI's own API (``https://api.openai.com``) and
            ``HOOKLOOP_API_KEY`` for any other server; a server with neither gets a
            placeholder.
        context_window: The model's context window in tokens, when you know it.
        timeout: Seconds one call may wait for the server in all: the whole answer, or the
            whole of a stream.
        stream_idle_timeout: Seconds a stream may go without sending anything; ``None``
            for no bound beyond ``timeout``.
        stream_usage: Ask for the usage chunk at the end of a stream
            (``stream_options.include_usage``); turn off for a server that rejects it.
        trust_env: Use proxy settings from the environment (``HTTPS_PROXY``, ...).
        client: A ready ``openai.AsyncOpenAI`` to use instead (its retries are yours then).
        json_mode: How a request's ``output_format`` is sent (native output mode):
            ``"json_schema"``, OpenAI's strict structured outputs; or ``"json_object"``
            with the schema beside it, which llama.cpp's server turns into a grammar.
        prompt_cache_key: Send each request's ``cache_key`` (the agent's session id,
            hashed) as ``prompt_cache_key``, which routes a session's requests to the same
            prompt cache: ``None`` (the default) sends it to OpenAI's own API only, since some
            compatible servers reject fields they do not know; ``True`` or ``False`` decide
            for any server. A ``prompt_cache_key`` in ``settings.extra`` wins.

    Raises:
        MissingExtraError: The ``openai`` extra is not installed.
        UsageError: No key given or in ``OPENAI_API_KEY`` for OpenAI's own API (a
            compatible server needs none), or a timeout that is not positive.

    Example:
        >>> model = OpenAIModel("qwen3:0.6b", base_url="http://localhost:11434/v1")
        >>> model.name
        'qwen3:0.6b'
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
        stream_usage: bool = True,
        trust_env: bool = True,
        client: openai.AsyncOpenAI | None = None,
        json_mode: Literal["json_schema", "json_object"] = "json_schema",
        prompt_cache_key: bool | None = None,
    ) -> None:
        if json_mode not in ("json_schema", "json_object"):
            raise UsageError(f"json_mode must be 'json_schema' or 'json_object', got {json_mode!r}")
        self.json_mode = json_mode
        self._sdk = import_extra("openai", extra="openai", by=type(self).__name__)
        self.name = name
        self.context_window = context_window
        self.stream_usage = stream_usage
        self._limits = CallLimits(timeout, stream_idle_timeout)
        self._clients = LoopClient(
            lambda: openai_client(
                api_key=api_key, base_url=base_url, timeout=timeout, trust_env=trust_env
            ),
            client,
        )
        own = is_host(str(self._clients.first.base_url), "api.openai.com")
        # OpenAI's own API wants max_completion_tokens; compatible servers know max_tokens.
        self._max_tokens_field = "max_completion_tokens" if own else "max_tokens"
        self.prompt_cache_key = own if prompt_cache_key is None else prompt_cache_key

    provider_name = "openai"

    @property
    def base_url(self) -> str:
        """The API root requests go to."""
        return str(self._clients.first.base_url)

    def __repr__(self) -> str:
        return f"OpenAIModel({self.name!r}, base_url={str(self._clients.first.base_url)!r})"

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
            completion = await timer.wait(client.chat.completions.create(**self._body(request)))
        with translated_errors(self._sdk, self.name):
            return _parse_completion(completion)

    async def stream(self, request: ProviderRequest) -> AsyncIterator[StreamPart]:
        """Send one request and yield the answer as it arrives.

        Raises:
            ProviderError: The matching class of hookloop's error tree, also for an error
                the server sends inside the stream; a stream that ends before the model
                finished raises :class:`~hookloop.ProviderConnectionError`.
        """
        body = self._body(request)
        body["stream"] = True
        if self.stream_usage:
            body["stream_options"] = {"include_usage": True}
        finish: FinishReason | None = None
        usage: Usage | None = None
        model: str | None = None
        response_id: str | None = None
        refused = False
        timer = CallTimer(self._limits, self.name)
        with translated_errors(self._sdk, self.name, reading=False):
            client = await self._clients.get()
            chunks = await timer.wait(client.chat.completions.create(**body))
        calls = _CallSlots()
        pairs = SplitPairs()
        with translated_errors(self._sdk, self.name):
            async with chunks:  # closes the connection if the consumer stops early
                async for chunk in timer.parts(aiter(chunks)):
                    model = chunk.model or model
                    response_id = chunk.id or response_id
                    if chunk.usage is not None:
                        usage = _usage(chunk.usage)
                    for choice in chunk.choices or ():
                        if choice.index != 0:
                            continue
                        delta = choice.delta
                        if delta is not None and (
                            text := pairs.text(delta.content or delta.refusal or "")
                        ):
                            yield TextDelta(text=text)
                        for call in (delta.tool_calls if delta is not None else None) or ():
                            function = call.function
                            yield ToolCallDelta(
                                index=calls.slot(call.index, call.id),
                                id=call.id or None,
                                name=(function.name if function is not None else None) or None,
                                arguments=(function.arguments if function else "") or "",
                            )
                        if delta is not None and delta.refusal:
                            refused = True
                        if choice.finish_reason is not None:
                            finish = _finish(choice.finish_reason, refused=refused)
        if finish is None:
            raise ProviderConnectionError(
                "the stream ended before the model finished its answer", model=self.name
            )
        if rest := pairs.rest():
            yield TextDelta(text=rest)
        yield StreamEnd(finish_reason=finish, usage=usage, model=model, id=response_id)

    def _body(self, request: ProviderRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": request.model or self.name,
            "messages": openai_messages(request.system, request.messages),
        }
        settings = request.settings
        if request.tools:
            body["tools"] = openai_tools(request)
            body["tool_choice"] = _tool_choice(settings.tool_choice)
        if settings.temperature is not None:
            body["temperature"] = settings.temperature
        if settings.max_tokens is not None:
            body[self._max_tokens_field] = settings.max_tokens
        if (output := request.output_format) is not None:
            if self.json_mode == "json_schema":
                schema = {"name": output.name, "schema": dict(output.schema), "strict": True}
                body["response_format"] = {"type": "json_schema", "json_schema": schema}
            else:
                body["response_format"] = {"type": "json_object", "schema": dict(output.schema)}
        if key := sent_cache_key(request, self.prompt_cache_key):
            body["prompt_cache_key"] = key
        if settings.extra:
            body["extra_body"] = dict(settings.extra)
        return encodable(body)


def openai_client(
    *, api_key: str | None, base_url: str | None, timeout: float, trust_env: bool = True
) -> openai.AsyncOpenAI:
    """An ``openai.AsyncOpenAI`` with its own retries off (the agent's strategy retries).

    The API root is ``base_url``, else ``OPENAI_BASE_URL``, else OpenAI's. The key is
    ``api_key``, else the one :func:`~hookloop.models._client.key_for` allows for that host
    (``OPENAI_API_KEY`` for OpenAI's own, ``HOOKLOOP_API_KEY`` for any other); a server
    other than OpenAI with neither gets a placeholder (the client insists on a key, and
    would otherwise read ``OPENAI_API_KEY`` itself). ``trust_env=False`` ignores proxy
    settings in the environment.

    Raises:
        MissingExtraError: The ``openai`` extra is not installed.
        UsageError: No key for OpenAI's own API.
    """
    with extra_needed("openai", by="openai_client"):
        import openai
    url = base_url or os.environ.get("OPENAI_BASE_URL") or OPENAI_URL
    key = key_for(url, given=api_key, own_host="api.openai.com", own_variable="OPENAI_API_KEY")
    own = is_host(url, "api.openai.com")
    if key is None:
        if own:
            raise UsageError("OpenAI needs an API key: set OPENAI_API_KEY or pass api_key=")
        key = "not-needed"
    # The client sends OPENAI_ORG_ID and OPENAI_PROJECT_ID from the environment as headers:
    # OpenAI's account ids, for OpenAI only.
    headers = {} if own else {name: openai.Omit() for name in _OPENAI_ACCOUNT_HEADERS}
    http_client = None if trust_env else openai.DefaultAsyncHttpx2Client(trust_env=False)
    return openai.AsyncOpenAI(
        api_key=key,
        base_url=url,
        timeout=timeout,
        max_retries=0,
        http_client=http_client,
        default_headers=cast(Mapping[str, str], headers),  # Omit() drops a header; typed str
    )


_OPENAI_ACCOUNT_HEADERS = ("OpenAI-Organization", "OpenAI-Project")


def openai_messages(system: str | None, messages: tuple[Message, ...]) -> list[dict[str, Any]]:
    """The conversation in Chat Completions wire format."""
    out: list[dict[str, Any]] = []
    if system:
        out.append({"role": "system", "content": system})
    for message in messages:
        if isinstance(message, UserMessage):
            out.append({"role": "user", "content": _user_content(message)})
        elif isinstance(message, AssistantMessage):
            # "" rather than null beside tool calls: llama.cpp's server fails on null.
            entry: dict[str, Any] = {"role": "assistant", "content": message.content}
            if message.tool_calls:
                entry["tool_calls"] = [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": call.arguments},
                    }
                    for call in message.tool_calls
                ]
            out.append(entry)
        elif isinstance(message, ToolMessage):
            out.append(
                {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
            )
        elif isinstance(message, SystemMessage):
            out.append({"role": "system", "content": message.content})
    return out


def openai_tools(request: ProviderRequest) -> list[dict[str, Any]]:
    """The request's tools as Chat Completions function tools."""
    return [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description,
                "parameters": dict(tool.parameters),
                **({"strict": True} if tool.strict else {}),
            },
        }
        for tool in request.tools
    ]


def image_url(part: ImagePart) -> str:
    """An image part as a URL: its own, or a ``data:`` URL of its bytes."""
    if part.url is not None:
        return part.url
    return f"data:{part.media_type};base64,{part.data}"


def _user_content(message: UserMessage) -> str | list[dict[str, Any]]:
    if isinstance(message.content, str):
        return message.content
    parts: list[dict[str, Any]] = []
    for part in message.content:
        if isinstance(part, TextPart):
            parts.append({"type": "text", "text": part.text})
        else:
            parts.append({"type": "image_url", "image_url": {"url": image_url(part)}})
    return parts


def _tool_choice(choice: str) -> str | dict[str, Any]:
    if choice in ("auto", "none", "required"):
        return choice
    return {"type": "function", "function": {"name": choice}}


def _usage(usage: Any) -> Usage:
    prompt = getattr(usage, "prompt_tokens_details", None)
    completion = getattr(usage, "completion_tokens_details", None)
    return Usage(
        input_tokens=int(usage.prompt_tokens or 0),
        output_tokens=int(usage.completion_tokens or 0),
        cached_input_tokens=int(getattr(prompt, "cached_tokens", 0) or 0),
        reasoning_tokens=int(getattr(completion, "reasoning_tokens", 0) or 0),
    )


def _parse_completion(completion: Any) -> ProviderResponse:
    error = (completion.model_extra or {}).get("error")
    if error:  # OpenRouter and others: an error in a 200 body
        raise provider_error(status=None, body={"error": error}, model=completion.model)
    if not completion.choices:
        raise InvalidResponseError("the response has no choices", body=_dump(completion))
    choice = completion.choices[0]
    message = choice.message
    if message is None:
        raise InvalidResponseError("the response's choice has no message", body=_dump(completion))
    calls = []
    for call in message.tool_calls or ():
        function = call.function
        if function is None or not function.name:
            raise InvalidResponseError("a tool call has no function name", body=_dump(completion))
        calls.append(_tool_call(call.id, function.name, function.arguments))
    refusal = getattr(message, "refusal", None)
    finish = (
        _finish(choice.finish_reason, refused=bool(refusal))
        if choice.finish_reason
        else ("tool_calls" if calls else "stop")
    )
    return ProviderResponse(
        content=message.content or refusal or "",
        tool_calls=tuple(calls),
        finish_reason=finish,
        usage=_usage(completion.usage) if completion.usage is not None else None,
        model=completion.model,
        id=completion.id or None,
    )


def _finish(reason: str, *, refused: bool) -> FinishReason:
    """Our finish reason for the provider's; a refusal reads as a content filter."""
    if reason == "error":  # OpenRouter: the upstream failed mid-answer
        raise ProviderConnectionError("the provider ended the answer with finish_reason 'error'")
    return "content_filter" if refused else _FINISH.get(reason, "stop")


class _CallSlots:
    """The accumulator index of each streamed tool call.

    Ollama streams parallel calls all with ``index`` 0, each with its own ``id``: a new id
    at an index already taken starts a new call instead of running into the previous one.
    """

    __slots__ = ("_ids", "_latest", "_next")

    def __init__(self) -> None:
        self._ids: dict[int, str] = {}  # slot -> call id
        self._latest: dict[int, int] = {}  # provider index -> slot of its latest call
        self._next = 0

    def slot(self, index: int, call_id: str | None) -> int:
        slot = self._latest.get(index)
        if slot is None or (call_id and self._ids.get(slot, call_id) != call_id):
            slot = self._latest[index] = self._next
            self._next += 1
        if call_id:
            self._ids[slot] = call_id
        return slot


def _tool_call(call_id: str | None, name: str, arguments: str | None) -> ToolCall:
    if call_id:
        return ToolCall(name=name, arguments=arguments or "{}", id=call_id)
    return ToolCall(name=name, arguments=arguments or "{}")


def _dump(value: Any) -> object:
    try:
        return cast(object, value.model_dump(mode="json"))
    except Exception:  # the body is for the error report only
        return repr(value)

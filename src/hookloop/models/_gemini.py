"""Google's Gemini API through the official ``google-genai`` client.

The adapter maps hookloop's conversation onto Gemini's contents: the system prompt is the
``system_instruction``, the assistant's turns are ``model`` turns, a tool call is a
``functionCall`` part and its result a ``functionResponse`` part of a user turn (neighbouring
turns of one role are merged, as Gemini wants them alternating). Tools are sent as function
declarations with their JSON schema as it is (``parameters_json_schema``), a typed answer
as ``response_json_schema``. The client's own retries are off, and it runs on an
``httpx2`` client the adapter owns (never the client's ``aiohttp`` path, which retries a
failed connection by itself after sleeping up to ten seconds). Needs the ``gemini`` extra.

Gemini 3 signs the function calls of a turn (``thoughtSignature``) and refuses a history
whose calls of the current turn come back without it. The adapter keeps the signatures it
received, by call id, and sends each back with its call; a call it holds none for (a
history from another process or another model) goes with the placeholder Google documents
for that case.
"""

from __future__ import annotations

import base64
import binascii
import json
import mimetypes
import os
import re
import uuid
from collections import OrderedDict
from collections.abc import AsyncGenerator, AsyncIterator, Iterator, Mapping
from contextlib import contextmanager
from types import ModuleType
from typing import TYPE_CHECKING, Any, cast

from .._errors import (
    AuthenticationError,
    InvalidResponseError,
    ProviderConnectionError,
    ProviderError,
    UsageError,
)
from .._extras import extra_needed
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
    COMPATIBLE_KEY_VARIABLE,
    DEFAULT_TIMEOUT,
    CallLimits,
    CallTimer,
    LoopClient,
    SplitPairs,
    arguments_object,
    encodable,
    is_host,
    system_text,
    transport_errors,
)
from ._provider_errors import ContentBlockedError, kept_headers, provider_error

if TYPE_CHECKING:
    from google import genai

__all__ = [
    "GEMINI_API_VERSION",
    "GEMINI_URL",
    "KEY_VARIABLES",
    "SKIP_SIGNATURE",
    "GeminiModel",
    "gemini_contents",
]

GEMINI_URL = "https://generativelanguage.googleapis.com"
"""Gemini's own API root: the only place ``GEMINI_API_KEY`` / ``GOOGLE_API_KEY`` is sent."""

GEMINI_API_VERSION = "v1beta"
"""The API version requests go to (function-call signatures and JSON schemas need it)."""

KEY_VARIABLES = ("GOOGLE_API_KEY", "GEMINI_API_KEY")
"""Where the key for Gemini's own API is read, in this order (as the client reads them)."""

SKIP_SIGNATURE = b"skip_thought_signature_validator"
"""The signature Google documents for a function call whose own signature is not known."""

_OWN_HOST = "generativelanguage.googleapis.com"
_MARK = "x-hookloop-stream"  # never sent: see _Hooks
_KEPT_SIGNATURES = 4096  # call ids whose signature is kept, most recent first

_FINISH: Mapping[str, FinishReason] = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
}
# Finish reasons that mean a filter stopped the answer: ContentBlockedError.
_BLOCKED = frozenset(
    {
        "SAFETY",
        "RECITATION",
        "BLOCKLIST",
        "PROHIBITED_CONTENT",
        "SPII",
        "IMAGE_SAFETY",
        "IMAGE_PROHIBITED_CONTENT",
        "IMAGE_RECITATION",
    }
)
# Finish reasons that mean the model's function call could not be used.
_BROKEN_CALL = frozenset({"MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL", "TOO_MANY_TOOL_CALLS"})
_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?)s\s*$")


class _Client:
    """The ``genai.Client`` of one event loop and the ``httpx2`` client it runs on."""

    __slots__ = ("genai", "http")

    def __init__(self, client: genai.Client, http: Any = None) -> None:
        self.genai = client
        self.http = http

    async def close(self) -> None:
        if self.http is not None:
            await self.http.aclose()


class GeminiModel(Model):
    """A Gemini model behind Google's Gemini API (``generateContent``).

    Args:
        name: The model's name, e.g. ``"gemini-2.5-flash"``.
        api_key: The key, sent to ``base_url`` whatever it is. ``None`` reads
            ``GOOGLE_API_KEY``, then ``GEMINI_API_KEY``, for Gemini's own API
            (``https://generativelanguage.googleapis.com``) and ``HOOKLOOP_API_KEY`` for
            any other server; a server with neither gets a placeholder. No other credential
            of the environment is used (Vertex AI's are not: this is the Gemini API).
        base_url: Another API root (a proxy or gateway); ``None`` for Google's (or
            ``GOOGLE_GEMINI_BASE_URL``). Requests go to ``{base_url}/v1beta/models/...``.
        context_window: The model's context window in tokens, when you know it.
        timeout: Seconds one call may wait for the server in all: the whole answer, or the
            whole of a stream.
        stream_idle_timeout: Seconds a stream may go without sending anything; ``None``
            for no bound beyond ``timeout``.
        client: A ready ``google.genai.Client`` to use instead: its key, retries and HTTP
            client are yours then (an ``aiohttp`` one included, whose own errors this
            adapter does not translate); pass ``base_url`` too if it is not Google's, for
            the price lookup and telemetry.

    Raises:
        MissingExtraError: The ``gemini`` extra is not installed.
        UsageError: No key for Gemini's own API (and no ``client``), a timeout that is
            not positive, or a ``name`` that cannot go in the URL (empty, or with ``..``,
            ``?``, ``&`` or ``#``; a request's ``model`` is checked the same way).

    Example:
        >>> model = GeminiModel("gemini-2.5-flash", api_key="...")
        >>> model.base_url
        'https://generativelanguage.googleapis.com'
    """

    native_output = True
    provider_name = "gcp.gemini"

    def __init__(
        self,
        name: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        context_window: int | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        stream_idle_timeout: float | None = None,
        client: genai.Client | None = None,
    ) -> None:
        with extra_needed("gemini", by=type(self).__name__):
            import httpx2
            from google import genai
            from google.genai import errors, types
        self._types: ModuleType = types
        self._errors: ModuleType = errors
        self.name = _model_name(name)
        self.context_window = context_window
        self._limits = CallLimits(timeout, stream_idle_timeout)
        url = (base_url or os.environ.get("GOOGLE_GEMINI_BASE_URL") or GEMINI_URL).rstrip("/")
        self._url = url
        key = _key_for(url, api_key)
        if key is None and client is None and is_host(url, _OWN_HOST):
            raise UsageError(
                "Gemini needs an API key: set GEMINI_API_KEY (or GOOGLE_API_KEY) or pass api_key="
            )
        # The call's signatures, by call id, as the model sent them (see the module's notes).
        self._signatures: OrderedDict[str, bytes] = OrderedDict()
        self._streams: dict[str, Any] = {}  # the HTTP responses of open streams, by mark

        def make() -> _Client:
            hooks = _Hooks(self._streams)
            http = httpx2.AsyncClient(
                timeout=timeout,
                event_hooks={"request": [hooks.on_request], "response": [hooks.on_response]},
            )
            options = types.HttpOptions(
                base_url=url,
                api_version=GEMINI_API_VERSION,
                timeout=int(timeout * 1000),
                retry_options=types.HttpRetryOptions(attempts=1),
                httpx_async_client=http,
            )
            # Always an explicit key and vertexai=False: given none, the client would read
            # the environment (Vertex AI's project and credentials among it).
            made = genai.Client(api_key=key or "not-needed", vertexai=False, http_options=options)
            return _Client(made, http)

        self._clients = LoopClient(make, None if client is None else _Client(client))

    @property
    def base_url(self) -> str:
        """The API root requests go to."""
        return self._url

    def __repr__(self) -> str:
        return f"GeminiModel({self.name!r})"

    async def aclose(self) -> None:
        """Close the HTTP client this model made for this loop (a client you passed stays open)."""
        await self._clients.close()

    async def request(self, request: ProviderRequest) -> ProviderResponse:
        """Send one request and return the whole answer.

        Raises:
            ContentBlockedError: Gemini's safety filter blocked the prompt or the answer.
            ProviderError: The matching class of hookloop's error tree.
        """
        contents, config = self._body(request)
        timer = CallTimer(self._limits, self.name)
        with self._translated(reading=False):
            client = await self._clients.get()
            answer = await timer.wait(
                client.genai.aio.models.generate_content(
                    model=_model_name(request.model or self.name), contents=contents, config=config
                )
            )
        with self._translated():
            return self._parse(answer)

    async def stream(self, request: ProviderRequest) -> AsyncIterator[StreamPart]:
        """Send one request and yield the answer as it arrives.

        Raises:
            ContentBlockedError: Gemini's safety filter blocked the prompt or the answer
                (what streamed before stays streamed).
            ProviderError: The matching class of hookloop's error tree, also for an error
                the server sends inside the stream; a stream that ends before the model
                finished (no ``finishReason``) raises
                :class:`~hookloop.ProviderConnectionError`.
        """
        contents, config = self._body(request)
        timer = CallTimer(self._limits, self.name)
        # The HTTP response is found by this mark (see _Hooks), to be closed below.
        mark = uuid.uuid4().hex
        config.http_options = self._types.HttpOptions(headers={_MARK: mark})
        with self._translated(reading=False):
            client = await self._clients.get()
            stream = await timer.wait(
                client.genai.aio.models.generate_content_stream(
                    model=_model_name(request.model or self.name), contents=contents, config=config
                )
            )
        # An async generator: closed below if the consumer stops early.
        chunks = cast("AsyncGenerator[Any, None]", stream)
        usage: Usage | None = None
        model: str | None = None
        response_id: str | None = None
        finish: str | None = None
        calls = 0
        pairs = SplitPairs()
        with self._translated():
            try:
                async for chunk in timer.parts(aiter(chunks)):
                    model = chunk.model_version or model
                    response_id = chunk.response_id or response_id
                    if chunk.usage_metadata is not None:
                        usage = _usage(chunk.usage_metadata)
                    _check_prompt(chunk, self.name)
                    candidate = _first(chunk)
                    if candidate is None:
                        continue
                    for part in _parts(candidate):
                        if part.function_call is not None:
                            call = self._call(part)
                            yield ToolCallDelta(
                                index=calls, id=call.id, name=call.name, arguments=call.arguments
                            )
                            calls += 1
                        elif part.text and not part.thought and (text := pairs.text(part.text)):
                            yield TextDelta(text=text)
                    if candidate.finish_reason is not None:
                        finish = _reason(candidate.finish_reason)
                        self._check_finish(finish, candidate, chunk)
            finally:
                # Leaving the client's generators early does not close their response (only
                # the garbage collector would, some time later): close it here.
                await chunks.aclose()
                if (response := self._streams.pop(mark, None)) is not None:
                    await response.aclose()
        if finish is None:
            raise ProviderConnectionError(
                "the stream ended before the model finished its answer", model=self.name
            )
        if rest := pairs.rest():
            yield TextDelta(text=rest)
        yield StreamEnd(
            finish_reason=_finish(finish, calls > 0), usage=usage, model=model, id=response_id
        )

    # --- the request ----------------------------------------------------------------------

    def _body(self, request: ProviderRequest) -> tuple[list[Any], Any]:
        """The request's contents and config, as the client's types.

        Checked here, not in the call, so a ValidationError in the call is always about
        the response.
        """
        types = self._types
        settings = request.settings
        config: dict[str, Any] = {}
        system = system_text(request)
        if system:
            config["system_instruction"] = system
        if request.tools:
            config["tools"] = [
                {
                    "function_declarations": [
                        {
                            "name": tool.name,
                            "description": tool.description,
                            "parameters_json_schema": dict(tool.parameters),
                        }
                        for tool in request.tools
                    ]
                }
            ]
            config["tool_config"] = {"function_calling_config": _tool_choice(settings.tool_choice)}
        if settings.temperature is not None:
            config["temperature"] = settings.temperature
        if settings.max_tokens is not None:
            config["max_output_tokens"] = settings.max_tokens
        if request.output_format is not None:
            config["response_mime_type"] = "application/json"
            config["response_json_schema"] = dict(request.output_format.schema)
        config.update(settings.extra)
        contents = gemini_contents(request.messages, self._signatures)
        try:
            checked = (
                [types.Content.model_validate(encodable(turn)) for turn in contents],
                types.GenerateContentConfig.model_validate(encodable(config)),
            )
        except ValueError as exc:  # settings.extra the client does not know
            raise UsageError(f"GeminiModel cannot send this request: {exc}") from exc
        return checked

    # --- the answer -----------------------------------------------------------------------

    def _parse(self, answer: Any) -> ProviderResponse:
        _check_prompt(answer, self.name)
        candidate = _first(answer)
        if candidate is None:
            raise InvalidResponseError(
                "the response has no candidate", body=_dump(answer), model=self.name
            )
        texts: list[str] = []
        calls: list[ToolCall] = []
        for part in _parts(candidate):
            if part.function_call is not None:
                calls.append(self._call(part))
            elif part.text and not part.thought:
                texts.append(part.text)
        finish = _reason(candidate.finish_reason) if candidate.finish_reason else "STOP"
        self._check_finish(finish, candidate, answer)
        return ProviderResponse(
            content="".join(texts),
            tool_calls=tuple(calls),
            finish_reason=_finish(finish, bool(calls)),
            usage=_usage(answer.usage_metadata) if answer.usage_metadata is not None else None,
            model=answer.model_version or None,
            id=answer.response_id or None,
        )

    def _call(self, part: Any) -> ToolCall:
        function = part.function_call
        if not function.name:
            raise InvalidResponseError("a functionCall part has no name", model=self.name)
        arguments = json.dumps(function.args or {}, ensure_ascii=False)
        call = (
            ToolCall(name=function.name, arguments=arguments, id=function.id)
            if function.id
            else ToolCall(name=function.name, arguments=arguments)
        )
        if part.thought_signature:
            self._signatures[call.id] = part.thought_signature
            while len(self._signatures) > _KEPT_SIGNATURES:
                self._signatures.popitem(last=False)
        return call

    def _check_finish(self, finish: str, candidate: Any, answer: Any) -> None:
        if finish in _BLOCKED:
            categories = tuple(
                _reason(rating.category)
                for rating in candidate.safety_ratings or ()
                if rating.blocked and rating.category is not None
            )
            raise ContentBlockedError(
                f"Gemini blocked the answer ({finish}"
                + (f": {', '.join(categories)}" if categories else "")
                + ")",
                reason=finish,
                blocked="answer",
                categories=categories,
                body=_dump(answer),
                model=self.name,
            )
        if finish in _BROKEN_CALL:
            note = f": {candidate.finish_message}" if candidate.finish_message else ""
            raise InvalidResponseError(
                f"the model's function call could not be used ({finish}){note}",
                body=_dump(answer),
                model=self.name,
            )

    @contextmanager
    def _translated(self, *, reading: bool = True) -> Iterator[None]:
        errors = self._errors
        with transport_errors(self.name, reading=reading):
            try:
                yield
            except errors.APIError as exc:
                raise _api_error(exc, self.name) from exc
            except errors.UnknownApiResponseError as exc:  # a stream line that is not JSON
                raise InvalidResponseError(f"malformed response: {exc}", model=self.name) from exc
            except ValueError as exc:  # pydantic's ValidationError: the body's fields
                if type(exc).__name__ != "ValidationError":
                    raise
                raise InvalidResponseError(f"malformed response: {exc}", model=self.name) from exc


def gemini_contents(
    messages: tuple[Message, ...], signatures: Mapping[str, bytes] | None = None
) -> list[dict[str, Any]]:
    """The conversation as Gemini's alternating ``user`` and ``model`` contents.

    A tool result becomes a ``functionResponse`` part of a user turn (``{"output": ...}``,
    or ``{"error": ...}`` for a failed call); neighbouring messages of one role are merged
    into one turn; empty assistant messages are left out. System messages inside the
    conversation are sent as the system instruction instead. The first function call of
    each model turn carries its signature from ``signatures`` (by call id), or
    :data:`SKIP_SIGNATURE`.
    """
    turns: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, SystemMessage):
            continue
        role, parts = _parts_of(message, signatures or {})
        if not parts:
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1]["parts"].extend(parts)
        else:
            turns.append({"role": role, "parts": parts})
    return turns


def _parts_of(
    message: Message, signatures: Mapping[str, bytes]
) -> tuple[str, list[dict[str, Any]]]:
    if isinstance(message, UserMessage):
        if isinstance(message.content, str):
            return "user", [{"text": message.content}] if message.content else []
        parts: list[dict[str, Any]] = []
        for part in message.content:
            if isinstance(part, TextPart):
                if part.text:
                    parts.append({"text": part.text})
            else:
                parts.append(_image(part))
        return "user", parts
    if isinstance(message, AssistantMessage):
        parts = [{"text": message.content}] if message.content else []
        for index, call in enumerate(message.tool_calls):
            function = {"id": call.id, "name": call.name, "args": arguments_object(call)}
            signed: dict[str, Any] = {"function_call": function}
            signature = signatures.get(call.id)
            if signature is not None or index == 0:
                signed["thought_signature"] = signature or SKIP_SIGNATURE
            parts.append(signed)
        return "model", parts
    if isinstance(message, ToolMessage):
        key = "error" if message.is_error else "output"
        response = {
            "id": message.tool_call_id,
            "name": message.tool_name,
            "response": {key: message.content},
        }
        return "user", [{"function_response": response}]
    return "user", []


def _image(part: ImagePart) -> dict[str, Any]:
    if part.data is not None:
        return {"inline_data": {"mime_type": part.media_type, "data": _decoded(part.data)}}
    url = part.url or ""
    if url.startswith("data:"):
        header, _, data = url.partition(",")
        media_type = header[5:].partition(";")[0] or "application/octet-stream"
        return {"inline_data": {"mime_type": media_type, "data": _decoded(data)}}
    media_type = part.media_type or mimetypes.guess_type(url)[0] or "image/jpeg"
    return {"file_data": {"file_uri": url, "mime_type": media_type}}


def _decoded(data: str) -> bytes:
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise UsageError(f"an image's data is not base64: {exc}") from exc


def _model_name(name: str) -> str:
    """``name``, if it can be the model's part of the URL (the client refuses some)."""
    if not name or any(mark in name for mark in ("..", "?", "&", "#")):
        raise UsageError(
            f"{name!r} is not a Gemini model name: it must be non-empty, without '..', "
            "'?', '&' or '#' (it goes in the request's URL)"
        )
    return name


def _tool_choice(choice: str) -> dict[str, Any]:
    if choice == "auto":
        return {"mode": "AUTO"}
    if choice == "required":
        return {"mode": "ANY"}
    if choice == "none":
        return {"mode": "NONE"}
    return {"mode": "ANY", "allowed_function_names": [choice]}


def _key_for(url: str, given: str | None) -> str | None:
    if given:
        return given
    variables = KEY_VARIABLES if is_host(url, _OWN_HOST) else (COMPATIBLE_KEY_VARIABLE,)
    for variable in variables:
        if value := os.environ.get(variable):
            return value
    return None


class _Hooks:
    """The hooks of the HTTP client the adapter makes.

    A stream's request carries a mark in a header; it is taken off before the request is
    sent, and the response is kept under it, for :meth:`GeminiModel.stream` to close when
    its consumer leaves early (the client's generators would leave it to the garbage
    collector). A whole answer whose body is not UTF-8 is refused (the client would decode
    it lossily).
    """

    __slots__ = ("_streams",)

    def __init__(self, streams: dict[str, Any]) -> None:
        self._streams = streams

    async def on_request(self, request: Any) -> None:
        mark = request.headers.get(_MARK)
        if mark is not None:
            del request.headers[_MARK]
            request.extensions = {**request.extensions, _MARK: mark}

    async def on_response(self, response: Any) -> None:
        mark = response.request.extensions.get(_MARK)
        if mark is not None:
            self._streams[mark] = response
            return  # a stream: its lines are decoded as they come
        await response.aread()
        response.content.decode("utf-8")


def _first(answer: Any) -> Any:
    candidates = answer.candidates
    return candidates[0] if candidates else None


def _parts(candidate: Any) -> list[Any]:
    content = candidate.content
    return list(content.parts or ()) if content is not None else []


def _reason(value: Any) -> str:
    # The client's enums are str enums; a value it does not know stays a plain string.
    return str(getattr(value, "value", value))


def _finish(finish: str, called: bool) -> FinishReason:
    if finish == "STOP" and called:
        return "tool_calls"
    return _FINISH.get(finish, "tool_calls" if called else "stop")


def _check_prompt(answer: Any, model: str) -> None:
    feedback = answer.prompt_feedback
    if feedback is None or feedback.block_reason is None:
        return
    reason = _reason(feedback.block_reason)
    categories = tuple(
        _reason(rating.category)
        for rating in feedback.safety_ratings or ()
        if rating.blocked and rating.category is not None
    )
    message = feedback.block_reason_message or f"Gemini blocked the prompt ({reason})"
    raise ContentBlockedError(
        message,
        reason=reason,
        blocked="prompt",
        categories=categories,
        body=_dump(answer),
        model=model,
    )


def _usage(usage: Any) -> Usage:
    thoughts = usage.thoughts_token_count or 0
    return Usage(
        # The prompt's count holds the cached tokens; tool-use prompts are input as well.
        input_tokens=(usage.prompt_token_count or 0) + (usage.tool_use_prompt_token_count or 0),
        # The candidates' count leaves the thinking out; hookloop's output holds it.
        output_tokens=(usage.candidates_token_count or 0) + thoughts,
        cached_input_tokens=usage.cached_content_token_count or 0,
        reasoning_tokens=thoughts,
    )


def _dump(answer: Any) -> object:
    try:
        return answer.model_dump(mode="json", exclude_none=True, exclude={"sdk_http_response"})
    except Exception:  # only for the error's body: never hide the error itself
        return repr(answer)


def _api_error(exc: Any, model: str) -> ProviderError:
    """The hookloop error for the client's ``APIError`` (an HTTP error, or one in a stream)."""
    body = exc.details
    response = exc.response
    headers = getattr(response, "headers", None) or {}
    status = exc.code if isinstance(exc.code, int) else None
    message = exc.message or str(exc)
    inner = body.get("error", body) if isinstance(body, Mapping) else {}
    details = inner.get("details") if isinstance(inner, Mapping) else None
    details = details if isinstance(details, list) else []
    if any(
        isinstance(d, Mapping) and str(d.get("reason", "")).startswith("API_KEY_") for d in details
    ):
        # Gemini says 400 INVALID_ARGUMENT for a key it does not know.
        return AuthenticationError(
            message, status=status, body=body, model=model, headers=kept_headers(headers)
        )
    error = provider_error(
        status=status, body=body, headers=headers, model=model, fallback_message=message
    )
    delay = _retry_delay(details)
    if delay is not None:
        error.retry_after = delay
    return error


def _retry_delay(details: list[Any]) -> float | None:
    """Seconds from a ``google.rpc.RetryInfo`` detail (``"retryDelay": "38s"``)."""
    for detail in details:
        if isinstance(detail, Mapping) and str(detail.get("@type", "")).endswith("RetryInfo"):
            found = _DURATION.match(str(detail.get("retryDelay", "")))
            if found:
                return float(found.group(1))
    return None

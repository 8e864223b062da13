"""AWS Bedrock's Converse and ConverseStream APIs through ``aiobotocore``.

``aiobotocore`` is botocore (the AWS SDK's core: credentials, signing, the service model,
the event-stream parser) on an asyncio HTTP client, so a call is a coroutine of the loop like
every other adapter's: :class:`~hookloop.models._client.CallTimer` and a cancelled chat stop
it mid-read, and no thread is left blocked on a socket. ``boto3`` would need a thread per
call, which a cancellation cannot interrupt. botocore's own retries are off (one attempt):
hookloop's retry strategy decides. Needs the ``bedrock`` extra.

The conversation is mapped as for Anthropic: the system prompt is a parameter, tool results
travel as ``toolResult`` blocks of a user turn, turns alternate (neighbouring messages of one
role are merged), and an assistant message with nothing in it is left out.

Prompt caching: for the models that support it (Claude and Nova ids), each request carries
``cachePoint`` blocks on its stable prefix (:func:`cache_points`).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import os
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from .._errors import (
    AuthenticationError,
    BadRequestError,
    InvalidResponseError,
    ProviderConnectionError,
    ProviderError,
    ProviderTimeoutError,
    UsageError,
)
from .._extras import extra_needed
from .._messages import (
    AssistantMessage,
    Message,
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
    alternating_turns,
    arguments_object,
    encodable,
    nested_too_deep,
    system_text,
)
from ._provider_errors import provider_error

if TYPE_CHECKING:
    from types import ModuleType

__all__ = [
    "MAX_CACHE_POINTS",
    "BedrockCache",
    "BedrockModel",
    "bedrock_messages",
    "cache_points",
]

MAX_CACHE_POINTS = 4
"""The most ``cachePoint`` blocks Bedrock accepts in one request."""

BedrockCache: TypeAlias = Literal["auto", "5m", "1h"]
"""Prompt caching for :class:`BedrockModel`: ``"auto"``, or a cache entry's lifetime."""

_STOP: Mapping[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "guardrail_intervened": "content_filter",
    "content_filtered": "content_filter",
    "malformed_model_output": "error",
    "malformed_tool_use": "error",
}

# Members of the Converse request that ModelSettings.extra may set as they are; any other
# key of extra is a model's own parameter (top_k, ...) and goes in
# additionalModelRequestFields.
_REQUEST_MEMBERS = frozenset(
    {
        "additionalModelRequestFields",
        "additionalModelResponseFieldPaths",
        "guardrailConfig",
        "inferenceConfig",
        "outputConfig",
        "performanceConfig",
        "promptVariables",
        "requestMetadata",
        "serviceTier",
    }
)
# Image formats Converse takes, by media type.
_IMAGE_FORMATS: Mapping[str, str] = {
    "image/png": "png",
    "image/jpeg": "jpeg",
    "image/jpg": "jpeg",
    "image/gif": "gif",
    "image/webp": "webp",
}


class BedrockModel(Model):
    """A model on AWS Bedrock, through the Converse API.

    Args:
        model_id: The model or inference profile id (or ARN), e.g.
            ``"us.anthropic.claude-sonnet-4-5-20250929-v1:0"`` or ``"amazon.nova-micro-v1:0"``.
        region: The AWS region; ``None`` reads ``AWS_REGION``, then ``AWS_DEFAULT_REGION``,
            then the profile's region.
        endpoint_url: Another endpoint (a VPC endpoint, a test server); ``None`` reads
            ``AWS_ENDPOINT_URL_BEDROCK_RUNTIME``, then ``AWS_ENDPOINT_URL``, else the
            region's ``https://bedrock-runtime.REGION.amazonaws.com``.
        profile: The AWS profile whose credentials and region to use; ``None`` for the
            usual chain (environment, shared files, SSO, container and instance roles).
        context_window: The model's context window in tokens, when you know it.
        timeout: Seconds one call may wait for the service in all: the whole answer, or the
            whole of a stream.
        stream_idle_timeout: Seconds a stream may go without sending anything; ``None``
            for no bound beyond ``timeout``.
        cache: Prompt caching: ``"auto"`` (the default) marks the stable prefix with
            ``cachePoint`` blocks for the models that cache (ids of Anthropic's Claude and
            Amazon's Nova), at Bedrock's default lifetime of 5 minutes; ``"5m"`` or ``"1h"``
            marks it for any model (``"1h"`` where the model offers it); ``None`` sends no
            cache points. See ``docs/providers.md``, "Prompt caching".

    Raises:
        MissingExtraError: The ``bedrock`` extra is not installed.
        UsageError: No region could be found, a region or ``endpoint_url`` botocore
            refuses, an unknown ``profile`` (or AWS config file that does not parse), a
            timeout that is not positive, or a ``cache`` that is not ``"auto"``, ``"5m"``,
            ``"1h"`` or ``None``.
    """

    provider_name = "aws.bedrock"
    native_output = True  # outputConfig.textFormat: a JSON schema (models that offer it)

    def __init__(
        self,
        model_id: str,
        *,
        region: str | None = None,
        endpoint_url: str | None = None,
        profile: str | None = None,
        context_window: int | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        stream_idle_timeout: float | None = None,
        cache: BedrockCache | None = "auto",
    ) -> None:
        if cache not in ("auto", "5m", "1h", None):
            raise UsageError(f"cache must be 'auto', '5m', '1h' or None, got {cache!r}")
        with extra_needed("bedrock", by=type(self).__name__):
            import aiobotocore.session  # type: ignore[import-untyped]
            import botocore.config  # type: ignore[import-untyped]
            import botocore.eventstream  # type: ignore[import-untyped]
            import botocore.exceptions  # type: ignore[import-untyped]
            import botocore.parsers  # type: ignore[import-untyped]
            import botocore.utils  # type: ignore[import-untyped]
        self._exceptions: ModuleType = botocore.exceptions
        # The event-stream framing (a bad CRC or length) and a body botocore cannot parse.
        self._malformed: tuple[type[Exception], ...] = (
            botocore.eventstream.ParserError,
            botocore.parsers.ResponseParserError,
        )
        self.name = model_id
        self.context_window = context_window
        self._limits = CallLimits(timeout, stream_idle_timeout)
        self.cache: BedrockCache | None = cache
        try:
            # Read even when the region is given: an unknown profile is refused here, not
            # at the first call (where botocore's ProfileNotFound would escape untyped).
            configured = aiobotocore.session.AioSession(profile=profile).get_config_variable(
                "region"
            )
            region = (
                region
                or os.environ.get("AWS_REGION")
                or os.environ.get("AWS_DEFAULT_REGION")
                or configured
            )
        except (botocore.exceptions.ProfileNotFound, botocore.exceptions.ConfigParseError) as exc:
            raise UsageError(f"Bedrock's AWS configuration: {exc}") from exc
        if not region:
            raise UsageError(
                "Bedrock needs an AWS region: set AWS_REGION (or AWS_DEFAULT_REGION), "
                "or pass region="
            )
        try:  # botocore checks it only when the first call makes the client
            botocore.utils.validate_region_name(region)
        except botocore.exceptions.InvalidRegionError as exc:
            raise UsageError(f"Bedrock's AWS region: {exc}") from exc
        self.region: str = region
        # botocore reads these too; read here so base_url says where requests go.
        endpoint_url = (
            endpoint_url
            or os.environ.get("AWS_ENDPOINT_URL_BEDROCK_RUNTIME")
            or os.environ.get("AWS_ENDPOINT_URL")
        )
        if endpoint_url and not (
            botocore.utils.is_valid_endpoint_url(endpoint_url)
            or botocore.utils.is_valid_ipv6_endpoint_url(endpoint_url)
        ):
            raise UsageError(f"Bedrock's endpoint_url is not a URL: {endpoint_url!r}")
        self._endpoint_url = endpoint_url
        config = botocore.config.Config(
            # One attempt: hookloop's retry strategy is the one that retries.
            retries={"total_max_attempts": 1, "mode": "standard"},
            connect_timeout=min(timeout, 60.0),
            read_timeout=timeout,
        )
        options = {"region_name": region, "endpoint_url": endpoint_url, "config": config}
        # A session per loop as well: its credential cache's locks belong to one loop.
        self._clients = LoopClient(
            lambda: _Client(aiobotocore.session.AioSession(profile=profile), options)
        )

    def __repr__(self) -> str:
        return f"BedrockModel({self.name!r}, region={self.region!r})"

    @property
    def base_url(self) -> str:
        """The endpoint requests go to."""
        return self._endpoint_url or f"https://bedrock-runtime.{self.region}.amazonaws.com"

    async def aclose(self) -> None:
        """Close the HTTP client this model made for this loop."""
        await self._clients.close()

    async def request(self, request: ProviderRequest) -> ProviderResponse:
        """Send one Converse request and return the whole answer.

        Raises:
            ProviderError: The matching class of hookloop's error tree.
        """
        timer = CallTimer(self._limits, self.name)
        body = self._body(request)
        with self._translated(reading=False):
            client = await (await self._clients.get()).get()
        # botocore parses the body inside the call: its Python errors there are the body's.
        with self._translated():
            answer = await timer.wait(client.converse(**body))
            return _parse_answer(answer)

    async def stream(self, request: ProviderRequest) -> AsyncIterator[StreamPart]:
        """Send one ConverseStream request and yield the answer as it arrives.

        Raises:
            ProviderError: The matching class of hookloop's error tree, also for an
                exception event inside the stream (``throttlingException``,
                ``modelStreamErrorException``, ...); a stream that ends before
                ``messageStop`` raises :class:`~hookloop.ProviderConnectionError`.
        """
        usage: Usage | None = None
        stop: FinishReason | None = None
        finished = False
        unargued: set[int] = set()  # toolUse blocks that have not streamed any input yet
        pairs = SplitPairs()
        timer = CallTimer(self._limits, self.name)
        body = self._body(request)
        with self._translated(reading=False):
            client = await (await self._clients.get()).get()
        with self._translated():  # botocore parses the answer's start inside the call
            answer = await timer.wait(client.converse_stream(**body))
        response_id = _request_id(answer)
        events = answer["stream"]
        try:
            with self._translated():
                async for event in timer.parts(aiter(events)):
                    if "contentBlockDelta" in event:
                        delta_event = event["contentBlockDelta"]
                        index = int(delta_event["contentBlockIndex"])
                        delta = delta_event["delta"]
                        if "text" in delta and (text := pairs.text(delta["text"])):
                            yield TextDelta(text=text)
                        elif "toolUse" in delta and delta["toolUse"].get("input"):
                            unargued.discard(index)
                            yield ToolCallDelta(index=index, arguments=delta["toolUse"]["input"])
                    elif "contentBlockStart" in event:
                        start_event = event["contentBlockStart"]
                        tool = start_event["start"].get("toolUse")
                        if tool is not None:
                            index = int(start_event["contentBlockIndex"])
                            unargued.add(index)
                            yield ToolCallDelta(
                                index=index, id=tool["toolUseId"], name=tool["name"]
                            )
                    elif "contentBlockStop" in event:
                        index = int(event["contentBlockStop"]["contentBlockIndex"])
                        if index in unargued:  # a toolUse block without input: an empty object
                            unargued.discard(index)
                            yield ToolCallDelta(index=index, arguments="{}")
                    elif "messageStop" in event:
                        finished = True
                        stop = _STOP.get(event["messageStop"].get("stopReason", ""), "stop")
                    elif "metadata" in event and "usage" in event["metadata"]:
                        usage = _usage(event["metadata"]["usage"])
        finally:
            events.close()  # the connection, also when the consumer stops early
        if not finished:
            raise ProviderConnectionError(
                "the stream ended before the model finished its answer", model=self.name
            )
        if rest := pairs.rest():
            yield TextDelta(text=rest)
        yield StreamEnd(finish_reason=stop, usage=usage, model=None, id=response_id)

    def _body(self, request: ProviderRequest) -> dict[str, Any]:
        settings = request.settings
        messages = bedrock_messages(request.messages)
        body: dict[str, Any] = {"modelId": request.model or self.name, "messages": messages}
        system = system_text(request)
        if system:
            body["system"] = [{"text": system}]
        inference: dict[str, Any] = {}
        if settings.max_tokens is not None:
            inference["maxTokens"] = settings.max_tokens
        if settings.temperature is not None:
            inference["temperature"] = settings.temperature
        if inference:
            body["inferenceConfig"] = inference
        tools = _tool_config(request, messages)
        if tools is not None:
            body["toolConfig"] = tools
        if request.output_format is not None:
            schema = {
                "schema": json.dumps(dict(request.output_format.schema)),
                "name": request.output_format.name,
            }
            body["outputConfig"] = {
                "textFormat": {"type": "json_schema", "structure": {"jsonSchema": schema}}
            }
        extra_fields: dict[str, Any] = {}
        for key, value in settings.extra.items():
            if key in _REQUEST_MEMBERS:
                body[key] = value
            else:
                extra_fields[key] = value
        if extra_fields:
            body["additionalModelRequestFields"] = {
                **body.get("additionalModelRequestFields", {}),
                **extra_fields,
            }
        ttl = self._cache_ttl(body["modelId"])
        if ttl is not None:
            cache_points(body, ttl, tools=_caches_tools(body["modelId"]))
        return encodable(body)

    def _cache_ttl(self, model_id: str) -> str | None:
        if self.cache == "auto":
            return "5m" if _caches(model_id) else None
        return self.cache

    @contextmanager
    def _translated(self, *, reading: bool = True) -> Iterator[None]:
        """Botocore's and aiohttp's exceptions as hookloop's errors (see ``docs/providers.md``)."""
        import aiohttp

        errors = self._exceptions
        try:
            yield
        except ProviderError:
            raise
        except errors.ClientError as exc:  # an error answer, or an exception event of a stream
            raise _client_error(exc, self.name) from exc
        except (errors.ReadTimeoutError, errors.ConnectTimeoutError, TimeoutError) as exc:
            # TimeoutError: aiohttp's socket read timeout inside a stream (ServerTimeoutError)
            raise ProviderTimeoutError(f"the request timed out: {exc}", model=self.name) from exc
        except (
            errors.HTTPClientError,
            errors.ConnectionError,
            aiohttp.ClientError,
        ) as exc:
            raise ProviderConnectionError(
                f"the connection failed: {type(exc).__name__}: {exc}", model=self.name
            ) from exc
        except (
            errors.NoCredentialsError,
            errors.PartialCredentialsError,
            errors.CredentialRetrievalError,
            errors.NoAuthTokenError,
            errors.TokenRetrievalError,
        ) as exc:
            raise AuthenticationError(f"no usable AWS credentials: {exc}", model=self.name) from exc
        except errors.ParamValidationError as exc:  # refused by botocore before it was sent
            raise BadRequestError(str(exc), model=self.name) from exc
        except UnicodeDecodeError as exc:
            raise InvalidResponseError(
                f"the response is not valid UTF-8: {exc}", model=self.name
            ) from exc
        except RecursionError as exc:
            raise nested_too_deep(exc, self.name, reading=reading) from exc
        except self._malformed as exc:
            raise InvalidResponseError(f"malformed response: {exc}", model=self.name) from exc
        except (ValueError, TypeError, KeyError, IndexError, AttributeError) as exc:
            if not reading:
                raise
            raise InvalidResponseError(
                f"malformed response: {type(exc).__name__}: {exc}", model=self.name
            ) from exc


class _Client:
    """The aiobotocore client of one event loop, made on first use (making it is async)."""

    def __init__(self, session: Any, options: Mapping[str, Any]) -> None:
        self._session = session
        self._options = options
        self._context: Any = None
        self._client: Any = None
        # Calls that start together make one client (creating one may wait on I/O).
        self._making = asyncio.Lock()

    async def get(self) -> Any:
        if self._client is not None:
            return self._client
        async with self._making:
            if self._client is None:
                context = self._session.create_client("bedrock-runtime", **self._options)
                self._client = await context.__aenter__()
                self._context = context
        return self._client

    async def close(self) -> None:
        context, self._context, self._client = self._context, None, None
        if context is not None:
            await context.__aexit__(None, None, None)


def bedrock_messages(messages: tuple[Message, ...]) -> list[dict[str, Any]]:
    """The conversation as alternating Converse turns of content blocks.

    Tool results become ``toolResult`` blocks of a user turn; neighbouring messages of the
    same role are merged into one turn, tool results first; empty assistant messages are
    left out (Converse rejects blank text blocks). System messages inside the conversation
    are sent as the system prompt instead.
    """
    return alternating_turns(messages, _blocks, _is_result)


def _is_result(block: dict[str, Any]) -> bool:
    return "toolResult" in block


def cache_points(body: dict[str, Any], ttl: str, *, tools: bool = True) -> int:
    """Mark the stable prefix of a Converse ``body`` with ``cachePoint`` blocks, in place.

    The places are those of Anthropic's breakpoints
    (:func:`~hookloop.models._anthropic.cache_breakpoints`), at most
    :data:`MAX_CACHE_POINTS`: after the tool definitions (when ``tools``: Nova caches no
    tools), after the system prompt, after the turn before the newest answer, and after the
    newest turn. ``ttl`` ``"5m"`` is Bedrock's default lifetime; ``"1h"`` is sent as the
    block's ``ttl``. Returns how many cache points were placed.
    """
    point: dict[str, Any] = {"type": "default"}
    if ttl != "5m":
        point["ttl"] = ttl
    block = {"cachePoint": point}
    marks = 0
    tool_config = body.get("toolConfig")
    if tools and tool_config and tool_config.get("tools"):
        tool_config["tools"] = [*tool_config["tools"], block]
        marks += 1
    if body.get("system"):
        body["system"] = [*body["system"], block]
        marks += 1
    turns = body["messages"]
    for index in (len(turns) - 3, len(turns) - 1):
        if index >= 0 and turns[index]["content"] and marks < MAX_CACHE_POINTS:
            turns[index]["content"].append(block)
            marks += 1
    return marks


def _caches(model_id: str) -> bool:
    return "anthropic.claude" in model_id or "amazon.nova" in model_id


def _caches_tools(model_id: str) -> bool:
    return "amazon.nova" not in model_id  # Nova caches the system prompt and messages only


def _blocks(message: Message) -> tuple[str, list[dict[str, Any]]]:
    if isinstance(message, UserMessage):
        if isinstance(message.content, str):
            return "user", [{"text": message.content}] if message.content else []
        blocks: list[dict[str, Any]] = []
        for part in message.content:
            if isinstance(part, TextPart):
                if part.text:
                    blocks.append({"text": part.text})
            else:
                blocks.append({"image": _image(part.url, part.data, part.media_type)})
        return "user", blocks
    if isinstance(message, AssistantMessage):
        text = message.content
        blocks = [{"text": text}] if text.strip() else []
        blocks.extend(
            {"toolUse": {"toolUseId": call.id, "name": call.name, "input": arguments_object(call)}}
            for call in message.tool_calls
        )
        return "assistant", blocks
    if isinstance(message, ToolMessage):
        result: dict[str, Any] = {
            "toolUseId": message.tool_call_id,
            "content": [{"text": message.content}],
        }
        if message.is_error:
            result["status"] = "error"
        return "user", [{"toolResult": result}]
    return "user", []


def _image(url: str | None, data: str | None, media_type: str | None) -> dict[str, Any]:
    # Converse takes an image's bytes (botocore base64-encodes them) or an S3 location.
    if url is not None and url.startswith("s3://"):
        kind = _IMAGE_FORMATS.get(media_type or "", url.rpartition(".")[2].lower())
        return {"format": "jpeg" if kind == "jpg" else kind, "source": {"s3Location": {"uri": url}}}
    if url is not None:
        if not url.startswith("data:") or ";base64," not in url:
            raise UsageError(
                "Bedrock takes images as data (ImagePart(data=..., media_type=...)), a "
                f"base64 data: URL or an s3:// location, not {url[:40]!r}"
            )
        header, _, data = url.partition(";base64,")
        media_type = header.removeprefix("data:")
    image_format = _IMAGE_FORMATS.get(media_type or "")
    if image_format is None:
        raise UsageError(f"Bedrock takes PNG, JPEG, GIF or WebP images, not {media_type!r}")
    try:
        raw = base64.b64decode(data or "", validate=True)
    except binascii.Error as exc:
        raise UsageError(f"an image's data is not base64: {exc}") from exc
    return {"format": image_format, "source": {"bytes": raw}}


def _tool_config(request: ProviderRequest, messages: list[dict[str, Any]]) -> dict[str, Any] | None:
    if not request.tools:
        return None
    choice = request.settings.tool_choice
    if choice == "none" and not any(
        "toolUse" in block or "toolResult" in block
        for turn in messages
        for block in turn["content"]
    ):
        # Converse has no "none": the tools are left out. (With tool blocks in the
        # conversation they must be sent, and the model may still call one.)
        return None
    config: dict[str, Any] = {
        "tools": [
            {
                "toolSpec": {
                    "name": tool.name,
                    "description": tool.description,
                    "inputSchema": {"json": dict(tool.parameters)},
                }
            }
            for tool in request.tools
        ]
    }
    if choice == "required":
        config["toolChoice"] = {"any": {}}
    elif choice not in ("auto", "none"):
        config["toolChoice"] = {"tool": {"name": choice}}
    return config


def _usage(usage: Mapping[str, Any]) -> Usage:
    # Tokens read from or written to the cache are reported apart from inputTokens.
    read = int(usage.get("cacheReadInputTokens") or 0)
    written = int(usage.get("cacheWriteInputTokens") or 0)
    return Usage(
        input_tokens=int(usage.get("inputTokens") or 0) + read + written,
        output_tokens=int(usage.get("outputTokens") or 0),
        cached_input_tokens=read,
        cache_write_tokens=written,
    )


def _request_id(answer: Mapping[str, Any]) -> str | None:
    request_id = answer.get("ResponseMetadata", {}).get("RequestId")
    return str(request_id) if request_id else None


def _parse_answer(answer: Mapping[str, Any]) -> ProviderResponse:
    message = answer["output"]["message"]
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in message["content"]:
        if "text" in block:
            texts.append(block["text"])
        elif "toolUse" in block:
            use = block["toolUse"]
            if not use.get("name"):
                raise InvalidResponseError("a toolUse block has no name", body=repr(answer))
            arguments = json.dumps(use.get("input") or {}, ensure_ascii=False)
            calls.append(ToolCall(name=use["name"], arguments=arguments, id=use["toolUseId"]))
    stop = _STOP.get(answer.get("stopReason") or "", "tool_calls" if calls else "stop")
    usage = answer.get("usage")
    return ProviderResponse(
        content="".join(texts),
        tool_calls=tuple(calls),
        finish_reason=stop,
        usage=_usage(usage) if usage is not None else None,
        model=None,
        id=_request_id(answer),
    )


def _client_error(exc: Any, model: str) -> ProviderError:
    """The hookloop error for botocore's ``ClientError`` (or ``EventStreamError``)."""
    response = exc.response
    error = response.get("Error", {})
    code = str(error.get("Code") or "")
    # A stream's exception events name their type in lower camel case (throttlingException).
    kind = code[:1].upper() + code[1:]
    metadata = response.get("ResponseMetadata", {})
    status = metadata.get("HTTPStatusCode")
    if status == 200 or not isinstance(status, int):
        status = None  # an exception event inside a stream that had started
    body: dict[str, Any] = {"type": kind or None, "message": error.get("Message") or ""}
    for key in ("originalStatusCode", "originalMessage"):
        if key in response:
            body[key] = response[key]
    return provider_error(
        status=status,
        body=body,
        headers=metadata.get("HTTPHeaders") or {},
        model=model,
        fallback_message=str(exc),
    )

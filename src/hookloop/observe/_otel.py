"""``OpenTelemetryPlugin``: an agent's run as OpenTelemetry GenAI spans and metrics.

One handler per traced event, in ``Phase.TELEMETRY`` (after every handler but the sub-agent
forwarding), so a span shows what the handlers decided (the final request, the response a
hook rewrote, whether a retry strategy retries). A sub-agent's events arrive through
``on_subagent_event`` with the agent path; they build the same spans, keyed by that path, so
the whole tree is traced by the plugin on the top agent.

The ``execute_tool`` span is made the current OpenTelemetry context while the tool runs:
spans the tool makes (an instrumented HTTP client, a sub-agent's ``invoke_agent``) nest
under it. Everything else names its parent explicitly and leaves the context alone.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._errors import ToolExecutionError, UsageLimitExceeded
from .._extras import import_extra
from .._messages import AssistantMessage, ToolCall
from .._tools import exception_text, serialize_result
from .._version import VERSION
from ..hooks._contexts import (
    AfterModelCallContext,
    BackoffWaitContext,
    ChatAbortContext,
    ChatDoneContext,
    ChatErrorContext,
    ChatStartContext,
    CompactionContext,
    FirstChunkContext,
    GuardrailVerdictContext,
    MessageContext,
    PreRequestContext,
    PreToolCallContext,
    ResponseContext,
    SubAgentEventContext,
    ToolErrorContext,
    ToolResultContext,
    TrimContext,
)
from ..hooks._dispatch import Phase
from ..hooks._host import attach_once
from ..models._base import Model, ProviderRequest
from . import _genai as g

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.trace import Span, TracerProvider

    from .._tools import Tool
    from ..hooks._host import AgentHost

__all__ = ["OpenTelemetryPlugin"]

_Key = tuple[str, ...]
"""The agent path: ``(agent,)`` for the agent the plugin is on, longer for sub-agents."""


@dataclass(slots=True, eq=False)
class _Call:
    """One model call (all its attempts) of a chat."""

    start_ns: int
    started: float
    span: Span | None = None
    pending: list[tuple[str, dict[str, Any], int]] = field(default_factory=list)
    attributes: dict[str, Any] = field(default_factory=dict)  # those the metrics carry too
    attempt_started: float = 0.0
    failed: set[int] = field(default_factory=set)
    model: Model | None = None  # the model the span names
    error: Exception | None = None  # that of the last failed attempt
    client: bool = False  # the span is a CLIENT's: its server.* are due
    server: bool = False  # they are set (a model that starts on its first call has none)


@dataclass(slots=True, eq=False)
class _ToolRun:
    """One tool call: its span and, while the tool runs, the context token that shows it."""

    span: Span
    reached: bool = False  # the pre_tool_call chain ran to its end: no hook short-circuited
    token: object = None
    task: asyncio.Task[Any] | None = None


@dataclass(slots=True, eq=False)
class _Chat:
    """One chat of one agent of the tree."""

    span: Span
    context: Context
    call: _Call | None = None
    tools: dict[str, _ToolRun] = field(default_factory=dict)
    asked: dict[str, ToolCall] = field(default_factory=dict)  # tool calls as the model made them
    model_known: bool = False
    server_known: bool = False
    model: Model | None = None  # the model of the agent's last call


class OpenTelemetryPlugin:
    """Traces an agent's chats as OpenTelemetry GenAI spans and records the GenAI metrics.

    Spans: ``invoke_agent {agent}`` per chat, ``chat {model}`` per model call (its
    attempts, backoff waits, trims and compactions as span events), ``execute_tool {tool}``
    per tool call; a sub-agent's spans nest under the ``execute_tool`` span that delegated
    to it. Metrics: ``gen_ai.client.token.usage``, ``gen_ai.client.operation.duration`` and,
    for streams, ``gen_ai.client.operation.time_to_first_chunk``. See
    ``docs/observability.md`` for the whole mapping.

    Attach it to the top agent only: it traces the sub-agents through their forwarded
    events. One instance serves one agent.

    Args:
        tracer_provider: Where spans go; the global provider by default.
        meter_provider: Where metrics go; the global provider by default.
        capture_content: Record message content (``gen_ai.input.messages``,
            ``gen_ai.output.messages``, ``gen_ai.system_instructions``,
            ``gen_ai.tool.definitions``, tool arguments and results). ``None`` (the default)
            reads ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``; off unless set.
        capture_error_text: Record errors' texts: ``exception.message`` of a failed attempt
            and of a failed chat (with its stack trace), and the ``Type: text`` descriptions
            of failed spans. They can quote the conversation (a tool's error names its
            arguments; a provider's error may quote the request), so content capture being
            off does not leave them out; ``False`` does: errors then show their type only.
        environ: The environment to read the ``OTEL_*`` variables from (``os.environ``).

    Raises:
        MissingExtraError: ``opentelemetry-api`` is not installed (``hookloop[otel]``).
    """

    name = "opentelemetry"

    def __init__(
        self,
        *,
        tracer_provider: TracerProvider | None = None,
        meter_provider: MeterProvider | None = None,
        capture_content: bool | None = None,
        capture_error_text: bool = True,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        by = type(self).__name__
        self._trace = import_extra("opentelemetry.trace", extra="otel", by=by)
        self._context = import_extra("opentelemetry.context", extra="otel", by=by)
        metrics = import_extra("opentelemetry.metrics", extra="otel", by=by)
        env = os.environ if environ is None else environ
        self.capture_content = (
            g.content_from_environment(env) if capture_content is None else capture_content
        )
        self.capture_error_text = capture_error_text
        self.latest = g.latest_conventions(env)
        version = VERSION
        self._tracer = self._trace.get_tracer("hookloop", version, tracer_provider)
        meter = metrics.get_meter("hookloop", version, meter_provider)
        self._tokens = meter.create_histogram(
            g.METRIC_TOKEN_USAGE,
            unit="{token}",
            description="Tokens used by a model call, by gen_ai.token.type",
            explicit_bucket_boundaries_advisory=g.TOKEN_BUCKETS,
        )
        self._duration = meter.create_histogram(
            g.METRIC_DURATION,
            unit="s",
            description="Duration of a model call, its retries and waits included",
            explicit_bucket_boundaries_advisory=g.SECONDS_BUCKETS,
        )
        self._first_chunk = meter.create_histogram(
            g.METRIC_TIME_TO_FIRST_CHUNK,
            unit="s",
            description="Time from sending a streamed request to its first chunk",
            explicit_bucket_boundaries_advisory=g.SECONDS_BUCKETS,
        )
        self._agent: AgentHost | None = None
        self._chats: dict[_Key, _Chat] = {}
        self._handlers: dict[str, Callable[[_Key, Any], None]] = {
            "on_chat_start": self._chat_start,
            "on_chat_done": self._chat_done,
            "on_chat_error": self._chat_error,
            "on_chat_abort": self._chat_abort,
            "on_message": self._message,
            "pre_request": self._pre_request,
            "on_first_chunk": self._first_chunk_arrived,
            "after_model_call": self._after_model_call,
            "on_backoff_wait": self._backoff,
            "on_trim": self._trim,
            "on_compaction": self._compaction,
            "on_response": self._response,
            "pre_tool_call": self._pre_tool_call,
            "on_tool_call_result": self._tool_result,
            "on_tool_call_error": self._tool_error,
            "on_guardrail_verdict": self._guardrail_verdict,
        }

    # -- registration ----------------------------------------------------------------------

    def init_agent(self, agent: AgentHost) -> None:
        """Register one handler per traced event, and one for the sub-agents' events.

        Raises:
            UsageError: This instance already traces another agent.
        """
        self._agent = attach_once(
            "OpenTelemetryPlugin",
            self._agent,
            agent,
            "it keeps the open spans of its chats",
            owner=self,
        )
        key = (agent.name,)
        for event, method in self._handlers.items():
            agent.hooks.add(event, _bound(method, key, event), order=Phase.TELEMETRY)
        agent.hooks.add("on_subagent_event", self._subagent_event, order=Phase.TELEMETRY)

    def _subagent_event(self, ctx: SubAgentEventContext) -> None:
        method = self._handlers.get(ctx.event)
        if method is not None:
            method(ctx.path, ctx.context)

    # -- chats -----------------------------------------------------------------------------

    def _chat_start(self, key: _Key, ctx: ChatStartContext) -> None:
        if key in self._chats:  # a chat whose end never reached us: close it first
            self._close(key, "ERROR", "the next chat started", None)
        attributes: dict[str, Any] = {g.OPERATION: "invoke_agent", g.AGENT_NAME: key[-1]}
        agent = self._agent
        known = False
        if len(key) == 1 and agent is not None:
            attributes[g.CONVERSATION_ID] = agent.session_id
            attributes.update(self._model_attributes(agent.model))
            known = True
        # The parent is the current context: the caller's span, or for a sub-agent the
        # execute_tool span that delegated to it (see the module docstring).
        span = self._tracer.start_span(
            f"invoke_agent {key[-1]}", kind=self._trace.SpanKind.INTERNAL, attributes=attributes
        )
        context = self._trace.set_span_in_context(span)
        server = g.SERVER_ADDRESS in attributes
        self._chats[key] = _Chat(span=span, context=context, model_known=known, server_known=server)

    def _chat_done(self, key: _Key, ctx: ChatDoneContext) -> None:
        chat = self._chats.get(key)
        if chat is None:
            return
        usage = ctx.response.usage
        chat.span.set_attributes(
            {
                g.USAGE_INPUT: usage.input_tokens,
                g.USAGE_OUTPUT: usage.output_tokens,
                **g.cost_attributes(usage),
            }
        )
        self._close(key, None, None, None)

    def _chat_error(self, key: _Key, ctx: ChatErrorContext) -> None:
        error = ctx.error
        chat = self._chats.get(key)
        if chat is not None and isinstance(error, UsageLimitExceeded):
            # What the chat spent up to the limit, and which limit it was.
            usage = error.usage
            chat.span.set_attributes(
                {
                    g.USAGE_INPUT: usage.input_tokens,
                    g.USAGE_OUTPUT: usage.output_tokens,
                    **g.cost_attributes(usage),
                    "hookloop.usage.limit": error.limit,
                }
            )
        self._close(key, "ERROR", self._described(error), error)

    def _chat_abort(self, key: _Key, ctx: ChatAbortContext) -> None:
        reason = "" if ctx.reason is None else f": {ctx.reason}"
        self._close(key, "ERROR", f"cancelled{reason}", None)

    def _close(
        self, key: _Key, status: str | None, description: str | None, error: Exception | None
    ) -> None:
        """End every span the chat left open, then the chat's own; nothing stays open."""
        chat = self._chats.pop(key, None)
        if chat is None:
            return
        error_type = _error_type(error) if status else None
        task = asyncio.current_task()
        for run in reversed(chat.tools.values()):
            self._detach(run, task)
            self._end(run.span, status, description, error_type)
        chat.tools.clear()
        if chat.call is not None:
            call, chat.call = chat.call, None
            if call.span is not None or call.pending:
                self._end_call(chat, call, status, description, error_type)
        if error is not None:
            if self.capture_error_text:
                chat.span.record_exception(error)
            else:  # the type only: the message and the traceback's last line say the text
                chat.span.add_event("exception", {"exception.type": type(error).__name__})
        self._end(chat.span, status, description, error_type)

    # -- model calls -----------------------------------------------------------------------

    def _message(self, key: _Key, ctx: MessageContext) -> None:
        message = ctx.message
        chat = self._chats.get(key)
        if chat is not None and isinstance(message, AssistantMessage) and message.tool_calls:
            chat.asked = {c.id: c for c in message.tool_calls}

    def _current_call(self, chat: _Chat) -> _Call:
        call = chat.call
        if call is None:
            call = chat.call = _Call(start_ns=time.time_ns(), started=time.monotonic())
        return call

    def _open(
        self,
        chat: _Chat,
        model: Model | None,
        request: ProviderRequest,
        *,
        stream: bool = False,
        supplied: bool = False,
    ) -> _Call:
        """The model call's span, started now if it was not (with its pending events).

        A ``supplied`` answer (a ``pre_request`` hook's) reached no server: its span names
        the model's provider only, and is INTERNAL.
        """
        call = self._current_call(chat)
        if call.span is not None:
            return call
        # A model behind an API is a client even before it has an address (LocalModel
        # starts its server on the first request): its server.* come once it has one.
        client = model is not None and not supplied and _remote(model)
        kind = self._trace.SpanKind.CLIENT if client else self._trace.SpanKind.INTERNAL
        name = model.name if model is not None else request.model
        call.attributes = {g.OPERATION: "chat", g.REQUEST_MODEL: name}
        call.model = model
        call.client = client
        if model is not None:
            chat.model = model
            model_attributes = self._model_attributes(model)
            if supplied:
                call.attributes.update(self._provider(model))
            else:
                call.attributes.update(model_attributes)
            if not chat.model_known:
                chat.span.set_attributes(model_attributes)
                chat.model_known = True
                chat.server_known = g.SERVER_ADDRESS in model_attributes
        call.server = g.SERVER_ADDRESS in call.attributes
        attributes = {**call.attributes, **g.request_attributes(request)}
        if stream:
            attributes[g.REQUEST_STREAM] = True
        if self.capture_content:
            attributes[g.INPUT_MESSAGES] = g.input_messages(request.messages)
            if request.system:
                attributes[g.SYSTEM_INSTRUCTIONS] = g.system_instructions(request.system)
            if request.tools:
                attributes[g.TOOL_DEFINITIONS] = g.tool_definitions(request.tools)
        span = self._tracer.start_span(
            f"chat {name}",
            context=chat.context,
            kind=kind,
            attributes=attributes,
            start_time=call.start_ns,
        )
        for event, event_attributes, at in call.pending:
            span.add_event(event, event_attributes, timestamp=at)
        call.pending.clear()
        call.span = span
        return call

    def _model_attributes(self, model: Model) -> dict[str, Any]:
        return {**g.server_attributes(model.base_url), **self._provider(model)}

    def _provider(self, model: Model) -> dict[str, Any]:
        return {g.PROVIDER if self.latest else g.SYSTEM_OLD: model.provider_name}

    def _pre_request(self, key: _Key, ctx: PreRequestContext) -> None:
        chat = self._chats.get(key)
        if chat is None:
            return
        call = chat.call
        if call is not None and call.span is not None:
            if ctx.attempt == 1:
                # The last call never ended (a hook raised after it): it is over now.
                self._end_call(chat, call, None, None, None)
            elif call.model is not None and ctx.model is not call.model:
                # A fallback: the attempts so far failed on the model the span names; the
                # call goes on under a span (and metrics) of the model it goes to now.
                self._end_call(chat, call, *self._failure(call.error))
        call = self._open(chat, ctx.model, ctx.request, stream=ctx.stream)
        call.attempt_started = time.monotonic()

    def _first_chunk_arrived(self, key: _Key, ctx: FirstChunkContext) -> None:
        chat = self._chats.get(key)
        call = chat.call if chat is not None else None
        if call is None or call.span is None:
            return
        seconds = time.monotonic() - call.attempt_started
        call.span.set_attributes({g.REQUEST_STREAM: True, g.RESPONSE_TIME_TO_FIRST_CHUNK: seconds})
        self._first_chunk.record(seconds, {**call.attributes, g.REQUEST_MODEL: ctx.model.name})

    def _after_model_call(self, key: _Key, ctx: AfterModelCallContext) -> None:
        chat = self._chats.get(key)
        if chat is None or ctx.error is None:
            return  # a success ends in on_response, with the final response
        call = self._open(chat, ctx.model, ctx.request)
        self._attempt_failed(call, ctx.attempt, ctx.error, retry=ctx.retry)
        if not ctx.retry:
            chat.call = None
            self._end_call(chat, call, *self._failure(ctx.error))

    def _attempt_failed(self, call: _Call, attempt: int, error: Exception, *, retry: bool) -> None:
        call.error = error
        if attempt in call.failed:
            return
        call.failed.add(attempt)
        attributes: dict[str, Any] = {
            "hookloop.attempt": attempt,
            g.ERROR_TYPE: _error_type(error),
            "hookloop.retry": retry,
        }
        if self.capture_error_text:
            attributes["exception.message"] = str(error)
        self._event(call, "hookloop.attempt_failed", attributes)

    def _backoff(self, key: _Key, ctx: BackoffWaitContext) -> None:
        chat = self._chats.get(key)
        if chat is None:
            return
        call = self._current_call(chat)
        self._attempt_failed(call, ctx.attempt, ctx.error, retry=True)
        attributes: dict[str, Any] = {
            "hookloop.attempt": ctx.attempt,
            "hookloop.wait.seconds": ctx.seconds,
            "hookloop.wait.reason": ctx.reason,
            "hookloop.retry.strategy": ctx.strategy,
        }
        if ctx.retry_after is not None:
            attributes["hookloop.wait.retry_after"] = ctx.retry_after
        self._event(call, "hookloop.backoff_wait", attributes)

    def _trim(self, key: _Key, ctx: TrimContext) -> None:
        if (chat := self._chats.get(key)) is not None:
            attributes = _figures(ctx, "trim", ("reason", "budget", "window"))
            self._event(self._current_call(chat), "hookloop.trim", attributes)

    def _compaction(self, key: _Key, ctx: CompactionContext) -> None:
        if (chat := self._chats.get(key)) is not None:
            attributes = _figures(ctx, "compaction", ("tier", "window"))
            self._event(self._current_call(chat), "hookloop.compaction", attributes)

    def _guardrail_verdict(self, key: _Key, ctx: GuardrailVerdictContext) -> None:
        """A verdict that stopped or changed something: an event on the chat's span.

        Its reason is the guardrail's text and may quote what it checked: only with
        ``capture_content``.
        """
        if (chat := self._chats.get(key)) is None:
            return
        attributes: dict[str, Any] = {
            "hookloop.guardrail.name": ctx.guardrail,
            "hookloop.guardrail.position": ctx.position,
            "hookloop.guardrail.action": ctx.verdict.action,
        }
        if ctx.call_id is not None:
            attributes[g.TOOL_CALL_ID] = ctx.call_id
        if self.capture_content and ctx.verdict.reason:
            attributes["hookloop.guardrail.reason"] = ctx.verdict.reason
        chat.span.add_event("hookloop.guardrail", attributes)

    def _event(self, call: _Call, name: str, attributes: dict[str, Any]) -> None:
        if call.span is not None:
            call.span.add_event(name, attributes)
        else:  # before the span: it starts at the first attempt, with these events
            call.pending.append((name, attributes, time.time_ns()))

    def _response(self, key: _Key, ctx: ResponseContext) -> None:
        chat = self._chats.get(key)
        if chat is None:
            return
        supplied = chat.call is None or chat.call.span is None  # pre_request answered
        # The model that would have answered: the agent's, or a sub-agent's last one.
        agent = self._agent
        model = agent.model if len(key) == 1 and agent is not None else chat.model
        call = self._open(chat, model if supplied else None, ctx.request, supplied=supplied)
        chat.call = None
        response = ctx.response
        attributes = g.response_attributes(response, latest=self.latest)
        if supplied:
            attributes["hookloop.response.supplied"] = True
        if self.capture_content:
            attributes[g.OUTPUT_MESSAGES] = g.output_messages(response)
        assert call.span is not None  # _open started it
        call.span.set_attributes(attributes)
        if response.model:
            call.attributes[g.RESPONSE_MODEL] = response.model
        # A supplied answer used no model: no tokens, no duration of a model call.
        self._end_call(chat, call, None, None, None, record=not supplied)
        if response.usage is not None and not supplied:
            metric = call.attributes
            self._tokens.record(response.usage.input_tokens, {**metric, g.TOKEN_TYPE: "input"})
            self._tokens.record(response.usage.output_tokens, {**metric, g.TOKEN_TYPE: "output"})

    def _end_call(
        self,
        chat: _Chat,
        call: _Call,
        status: str | None,
        description: str | None,
        error_type: str | None,
        *,
        record: bool = True,
    ) -> None:
        if chat.call is call:
            chat.call = None
        if call.client and not call.server and call.span is not None and call.model is not None:
            self._found_server(chat, call, call.model)
        if call.span is None:  # only pending events: a span for them, in the chat
            call.span = self._tracer.start_span(
                "chat",
                context=chat.context,
                start_time=call.start_ns,
                attributes={g.OPERATION: "chat"},
            )
            for event, attributes, at in call.pending:
                call.span.add_event(event, attributes, timestamp=at)
        self._end(call.span, status, description, error_type)
        if record:
            metric = (
                call.attributes
                if error_type is None
                else {**call.attributes, g.ERROR_TYPE: error_type}
            )
            self._duration.record(time.monotonic() - call.started, metric)

    def _found_server(self, chat: _Chat, call: _Call, model: Model) -> None:
        """``server.*`` of a model that had no address when its call began, now it has."""
        server = g.server_attributes(model.base_url)
        if not server or call.span is None:
            return
        call.span.set_attributes(server)
        call.attributes.update(server)  # the call's metrics carry them too
        call.server = True
        if not chat.server_known:
            chat.span.set_attributes(server)
            chat.server_known = True

    # -- tools -----------------------------------------------------------------------------

    def _tool_run(self, chat: _Chat, call: ToolCall, tool: Tool | None) -> _ToolRun:
        run = chat.tools.get(call.id)
        if run is None:
            attributes: dict[str, Any] = {
                g.OPERATION: "execute_tool",
                g.TOOL_NAME: call.name,
                g.TOOL_CALL_ID: call.id,
                g.TOOL_TYPE: "function",
            }
            if tool is not None and tool.description:
                attributes[g.TOOL_DESCRIPTION] = tool.description
            if self.capture_content:
                attributes[g.TOOL_ARGUMENTS] = call.arguments
            span = self._tracer.start_span(
                f"execute_tool {call.name}",
                context=chat.context,
                kind=self._trace.SpanKind.INTERNAL,
                attributes=attributes,
            )
            run = chat.tools[call.id] = _ToolRun(span=span)
        return run

    def _pre_tool_call(self, key: _Key, ctx: PreToolCallContext) -> None:
        chat = self._chats.get(key)
        if chat is None:
            return
        run = self._tool_run(chat, ctx.call, ctx.tool)
        run.reached = True
        asked = chat.asked.get(ctx.call.id)
        run.span.set_attribute("hookloop.tool.rewritten", asked is not None and asked != ctx.call)
        if self.capture_content:
            run.span.set_attribute(g.TOOL_ARGUMENTS, ctx.call.arguments)
        if run.token is None:  # spans the tool makes nest under this one
            run.token = self._context.attach(self._trace.set_span_in_context(run.span))
            run.task = asyncio.current_task()

    def _tool_result(self, key: _Key, ctx: ToolResultContext) -> None:
        chat = self._chats.get(key)
        if chat is None:
            return
        run = self._tool_run(chat, ctx.call, ctx.tool)
        attributes: dict[str, Any] = {"hookloop.tool.outcome": "ok"}
        if self.capture_content:
            attributes[g.TOOL_RESULT] = serialize_result(ctx.result)
        self._finish_tool(chat, ctx.call, run, attributes, None)

    def _tool_error(self, key: _Key, ctx: ToolErrorContext) -> None:
        chat = self._chats.get(key)
        if chat is None:
            return
        run = self._tool_run(chat, ctx.call, ctx.tool)
        error = ctx.error
        if ctx.retry and isinstance(error, ToolExecutionError):
            retry: dict[str, Any] = {
                "hookloop.attempt": ctx.attempt,
                g.ERROR_TYPE: _error_type(error),
            }
            run.span.add_event("hookloop.tool_retry", retry)
            return
        attributes = {"hookloop.tool.outcome": "error", g.ERROR_TYPE: _error_type(error)}
        if self.capture_content:
            attributes[g.TOOL_RESULT] = exception_text(error)
        self._finish_tool(chat, ctx.call, run, attributes, error, unknown=ctx.tool is None)

    def _finish_tool(
        self,
        chat: _Chat,
        call: ToolCall,
        run: _ToolRun,
        attributes: dict[str, Any],
        error: Exception | None,
        *,
        unknown: bool = False,
    ) -> None:
        chat.tools.pop(call.id, None)
        attributes["hookloop.tool.short_circuited"] = not run.reached and not unknown
        run.span.set_attributes(attributes)
        self._detach(run, asyncio.current_task())
        if error is None:
            self._end(run.span, None, None, None)
        else:
            self._end(run.span, "ERROR", self._described(error), _error_type(error))

    def _detach(self, run: _ToolRun, task: asyncio.Task[Any] | None) -> None:
        # A token can only be reset in the context it was made in: the tool's task. A tool
        # task that ended without us took its context with it.
        if run.token is not None and run.task is task:
            self._context.detach(run.token)
        run.token = None

    # -- helpers ---------------------------------------------------------------------------

    def _failure(self, error: Exception | None) -> tuple[str | None, str | None, str | None]:
        """Status, description and ``error.type`` of a call that ended with ``error``."""
        if error is None:
            return None, None, None
        return "ERROR", self._described(error), _error_type(error)

    def _described(self, error: BaseException) -> str:
        """A status's description: the error's type, and its text unless that is left out."""
        if not self.capture_error_text:
            return type(error).__name__
        return f"{type(error).__name__}: {error}"

    def _end(
        self, span: Span, status: str | None, description: str | None, error_type: str | None
    ) -> None:
        if status is not None:
            if error_type is not None:
                span.set_attribute(g.ERROR_TYPE, error_type)
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, description))
        span.end()


def _remote(model: Model) -> bool:
    """Whether the model answers from behind an API (a server, even one not started yet)."""
    return model.base_url is not None or model.provider_name != Model.provider_name


def _bound(method: Callable[[_Key, Any], None], key: _Key, event: str) -> Callable[[Any], None]:
    def handler(ctx: Any) -> None:
        method(key, ctx)

    handler.__qualname__ = f"OpenTelemetryPlugin.{event}"
    return handler


def _figures(
    ctx: TrimContext | CompactionContext, what: str, extra: tuple[str, ...]
) -> dict[str, Any]:
    attributes: dict[str, Any] = {"hookloop.attempt": ctx.attempt}
    for name in ("messages_before", "messages_after", "tokens_before", "tokens_after", *extra):
        value = getattr(ctx, name)
        if value is not None:
            attributes[f"hookloop.{what}.{name}"] = value
    return attributes


def _error_type(error: BaseException | None) -> str:
    """``error.type``: the exception's class name; ``"cancelled"`` for a cancelled chat."""
    return type(error).__name__ if error is not None else "cancelled"

"""One model call of a chat, with its attempts: the steps between a request and an answer.

``pre_request``, the model (whole or streamed), ``after_model_call`` (which may retry with
another request or model) and ``on_response``, as drawn in ``docs/hooks.md``. :class:`ChatRun`
(``_loop.py``) runs a chat's model calls through these steps.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Final

from ._errors import HookReturnError, InvalidResponseError
from ._messages import AssistantMessage, SystemMessage, ToolMessage, Usage, UserMessage
from ._output import PartialOutputs
from ._stream_events import AgentEvent, ModelCallRestarted, ModelRetry, PartialOutput
from .context._repair import repair
from .hooks._contexts import (
    AfterModelCallContext,
    FirstChunkContext,
    HistoryReplacement,
    PreCompressContext,
    PreRequestContext,
    ResponseContext,
    maker,
)
from .hooks._dispatch import (
    Handler,
    HookRegistry,
    answered_row,
    collect_texts,
    notify,
    notify_plainly,
    run_chain,
)
from .hooks._events import (
    AFTER_MODEL_CALL,
    ON_FIRST_CHUNK,
    ON_PRE_COMPRESS,
    ON_RESPONSE,
    PRE_REQUEST,
)
from .models._base import (
    Model,
    ProviderRequest,
    ProviderResponse,
    ResponseAccumulator,
    StreamEnd,
    WholeAnswerStream,
    make_response,
    response_deltas,
)

if TYPE_CHECKING:
    from ._limits import Budget
    from ._setup import ChatSetup, StepRunner
    from .context._history import ChatHistory

__all__ = ["ModelCalls"]

_MESSAGE_TYPES = (SystemMessage, UserMessage, AssistantMessage, ToolMessage)


class ModelCalls:
    """The model-call steps of a chat; :class:`~hookloop._loop.ChatRun` is the chat."""

    # The chat's tokens so far (the answers' usage is counted here), and its limits (None
    # without any: one test per model call).
    __slots__ = ("_budget", "_usage")

    _usage: Usage
    _budget: Budget | None
    _setup: ChatSetup
    _handlers: dict[str, tuple[Handler, ...]]
    _hooks: HookRegistry
    _history: ChatHistory
    _iteration: int
    emit: Callable[[AgentEvent], Awaitable[None]] | None

    async def _recorded_model_call(
        self, steps: StepRunner, iteration: int, request: ProviderRequest
    ) -> tuple[ProviderResponse, AssistantMessage]:
        """One model call as a durable step: a replay takes the recorded answer."""
        usage = self._usage
        ran = False

        async def run(restarted: bool) -> ProviderResponse:
            nonlocal ran
            ran = True
            if restarted and self.emit is not None:
                await self.emit(ModelCallRestarted(iteration=iteration))
            return await self._call_model(iteration, request)

        response, message = await steps.model_call(run)
        # The recorded answer's usage, whether the call ran here or in an earlier run.
        self._usage = usage if response.usage is None else usage + response.usage
        if not ran and (budget := self._budget) is not None:
            budget.requests += 1  # the recorded answer's request (its retries are not recorded)
        return response, message

    def _unhooked(self) -> bool:
        """Whether a model call is the model's answer alone: no step of its own to run.

        No ``pre_request``, ``after_model_call`` or ``on_response`` handler, no limits to
        check, no stream, no left-out notes to apply: the loop then awaits the model
        itself and takes its answer with :meth:`_answered`, without :meth:`_call_model`'s
        coroutine (1.7k instructions an iteration of the bare loop, about 2%).
        """
        handlers = self._handlers
        return (
            self.emit is None
            and self._budget is None
            and self._history._notes is None
            and PRE_REQUEST not in handlers
            and AFTER_MODEL_CALL not in handlers
            and ON_RESPONSE not in handlers
        )

    def _answered(self, response: object, model: Model) -> ProviderResponse:
        """The model's answer to an unhooked call, as :meth:`_call_model` takes it.

        Raises:
            InvalidResponseError: The model returned something else than a valid response.
        """
        response = _checked(response)
        if (usage := response.usage) is not None and usage.cost is None:
            response = self._priced(response, usage, model)
        return self._keep_response(response)

    async def _call_model(self, iteration: int, request: ProviderRequest) -> ProviderResponse:
        """The answer of one model call: its attempts, until one answers or nobody retries."""
        handlers = self._handlers
        model = self._setup.model
        emit = self.emit
        base = request  # what every attempt's pre_request chain starts from
        window = self._setup.window
        attempt = 0
        while True:
            attempt += 1
            request = base
            if (hs := handlers.get(PRE_REQUEST)) and (
                # The window alone, with a request that fits as it built it: no chain to run.
                window is None or not window.passes(hs, request, model)
            ):
                pre = _pre_request(iteration, request, attempt, model, None, (), emit is not None)
                supplied = await run_chain(hs, pre)
                request = pre._request  # type: ignore[attr-defined]  # (the slot: a call less)
                if pre.model is not model:  # a handler chose another (an ABC check costs)
                    model = _checked_model(pre.model)
                if pre.left_out:
                    await self._left_out(pre.left_out)
                if pre.replace_history is not None:
                    request = await self._replace_history(pre.replace_history, request)
                if request is not base:
                    # A hook rewrote the request: make sure it still pairs every tool call.
                    request = _repaired(request)
                if supplied is not None and isinstance(supplied, ProviderResponse):
                    if emit is not None:  # a stream shows a supplied answer like a model's
                        for part in response_deltas(supplied):
                            await emit(part)
                    return await self._accept(iteration, request, supplied)
            if (notes := self._history._notes) is not None:
                # What on_pre_compress handlers kept of stored messages the request leaves
                # out without a summary goes in their place (after every pre_request
                # handler: the window's budget made room for it).
                history = self._history
                request = notes.applied(request, history._ids(), history.token_counter)
            if (budget := self._budget) is not None:  # a request that would cross: not sent
                budget.before_call(request, model, self._usage)
            response: ProviderResponse | None = None
            error: Exception | None = None
            try:
                if emit is None:
                    response = _checked(await model.request(request))
                else:
                    response = await self._stream_model(model, request, emit, iteration, attempt)
            except Exception as exc:
                error = exc
            else:
                if (usage := response.usage) is not None and usage.cost is None:
                    response = self._priced(response, usage, model)
            hs = handlers.get(AFTER_MODEL_CALL)
            if hs and error is None and (answered := answered_row(self._hooks)) is not None:
                # An answer: the handlers that promised to have nothing to do for one (the
                # window's and the retry strategy's of Agent()) are left out; none left, no
                # context and no dispatch.
                hs = answered
            if hs:
                after = _after_model_call(
                    iteration, attempt, request, response, error, model, False, None, ()
                )
                # The window's and the retry strategy's handlers are plain calls that return
                # None on success: no coroutine then.
                if (rest := notify_plainly(hs, after)) is not None:
                    await rest
                if after.left_out:
                    await self._left_out(after.left_out)
                if after.replace_history is not None:
                    after.request = await self._replace_history(
                        after.replace_history, after.request
                    )
                if after.retry:
                    if after.request is not request:
                        # A handler chose the next attempt's request (smaller, say): the next
                        # pre_request chain starts from it, repaired. Otherwise each attempt
                        # starts from the built request, so rewrites never pile up.
                        base = _repaired(after.request)
                    model = _checked_model(after.model)
                    if emit is not None:
                        await emit(ModelRetry(iteration=iteration, attempt=attempt, error=error))
                    continue
            if error is not None:
                raise error
            assert response is not None  # no error means a response
            if ON_RESPONSE in handlers:
                # _accept's chain, here: a coroutine around it cost about 1.2k instructions
                # for every model call with on_response handlers.
                ctx = _response_context(iteration, request, response)
                await run_chain(handlers[ON_RESPONSE], ctx)
                # The field's slot: a handler that returned a new response is checked.
                if (returned := ctx._response) is not response:  # type: ignore[attr-defined]
                    response = _checked(returned)
            return self._keep_response(response)

    async def _left_out(self, messages: object) -> None:
        """``on_pre_compress`` with the stored messages a policy left out of the request.

        No summary is written to keep what its handlers return: the history keeps the texts
        (its left-out notes), and every request that leaves those messages out gets them in
        their place, as a summary message.

        Raises:
            HookReturnError: ``left_out`` was set to something else than a tuple of messages.
        """
        if type(messages) is not tuple or not all(isinstance(m, _MESSAGE_TYPES) for m in messages):
            raise HookReturnError(f"left_out must be a tuple of messages, got {messages!r:.80}")
        if hs := self._handlers.get(ON_PRE_COMPRESS):
            texts = await collect_texts(hs, PreCompressContext(messages=messages))
            if texts:
                history = self._history
                notes = history._left_out_notes()
                notes.add(messages, texts, history._ids(), history.token_counter)

    async def _replace_history(
        self, change: HistoryReplacement, request: ProviderRequest
    ) -> ProviderRequest:
        """Commit a policy's new conversation; returns ``request`` with the final summary.

        ``on_pre_compress`` sees the messages that go; the texts it returns join the summary.

        Raises:
            HookReturnError: ``replace_history`` was set to something else.
        """
        if not isinstance(change, HistoryReplacement):
            raise HookReturnError(
                f"replace_history must be a HistoryReplacement, got {type(change).__name__}"
            )
        summary = change.summary
        if change.removed and (hs := self._handlers.get(ON_PRE_COMPRESS)):
            texts = await collect_texts(hs, PreCompressContext(messages=change.removed))
            if kept := [text.strip() for text in texts if text.strip()]:
                amended = dataclasses.replace(summary, content="\n\n".join([summary.text, *kept]))
                request = dataclasses.replace(
                    request,
                    messages=tuple(amended if m.id == summary.id else m for m in request.messages),
                )
                summary = amended
        self._history.replace_committed((summary, *change.kept))
        return request

    async def _stream_model(
        self,
        model: Model,
        request: ProviderRequest,
        emit: Callable[[AgentEvent], Awaitable[None]],
        iteration: int,
        attempt: int,
    ) -> ProviderResponse:
        spec = self._setup.output
        partials = PartialOutputs(spec) if spec is not None else None
        parts = model.stream(request)
        if type(parts) is WholeAnswerStream:
            # An answer that comes whole: its parts are the response's, no folding back.
            response = _checked(await parts.response())
            if hs := self._handlers.get(ON_FIRST_CHUNK):
                ctx = FirstChunkContext(iteration=iteration, attempt=attempt, model=model)
                await notify(hs, ctx)
            for delta in response_deltas(response):
                await emit(delta)
                if partials is not None:
                    found, value = partials.feed(delta)
                    if found:
                        await emit(PartialOutput(output=value, iteration=self._iteration))
            return response
        accumulator = ResponseAccumulator()
        first = True
        try:
            async for part in parts:
                if first:
                    first = False
                    if hs := self._handlers.get(ON_FIRST_CHUNK):
                        ctx = FirstChunkContext(iteration=iteration, attempt=attempt, model=model)
                        await notify(hs, ctx)
                accumulator.add(part)
                if not isinstance(part, StreamEnd):
                    await emit(part)
                    if partials is not None:
                        found, value = partials.feed(part)
                        if found:
                            await emit(PartialOutput(output=value, iteration=self._iteration))
        finally:
            # Close the provider's stream now (its connection), also on cancellation.
            aclose = getattr(parts, "aclose", None)
            if aclose is not None:
                await aclose()
        return _checked(accumulator.response())

    async def _accept(
        self, iteration: int, request: ProviderRequest, response: ProviderResponse
    ) -> ProviderResponse:
        """A ``pre_request`` handler's answer, checked as the model's, through ``on_response``.

        Raises:
            InvalidResponseError: The answer is not a valid response (two tool calls with
                the same id).
        """
        response = _checked(response)
        if hs := self._handlers.get(ON_RESPONSE):
            ctx = _response_context(iteration, request, response)
            await run_chain(hs, ctx)
            if (returned := ctx._response) is not response:  # type: ignore[attr-defined]
                response = _checked(returned)
        return self._keep_response(response)

    def _priced(self, response: ProviderResponse, usage: Usage, model: Model) -> ProviderResponse:
        """``response`` with the cost of its usage at ``model``'s price, when it has one."""
        pricing = self._setup.pricing
        if pricing is None:
            return response
        priced = pricing.priced(usage, model)
        if priced is usage:
            return response
        # A copy without the constructor (dataclasses.replace costs several times as much).
        r = response
        return make_response(r.content, r.tool_calls, r.finish_reason, priced, r.model, r.id)

    def _keep_response(self, response: ProviderResponse) -> ProviderResponse:
        if response.usage is not None:
            self._usage = self._usage + response.usage
        return response


# Every model call's contexts, made from their fields in order (no keyword call).
_pre_request: Final = maker(PreRequestContext)
_after_model_call: Final = maker(AfterModelCallContext)
_response_context: Final = maker(ResponseContext)


def _repaired(request: ProviderRequest) -> ProviderRequest:
    messages = repair(request.messages)
    if messages is request.messages:
        return request
    return dataclasses.replace(request, messages=tuple(messages))


def _checked_model(model: object) -> Model:
    if not isinstance(model, Model):
        raise HookReturnError(f"a hook set the attempt's model to {model!r}, not a Model")
    return model


def _checked(response: object) -> ProviderResponse:
    if not isinstance(response, ProviderResponse):
        raise InvalidResponseError(
            f"the model returned {type(response).__name__}, not a ProviderResponse"
        )
    calls = response.tool_calls
    if len(calls) > 1 and len({c.id for c in calls}) != len(calls):
        raise InvalidResponseError("the model returned two tool calls with the same id")
    return response

"""What one chat runs with, and the request each of its model calls is built from.

The agent hands each chat a :class:`ChatSetup` (``_agent.py``); the loop builds every model
call's request from it with :func:`build_request`, before the ``pre_request`` handlers see it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final, Protocol

from ._approval import ApprovalDecision, PendingApproval
from ._approval_log import ApprovalBook, Ruling
from ._errors import ToolResultLostError
from ._limits import RepeatLimit, Spend, UsageLimits
from ._messages import (
    AssistantMessage,
    Message,
    TextPart,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from ._output import OutputSpec
from ._slots import frozen_maker, slot_setter
from .context._history import ChatHistory
from .context._repair import repair
from .context._sliding_window import SlidingWindow
from .hooks._dispatch import Handler
from .models._base import (
    Model,
    ModelSettings,
    ProviderRequest,
    ProviderResponse,
    ToolDefinition,
)

if TYPE_CHECKING:
    from ._pricing import Pricing
    from ._tools import ScopeRegistry
    from .hooks._host import AgentHost

__all__ = ["ChatSetup", "Resumption", "StepRunner", "build_request", "keyed_settings"]


class StepRunner(Protocol):
    """How a durable turn runs each model call and each tool call as one recorded step.

    ``hookloop.durable`` implements it; a chat without one runs as it always does.
    """

    async def model_call(
        self, run: Callable[[bool], Awaitable[ProviderResponse]]
    ) -> tuple[ProviderResponse, AssistantMessage]:
        """The response and its message: ``run``'s, or the ones recorded by an earlier run.

        ``run(restarted)`` makes the call; ``restarted`` says that the turn resumed after a
        crash at this call.
        """
        ...

    async def tool_call(
        self,
        call: ToolCall,
        idempotent: bool,
        run: Callable[[], Awaitable[tuple[ToolMessage | PendingApproval, Spend | None]]],
        lost: Callable[[ToolResultLostError], Awaitable[ToolMessage]],
    ) -> tuple[ToolMessage | PendingApproval, Spend | None]:
        """The call's result: ``run``'s, the recorded one, or ``lost``'s answer.

        ``run`` returns the message and the tokens the call used (a sub-agent's, counted
        into the chat as they were used), or the call's wait for approval (the turn then
        ends with it). ``lost`` answers a call that is not ``idempotent`` and was running
        when the worker died. Returns the message (or the wait) and, for a recorded call
        that did not run now, the tokens it used, for the chat to count again.
        """
        ...

    def closing_id(self, call_id: str) -> str:
        """The id of the "not run" answer to call ``call_id`` when an error ends the turn.

        The same in every run, so a resumed turn that closes the call again stores it once.
        """
        ...


@dataclasses.dataclass(slots=True, kw_only=True)  # not frozen: that doubles its cost per chat
class ChatSetup:
    """What one chat runs with, taken from its agent when the chat starts; read-only.

    Attributes:
        handlers: The hook handlers by event (the registry's live mapping: a hook added
            during the chat fires from its next event on).
        model: The model each model call starts from.
        scopes: The tools and context (live: see ``docs/tools.md``).
        settings: Sampling and tool-choice settings, with the cache key the chat's requests
            carry (the session id, unless the agent's settings name one).
        max_iterations: The most model calls the chat may make.
        reset_tool_choice: Whether a forcing tool choice holds for the first call only.
        history: The conversation the chat appends to.
        window: The agent's own sliding window, which builds each request from only the
            messages that fit; ``None`` when the agent has another policy or none.
        agent: The agent the chat runs on (a tool's run context names it).
        deps: The chat's dependencies for tools' run contexts, or ``NO_DEPS``.
        approvals: Where the chat leaves the calls that wait for approval.
        output: How the chat asks for and checks a typed answer; ``None`` for text.
        steps: How a durable turn records its model and tool calls; ``None`` otherwise.
        limits: The chat's usage limits (the chat's own, else the agent's), checked against
            what this chat spends; ``None`` for none.
        session_limits: Limits checked against ``spent_before`` plus what this chat
            spends (a session's, or a parent's remaining for a sub-agent); ``None`` for none.
        spent_before: What was spent before this chat, for ``session_limits``; ``None``
            for nothing.
        repeat_limit: How often the chat may call a tool with the same arguments.
        pricing: The agent's prices, which put a cost on each model call's usage; ``None``
            leaves usage unpriced.
    """

    handlers: dict[str, tuple[Handler, ...]]
    model: Model
    scopes: ScopeRegistry
    settings: ModelSettings
    max_iterations: int
    reset_tool_choice: bool
    history: ChatHistory
    window: SlidingWindow | None
    agent: AgentHost
    deps: object
    approvals: ApprovalBook
    output: OutputSpec[Any] | None = None
    steps: StepRunner | None = None
    limits: UsageLimits | None = None
    session_limits: UsageLimits | None = None
    spent_before: Spend | None = None
    repeat_limit: RepeatLimit | None = None
    pricing: Pricing | None = None


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Resumption:
    """What a chat starts from when calls of a batch were decided: answer them first.

    Attributes:
        message: The assistant message whose calls waited for approval.
        decided: Each call decided now with its checked decision, in call order
            (``on_approval_decision`` fires for these; decisions recorded earlier, by a
            process that died before their results, are only in ``rulings``).
        rulings: How each decided call is answered, in call order.
        user: For ``chat()``, the user message that follows the answers; ``None`` for
            ``resume()``, whose first model call follows the answers.
    """

    message: AssistantMessage
    decided: tuple[tuple[PendingApproval, ApprovalDecision], ...]
    rulings: tuple[Ruling, ...]
    user: UserMessage | None = None


def build_request(setup: ChatSetup, iteration: int = 0) -> ProviderRequest:
    """The request for the next model call: history plus the enabled scopes' context.

    When the history was changed from outside the loop since it was last checked (an edit,
    a deletion, an import), the request gets a repaired copy: no tool result without its
    call, no call without a result. The stored history stays as it is.

    A tool choice that forces a call (``"required"`` or a tool's name) holds for the first
    model call of a chat only when ``setup.reset_tool_choice`` is set: later iterations
    follow tool results and go back to ``"auto"``, or the model could never answer.
    """
    history = setup.history
    system_message = history.system_message
    system = system_message.content if system_message is not None else None
    system_parts: list[str] = []
    user_parts: list[str] = []
    tools: list[ToolDefinition] = []
    for scope in setup.scopes.ordered:
        # is_enabled() only for a flag that is not plainly True: this runs every iteration.
        if scope.enabled is not True and not scope.is_enabled():
            continue
        for t in scope.tools:
            if t.enabled is True or t.is_enabled():
                tools.append(t.definition)
        if scope.context is not None and (text := scope.render_context()):
            (system_parts if scope.context_placement == "system" else user_parts).append(text)
    if system_parts:
        system = "\n\n".join([system, *system_parts] if system else system_parts)
    settings = _settings_for(setup, iteration)
    definitions = tuple(tools)
    output_format = None
    if (output := setup.output) is not None:  # before the window: its parts take room too
        definitions, settings, system = output.extend(definitions, settings, system)
        output_format = output.output_format
    window = None
    if (policy := setup.window) is not None:
        # Only the window, not the whole history: a turn costs the same however long the
        # conversation grows (bench/loop.py, overhead_us_by_history).
        request = _request(setup.model.name, system, (), definitions, settings, output_format)
        window = policy.request_messages(request, history, setup.model)
        if window is not None and not user_parts:
            # The window saw this request without messages and knows it by identity from now
            # on (its as-built check); no one else has it yet, so it takes the messages here
            # instead of a second request being made from the same fields.
            _request_messages(request, window)
            return request
    if window is not None:
        messages = window
    else:
        messages = history.messages
        if history.version != history.checked_version:
            repaired = repair(messages)
            if repaired is messages:
                history.checked_version = history.version
            else:
                messages = tuple(repaired)
    if user_parts:
        extended = _extend_last_user(messages, "\n\n".join(user_parts))
        if extended is None:  # no user message to carry it: the system prompt does
            system = "\n\n".join(p for p in (system, *user_parts) if p)
        else:
            messages = extended
    return _request(setup.model.name, system, messages, definitions, settings, output_format)


_request_messages = slot_setter(ProviderRequest, "messages")

# Every iteration's request, from its fields in order, without the constructor's checks.
_request: Final = frozen_maker(ProviderRequest)


def keyed_settings(
    settings: ModelSettings,
    model: Model,
    agent: AgentHost,
    last: tuple[ModelSettings, ModelSettings] | None,
) -> tuple[ModelSettings, ModelSettings] | None:
    """An agent's ``settings`` with its session id as ``cache_key``, for the prompt caches.

    ``None`` when the settings name a key of their own, or the model sends none (nothing
    to do: the chat carries the settings as they are). Otherwise ``(settings, keyed)``,
    ``last`` again while the settings and the session are the ones it was made for: one
    object per settings and session, so every request of a session carries the same one.
    The agent's session id is read only then (an agent makes it when first read).
    """
    if settings.cache_key is not None or not model.prompt_cache_key:
        return None
    session_id = agent.session_id
    if last is not None and last[0] is settings and last[1].cache_key == session_id:
        return last
    return settings, dataclasses.replace(settings, cache_key=session_id)


def _settings_for(setup: ChatSetup, iteration: int) -> ModelSettings:
    settings = setup.settings
    if iteration and setup.reset_tool_choice and settings.tool_choice not in ("auto", "none"):
        return dataclasses.replace(settings, tool_choice="auto")
    return settings


def _extend_last_user(messages: tuple[Message, ...], text: str) -> tuple[Message, ...] | None:
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, UserMessage):
            if isinstance(message.content, str):
                content: str | tuple[TextPart, ...] = f"{message.content}\n\n{text}"
                changed = dataclasses.replace(message, content=content)
            else:
                changed = dataclasses.replace(
                    message, content=(*message.content, TextPart(text=text))
                )
            return (*messages[:index], changed, *messages[index + 1 :])
    return None

"""The agent: configuration plus ``chat`` / ``chat_stream`` / ``chat_sync`` / ``cancel``.

The agent composes its collaborators (the hook registry, the scope registry, the model, the
memory store, the chat slot of ``_chat_slot.py`` that keeps one chat at a time) and hands each chat
to the loop in ``_loop.py`` with what it needs (a ``ChatSetup``), each memory write to
``memory/_write.py`` and each delegation to ``_delegation.py``; it holds no logic of its own.
"""

from __future__ import annotations

import enum
from collections.abc import (
    Awaitable,
    Callable,
    Iterable,
    Mapping,
)
from types import TracebackType
from typing import Any, Literal, TypeVar, overload

from ._agent_memory import MemoryMethods
from ._agent_parts import IdleParts
from ._approval import ApprovalDecision, PendingApproval
from ._approval_log import (
    ApprovalState,
    check_deps,
    check_edit,
    checked_decisions,
    current_state,
    in_call_order,
    rulings_for,
)
from ._background import run_sync
from ._delegation import as_tool, delegate
from ._errors import UsageError
from ._limits import NO_LIMITS, ChatLimits, RepeatLimit, UsageLimits, chat_limits
from ._loop import ChatRun
from ._messages import Message, UserInput, UserMessage, user_message
from ._output import DEFAULT_OUTPUT_RETRIES, OutputMode, OutputSpec, output_spec
from ._pricing import NO_PRICES, ModelPrice, Pricing
from ._run_context import NO_DEPS
from ._session_limits import check_session_limits, records_spend, seed_session, watch_session
from ._setup import ChatSetup, Resumption, StepRunner, keyed_settings
from ._stream import ChatStream
from ._stream_events import AgentEvent, AgentResponse
from ._tools import Scope, ScopeRegistry, Tool, check_name
from .context._history import ChatHistory
from .context._sliding_window import SlidingWindow
from .context._tokens import counter_for_model
from .hooks._contexts import SessionSwitchContext
from .hooks._dispatch import Disposer, HookRegistry, notify_reporting
from .hooks._events import ON_SESSION_SWITCH
from .hooks._host import AgentHost, Plugin, is_plugin
from .memory._attach import attach_memory
from .memory._base import MemoryStore
from .models._base import Model, ModelSettings
from .retry import DefaultRetryStrategy, ModelRetryStrategy

__all__ = ["DEFAULT_SCOPE", "Agent", "Default"]

DEFAULT_CONTEXT_WINDOW = 128_000
"""The token budget of a new history when the model does not say its context window."""

DEFAULT_SCOPE = "default"
"""The name of the scope that holds the tools passed to ``Agent(tools=...)``."""

OutT = TypeVar("OutT")

_OUTPUT_SPECS_KEPT = 64  # per agent; more distinct per-chat output types are built each time
_DEFAULT_SETTINGS = ModelSettings()  # frozen: every agent without settings shares it


class Default(enum.Enum):
    """The type of the "not given, use the default" marker for arguments that accept None."""

    DEFAULT = enum.auto()


class Agent(MemoryMethods, IdleParts, AgentHost):
    """An LLM agent whose every step can be watched and steered with hooks.

    A chat runs with the ``model``, ``settings``, ``max_iterations`` and
    ``reset_tool_choice`` the agent had when it started; changing them takes effect from the
    next chat (a ``pre_request`` hook chooses the model of one attempt).

    Args:
        model: The model to call; see :mod:`hookloop.models`.
        name: A name for logs and for delegation paths.
        system_prompt: Instructions sent with every request.
        tools: Tools (or typed functions) the model may call; they form the scope
            ``"default"``.
        max_iterations: The most model calls one chat may make; past it the chat raises
            :class:`~hookloop.MaxIterationsError`.
        settings: Sampling and tool-choice settings for every request.
        reset_tool_choice: When ``settings.tool_choice`` forces a tool call (``"required"``
            or a tool's name), force it on the first model call of each chat only; the
            calls that follow tool results use ``"auto"`` so the model can answer. ``False``
            forces every call (the chat then ends at ``max_iterations``).
        history: The conversation to continue; by default a new
            :class:`~hookloop.ChatHistory` sized to the model's context window,
            counting tokens as exactly as the model allows. A ``system_prompt`` given here
            replaces the history's.
        retry: How failed model calls are retried: a :class:`~hookloop.retry.
            ModelRetryStrategy`, ``None`` for no retries, or (when not given) a new
            :class:`~hookloop.retry.DefaultRetryStrategy`. See ``docs/retries.md``.
        context: What keeps requests inside the context window: a context policy plugin
            (:class:`~hookloop.context.SlidingWindow`, :class:`~hookloop.context.Compaction`),
            ``None`` to send the whole history every time, or (when not given) a new
            :class:`~hookloop.context.SlidingWindow`: every request fits the model's window
            minus room for the answer and the history's ``max_context_tokens``, and a
            provider's overflow error is recovered from. See ``docs/context.md``.
        plugins: Plugins to :meth:`use` at once.
        memory: Where :meth:`store_memory` and the memory tool write: a
            :class:`~hookloop.memory.MemoryStore`, or your own object with
            ``store_<type>`` methods (the seed's convention). If the object has memory hooks
            (``on_memory_write``…), they are registered too. See ``docs/memory.md``.
        session_id: The session the agent starts in; a new id when not given. See
            :meth:`switch_session`.
        deps: The dependencies tools receive in their :class:`~hookloop.RunContext` when a
            chat passes none (``chat(..., deps=...)`` wins). See ``docs/tools.md``.
        output_type: The type every chat's answer is validated as (a pydantic model, a
            dataclass, a ``TypedDict``, a scalar, a union...), found in ``response.output``;
            ``None`` for text. A chat may ask for another. See ``docs/output.md``.
        output_mode: How the model is asked for it: ``"tool"`` (an output tool it calls;
            its other tools stay usable), ``"native"`` (the provider's JSON-schema mode),
            or ``"prompted"`` (the schema in the system prompt).
        output_retries: How many invalid answers go back to the model, each with what is
            wrong, before the chat raises :class:`~hookloop.OutputValidationError`.
        limits: What each chat may spend (:class:`~hookloop.UsageLimits`).
        repeat_limit: How often a chat may make the same tool call: an int, a
            :class:`~hookloop.limits.RepeatLimit`, or ``None``. See ``docs/budgets.md``.
        prices: Your own :class:`~hookloop.limits.ModelPrice` by model name.
        session_limits: What the whole session may spend, all its chats together
            (:class:`~hookloop.UsageLimits`): with a session recorder, in whatever process
            or worker they ran; otherwise this agent's chats in this process since it
            entered the session. See ``docs/budgets.md``.

    Attributes:
        hooks: The hook registry; prefer :meth:`add_hook`.
        scopes: The scopes of tools and context (``agent.scopes.register(scope)``).
    """

    def __init__(
        self,
        model: Model,
        *,
        name: str = "agent",
        system_prompt: str | None = None,
        tools: Iterable[Tool | Callable[..., Any]] = (),
        max_iterations: int = 20,
        settings: ModelSettings | None = None,
        reset_tool_choice: bool = True,
        history: ChatHistory | None = None,
        retry: ModelRetryStrategy | Literal[Default.DEFAULT] | None = Default.DEFAULT,
        context: Plugin | Literal[Default.DEFAULT] | None = Default.DEFAULT,
        plugins: Iterable[Plugin] = (),
        memory: object = None,
        session_id: str | None = None,
        deps: object = NO_DEPS,
        output_type: object = None,
        output_mode: OutputMode = "tool",
        output_retries: int = DEFAULT_OUTPUT_RETRIES,
        limits: UsageLimits | None = None,
        repeat_limit: int | RepeatLimit | None = None,
        prices: Mapping[str, ModelPrice] | None = None,
        session_limits: UsageLimits | None = None,
    ) -> None:
        if not isinstance(model, Model):
            raise UsageError(f"model must be a hookloop Model, got {type(model).__name__}")
        if (
            isinstance(max_iterations, bool)
            or not isinstance(max_iterations, int)
            or max_iterations < 1
        ):
            raise UsageError(f"max_iterations must be a positive int, got {max_iterations!r}")
        if system_prompt is not None and not isinstance(system_prompt, str):
            raise UsageError("system_prompt must be a str or None")
        if history is not None and not isinstance(history, ChatHistory):
            raise UsageError(f"history must be a ChatHistory, got {type(history).__name__}")
        self._output = (
            None
            if output_type is None
            else output_spec(output_type, mode=output_mode, retries=output_retries)
        )
        if self._output is not None:
            self._output.check_model(model)
        # The output spec of the chat started last: a resumed chat goes on with it.
        self._chat_output = self._output
        self._output_mode = output_mode
        self._output_retries = output_retries
        # Specs of per-chat output types: a pydantic TypeAdapter costs ~150 us to build.
        # Made on first use: an idle agent is smaller (bench/context.py, agent_kb_*).
        self._output_specs: dict[tuple[object, str, int], OutputSpec[Any]] | None = None
        self.model = model
        self.name = check_name("agent", name)
        if history is None:  # not `or`: an empty history is falsy, and it is still the one given
            history = ChatHistory(
                max_context_tokens=model.context_window or DEFAULT_CONTEXT_WINDOW,
                token_counter=counter_for_model(model.name),
            )
        self.history = history
        """The conversation: messages, system prompt, token budget (see ``docs/context.md``)."""
        if system_prompt is not None:
            self.history.add_system_prompt(system_prompt)
        self.max_iterations = max_iterations
        self.settings = settings or _DEFAULT_SETTINGS
        self.reset_tool_choice = reset_tool_choice
        """Whether a forcing ``settings.tool_choice`` applies to a chat's first model call only."""
        self.hooks = HookRegistry()
        self.scopes = ScopeRegistry(self.hooks)
        # The session id (a new one when first read), chat slot, approval book and background
        # tasks are made when first needed: an idle agent is smaller (_agent_parts.py).
        self._no_parts(None if session_id is None else _checked_session_id(session_id))
        self.deps = deps
        """The default dependencies of a chat's tools (``NO_DEPS`` for none)."""
        self._limits = chat_limits(NO_LIMITS, limits, repeat_limit, None)  # none: NO_LIMITS
        self._pricing = NO_PRICES if prices is None else Pricing(prices)
        self._plugins: tuple[Plugin, ...] = ()
        self.session_limits = check_session_limits(session_limits)
        """What the whole session may spend (``None``: no limit); see ``docs/budgets.md``."""
        if self.session_limits is not None:
            watch_session(self)
        tool_list = list(tools)
        if tool_list:
            self.scopes.register(Scope(DEFAULT_SCOPE, tools=tool_list))
        if self._output is not None:
            self._output.check_tools(self.scopes.tool_names)
        if retry is Default.DEFAULT:
            retry = DefaultRetryStrategy()
        elif retry is not None and not isinstance(retry, ModelRetryStrategy):
            raise UsageError(f"retry must be a ModelRetryStrategy or None, got {retry!r}")
        self.retry_strategy = retry
        """The model retry strategy in use, or ``None``."""
        if context is Default.DEFAULT:
            context = SlidingWindow()
        elif context is not None and not is_plugin(context):
            raise UsageError(f"context must be a context policy plugin or None, got {context!r}")
        self.context_policy = context
        """The context policy in use, or ``None``."""
        attached: list[Disposer] = []
        try:
            for plugin in (retry, context, *plugins):
                if plugin is not None:
                    attached.append(self.use(plugin))
            self.memory: MemoryStore | None = attach_memory(self, memory)
            """Where memory writes go, or ``None``; see ``docs/memory.md``."""
        except BaseException:
            # The agent is never returned: hand the plugins back, so they can serve another.
            for dispose in reversed(attached):
                dispose()
            raise

    def __repr__(self) -> str:
        return f"Agent(name={self.name!r}, model={self.model.name!r})"

    @property
    def messages(self) -> tuple[Message, ...]:
        """The conversation so far (the system prompt is not part of it)."""
        return self.history.messages

    @property
    def system_prompt(self) -> str | None:
        """The system prompt, kept in :attr:`history`; set it to change it."""
        system = self.history.system_message
        return system.content if system is not None else None

    @system_prompt.setter
    def system_prompt(self, prompt: str | None) -> None:
        self.history.add_system_prompt(prompt or "")

    @property
    def plugins(self) -> tuple[Plugin, ...]:
        """The plugins in use, in the order they were added."""
        return self._plugins

    def use(self, plugin: Plugin) -> Disposer:
        """Add a plugin: it registers its hooks now; the disposer removes them all.

        Raises:
            UsageError: ``plugin`` is not a plugin, or this agent uses it already.
        """
        if not is_plugin(plugin):
            raise UsageError(f"{plugin!r} is not a plugin: it needs a name and init_agent(agent)")
        if any(p is plugin for p in self._plugins):
            raise UsageError(f"plugin {plugin.name!r} is already used by this agent")
        with self.hooks.collect() as disposers:
            try:
                plugin.init_agent(self)
            except BaseException:
                for dispose in disposers:
                    dispose()
                raise
        self._plugins = (*self._plugins, plugin)

        def remove() -> None:
            for dispose in disposers:
                dispose()
            self._plugins = tuple(p for p in self._plugins if p is not plugin)

        # A plugin used from inside another plugin's init_agent goes with its parent.
        return self.hooks.adopt(Disposer(remove))

    @overload
    async def chat(
        self,
        message: UserInput,
        *,
        output_type: type[OutT],
        output_mode: OutputMode | None = None,
        output_retries: int | None = None,
        deps: object = NO_DEPS,
        limits: UsageLimits | Literal[Default.DEFAULT] | None = Default.DEFAULT,
        repeat_limit: int | RepeatLimit | Literal[Default.DEFAULT] | None = Default.DEFAULT,
    ) -> AgentResponse[OutT]: ...
    @overload
    async def chat(
        self,
        message: UserInput,
        *,
        output_type: object = ...,
        output_mode: OutputMode | None = None,
        output_retries: int | None = None,
        deps: object = NO_DEPS,
        limits: UsageLimits | Literal[Default.DEFAULT] | None = Default.DEFAULT,
        repeat_limit: int | RepeatLimit | Literal[Default.DEFAULT] | None = Default.DEFAULT,
    ) -> AgentResponse[Any]: ...
    async def chat(
        self,
        message: UserInput,
        *,
        output_type: object = Default.DEFAULT,
        output_mode: OutputMode | None = None,
        output_retries: int | None = None,
        deps: object = NO_DEPS,
        limits: UsageLimits | Literal[Default.DEFAULT] | None = Default.DEFAULT,
        repeat_limit: int | RepeatLimit | Literal[Default.DEFAULT] | None = Default.DEFAULT,
    ) -> AgentResponse[Any]:
        """Send one user message and run the loop until the model answers without tools.

        A chat whose model calls a tool that needs approval ends early with the call in
        ``response.pending_approvals``; :meth:`resume` goes on.

        Args:
            message: The user's message.
            output_type: The type this chat's answer is validated as (``response.output``),
                instead of the agent's; ``None`` for text. A type checker infers
                ``response.output`` from it.
            output_mode: Instead of the agent's ``output_mode``.
            output_retries: Instead of the agent's ``output_retries``.
            deps: The dependencies tools receive in their :class:`~hookloop.RunContext`;
                :attr:`deps` when not given.
            limits: Replace the agent's usage limits for this chat (``None``: none).
            repeat_limit: Replaces the agent's repeat limit for this chat.

        Calls decided in a process that died before their results were committed are
        answered first (see ``docs/approval.md``, "Across a restart").

        Raises:
            UsageError: Tool calls of the last chat (of this process, or with a session
                recorder of any) still wait for approval (:meth:`resume` first).
            ConcurrentChatError: Another chat is running on this agent.
            MaxIterationsError: The model kept calling tools past ``max_iterations``.
            UsageLimitExceeded: A usage limit or the repeat limit (``"stop"``) was reached.
            OutputValidationError: The answer stayed invalid as ``output_type``.
            ProviderError: The model failed and no hook retried it.
            ChatCancelledError: :meth:`cancel` ended the chat.
            UsageError: An output type, mode or retry count that cannot be used, or a
                tool named ``final_result`` beside the output tool.
            asyncio.CancelledError: The task running the chat was cancelled.
        """
        output = self._output_for(output_type, output_mode, output_retries)
        budget = chat_limits(self._limits, limits, repeat_limit, Default.DEFAULT)
        run = await self._start(user_message(message), None, deps, output, limits=budget)
        return await self._slot.drive(run)

    def chat_stream(
        self,
        message: UserInput,
        *,
        output_type: object = Default.DEFAULT,
        output_mode: OutputMode | None = None,
        output_retries: int | None = None,
        deps: object = NO_DEPS,
        limits: UsageLimits | Literal[Default.DEFAULT] | None = Default.DEFAULT,
        repeat_limit: int | RepeatLimit | Literal[Default.DEFAULT] | None = Default.DEFAULT,
    ) -> ChatStream:
        """Run a chat like :meth:`chat`, yielding its events as they happen.

        Use it as ``async with agent.chat_stream(...) as events: async for event in events``
        so that leaving early ends the chat at once; the last event is
        :class:`~hookloop.ChatDone`. See docs/hooks.md for the order of events.
        With an output type, :class:`~hookloop.PartialOutput` events carry the answer as
        it validates so far.
        """
        output = self._output_for(output_type, output_mode, output_retries)
        budget = chat_limits(self._limits, limits, repeat_limit, Default.DEFAULT)
        return ChatStream(self, user_message(message), deps, output, budget)

    @overload
    def chat_sync(
        self,
        message: UserInput,
        *,
        output_type: type[OutT],
        output_mode: OutputMode | None = None,
        output_retries: int | None = None,
        deps: object = NO_DEPS,
        limits: UsageLimits | Literal[Default.DEFAULT] | None = Default.DEFAULT,
        repeat_limit: int | RepeatLimit | Literal[Default.DEFAULT] | None = Default.DEFAULT,
    ) -> AgentResponse[OutT]: ...
    @overload
    def chat_sync(
        self,
        message: UserInput,
        *,
        output_type: object = ...,
        output_mode: OutputMode | None = None,
        output_retries: int | None = None,
        deps: object = NO_DEPS,
        limits: UsageLimits | Literal[Default.DEFAULT] | None = Default.DEFAULT,
        repeat_limit: int | RepeatLimit | Literal[Default.DEFAULT] | None = Default.DEFAULT,
    ) -> AgentResponse[Any]: ...
    def chat_sync(
        self,
        message: UserInput,
        *,
        output_type: object = Default.DEFAULT,
        output_mode: OutputMode | None = None,
        output_retries: int | None = None,
        deps: object = NO_DEPS,
        limits: UsageLimits | Literal[Default.DEFAULT] | None = Default.DEFAULT,
        repeat_limit: int | RepeatLimit | Literal[Default.DEFAULT] | None = Default.DEFAULT,
    ) -> AgentResponse[Any]:
        """Blocking :meth:`chat` for code without an event loop.

        Raises:
            UsageError: Called while an event loop is running in this thread.
        """
        return run_sync(
            self.chat(
                message,
                output_type=output_type,
                output_mode=output_mode,
                output_retries=output_retries,
                deps=deps,
                limits=limits,
                repeat_limit=repeat_limit,
            ),
            "chat_sync",
        )

    def _output_for(
        self,
        output_type: object,
        mode: OutputMode | None,
        retries: int | None,
        base: OutputSpec[Any] | Literal[Default.DEFAULT] | None = Default.DEFAULT,
    ) -> OutputSpec[Any] | None:
        """The output spec of one chat: ``base`` (the agent's), unless the call asks for another.

        Raises:
            UsageError: The type, mode or retries cannot be used, or the model cannot do
                the mode.
        """
        default_mode, default_retries = self._output_mode, self._output_retries
        if output_type is Default.DEFAULT:
            spec = self._output if base is Default.DEFAULT else base
            if spec is None or (mode is None and retries is None):
                return spec
            output_type, default_mode, default_retries = spec.output_type, spec.mode, spec.retries
        if output_type is None:
            return None
        mode = default_mode if mode is None else mode
        retries = default_retries if retries is None else retries
        key = (output_type, mode, retries)
        if self._output_specs is None:
            self._output_specs = {}
        try:
            spec, kept = self._output_specs.get(key), True
        except TypeError:  # an unhashable type (Annotated with a list in it...): no cache
            spec, kept = None, False
        if spec is None:
            spec = output_spec(output_type, mode=mode, retries=retries)
            if kept and len(self._output_specs) < _OUTPUT_SPECS_KEPT:
                self._output_specs[key] = spec
        spec.check_model(self.model)
        return spec

    # -- approval ----------------------------------------------------------------------------

    async def pending_approvals(self) -> tuple[PendingApproval, ...]:
        """The tool calls waiting for a person's decision, in call order.

        With a session recorder in use, they are read from the session (restoring it
        first if this agent has not yet), so a new process sees what an earlier one left
        pending; otherwise they are the ones the last chat of this agent left.

        A call whose tool or arguments in the history changed since its approval was
        asked for is listed with ``requested_digest`` set: only a denial is accepted for it.

        Raises:
            CorruptSessionError: An approval record of the session cannot be read.
        """
        return (await self._approval_state()).pending

    async def resume(
        self,
        decisions: Iterable[ApprovalDecision],
        *,
        deps: object = NO_DEPS,
        output_type: object = Default.DEFAULT,
        output_mode: OutputMode | None = None,
        output_retries: int | None = None,
        limits: UsageLimits | Literal[Default.DEFAULT] | None = Default.DEFAULT,
        repeat_limit: int | RepeatLimit | Literal[Default.DEFAULT] | None = Default.DEFAULT,
    ) -> AgentResponse:
        """Go on with a chat that ended with pending approvals, one decision per call.

        Make each decision from a pending call: ``pending.approve()``,
        ``pending.deny(reason)`` (the model sees ``reason`` as the call's error result) or
        ``pending.edit(arguments)``. ``on_approval_decision`` fires for each, the approved
        and edited calls run (concurrently, committed in call order) with exactly the
        arguments decided on (the pending call's ``arguments``, or the edit's), and the
        chat goes on as :meth:`chat` does; it may end with new pending approvals.

        Calls decided in a process that died before their results were committed are
        answered in the same batch (see ``docs/approval.md``, "Across a restart"); with
        only such calls and none pending, ``resume([])`` answers them and goes on.

        The chat keeps the output type, mode and retries it was started with when this
        agent started it; a resume in another process (the session restored) gets the
        agent's, unless it passes them again.

        Args:
            decisions: One decision for every pending call.
            deps: As for :meth:`chat`.
            output_type: Instead of the paused chat's output type (``None`` for text).
            output_mode: Instead of the paused chat's output mode.
            output_retries: Instead of the paused chat's output retries.
            limits: As for :meth:`chat` (the agent's when not given, not the paused chat's).
            repeat_limit: As for :meth:`chat`.

        Raises:
            UsageError: No call is pending, or a call has no decision or two; or an
                output type, mode or retry count that cannot be used.
            UnknownApprovalError: A decision names a call that is not pending.
            ApprovalMismatchError: An approval or edit was made for other arguments than
                the call has now, or the call changed since its approval was asked for.
                Nothing was run or recorded.
            ApprovalEditError: An edit's arguments do not fit the tool's parameters;
                nothing was run or recorded, the calls still wait.
            MissingDepsError: An approved or edited call's tool takes
                ``RunContext[Deps]`` and no ``deps`` are given; nothing was run or
                recorded, the calls still wait.
            SessionConflictError: With a session recorder, another worker decided on
                these calls first; nothing was run.
            ConcurrentChatError: A chat is running.
        """
        output = self._output_for(output_type, output_mode, output_retries, self._chat_output)
        budget = chat_limits(self._limits, limits, repeat_limit, Default.DEFAULT)
        run = await self._resumed(decisions, None, deps, output, budget)
        return await self._slot.drive(run)

    async def _resumed(
        self,
        decisions: Iterable[ApprovalDecision],
        emit: Callable[[AgentEvent], Awaitable[None]] | None,
        deps: object,
        output: OutputSpec[Any] | None,
        limits: ChatLimits,
        steps: StepRunner | None = None,
    ) -> ChatRun:
        """The run :meth:`resume` drives, its decisions checked (``hookloop serve`` streams it).

        ``steps`` records a durable turn's calls (a durable turn that resumes).
        """
        with self._slot.holding("resume"):
            state = await self._approval_state()
        if state.message is None:
            raise UsageError("nothing to resume: no tool call is waiting for approval")
        decided = checked_decisions(state.pending, decisions, state.rulings)
        for pending, decision in decided:
            check_edit(decision, pending.tool_name, self.scopes)
        rulings = in_call_order(state.message, (*state.rulings, *rulings_for(decided)))
        if deps is NO_DEPS and self.deps is NO_DEPS:
            check_deps(self.scopes, rulings, state.message)
        start = Resumption(message=state.message, decided=decided, rulings=rulings)
        return await self._start(start, emit, deps, output, steps, limits=limits)

    def resume_sync(
        self,
        decisions: Iterable[ApprovalDecision],
        *,
        deps: object = NO_DEPS,
        output_type: object = Default.DEFAULT,
        output_mode: OutputMode | None = None,
        output_retries: int | None = None,
        limits: UsageLimits | Literal[Default.DEFAULT] | None = Default.DEFAULT,
        repeat_limit: int | RepeatLimit | Literal[Default.DEFAULT] | None = Default.DEFAULT,
    ) -> AgentResponse:
        """Blocking :meth:`resume` for code without an event loop.

        Raises:
            UsageError: Called while an event loop is running in this thread.
        """
        resumed = self.resume(
            decisions,
            deps=deps,
            output_type=output_type,
            output_mode=output_mode,
            output_retries=output_retries,
            limits=limits,
            repeat_limit=repeat_limit,
        )
        return run_sync(resumed, "resume_sync")

    def pending_approvals_sync(self) -> tuple[PendingApproval, ...]:
        """Blocking :meth:`pending_approvals` for code without an event loop.

        Raises:
            UsageError: Called while an event loop is running in this thread.
        """
        return run_sync(self.pending_approvals(), "pending_approvals_sync")

    async def _approval_state(self) -> ApprovalState:
        """The latest batch's pending calls and decided calls without results."""
        return await current_state(self._plugins, self._book(), self.history)

    def cancel(self, reason: object = None) -> bool:
        """End the running chat as soon as possible.

        Tool calls already in history get a "cancelled" result, ``on_chat_abort`` fires,
        and the chat raises :class:`~hookloop.ChatCancelledError`. It may be called from any
        task or thread; from a hook or tool of the chat itself it takes effect at the next
        step. Returns ``False`` when no chat is running.
        """
        return self._slot.cancel(reason)

    # -- delegation --------------------------------------------------------------------------

    async def delegate(
        self,
        task: str,
        *,
        to: Agent,
        metadata: Mapping[str, Any] | None = None,
        limits: UsageLimits | None = None,
    ) -> AgentResponse:
        """Have the sub-agent ``to`` do ``task`` (one chat of it) and return its response.

        Its events reach this agent's ``on_subagent_event`` handlers, tagged with the agent
        path; what it spends is added to this agent's running chat, if any, and it may
        spend at most what that chat's limits have left; cancelling the caller cancels it;
        ``on_delegation`` fires here once it succeeded. Delegations to one sub-agent take
        turns. See ``docs/delegation.md`` and ``docs/budgets.md``.

        Args:
            task: What the sub-agent should do, with everything it needs to know.
            to: The sub-agent.
            metadata: Passed to ``on_delegation`` handlers.
            limits: A slice: the most the sub-agent's chat may spend (within what this
                agent's chat has left).

        Raises:
            UsageError: ``to`` is this agent, or ``task`` is empty.
            UsageLimitExceeded: The sub-agent's chat reached its slice or what was left.
            Exception: What the sub-agent's chat raised.
        """
        return await delegate(self, task, to, metadata=metadata, limits=limits)

    def as_tool(
        self,
        *,
        name: str | None = None,
        description: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        limits: UsageLimits | None = None,
    ) -> Tool:
        """This agent as a tool another agent's model can call with a ``task``.

        Each call is a :meth:`delegate` from the agent whose chat called the tool; the
        tool's result is this agent's answer, and its failure (a limit reached included) a
        tool error the calling model sees.

        Args:
            name: The tool's name; this agent's name by default.
            description: What the calling model is told the tool does; say what this agent
                is good at.
            metadata: Passed to the parent's ``on_delegation`` handlers.
            limits: A slice: the most each call may spend (within what the calling chat's
                limits have left).
        """
        return as_tool(self, name=name, description=description, metadata=metadata, limits=limits)

    # -- sessions ----------------------------------------------------------------------------

    async def switch_session(
        self,
        new_session_id: str,
        *,
        parent_session_id: str | None = None,
        reset: bool = False,
    ) -> None:
        """Move the agent to another session; ``on_session_switch`` fires afterwards.

        Args:
            new_session_id: The session to be in from now on.
            parent_session_id: The session the new one continues from, if any (for
                session stores that keep lineage). Without ``reset`` the conversation goes
                on, so by default it is the session the agent was in.
            reset: Clear the conversation (the system prompt stays) before the event.

        Tool calls waiting for approval stay with the session they were asked in: without
        ``reset`` the switch is refused while some wait (decide on them with :meth:`resume`
        first); with ``reset`` the conversation, and with it the calls, is left behind.

        Raises:
            ConcurrentChatError: A chat is running: a chat's messages stay in one session.
            UsageError: ``new_session_id`` is not a non-empty str, or tool calls wait for
                approval and ``reset`` is not given.
        """
        checked = _checked_session_id(new_session_id)
        if parent_session_id is not None:
            _checked_session_id(parent_session_id)
        with self._slot.holding("switch sessions"):
            waiting = not reset and checked != self.session_id and await self.pending_approvals()
        if waiting:
            raise UsageError(
                "tool calls wait for approval in this session: decide on them with "
                "agent.resume(decisions) before switching, or switch with reset=True to "
                "leave them behind"
            )
        previous, self.session_id = self.session_id, checked
        if parent_session_id is None and not reset and previous != checked:
            parent_session_id = previous  # a continuation: it goes on from there
        if reset:
            self.history.clear_history()
        if hs := self.hooks.handlers.get(ON_SESSION_SWITCH):
            ctx = SessionSwitchContext(
                new_session_id=checked,
                parent_session_id=parent_session_id,
                reset=bool(reset),
                previous_session_id=previous,
            )
            await notify_reporting(hs, ctx)

    def switch_session_sync(
        self,
        new_session_id: str,
        *,
        parent_session_id: str | None = None,
        reset: bool = False,
    ) -> None:
        """Blocking :meth:`switch_session` for code without an event loop.

        Raises:
            UsageError: Called while an event loop is running in this thread.
        """
        run_sync(
            self.switch_session(new_session_id, parent_session_id=parent_session_id, reset=reset),
            "switch_session_sync",
        )

    # -- closing -----------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Wait for the agent's background work (async memory hooks), then close connections.

        Plugins that hold connections (an :class:`~hookloop.mcp.MCPToolset`: those with an
        ``aclose()`` method) close them, last added first; they reopen on the next use.
        The agent stays usable; call it again after more work. ``async with agent:`` calls
        it on the way out. The memory store is yours and stays open.
        """
        await self.background.drain()
        for plugin in reversed(self._plugins):
            close = getattr(plugin, "aclose", None)
            if close is not None:
                await close()

    async def __aenter__(self) -> Agent:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def _start(
        self,
        message: UserMessage | Resumption,
        emit: Callable[[AgentEvent], Awaitable[None]] | None,
        deps: object = NO_DEPS,
        output: OutputSpec[Any] | Literal[Default.DEFAULT] | None = Default.DEFAULT,
        steps: StepRunner | None = None,
        *,
        limits: ChatLimits | None = None,
    ) -> ChatRun:
        """The one start of every chat: a chat of ``message`` holding this agent's slot.

        ``chat``, ``chat_stream``, ``resume``, delegation and durable turns all start here;
        run the chat with ``_slot.drive``. A new user message is refused while tool calls
        of an earlier chat wait for approval; calls decided in a process that died before
        their results were committed are answered first (``docs/approval.md``). A
        :class:`Resumption` comes from :meth:`resume`, which decided them. ``output`` is how
        the chat gets a typed answer (the agent's when not given); ``steps`` records a
        durable turn's model and tool calls; ``limits`` the chat's (else the agent's).

        Raises:
            UsageError: Tool calls of an earlier chat (of this process or another) wait.
            MissingDepsError: A decided call to run again needs deps the chat lacks.
            ConcurrentChatError: A chat is running on this agent.
        """
        # While a chat runs, its calls are half-answered in the history; claiming the slot
        # then raises ConcurrentChatError, which is the answer.
        slot = self._slot
        if isinstance(message, UserMessage) and slot.run is None:
            with slot.holding("start a chat"):
                state = await self._approval_state()
            if state.pending:
                raise UsageError(
                    "tool calls of the last chat wait for approval: decide on them with "
                    "agent.resume(decisions) before the next chat"
                )
            if state.message is not None:
                if deps is NO_DEPS and self.deps is NO_DEPS:
                    check_deps(self.scopes, state.rulings, state.message)
                message = Resumption(
                    message=state.message, decided=(), rulings=state.rulings, user=message
                )
        output = self._output if output is Default.DEFAULT else output
        if output is not None:
            output.check_tools(self.scopes.tool_names)
        limits = limits or self._limits
        setup = ChatSetup(
            handlers=self.hooks.handlers,
            model=self.model,
            scopes=self.scopes,
            settings=self._chat_settings(),
            max_iterations=self.max_iterations,
            reset_tool_choice=self.reset_tool_choice,
            history=self.history,
            window=policy if isinstance(policy := self.context_policy, SlidingWindow) else None,
            agent=self,
            deps=self.deps if deps is NO_DEPS else deps,
            approvals=self._book(),
            output=output,
            steps=steps,
            limits=limits.limits,
            repeat_limit=limits.repeat,
            pricing=self._pricing,
        )
        if self.session_limits is not None or records_spend(self._plugins):
            await seed_session(self, setup, self.session_limits)
        run = slot.claim(ChatRun(setup, message, emit))
        self._chat_output = output
        return run

    _keyed: tuple[ModelSettings, ModelSettings] | None = None  # see keyed_settings

    def _chat_settings(self) -> ModelSettings:
        """A chat's settings: with the session id as ``cache_key`` for a model that sends one."""
        keyed = keyed_settings(self.settings, self.model, self, self._keyed)
        if keyed is None:
            return self.settings
        self._keyed = keyed
        return keyed[1]


def _checked_session_id(session_id: object) -> str:
    if not isinstance(session_id, str) or not session_id:
        raise UsageError(f"a session id must be a non-empty str, got {session_id!r}")
    return session_id

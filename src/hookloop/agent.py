"""The agent: configuration plus ``chat`` / ``chat_stream`` / ``chat_sync`` / ``cancel``.

The agent composes its collaborators (the hook registry, the scope registry, the model, the
memory store, the chat slot of ``_slot.py`` that keeps one chat at a time) and hands each chat
to the loop in ``_loop.py`` with what it needs (a ``ChatSetup``), each memory write to
``memory/_write.py`` and each delegation to ``_delegation.py``; it holds no logic of its own.
"""

from __future__ import annotations

import enum
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, Literal

from ._background import BackgroundTasks, run_sync
from ._delegation import as_tool, delegate
from ._loop import ChatRun, ChatSetup
from ._slot import ChatSlot
from ._stream import StreamedChat, handoff
from .context.history import ChatHistory, _check_message
from .context.policies import SlidingWindow
from .context.tokens import counter_for_model
from .errors import InvalidMessageError, MemoryRequestError, UsageError
from .events import AgentEvent, AgentResponse
from .hooks import (
    ON_SESSION_SWITCH,
    Disposer,
    HookHost,
    HookRegistry,
    Plugin,
    SessionSwitchContext,
    notify_reporting,
)
from .memory._attach import attach_memory
from .memory._write import write_memory
from .memory.base import MemoryAction, MemoryEntry, MemoryStore, MemoryType
from .memory.tool import memory_tool
from .messages import ContentPart, ImagePart, Message, TextPart, UserMessage, new_id
from .models.base import Model, ModelSettings
from .retry import DefaultRetryStrategy, ModelRetryStrategy
from .tools import Scope, ScopeRegistry, Tool, check_name

__all__ = ["DEFAULT_SCOPE", "Agent", "ChatStream", "Default"]

DEFAULT_CONTEXT_WINDOW = 128_000
"""The token budget of a new history when the model does not say its context window."""

DEFAULT_SCOPE = "default"
"""The name of the scope that holds the tools passed to ``Agent(tools=...)``."""

UserInput = str | UserMessage | Sequence[ContentPart]


class Default(enum.Enum):
    """The type of the "not given, use the default" marker for arguments that accept None."""

    DEFAULT = enum.auto()


class Agent(HookHost):
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
            :class:`~hookloop.context.ChatHistory` sized to the model's context window,
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

    Attributes:
        hooks: The hook registry; prefer :meth:`add_hook`.
        scopes: The scopes of tools and context (``agent.scopes.register(scope)``).
        background: Tasks the agent started that nobody awaits (async memory hooks);
            :meth:`aclose` waits for them.
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
        self.settings = settings or ModelSettings()
        self.reset_tool_choice = reset_tool_choice
        """Whether a forcing ``settings.tool_choice`` applies to a chat's first model call only."""
        self.hooks = HookRegistry()
        self.scopes = ScopeRegistry(self.hooks)
        self.background = BackgroundTasks()
        self.session_id: str = _checked_session_id(
            new_id("session") if session_id is None else session_id
        )
        """The session the agent is in; change it with :meth:`switch_session`."""
        self._slot = ChatSlot(self)
        self._plugins: list[Plugin] = []
        tool_list = list(tools)
        if tool_list:
            self.scopes.register(Scope(DEFAULT_SCOPE, tools=tool_list))
        if retry is Default.DEFAULT:
            retry = DefaultRetryStrategy()
        elif retry is not None and not isinstance(retry, ModelRetryStrategy):
            raise UsageError(f"retry must be a ModelRetryStrategy or None, got {retry!r}")
        self.retry_strategy = retry
        """The model retry strategy in use, or ``None``."""
        if context is Default.DEFAULT:
            context = SlidingWindow()
        elif context is not None and not isinstance(context, Plugin):
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
    def is_running(self) -> bool:
        """Whether a chat is running now."""
        return self._slot.run is not None

    @property
    def plugins(self) -> tuple[Plugin, ...]:
        """The plugins in use, in the order they were added."""
        return tuple(self._plugins)

    def use(self, plugin: Plugin) -> Disposer:
        """Add a plugin: it registers its hooks now; the disposer removes them all.

        Raises:
            UsageError: ``plugin`` is not a plugin, or this agent uses it already.
        """
        if not isinstance(plugin, Plugin):
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
        self._plugins.append(plugin)

        def remove() -> None:
            for dispose in disposers:
                dispose()
            self._plugins.remove(plugin)

        # A plugin used from inside another plugin's init_agent goes with its parent.
        return self.hooks.adopt(Disposer(remove))

    async def chat(self, message: UserInput) -> AgentResponse:
        """Send one user message and run the loop until the model answers without tools.

        Raises:
            ConcurrentChatError: Another chat is running on this agent.
            MaxIterationsError: The model kept calling tools past ``max_iterations``.
            ProviderError: The model failed and no hook retried it.
            ChatCancelledError: :meth:`cancel` ended the chat.
            asyncio.CancelledError: The task running the chat was cancelled.
        """
        return await self._slot.drive(self._start(_user_message(message), None))

    def chat_stream(self, message: UserInput) -> ChatStream:
        """Run a chat like :meth:`chat`, yielding its events as they happen.

        Use it as ``async with agent.chat_stream(...) as events: async for event in events``
        so that leaving early ends the chat at once; the last event is
        :class:`~hookloop.ChatDone`. See :mod:`hookloop.events` for the order of events.
        """
        return ChatStream(self, _user_message(message))

    def chat_sync(self, message: UserInput) -> AgentResponse:
        """Blocking :meth:`chat` for code without an event loop.

        Raises:
            UsageError: Called while an event loop is running in this thread.
        """
        return run_sync(self.chat(message), "chat_sync")

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
        self, task: str, *, to: Agent, metadata: Mapping[str, Any] | None = None
    ) -> AgentResponse:
        """Have the sub-agent ``to`` do ``task`` (one chat of it) and return its response.

        Its events reach this agent's ``on_subagent_event`` handlers, tagged with the agent
        path; its token usage is added to this agent's running chat, if any; cancelling
        the caller cancels it; ``on_delegation`` fires here once it succeeded. Delegations
        to one sub-agent take turns. See ``docs/delegation.md``.

        Args:
            task: What the sub-agent should do, with everything it needs to know.
            to: The sub-agent.
            metadata: Passed to ``on_delegation`` handlers.

        Raises:
            UsageError: ``to`` is this agent, or ``task`` is empty.
            Exception: What the sub-agent's chat raised.
        """
        return await delegate(self, task, to, metadata=metadata)

    def as_tool(
        self,
        *,
        name: str | None = None,
        description: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Tool:
        """This agent as a tool another agent's model can call with a ``task``.

        Each call is a :meth:`delegate` from the agent whose chat called the tool; the
        tool's result is this agent's answer, and its failure a tool error the calling
        model sees.

        Args:
            name: The tool's name; this agent's name by default.
            description: What the calling model is told the tool does; say what this agent
                is good at.
            metadata: Passed to the parent's ``on_delegation`` handlers.
        """
        return as_tool(self, name=name, description=description, metadata=metadata)

    # -- memory ------------------------------------------------------------------------------

    async def store_memory(
        self,
        content: str,
        *,
        memory_type: MemoryType = "long_term",
        action: MemoryAction = "add",
        metadata: Mapping[str, Any] | None = None,
        memory_id: str | None = None,
        match: str | None = None,
    ) -> MemoryEntry:
        """Write to :attr:`memory`; ``on_memory_write`` fires after the write succeeds.

        Args:
            content: The text to add; for ``"replace"``, the new text; for ``"remove"``,
                the text that names the entry when neither ``memory_id`` nor ``match`` is
                given.
            memory_type: ``"short_term"``, ``"long_term"``, ``"entity"`` or ``"episodic"``.
            action: ``"add"`` a new entry, ``"replace"`` an entry's text, or ``"remove"``
                an entry.
            metadata: JSON-compatible data kept with the entry; for ``"replace"``, ``None``
                keeps the entry's metadata.
            memory_id: The entry a replace or remove applies to.
            match: Or: text that exactly one entry of ``memory_type`` contains
                (case-insensitive).

        Returns:
            The entry written (for ``"remove"``, as it was).

        Raises:
            MemoryRequestError: (a ``ValueError``) an unknown type or action, an action the
                store does not support, no store, or malformed arguments. Nothing was
                written and no hook fired.
            MemoryNotFoundError: No entry has that id or contains that text.
        """
        return await write_memory(
            self,
            content,
            memory_type=memory_type,
            action=action,
            metadata=metadata,
            memory_id=memory_id,
            match=match,
            source="api",
        )

    def store_memory_sync(
        self,
        content: str,
        *,
        memory_type: MemoryType = "long_term",
        action: MemoryAction = "add",
        metadata: Mapping[str, Any] | None = None,
        memory_id: str | None = None,
        match: str | None = None,
    ) -> MemoryEntry:
        """Blocking :meth:`store_memory` for code without an event loop.

        Raises:
            UsageError: Called while an event loop is running in this thread.
        """
        return run_sync(
            self.store_memory(
                content,
                memory_type=memory_type,
                action=action,
                metadata=metadata,
                memory_id=memory_id,
                match=match,
            ),
            "store_memory_sync",
        )

    async def search_memory(
        self, query: str, *, memory_type: MemoryType | None = None, limit: int = 10
    ) -> list[MemoryEntry]:
        """The entries of :attr:`memory` that best match ``query``, best first.

        Raises:
            MemoryRequestError: The agent has no memory store, or the type is unknown.
        """
        store = self.memory
        if store is None:
            raise MemoryRequestError(f"agent {self.name!r} has no memory: pass Agent(memory=...)")
        return await store.search(query, memory_type=memory_type, limit=limit)

    def memory_tool(self, *, name: str = "memory", description: str | None = None) -> Tool:
        """A tool the model can call to search and write :attr:`memory`.

        Its writes go through :meth:`store_memory`'s path, so ``on_memory_write`` fires
        for them. Register it like any tool:
        ``agent.scopes.register(Scope("memory", tools=[agent.memory_tool()]))``.

        Raises:
            UsageError: The agent has no memory store.
        """
        return memory_tool(self, name=name, description=description)

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

        Raises:
            ConcurrentChatError: A chat is running: a chat's messages stay in one session.
            UsageError: ``new_session_id`` is not a non-empty str.
        """
        checked = _checked_session_id(new_session_id)
        if parent_session_id is not None:
            _checked_session_id(parent_session_id)
        self._slot.refuse("switch sessions")
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
        """Wait for the agent's background work (async memory hooks) to finish.

        The agent stays usable; call it again after more work. ``async with agent:`` calls
        it on the way out. The memory store is yours and stays open.
        """
        await self.background.drain()

    async def __aenter__(self) -> Agent:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def _start(
        self, message: UserMessage, emit: Callable[[AgentEvent], Awaitable[None]] | None
    ) -> ChatRun:
        """A chat of ``message`` holding this agent's slot; run it with ``_slot.drive``.

        Raises:
            ConcurrentChatError: A chat is running on this agent.
        """
        setup = ChatSetup(
            handlers=self.hooks.handlers,
            model=self.model,
            scopes=self.scopes,
            settings=self.settings,
            max_iterations=self.max_iterations,
            reset_tool_choice=self.reset_tool_choice,
            history=self.history,
            window=policy if isinstance(policy := self.context_policy, SlidingWindow) else None,
        )
        return self._slot.claim(ChatRun(setup, message, emit))


class ChatStream:
    """The events of one streamed chat: an async iterator and an async context manager.

    The chat starts when iteration starts and runs in the consumer's task, one event at a
    time: it waits while the consumer handles an event. Leaving the ``async with`` block (or
    calling :meth:`aclose`) before the end cancels the chat, which then ends as cancelled
    (``on_chat_abort``); so does cancelling the consumer's task.
    """

    def __init__(self, agent: Agent, message: UserMessage) -> None:
        self._agent = agent
        self._message = message
        self._events: AsyncIterator[AgentEvent] | None = None
        self.response: AgentResponse | None = None
        """The chat's response, once the stream has ended successfully."""

    def __aiter__(self) -> AsyncIterator[AgentEvent]:
        if self._events is None:
            self._events = self._produce()
        return self._events

    async def __aenter__(self) -> ChatStream:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Stop the stream; a chat still running is cancelled, and closed before this returns.

        The chat answers its open tool calls and records them first. Cancelled while it
        waits, it passes the cancellation on to the chat, still waits, and then raises it.
        """
        if self._events is not None:
            await self._events.aclose()  # type: ignore[attr-defined]

    async def _produce(self) -> AsyncIterator[AgentEvent]:
        agent = self._agent
        run = agent._start(self._message, handoff)
        chat = StreamedChat(run, agent._slot.drive(run))
        try:
            while (event := await chat.pull()) is not None:
                yield event
            self.response = chat.response
        finally:
            await chat.close()


def _user_message(message: UserInput) -> UserMessage:
    # Whatever form it comes in, the message passes add_message()'s rules: chat("") and
    # chat(UserMessage(content="")) are refused alike.
    if isinstance(message, UserMessage):
        _check_message(message)
        return message
    if isinstance(message, str):
        message = UserMessage(content=message)
        _check_message(message)
        return message
    if isinstance(message, Sequence) and message:
        message = UserMessage(content=tuple(_content_part(part) for part in message))
        _check_message(message)
        return message
    raise InvalidMessageError(
        f"a user message must be a non-empty str, a UserMessage or a sequence of parts, "
        f"got {type(message).__name__}"
    )


def _content_part(part: object) -> ContentPart:
    if isinstance(part, (TextPart, ImagePart)):
        return part
    raise InvalidMessageError(
        f"a user message part must be TextPart or ImagePart, got {type(part).__name__}"
    )


def _checked_session_id(session_id: object) -> str:
    if not isinstance(session_id, str) or not session_id:
        raise UsageError(f"a session id must be a non-empty str, got {session_id!r}")
    return session_id

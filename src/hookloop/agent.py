"""The agent: configuration plus ``chat`` / ``chat_stream`` / ``chat_sync`` / ``cancel``.

The agent composes its collaborators (the hook registry, the scope registry, the model) and
hands each chat to the loop in ``_loop.py``; it holds no loop logic of its own.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from types import TracebackType
from typing import Any, Literal

from ._loop import ChatRun
from .context.history import ChatHistory
from .context.tokens import counter_for_model
from .errors import ConcurrentChatError, InvalidMessageError, UsageError
from .events import AgentEvent, AgentResponse
from .hooks import Disposer, HookHost, HookRegistry, Plugin
from .messages import ContentPart, ImagePart, Message, TextPart, UserMessage
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
        plugins: Plugins to :meth:`use` at once.

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
        plugins: Iterable[Plugin] = (),
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
        self._run: ChatRun | None = None
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
        if retry is not None:
            self.use(retry)
        for plugin in plugins:
            self.use(plugin)

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
        return self._run is not None

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
        run = self._start(_user_message(message), None)
        try:
            return await run.run()
        finally:
            self._run = None

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
        _require_no_running_loop("chat_sync")
        return asyncio.run(self.chat(message))

    def cancel(self, reason: object = None) -> bool:
        """End the running chat as soon as possible.

        Tool calls already in history get a "cancelled" result, ``on_chat_abort`` fires,
        and the chat raises :class:`~hookloop.ChatCancelledError`. It may be called from any
        task or thread; from a hook or tool of the chat itself it takes effect at the next
        step. Returns ``False`` when no chat is running.
        """
        run = self._run
        return run.cancel(reason) if run is not None else False

    def _start(
        self, message: UserMessage, emit: Callable[[AgentEvent], Awaitable[None]] | None
    ) -> ChatRun:
        if self._run is not None:
            raise ConcurrentChatError(
                f"agent {self.name!r} is already running a chat; one chat at a time per agent "
                "(wait for it, cancel it, or close its stream first)"
            )
        self._run = ChatRun(self, message, self.history, emit)
        return self._run


class ChatStream:
    """The events of one streamed chat: an async iterator and an async context manager.

    The chat starts when iteration starts and runs in a task of its own; events arrive in
    order. Leaving the ``async with`` block (or calling :meth:`aclose`) before the end
    cancels the chat, which then ends as cancelled (``on_chat_abort``).
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
        """Stop the stream; a chat still running is cancelled."""
        if self._events is not None:
            await self._events.aclose()  # type: ignore[attr-defined]

    async def _produce(self) -> AsyncIterator[AgentEvent]:
        queue: asyncio.Queue[AgentEvent | None] = asyncio.Queue()

        async def emit(event: AgentEvent) -> None:
            # Hand the event over and let the consumer handle it before the loop goes on,
            # so hook side effects and the consumer's output interleave in order.
            queue.put_nowait(event)
            await asyncio.sleep(0)

        run = self._agent._start(self._message, emit)

        async def drive() -> AgentResponse:
            try:
                return await run.run()
            finally:
                self._agent._run = None
                queue.put_nowait(None)

        task = asyncio.ensure_future(drive())
        try:
            while (event := await queue.get()) is not None:
                yield event
            self.response = task.result()
        finally:
            if not task.done():
                run.cancel("the stream was closed before the chat finished")
                await asyncio.wait([task])
            if not task.cancelled():
                task.exception()  # retrieved: the consumer has seen it or chose to leave


def _user_message(message: UserInput) -> UserMessage:
    if isinstance(message, UserMessage):
        return message
    if isinstance(message, str):
        if not message.strip():
            raise InvalidMessageError("the user message is empty")
        return UserMessage(content=message)
    if isinstance(message, Sequence) and message:
        return UserMessage(content=tuple(_content_part(part) for part in message))
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


def _require_no_running_loop(name: str) -> None:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise UsageError(f"{name}() cannot run inside a running event loop; await the async method")

"""The hook contract: registration.

Add_hook / dispose / @hook / registration errors.

Part of DESIGN.md sections 2 and 3 (seed 002 "AG2B hooks").
"""

import pytest

from hookloop import ChatStartContext, Disposer, HookRegistrationError, HookReturnError, UsageError
from hookloop.hooks import ScopeContext
from hookloop.testing import ScriptedModel
from tests.hooks._support import (
    SCOPE_EVENTS,
    AsyncCallable,
    bare_agent,
    make_agent,
)

# --- registration -------------------------------------------------------------------------


async def test_add_hook_returns_a_disposer_that_removes_the_handler() -> None:
    agent, _, _ = make_agent(["one", "two"])
    seen: list[str] = []
    dispose = agent.add_hook("on_message", lambda ctx: seen.append(ctx.message.role))

    assert isinstance(dispose, Disposer)
    await agent.chat("first")
    dispose()
    await agent.chat("second")

    assert seen == ["user", "assistant"]


async def test_dispose_is_idempotent_and_leaves_other_registrations_alone() -> None:
    agent, _, _ = make_agent(["one"])
    seen: list[str] = []
    dispose_a = agent.add_hook("on_chat_start", lambda ctx: seen.append("a"))
    agent.add_hook("on_chat_start", lambda ctx: seen.append("b"))

    assert dispose_a.disposed is False
    dispose_a()
    dispose_a()
    dispose_a()
    assert dispose_a.disposed is True
    await agent.chat("hi")

    assert seen == ["b"]


async def test_same_function_registered_twice_is_two_registrations() -> None:
    agent, _, _ = make_agent(["one", "two"])
    seen: list[str] = []

    def on_start(ctx: ChatStartContext) -> None:
        seen.append(ctx.message.text)

    first = agent.add_hook("on_chat_start", on_start)
    agent.add_hook("on_chat_start", on_start)
    await agent.chat("a")
    first()
    first()  # idempotent: must not remove the second registration
    await agent.chat("b")

    assert seen == ["a", "a", "b"]


async def test_dispose_removes_exactly_its_own_registration() -> None:
    agent, _, _ = make_agent(["one"])
    seen: list[str] = []
    agent.add_hook("on_chat_start", lambda ctx: seen.append("first"))
    dispose_middle = agent.add_hook("on_chat_start", lambda ctx: seen.append("middle"))
    agent.add_hook("on_chat_start", lambda ctx: seen.append("last"))

    dispose_middle()
    await agent.chat("hi")

    assert seen == ["first", "last"]


async def test_hook_decorator_registers_and_returns_the_function_unchanged() -> None:
    agent, _, _ = make_agent(["one"])
    seen: list[str] = []

    def plain(ctx: ChatStartContext) -> None:
        seen.append("plain")

    decorated = agent.hook("on_chat_start")(plain)

    @agent.hook("on_chat_start", order=-1)
    def early(ctx: ChatStartContext) -> None:
        seen.append("early")

    await agent.chat("hi")

    assert decorated is plain
    assert callable(early)
    assert early.__name__ == "early"
    assert seen == ["early", "plain"]


@pytest.mark.parametrize("event", ["onMessage", "on_messages", "", "before_request"])
def test_unknown_event_raises_hook_registration_error(event: str) -> None:
    agent = bare_agent(ScriptedModel([]))

    with pytest.raises(HookRegistrationError, match="unknown hook event"):
        agent.add_hook(event, lambda ctx: None)  # type: ignore[call-overload]
    with pytest.raises(HookRegistrationError, match="unknown hook event"):
        agent.hook(event)(lambda ctx: None)  # type: ignore[arg-type]

    assert agent.hooks.handlers == {}


def test_non_callable_handler_is_rejected() -> None:
    agent = bare_agent(ScriptedModel([]))

    with pytest.raises(HookRegistrationError, match="callable"):
        agent.add_hook("on_message", "not a function")  # type: ignore[call-overload]
    assert agent.hooks.handlers == {}


@pytest.mark.parametrize("order", ["1", 1.0, True, None])
def test_order_must_be_an_int(order: object) -> None:
    agent = bare_agent(ScriptedModel([]))

    with pytest.raises(HookRegistrationError, match="order"):
        agent.add_hook("on_message", lambda ctx: None, order=order)  # type: ignore[call-overload]
    assert agent.hooks.handlers == {}


@pytest.mark.parametrize("event", SCOPE_EVENTS)
def test_async_handler_for_a_scope_event_is_rejected(event: str) -> None:
    agent = bare_agent(ScriptedModel([]))

    async def handler(ctx: ScopeContext) -> None:
        pass

    with pytest.raises(HookRegistrationError, match="plain functions"):
        agent.add_hook(event, handler)  # type: ignore[call-overload]
    with pytest.raises(HookRegistrationError, match="plain functions"):
        agent.add_hook(event, AsyncCallable([], "x"))  # type: ignore[call-overload]
    assert agent.hooks.handlers == {}


def test_registration_errors_are_usage_errors() -> None:
    assert issubclass(HookRegistrationError, UsageError)
    assert issubclass(HookReturnError, UsageError)
    assert issubclass(HookReturnError, TypeError)


def test_async_is_told_apart_for_every_kind_of_callable() -> None:
    # is_async_callable reads a plain function's code directly (a fast path for plugins
    # that register dozens of handlers); every other callable goes through inspect.
    import functools
    import inspect

    from hookloop.hooks._dispatch import is_async_callable

    async def coroutine(ctx: object) -> None:
        return None

    def plain(ctx: object) -> None:
        return None

    def tagged(ctx: object) -> None:
        return None

    tagged.note = "set on the function"  # type: ignore[attr-defined]

    class Callable:
        async def __call__(self, ctx: object) -> None:
            return None

    class Plugin:
        async def on_event(self, ctx: object) -> None:
            return None

        def on_other(self, ctx: object) -> None:
            return None

        @classmethod
        async def on_class(cls, ctx: object) -> None:
            return None

    plugin = Plugin()
    kinds: list[object] = [coroutine, plain, tagged, lambda ctx: None, Callable()]
    kinds += [functools.partial(coroutine), functools.partial(plain)]
    kinds += [plugin.on_event, plugin.on_other, Plugin.on_class, plugin.__init__]
    marked: list[object] = []
    if hasattr(inspect, "markcoroutinefunction"):  # Python 3.12+
        marked.append(inspect.markcoroutinefunction(lambda ctx: coroutine(ctx)))

        def method(self: object, ctx: object) -> object:
            return coroutine(ctx)

        Plugin.marked = inspect.markcoroutinefunction(method)  # type: ignore[attr-defined]
        marked.append(plugin.marked)  # type: ignore[attr-defined]
    expected = [True, False, False, False, True, True, False, True, False, True, False]
    expected += [True] * len(marked)
    assert [is_async_callable(fn) for fn in kinds + marked] == expected  # type: ignore[arg-type]


# --- idle_on_answer: a handler's promise that lets the loop skip after_model_call ---------


async def test_an_after_model_call_row_leaves_out_for_an_answer_the_handlers_idle_for_one() -> None:
    from hookloop import AfterModelCallContext, ServerError

    flaky = ServerError("busy", status=503)
    agent = bare_agent(ScriptedModel([flaky, "one", "two"]))
    idle = [True]
    seen: list[tuple[str, int, str]] = []

    def watch(name: str) -> object:
        def handler(ctx: AfterModelCallContext) -> None:
            seen.append((name, ctx.attempt, "ok" if ctx.error is None else "failed"))
            if ctx.error is not None:
                ctx.retry = True

        return handler

    agent.hooks.add("after_model_call", watch("a"), idle_on_answer=lambda: idle[0])
    await agent.chat("first")  # a failed attempt: the handler is called; the answer: not
    assert seen == [("a", 1, "failed")]

    idle[0] = False  # the promise is read every time
    await agent.chat("second")
    assert seen[1:] == [("a", 1, "ok")]

    # Handlers that promised nothing: the row runs for an answer, with them alone (in
    # their order) while the promise holds, with every handler when it does not.
    idle[0] = True
    agent.add_hook("after_model_call", watch("b"))  # type: ignore[call-overload]
    dispose_c = agent.add_hook("after_model_call", watch("c"), order=-1)  # type: ignore[call-overload]
    agent.model = ScriptedModel(["three", "four"])
    await agent.chat("third")
    assert seen[2:] == [("c", 1, "ok"), ("b", 1, "ok")]
    idle[0] = False
    await agent.chat("fourth")
    assert seen[4:] == [("c", 1, "ok"), ("a", 1, "ok"), ("b", 1, "ok")]

    # Disposed, a handler leaves the answer's row too.
    dispose_c()
    idle[0] = True
    agent.model = ScriptedModel(["five"])
    await agent.chat("fifth")
    assert seen[7:] == [("b", 1, "ok")]


class _Pending(list[str]):
    """Work a handler has left for an answer: idle while empty (and falsy then, too)."""

    def __call__(self) -> bool:
        return not self


async def test_a_falsy_idle_on_answer_is_a_promise_all_the_same() -> None:
    pending = _Pending()
    seen: list[str] = []
    agent = bare_agent(ScriptedModel(["one", "two"]))
    agent.hooks.add("after_model_call", lambda ctx: seen.append("watch"))
    agent.hooks.add("after_model_call", lambda ctx: seen.append("pending"), idle_on_answer=pending)
    await agent.chat("first")
    assert seen == ["watch"]
    pending.append("confirm")  # work for the next answer: the promise does not hold
    await agent.chat("second")
    assert seen == ["watch", "watch", "pending"]


async def _async_idle() -> bool:
    return True


@pytest.mark.parametrize(
    ("event", "idle"),
    [("on_message", lambda: True), ("after_model_call", "yes"), ("after_model_call", _async_idle)],
)
def test_idle_on_answer_is_a_plain_function_for_after_model_call_only(
    event: str, idle: object
) -> None:
    agent = bare_agent(ScriptedModel([]))

    with pytest.raises(HookRegistrationError, match="idle_on_answer"):
        agent.hooks.add(event, lambda ctx: None, idle_on_answer=idle)  # type: ignore[arg-type]
    assert agent.hooks.handlers == {}

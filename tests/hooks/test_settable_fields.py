"""A handler changes things by returning, or by setting the fields its event's row lists.

Setting any other field of the context (``ctx.request`` on ``pre_request``, which only a
return may replace) is refused with a ``HookReturnError`` naming the field, and undone.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from hookloop import Agent, HookReturnError
from hookloop.hooks import EVENT_TABLE
from hookloop.models import ProviderRequest, ProviderResponse
from hookloop.testing import ScriptedModel

# (event, field, what the error says to do)
REFUSED = [
    ("pre_request", "request", "return the new value instead"),
    ("pre_request", "iteration", "the fields it may set are: model, replace_history, left_out"),
    ("on_response", "response", "return the new value instead"),
    ("on_response", "request", "the fields it may set are: none"),
    ("after_model_call", "iteration", "the fields it may set are: retry, request, model, "),
    ("on_chat_start", "message", "the fields it may set are: none"),
]


def _replacement(value: object) -> object:
    if isinstance(value, ProviderRequest):
        return dataclasses.replace(value, messages=[])
    if isinstance(value, ProviderResponse):
        return dataclasses.replace(value, content="forged")
    if isinstance(value, int):
        return value + 41
    return object()


@pytest.mark.parametrize(("event", "field", "advice"), REFUSED)
async def test_setting_a_field_outside_the_settable_ones_is_refused(
    event: str, field: str, advice: str
) -> None:
    model = ScriptedModel(["Hello!"])
    agent = Agent(model, retry=None, context=None)
    seen: list[object] = []

    def sets_it(ctx: Any) -> None:
        setattr(ctx, field, _replacement(getattr(ctx, field)))

    def after(ctx: Any) -> None:
        seen.append(getattr(ctx, field))

    agent.add_hook(event, sets_it)  # type: ignore[call-overload]
    agent.add_hook(event, after, order=1)  # type: ignore[call-overload]

    with pytest.raises(HookReturnError) as raised:
        await agent.chat("hi")

    assert str(raised.value).startswith(
        f"the {event!r} handler {sets_it.__qualname__} set ctx.{field}; {advice}"
    )
    assert raised.value.__notes__ == [
        f"raised by the {event!r} hook handler {sets_it.__qualname__}"
    ]
    assert seen == []  # the chat ended there: no later handler saw the forged value


def test_every_settable_field_is_a_field_of_its_context_and_the_rest_are_fixed() -> None:
    for name, spec in EVENT_TABLE.items():
        fields = set(spec.context.__dataclass_fields__)
        assert set(spec.settable) <= fields, name
        assert set(spec.fixed) == fields - set(spec.settable), name
        assert (spec.field == "") or spec.field in spec.fixed, name


async def test_the_settable_fields_still_work() -> None:
    other = ScriptedModel(["from the other model"])
    agent = Agent(ScriptedModel(["never"]), retry=None, context=None)

    def route(ctx: Any) -> None:
        ctx.model = other

    agent.add_hook("pre_request", route)
    response = await agent.chat("hi")
    assert response.message.content == "from the other model"


async def test_the_assignment_itself_is_refused_and_the_field_keeps_its_value() -> None:
    """The context refuses the write where it happens: the handler's own line raises."""
    agent = Agent(ScriptedModel(["Hello!"]), retry=None, context=None)
    refused: list[str] = []
    seen: list[object] = []

    def tries(ctx: Any) -> None:
        original = ctx.request
        try:
            ctx.request = dataclasses.replace(original, messages=())
        except HookReturnError as exc:
            refused.append(str(exc))
        seen.append(ctx.request is original)

    agent.add_hook("pre_request", tries)
    response = await agent.chat("hi")

    assert response.text == "Hello!"  # the handler caught it: the chat went on
    assert refused == [
        "ctx.request of a PreRequestContext cannot be set; the fields a handler may set are: "
        "model, replace_history, left_out"
    ]
    assert seen == [True]


def test_a_context_refuses_its_fixed_fields_outside_any_dispatch() -> None:
    from hookloop import ChatStartContext, ToolCall, ToolErrorContext, UserMessage

    ctx = ChatStartContext(message=UserMessage(content="hi"))
    with pytest.raises(HookReturnError, match=r"ctx\.message of a ChatStartContext cannot be set"):
        ctx.message = UserMessage(content="forged")  # type: ignore[misc]
    assert ctx.message.content == "hi"

    error = ToolErrorContext(call=ToolCall(name="t"), tool=None, scope=None, error=ValueError())
    error.retry = True  # settable: a plain attribute
    assert error.retry is True
    with pytest.raises(HookReturnError, match="the fields a handler may set are: retry"):
        error.attempt = 2  # type: ignore[misc]
    assert error.attempt == 1


async def test_a_report_handler_writing_a_fixed_field_is_logged_like_any_report_failure(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Reports never raise: a refused write in one is logged at WARNING, the next runs."""
    agent = Agent(ScriptedModel([]), retry=None, context=None)
    after: list[str] = []

    def forges(ctx: Any) -> None:
        ctx.new_session_id = "forged"

    agent.add_hook("on_session_switch", forges)
    agent.add_hook("on_session_switch", lambda ctx: after.append(ctx.new_session_id), order=1)
    await agent.switch_session("s2")

    assert after == ["s2"]
    assert agent.session_id == "s2"
    (record,) = [r for r in caplog.records if r.levelname == "WARNING"]
    assert record.exc_info is not None
    assert str(record.exc_info[1]).startswith(
        f"the 'on_session_switch' handler {forges.__qualname__} set ctx.new_session_id; "
        "the fields it may set are: none"
    )


@pytest.mark.parametrize("spec", list(EVENT_TABLE.values()), ids=lambda spec: spec.name)
def test_a_context_from_its_maker_is_the_one_its_init_makes(spec: Any) -> None:
    # The loop makes the contexts it needs per tool call through maker(): the same fields,
    # the same refusals.
    from hookloop.hooks._contexts import FixedFieldError, maker

    fields = [f.name for f in dataclasses.fields(spec.context)]
    values = [object() for _ in fields]
    made = maker(spec.context)(*values)
    assert type(made) is spec.context
    for name, value in zip(fields, values, strict=True):
        assert getattr(made, name) is value
    for name in set(fields) - set(spec.context.__settable__):
        with pytest.raises(FixedFieldError):
            setattr(made, name, None)
    assert made == spec.context(**dict(zip(fields, values, strict=True)))

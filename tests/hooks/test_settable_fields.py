"""A handler changes things by returning, or by setting the fields its event's row lists.

Setting any other field of the context (``ctx.request`` on ``pre_request``, which only a
return may replace) is refused with a ``HookReturnError`` naming the field, and undone.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from hookloop import Agent, HookReturnError, ProviderRequest, ProviderResponse
from hookloop.hooks import EVENT_TABLE
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

"""What a model call costs: each model's price, found once, and the cost of a usage.

A model's price comes from, in this order: the agent's ``prices`` (by model name); zero for
the local model (it runs on this machine: no money is spent); the bundled price table of
``genai-prices`` (offline: its auto-update is never started here) for a model of a hosted
provider (OpenAI, Anthropic, or an OpenAI-compatible server it knows by its URL, else by the
model's name). The test doubles and models of your own have no price unless you give one:
their calls cost ``None`` ("not priced"), and a cost limit refuses them.

A price is looked up once per model and process (a lookup in ``genai-prices`` costs about
70 us, a call of a price found here about 1 us); a hosted model it does not know is logged
once per name.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, Final, Protocol, runtime_checkable

from ._errors import UsageError
from ._limits import checked_cost
from ._messages import Usage
from .models._base import Model

__all__ = ["NO_PRICES", "ModelPrice", "Price", "Pricing", "price_for"]

logger = logging.getLogger(__name__)

_NOT_LOOKED_UP: Final = object()
LOCAL_PROVIDERS: Final = frozenset({"llama.cpp"})
"""Providers whose models run on this machine: priced at zero."""
UNPRICED_PROVIDERS: Final = frozenset({"hookloop"})
"""Models that run in this process (the test doubles, your own): no price unless given."""


@runtime_checkable
class Price(Protocol):
    """What a model's calls cost: a :class:`ModelPrice`, or the price table's own form.

    :func:`price_for` gives one; a price with tiers (by request size) or a fee per request
    works its costs out with the table itself.
    """

    def cost(self, usage: Usage) -> Decimal:
        """What ``usage`` costs, in US dollars."""
        ...

    def input_cost(self, tokens: int) -> Decimal:
        """What ``tokens`` input tokens cost at most (none read from a cache)."""
        ...


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ModelPrice:
    """A model's price in US dollars per million tokens.

    Give your own with ``Agent(prices={"model-name": ModelPrice(...)})``: for a model that
    ``genai-prices`` does not know, a negotiated price, or a test double standing in for a
    paid model.

    Args:
        input_per_mtok: Per million input tokens that were not read from a cache.
        output_per_mtok: Per million output tokens (reasoning included).
        cached_input_per_mtok: Per million input tokens read from the provider's prompt
            cache; ``None`` prices them as other input tokens.
        cache_write_per_mtok: Per million input tokens written to the provider's prompt
            cache (``Usage.cache_write_tokens``: Anthropic's, 5-minute rate); ``None``
            prices them as other input tokens.

    Each is a ``Decimal``, an int or a float (taken by its shortest repr).

    Raises:
        UsageError: A price that is negative, a bool, not finite, or not a number.

    Example:
        >>> from hookloop import Usage
        >>> price = ModelPrice(input_per_mtok=2.5, output_per_mtok=10, cached_input_per_mtok=1.25)
        >>> price.cost(Usage(input_tokens=1000, cached_input_tokens=200, output_tokens=100))
        Decimal('0.00325000')
    """

    input_per_mtok: Decimal | float
    output_per_mtok: Decimal | float
    cached_input_per_mtok: Decimal | float | None = None
    cache_write_per_mtok: Decimal | float | None = None
    # Per token (a million's price shifted six places: exact), made once: every model call
    # is priced with a few multiplications.
    _per_token: tuple[Decimal, Decimal, Decimal, Decimal] = dataclasses.field(
        init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        prices: list[Decimal] = []
        for name in (
            "input_per_mtok",
            "output_per_mtok",
            "cached_input_per_mtok",
            "cache_write_per_mtok",
        ):
            value = getattr(self, name)
            if value is None and name in ("cached_input_per_mtok", "cache_write_per_mtok"):
                prices.append(prices[0])
                continue
            price = checked_cost(value, f"ModelPrice.{name}")
            if price is None:
                raise UsageError(f"ModelPrice.{name} must be given")
            object.__setattr__(self, name, price)
            prices.append(price.scaleb(-6))
        object.__setattr__(self, "_per_token", (prices[0], prices[2], prices[1], prices[3]))

    def cost(self, usage: Usage) -> Decimal:
        """What ``usage`` costs at this price."""
        inputs, cached_inputs, outputs, writes = self._per_token
        cached = usage.cached_input_tokens
        written = usage.cache_write_tokens
        # Cache reads and writes are counted in input_tokens too; a provider that reports
        # more of them than input tokens is priced for what it reports, never below zero.
        plain = max(usage.input_tokens - cached - written, 0)
        cost = plain * inputs + cached * cached_inputs + usage.output_tokens * outputs
        return cost + written * writes if written else cost

    def input_cost(self, tokens: int) -> Decimal:
        """What ``tokens`` input tokens cost at most (none read from a cache)."""
        return tokens * self._per_token[0]


class _TablePrice:
    """A price of ``genai-prices`` that is not flat: the table works out every cost.

    Tiers by request size (Anthropic's above 200k input tokens), a fee per request.
    """

    __slots__ = ("_price", "_usage")

    def __init__(self, price: Any, usage_type: Any) -> None:
        self._price = price
        self._usage = usage_type

    def cost(self, usage: Usage) -> Decimal:
        counted = self._usage(
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cache_read_tokens=usage.cached_input_tokens,
            cache_write_tokens=usage.cache_write_tokens,
        )
        total = self._price.calc_price(counted)["total_price"]
        assert isinstance(total, Decimal)
        return total

    def input_cost(self, tokens: int) -> Decimal:
        return self.cost(Usage(input_tokens=tokens))


_ZERO_PRICE: Final = ModelPrice(input_per_mtok=0, output_per_mtok=0)
_FOUND: dict[tuple[str, str | None, str], Price | None] = {}  # per process: the table's answers
_WARNED: set[str] = set()  # model names logged as without a price


def price_for(model: Model) -> Price | None:
    """The price of ``model`` without prices of your own: zero, the table's, or ``None``.

    Found once per process for each provider, URL and model name.
    """
    provider = model.provider_name
    if provider in LOCAL_PROVIDERS:
        return _ZERO_PRICE
    if provider in UNPRICED_PROVIDERS:
        return None
    base_url = model.base_url
    key = (provider, base_url, model.name)
    found = _FOUND.get(key, _NOT_LOOKED_UP)
    if found is _NOT_LOOKED_UP:
        found = _FOUND[key] = _look_up(provider, base_url, model.name)
    assert found is None or isinstance(found, Price)
    return found


def _look_up(provider: str, base_url: str | None, name: str) -> Price | None:
    try:
        from genai_prices import Usage as TableUsage
        from genai_prices import data_snapshot, types
    except ImportError:
        _warn_once(name, "genai-prices is not installed: pip install 'hookloop[prices]'")
        return None
    snapshot = data_snapshot.get_snapshot()
    # The provider's id first (its own API), then the server's URL (an OpenAI-compatible
    # one), then the model's name alone.
    tries: list[tuple[str | None, str | None]] = [(provider, None)]
    if base_url is not None:
        tries.insert(0, (None, base_url))
    tries.append((None, None))
    for provider_id, url in tries:
        try:
            _, info = snapshot.find_provider_model(name, None, provider_id, url)
        except LookupError:
            continue
        price = info.get_prices(datetime.now(tz=UTC))
        return _flat(price, types) or _TablePrice(price, TableUsage)
    _warn_once(name, "genai-prices has no price for it")
    return None


_TOKEN_KEYS: Final = frozenset({"input_mtok", "output_mtok", "cache_read_mtok", "cache_write_mtok"})
_UNREPORTED_KEYS: Final = frozenset(
    # Priced units hookloop's Usage never counts: they add nothing to a call's cost.
    {
        "cache_write_1h_mtok",  # Usage does not tell 1-hour writes apart: the 5-minute rate
        "web_searches_kcount",
        "storage_searches_kcount",
        "input_audio_mtok",
        "output_audio_mtok",
        "input_image_mtok",
        "output_image_mtok",
        "input_video_mtok",
        "output_video_mtok",
        "cache_audio_read_mtok",
        "cache_image_read_mtok",
        "audio_hours",
        "input_audio_hours",
        "input_document_kpages",
        "input_annotated_document_kpages",
        "output_citation_mtok",
    }
)


def _flat(price: Any, types: Any) -> ModelPrice | None:
    """The table's ``price`` as a :class:`ModelPrice` when it is one flat price per token."""
    values = {k: v for k, v in vars(price).items() if v is not None and not k.startswith("_")}
    if not set(values) <= _TOKEN_KEYS | _UNREPORTED_KEYS:
        return None
    keys = ("input_mtok", "output_mtok", "cache_read_mtok", "cache_write_mtok")
    tokens = [values.get(k) for k in keys]
    if any(v is not None and not isinstance(v, Decimal) for v in tokens):
        return None  # tiers
    if tokens[0] is None or tokens[1] is None:
        return None
    return ModelPrice(
        input_per_mtok=tokens[0],
        output_per_mtok=tokens[1],
        cached_input_per_mtok=tokens[2],
        cache_write_per_mtok=tokens[3],
    )


def _warn_once(name: str, why: str) -> None:
    if name not in _WARNED:
        _WARNED.add(name)
        logger.warning(
            "model %r has no price (%s): its calls cost None; give one with "
            "Agent(prices={%r: ModelPrice(...)})",
            name,
            why,
            name,
        )


class Pricing:
    """An agent's prices: yours by model name, else :func:`price_for`'s; per model, once."""

    __slots__ = ("_last", "_prices")

    def __init__(self, prices: Mapping[str, ModelPrice] | None = None) -> None:
        if prices is not None:
            if not isinstance(prices, Mapping):
                raise UsageError(
                    f"prices must be a mapping of model names to ModelPrice, got {prices!r}"
                )
            for name, price in prices.items():
                if not isinstance(name, str) or not isinstance(price, ModelPrice):
                    raise UsageError(
                        f"prices must map model names (str) to ModelPrice, got {name!r}: {price!r}"
                    )
        self._prices = dict(prices) if prices else None
        # The model priced last, its name then and its price: read and written as one, so
        # an agent without prices of its own can share one Pricing across threads.
        self._last: tuple[Model | None, str, Price | None] = (None, "", None)

    def price_of(self, model: Model) -> Price | None:
        """The price of ``model``'s calls, ``None`` when it has none."""
        last, name, price = self._last
        if model is last and model.name == name:
            return price
        price = None
        if self._prices is not None:
            price = self._prices.get(model.name)
        if price is None:
            price = price_for(model)
        self._last = (model, model.name, price)
        return price

    @staticmethod
    def input_rate(price: Price) -> Decimal | None:
        """One input token's price when ``price`` is flat (a :class:`ModelPrice`), or ``None``.

        ``tokens * input_rate(price)`` is ``price.input_cost(tokens)``: the usage limits
        estimate every request's cost with it, without a call.
        """
        # (Not a subclass's: it may work out input_cost its own way.)
        return price._per_token[0] if type(price) is ModelPrice else None

    def priced(self, usage: Usage, model: Model) -> Usage:
        """``usage`` with its cost at ``model``'s price, when it has none and one is known."""
        if usage.cost is not None:
            return usage
        price = self.price_of(model)
        if price is None:
            return usage
        return Usage(
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cached_input_tokens=usage.cached_input_tokens,
            reasoning_tokens=usage.reasoning_tokens,
            cache_write_tokens=usage.cache_write_tokens,
            cost=price.cost(usage),
        )


NO_PRICES: Final = Pricing()
"""The pricing of every agent without prices of its own (the table's, found once)."""

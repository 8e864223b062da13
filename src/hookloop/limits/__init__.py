"""Budgets: model prices and the repeat limit (the limits themselves are at the root).

``hookloop.UsageLimits`` says what a chat may spend and ``hookloop.UsageLimitExceeded`` is
raised when it would cross a limit; here are the prices that put a cost on each model call
(:class:`ModelPrice`, :func:`price_for`), :class:`RepeatLimit`, and :class:`Spend`, what a
session spent (``await recorder.spent()``). See ``docs/budgets.md``.
"""

from .._limits import RepeatLimit, Spend
from .._pricing import ModelPrice, Price, price_for
from .._publish import publish as _publish

__all__ = ["ModelPrice", "Price", "RepeatLimit", "Spend", "price_for"]

_publish(globals(), __all__)

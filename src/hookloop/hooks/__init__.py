"""Hook events, their typed contexts, the registry that holds handlers, and plugins.

Every event is one row of :data:`EVENT_TABLE`; the full contract, with the firing order drawn
once, is in ``docs/hooks.md``. Every name here is also importable from ``hookloop``.
"""

from . import _hooks
from ._hooks import *  # noqa: F403  (the public names are the ones _hooks.__all__ lists)

__all__ = _hooks.__all__

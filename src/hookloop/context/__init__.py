"""Context management: context policies, token counting, trimming and repair.

The history these work on is :class:`~hookloop.ChatHistory`, at the root.

- Context policies, the plugins that keep each request inside the context window:
  :class:`SlidingWindow` (the default) and :class:`Compaction`.
- Token counting: the :class:`TokenCounter` protocol, :class:`TiktokenCounter` (exact,
  offline), :class:`EstimateCounter`, :class:`CachingCounter`, :func:`counter_for_model`,
  and :class:`Calibration` from the provider's reported usage.
- :class:`ContextHooks`: rewrite the context before each attempt and recover from provider
  errors with your own functions.
- Pure steps over message sequences: :func:`trim_to_budget`, :func:`truncate_tool_results`,
  :func:`group_units` and :func:`repair`.
"""

from .._publish import publish as _publish
from ._compaction import SUMMARY_HEADER, SUMMARY_PROMPT, Compaction
from ._context_hooks import ContextBeforeRequestResult, ContextHooks, ContextOnErrorResult
from ._repair import MISSING_RESULT_TEXT, repair
from ._sliding_window import SlidingWindow
from ._tokens import (
    IMAGE_TOKENS,
    MESSAGE_OVERHEAD,
    REPLY_PRIMING,
    CachingCounter,
    Calibration,
    EstimateCounter,
    TiktokenCounter,
    TokenCounter,
    count_overhead,
    count_request,
    counter_for_model,
    encoding_for_model,
)
from ._trim import cut_to_fit, group_units, trim_to_budget, truncate_tool_results

__all__ = [
    "IMAGE_TOKENS",
    "MESSAGE_OVERHEAD",
    "MISSING_RESULT_TEXT",
    "REPLY_PRIMING",
    "SUMMARY_HEADER",
    "SUMMARY_PROMPT",
    "CachingCounter",
    "Calibration",
    "Compaction",
    "ContextBeforeRequestResult",
    "ContextHooks",
    "ContextOnErrorResult",
    "EstimateCounter",
    "SlidingWindow",
    "TiktokenCounter",
    "TokenCounter",
    "count_overhead",
    "count_request",
    "counter_for_model",
    "cut_to_fit",
    "encoding_for_model",
    "group_units",
    "repair",
    "trim_to_budget",
    "truncate_tool_results",
]

_publish(globals(), __all__)

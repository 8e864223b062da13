"""Retry strategies: plugins that retry failed model calls and tool runs.

See ``docs/retries.md``.
"""

from .._errors import RetryAttempt
from .._publish import publish as _publish
from ._backoff import Backoff, BackoffKind, JitterKind, apply_jitter, backoff_delay
from ._default import TRANSIENT_ERRORS, DefaultRetryStrategy
from ._fallback import CircuitBreaker, FallbackStrategy
from ._hints import retry_after_seconds
from ._model_retry import ModelRetryStrategy, RetryDecision, Sleep
from ._tool_retry import ToolRetryStrategy

__all__ = [
    "TRANSIENT_ERRORS",
    "Backoff",
    "BackoffKind",
    "CircuitBreaker",
    "DefaultRetryStrategy",
    "FallbackStrategy",
    "JitterKind",
    "ModelRetryStrategy",
    "RetryAttempt",
    "RetryDecision",
    "Sleep",
    "ToolRetryStrategy",
    "apply_jitter",
    "backoff_delay",
    "retry_after_seconds",
]

_publish(globals(), __all__)

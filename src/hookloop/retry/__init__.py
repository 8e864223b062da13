"""Retry strategies: plugins that retry failed model calls and tool runs.

See ``docs/retries.md``.
"""

from .backoff import Backoff, BackoffKind, JitterKind, apply_jitter, backoff_delay
from .default import TRANSIENT_ERRORS, DefaultRetryStrategy
from .fallback import CircuitBreaker, FallbackStrategy
from .hints import retry_after_seconds
from .model import ModelRetryStrategy, RetryDecision, Sleep
from .tools import ToolRetryStrategy

__all__ = [
    "TRANSIENT_ERRORS",
    "Backoff",
    "BackoffKind",
    "CircuitBreaker",
    "DefaultRetryStrategy",
    "FallbackStrategy",
    "JitterKind",
    "ModelRetryStrategy",
    "RetryDecision",
    "Sleep",
    "ToolRetryStrategy",
    "apply_jitter",
    "backoff_delay",
    "retry_after_seconds",
]

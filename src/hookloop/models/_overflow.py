"""Whether a provider's error says the request did not fit the model's context window.

The providers classify their errors with it (an overflow becomes
:class:`~hookloop.ContextOverflowError`), and the context policies recover from what it
accepts.
"""

from __future__ import annotations

from .._errors import ContextOverflowError, ProviderError, RateLimitError

__all__ = ["OVERFLOW_MARKERS", "is_context_overflow"]

OVERFLOW_KEYWORDS: tuple[str, ...] = (
    "maximum context length",
    "context length exceeded",
    "maximum tokens",
    "token limit",
    "too many tokens",
    "context window",
    "tokens exceed",
    "prompt is too long",
    "exceeds the maximum",
)
"""The overflow keywords of frame-agent-sdk's default detector, matched case-insensitively."""

OVERFLOW_MARKERS: tuple[str, ...] = (
    *OVERFLOW_KEYWORDS,
    # Error codes and types.
    "context_length_exceeded",  # OpenAI, Groq, OpenAI-compatible servers: error.code
    "exceed_context_size",  # llama.cpp server: error.type exceed_context_size_error
    # What real servers write besides the keywords.
    "context length",  # Ollama "exceeds the context length", LM Studio "context length of"
    "context size",  # llama.cpp: "exceeds the available context size"
    "context limit",  # Anthropic: "input length and `max_tokens` exceed context limit"
    "input is too long",  # Bedrock
    "reduce the length of the messages",  # Groq, Cerebras, Mistral
    "when context the overflows",  # LM Studio: "Trying to keep the first N tokens when ..."
    "cannot truncate prompt with n_keep",  # LM Studio, llama.cpp: n_keep >= n_ctx
    "`inputs` tokens + `max_new_tokens`",  # HF text-generation-inference (TGI)
    "`inputs` must have less than",  # TGI: "`inputs` must have less than 2048 tokens"
)
"""Lower-case fragments of the overflow errors real providers send: the seed's keywords plus
the providers' error codes and texts (``tests/fixtures/overflow/`` holds a recorded error of
each). An error about pace (a rate limit, "tokens per minute") is never an overflow, whatever
else its text says: see :data:`RATE_LIMIT_MARKERS`."""

RATE_LIMIT_MARKERS: tuple[str, ...] = ("rate limit", "rate_limit", "per min", "per day")
"""Lower-case fragments that make an error text about pace, not size."""


def is_overflow_text(text: str) -> bool:
    """Whether an error text (message, type, code) says the request did not fit the window.

    Example:
        >>> is_overflow_text("prompt is too long: 208736 tokens > 200000 maximum")
        True
        >>> is_overflow_text("Rate limit reached: too many tokens per minute")
        False
    """
    lowered = text.lower()
    if any(marker in lowered for marker in RATE_LIMIT_MARKERS):
        return False
    return any(marker in lowered for marker in OVERFLOW_MARKERS)


def is_context_overflow(error: BaseException) -> bool:
    """Whether ``error`` says the request did not fit the model's context window.

    True for :class:`~hookloop.ContextOverflowError`, and for other errors whose text or
    body contains one of :data:`OVERFLOW_MARKERS`.
    """
    if isinstance(error, ContextOverflowError):
        return True
    if isinstance(error, RateLimitError):
        return False
    text = str(error)
    if isinstance(error, ProviderError) and error.body is not None:
        text = f"{text} {error.body}"
    return is_overflow_text(text)

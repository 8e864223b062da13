"""Turn what a provider said about a failure into one class of hookloop's error tree.

Both adapters call :func:`provider_error` with what they could read off the failure (HTTP
status, the error object of the body, headers), whether it came as an HTTP error or inside
a stream that had started with 200. The class is chosen from the error's own type first
(Anthropic's ``overloaded_error`` may arrive in a 200 stream), then from the status.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from .._errors import (
    AuthenticationError,
    BadRequestError,
    ContextOverflowError,
    NotFoundError,
    OverloadedError,
    ProviderError,
    ProviderTimeoutError,
    RateLimitError,
    ServerError,
)
from ..retry._hints import retry_after_seconds
from ._overflow import is_overflow_text

__all__ = ["ContentBlockedError", "error_fields", "kept_headers", "provider_error"]


class ContentBlockedError(ProviderError):
    """The provider's safety filter blocked the prompt or the answer (Gemini's ``SAFETY``).

    A branch of hookloop's error tree under ``ProviderError`` (kept here: ``_errors.py`` is
    as long as a module may be). The provider answered, with nothing to use: the same
    request is blocked again, so the default retry strategy does not retry it.

    Attributes:
        reason: The provider's reason, e.g. ``"SAFETY"``, ``"PROHIBITED_CONTENT"``,
            ``"RECITATION"``.
        blocked: What was blocked: ``"prompt"`` (nothing was generated) or ``"answer"``.
        categories: The harm categories the filter flagged, e.g.
            ``("HARM_CATEGORY_HATE_SPEECH",)``; empty when the provider named none.
    """

    def __init__(
        self,
        message: str,
        *,
        reason: str,
        blocked: str,
        categories: tuple[str, ...] = (),
        body: object = None,
        model: str | None = None,
    ) -> None:
        super().__init__(message, body=body, model=model)
        self.reason = reason
        self.blocked = blocked
        self.categories = categories


_KEPT_HEADER_PREFIXES = (
    "retry-after",
    "x-ratelimit-",
    "anthropic-ratelimit-",
    "ratelimit-",
    "x-request-id",
    "request-id",
)

_BY_TYPE: Mapping[str, type[ProviderError]] = {
    "overloaded_error": OverloadedError,
    "rate_limit_error": RateLimitError,
    "rate_limit_exceeded": RateLimitError,
    "authentication_error": AuthenticationError,
    "permission_error": AuthenticationError,
    "not_found_error": NotFoundError,
    "api_error": ServerError,
    "server_error": ServerError,
    "timeout_error": ProviderTimeoutError,
    # AWS Bedrock's exception names (a stream's exception events, upper-cased first).
    "ThrottlingException": RateLimitError,
    "ServiceQuotaExceededException": RateLimitError,
    "ServiceUnavailableException": OverloadedError,
    "ModelNotReadyException": OverloadedError,
    "InternalServerException": ServerError,
    "ModelStreamErrorException": ServerError,
    "ModelTimeoutException": ProviderTimeoutError,
    "AccessDeniedException": AuthenticationError,
    "UnrecognizedClientException": AuthenticationError,
    "ExpiredTokenException": AuthenticationError,
    "InvalidSignatureException": AuthenticationError,
    "ResourceNotFoundException": NotFoundError,
    "ValidationException": BadRequestError,
}

_BY_STATUS: Mapping[int, type[ProviderError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    403: AuthenticationError,
    404: NotFoundError,
    408: ProviderTimeoutError,
    409: ServerError,  # a conflict on the provider's side; the official clients retry it
    413: BadRequestError,
    422: BadRequestError,
    429: RateLimitError,
    503: OverloadedError,  # "service unavailable": the provider sheds load
    529: OverloadedError,
}

# "maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens",
# "prompt is too long: 208310 tokens > 200000 maximum", llama.cpp's n_prompt_tokens / n_ctx.
_OVERFLOW_NUMBERS = (
    # Anthropic: "input length and `max_tokens` exceed context limit: 197626 + 8192 > 200000"
    re.compile(r"(?P<request>\d+) \+ \d+ > (?P<limit>\d+)"),
    re.compile(r"(?P<request>\d+) tokens? > (?P<limit>\d+)"),
    re.compile(r"context length is (?P<limit>\d+).*?resulted in (?P<request>\d+)", re.S),
    re.compile(r"context length is (?P<limit>\d+).*?requested (?P<request>\d+)", re.S),
    # Gemini: "The input token count (1196265) exceeds the maximum number of tokens allowed
    # (1048575)."
    re.compile(r"token count \((?P<request>\d+)\) exceeds .*?allowed \((?P<limit>\d+)\)"),
)


def error_fields(body: object) -> tuple[str | None, str | None, str]:
    """The ``(type, code, message)`` of a provider's error body, whatever its nesting.

    Accepts ``{"error": {...}}``, the inner object itself, or text. Codes are returned as
    text (OpenRouter sends the integer 429).

    Example:
        >>> error_fields({"error": {"type": "overloaded_error", "message": "Overloaded"}})
        ('overloaded_error', None, 'Overloaded')
    """
    if isinstance(body, Mapping):
        inner = body.get("error")
        if isinstance(inner, Mapping):
            body = inner
        elif isinstance(inner, str) and "message" not in body:
            return None, None, inner
    if not isinstance(body, Mapping):
        return None, None, "" if body is None else str(body)
    kind, code, message = body.get("type"), body.get("code"), body.get("message")
    return (
        kind if isinstance(kind, str) else None,
        None if code is None else str(code),
        message if isinstance(message, str) else "",
    )


def kept_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The response headers worth keeping on an error: retry hints, rate limits, request id."""
    return {
        key.lower(): value
        for key, value in headers.items()
        if key.lower().startswith(_KEPT_HEADER_PREFIXES)
    }


def provider_error(
    *,
    status: int | None,
    body: object,
    headers: Mapping[str, str] | None = None,
    model: str | None = None,
    fallback_message: str = "the provider reported an error",
) -> ProviderError:
    """The hookloop error for one provider failure.

    Args:
        status: The HTTP status, or ``None`` for an error that arrived inside a stream.
        body: The error body (parsed JSON or text).
        headers: The response headers.
        model: The model the request was for.
        fallback_message: The message when the body has none.
    """
    kind, code, message = error_fields(body)
    message = message or fallback_message
    kept = kept_headers(headers or {})
    if status is None and isinstance(body, Mapping):
        status = _embedded_status(body)
    if _is_overflow(kind, code, message) and (status is None or status in (400, 413, 422)):
        request_tokens, limit_tokens = _overflow_numbers(message, body)
        return ContextOverflowError(
            message,
            request_tokens=request_tokens,
            limit_tokens=limit_tokens,
            status=status,
            body=body,
            model=model,
            headers=kept,
        )
    if code == "insufficient_quota":
        # A 429 that waiting does not fix: the account is out of credit.
        cls: type[ProviderError] = ProviderError
    else:
        cls = _BY_TYPE.get(kind or "") or _BY_STATUS.get(status or 0) or _by_range(status)
    return cls(
        message,
        status=status,
        body=body,
        retry_after=retry_after_seconds(kept),
        model=model,
        headers=kept,
    )


def _by_range(status: int | None) -> type[ProviderError]:
    if status is not None and status >= 500:
        return ServerError
    if status is not None and 400 <= status < 500:
        return BadRequestError
    return ProviderError


def _embedded_status(body: Mapping[str, object]) -> int | None:
    # An error inside a 200 stream or body carries its status in the error object: Groq as
    # status_code, OpenRouter as an integer code.
    inner = body.get("error")
    source = inner if isinstance(inner, Mapping) else body
    for key in ("status_code", "status", "code"):
        value = source.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and 100 <= value <= 599:
            return value
    return None


def _is_overflow(kind: str | None, code: str | None, message: str) -> bool:
    if _BY_TYPE.get(kind or "") is RateLimitError or _BY_TYPE.get(code or "") is RateLimitError:
        return False
    return is_overflow_text(f"{kind or ''} {code or ''} {message}")


def _overflow_numbers(message: str, body: object) -> tuple[int | None, int | None]:
    for pattern in _OVERFLOW_NUMBERS:
        found = pattern.search(message)
        if found:
            return int(found["request"]), int(found["limit"])
    inner = body.get("error", body) if isinstance(body, Mapping) else None
    if isinstance(inner, Mapping):
        request, limit = inner.get("n_prompt_tokens"), inner.get("n_ctx")
        if isinstance(request, int) and isinstance(limit, int):
            return request, limit
    return None, None

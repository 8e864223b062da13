"""JSON schemas that OpenAI's strict mode accepts, and the values that go with them.

Strict mode wants every object closed (``additionalProperties: false``) with every property
required, refuses an object whose keys are free (a ``dict[str, X]`` field), and knows only
some keywords. So :func:`strict_schema` closes the objects, makes each optional property
nullable, writes a free-keyed object as an array of ``{"key", "value"}`` objects (a value of
any type, as in ``dict[str, Any]``, as JSON text), and moves the keywords it does not know
(``uniqueItems``, ``minLength``...) into the description; :func:`convert` walks the original
schema beside a value to turn a value of one form into the other, so what the model sends
is validated as the type the user asked for (with every keyword of its own schema).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal

__all__ = ["WRAPPER_KEY", "convert", "inline_root", "needs_wrapper", "strict_schema"]

WRAPPER_KEY = "response"
"""The one property of the object that carries an answer which is not an object itself."""

Schema = Mapping[str, Any]
Direction = Literal["to_strict", "from_strict"]

# Not allowed in strict mode, or (titles) tokens that tell the model nothing.
_DROPPED = frozenset({"default", "discriminator", "propertyNames", "patternProperties", "title"})
# The keywords strict mode knows; any other goes into the description, so the model still
# reads it, and validation (of the type's own schema) still checks it.
_KNOWN = frozenset(
    {
        "$ref",
        "additionalProperties",
        "anyOf",
        "const",
        "description",
        "enum",
        "exclusiveMaximum",
        "exclusiveMinimum",
        "format",
        "items",
        "maxItems",
        "maximum",
        "minItems",
        "minimum",
        "multipleOf",
        "pattern",
        "prefixItems",
        "properties",
        "required",
        "type",
    }
)
_ANY_VALUE = {"type": "string", "description": "The value as JSON text."}


def strict_schema(schema: Schema) -> dict[str, Any]:
    """``schema`` (with its ``$defs``) made valid for strict mode; the input is not changed."""
    out: dict[str, Any] = _strict(schema)
    if "$defs" in schema:
        out["$defs"] = {name: _strict(sub) for name, sub in schema["$defs"].items()}
    return out


def inline_root(schema: Schema) -> Schema:
    """``schema`` with a root that is a bare ``$ref`` (a recursive type) replaced by its target.

    The ``$defs`` stay for the inner references; a provider may want a ``type`` at the root.
    """
    if "$ref" not in schema:
        return schema
    target = _resolve(schema, schema)
    return {**target, "$defs": schema.get("$defs", {})}


def needs_wrapper(schema: Schema) -> bool:
    """Whether the answer must travel inside ``{"response": ...}``: its root is no object."""
    root = _resolve(schema, schema)
    return not (root.get("type") == "object" and "properties" in root)


def wrap(schema: Schema) -> dict[str, Any]:
    """An object schema with the one required property ``response`` of ``schema``."""
    inner = {key: value for key, value in schema.items() if key != "$defs"}
    wrapped: dict[str, Any] = {
        "type": "object",
        "properties": {WRAPPER_KEY: inner},
        "required": [WRAPPER_KEY],
    }
    if "$defs" in schema:
        wrapped["$defs"] = schema["$defs"]
    return wrapped


def convert(schema: Schema, value: Any, direction: Direction) -> Any:
    """``value`` of the original ``schema`` in strict form, or back (``"from_strict"``).

    Free-keyed objects become ``[{"key": k, "value": v}, ...]`` and back; going back, a
    ``null`` for a property that was optional and does not take ``null`` is left out, so the
    field's default applies. A value that does not fit the schema is passed on unchanged:
    validation reports it.
    """
    return _convert(schema, schema, value, direction)


# --- the schema ------------------------------------------------------------------------------


def _strict(node: Any) -> Any:  # a schema node, or a keyword's value as it is
    if not isinstance(node, Mapping):
        return node
    if _is_free_object(node):
        value = _ANY_VALUE if _any_value(node) else _strict(node["additionalProperties"])
        return {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"key": {"type": "string"}, "value": value},
                "required": ["key", "value"],
                "additionalProperties": False,
            },
            **({"description": node["description"]} if "description" in node else {}),
        }
    out: dict[str, Any] = {}
    unknown: list[str] = []
    for key, value in node.items():
        if key in _DROPPED or key == "$defs":
            continue
        if key not in _KNOWN and key not in ("oneOf", "allOf"):
            unknown.append(f"{key}: {json.dumps(value)}")
            continue
        if key == "properties":
            required = set(node.get("required", ()))
            out[key] = {
                name: _strict(sub) if name in required else _nullable(_strict(sub))
                for name, sub in value.items()
            }
        elif key in ("anyOf", "oneOf"):
            out["anyOf"] = [_strict(sub) for sub in value]
        elif key == "allOf" and len(value) == 1:
            out.update(_strict(value[0]))
        elif key == "items" or key == "additionalProperties":
            out[key] = _strict(value)
        elif key == "prefixItems":
            out[key] = [_strict(sub) for sub in value]
        else:
            out[key] = value
    if unknown:
        note = "; ".join(unknown)
        out["description"] = f"{out['description']} ({note})" if "description" in out else note
    if "$ref" in out and len(out) > 1:  # strict mode allows no keywords beside a $ref
        out = {"$ref": out["$ref"]}
    if out.get("type") == "object" or "properties" in out:
        out["required"] = list(out.get("properties", {}))
        out["additionalProperties"] = False
        out.setdefault("properties", {})
    return out


def _nullable(node: dict[str, Any]) -> dict[str, Any]:
    if _takes_null(node, {}):
        return node
    return {"anyOf": [node, {"type": "null"}]}


def _is_free_object(node: Mapping[str, Any]) -> bool:
    """An object whose keys are free: ``dict[str, X]``, or ``dict[str, Any]``."""
    if node.get("type") != "object" or node.get("properties"):
        return False
    extra = node.get("additionalProperties", True)
    return (isinstance(extra, Mapping) and bool(extra)) or (
        "properties" not in node and (extra is True or extra == {})
    )


def _any_value(node: Mapping[str, Any]) -> bool:
    """A free object whose values may be anything: they travel as JSON text."""
    extra = node.get("additionalProperties", True)
    return not (isinstance(extra, Mapping) and extra)


def _takes_null(node: Any, root: Schema) -> bool:
    if not isinstance(node, Mapping):
        return False
    node = _resolve(root, node)
    kind = node.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    return any(_takes_null(sub, root) for sub in (*node.get("anyOf", ()), *node.get("oneOf", ())))


def _resolve(root: Schema, node: Mapping[str, Any]) -> Mapping[str, Any]:
    seen = 0
    while "$ref" in node and seen < 64:
        name = str(node["$ref"]).rsplit("/", 1)[-1]
        node = root.get("$defs", {}).get(name, {})
        seen += 1
    if "allOf" in node and len(node["allOf"]) == 1:
        return _resolve(root, node["allOf"][0])
    return node


# --- the values ------------------------------------------------------------------------------


def _convert(root: Schema, node: Any, value: Any, direction: Direction) -> Any:
    if not isinstance(node, Mapping):
        return value
    node = _resolve(root, node)
    branches = [*node.get("anyOf", ()), *node.get("oneOf", ())]
    if branches:
        branch = _branch(root, branches, value, direction)
        return value if branch is None else _convert(root, branch, value, direction)
    if _is_free_object(node):
        if _any_value(node):
            if direction == "to_strict" and isinstance(value, Mapping):
                return [{"key": key, "value": json.dumps(item)} for key, item in value.items()]
            if direction == "from_strict" and _is_pairs(value):
                return {pair["key"]: _decoded(pair["value"]) for pair in value}
            return value
        inner = node["additionalProperties"]
        if direction == "to_strict" and isinstance(value, Mapping):
            return [
                {"key": key, "value": _convert(root, inner, item, direction)}
                for key, item in value.items()
            ]
        if direction == "from_strict" and _is_pairs(value):
            return {pair["key"]: _convert(root, inner, pair["value"], direction) for pair in value}
        return value
    properties = node.get("properties")
    if isinstance(properties, Mapping) and isinstance(value, Mapping):
        required = set(node.get("required", ()))
        out: dict[str, Any] = {}
        for key, item in value.items():
            sub = properties.get(key)
            if sub is None:
                out[key] = item
            elif (
                direction == "from_strict"
                and item is None
                and key not in required
                and not _takes_null(sub, root)
            ):
                continue  # strict mode's null for "not given": the default applies
            else:
                out[key] = _convert(root, sub, item, direction)
        if direction == "to_strict":
            for key in properties:
                out.setdefault(key, None)
        return out
    if isinstance(value, list):
        items = node.get("items")
        prefix = node.get("prefixItems")
        if prefix:
            return [
                _convert(root, prefix[i] if i < len(prefix) else items, item, direction)
                for i, item in enumerate(value)
            ]
        if items is not None:
            return [_convert(root, items, item, direction) for item in value]
    return value


def _branch(
    root: Schema, branches: list[Any], value: Any, direction: Direction
) -> Mapping[str, Any] | None:
    """The branch of a union that ``value`` is (or was) an instance of, as well as we can tell."""
    fitting: list[Mapping[str, Any]] = []
    for branch in branches:
        node = _resolve(root, branch)
        if _fits(root, node, value, direction):
            fitting.append(node)
    if not fitting:
        return None
    if isinstance(value, Mapping):  # several models: the one with exactly these keys (strict
        # mode sends every key), else the first that knows them all
        keys = set(value)
        for node in fitting:
            if keys == set(node.get("properties", {})):
                return node
        for node in fitting:
            if keys <= set(node.get("properties", {})):
                return node
    return fitting[0]


def _fits(root: Schema, node: Mapping[str, Any], value: Any, direction: Direction) -> bool:
    if "anyOf" in node or "oneOf" in node:
        return any(
            _fits(root, _resolve(root, sub), value, direction)
            for sub in (*node.get("anyOf", ()), *node.get("oneOf", ()))
        )
    if _is_free_object(node):
        return isinstance(value, Mapping) if direction == "to_strict" else _is_pairs(value)
    kind = node.get("type")
    kinds = kind if isinstance(kind, list) else [kind]
    if value is None:
        return "null" in kinds
    if isinstance(value, Mapping):
        return "object" in kinds or "properties" in node
    if isinstance(value, list):
        return "array" in kinds
    return kind is None or not ({"object", "array", "null"} >= set(kinds))


def _is_pairs(value: Any) -> bool:
    """Key/value pairs with string keys; anything else is left for validation to report."""
    return isinstance(value, list) and all(
        isinstance(pair, Mapping) and set(pair) == {"key", "value"} and isinstance(pair["key"], str)
        for pair in value
    )


def _decoded(text: Any) -> Any:
    """A value sent as JSON text; text that is no JSON stays as it is, for validation."""
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except ValueError:
        return text

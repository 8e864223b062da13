"""What an MCP tool's answer becomes in hookloop: a result value, or an error's text."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import mcp.types

__all__ = ["failure_text", "result_value", "wraps_one_result"]


def result_value(result: mcp.types.CallToolResult, *, wrapped: bool = False) -> object:
    """The tool's ``structured_content`` when it has one, else its content as text.

    ``wrapped``: the tool's output schema is the SDK's ``{"result": ...}`` wrapper around
    a value that is not an object (a ``-> str`` function's); the value is unwrapped.
    """
    structured = result.structured_content
    if structured is None:
        return content_text(result)
    if wrapped and set(structured) == {"result"}:
        return structured["result"]
    return structured


def wraps_one_result(output_schema: object) -> bool:
    """Whether an output schema is exactly the SDK's single-result wrapper."""
    if not isinstance(output_schema, dict) or output_schema.get("type") != "object":
        return False
    properties = output_schema.get("properties")
    return (
        isinstance(properties, dict)
        and set(properties) == {"result"}
        and output_schema.get("required") == ["result"]
    )


def failure_text(result: mcp.types.CallToolResult) -> str:
    """What a tool that reported ``is_error`` said, for the model."""
    return content_text(result) or "the tool reported an error without a message"


def content_text(result: mcp.types.CallToolResult) -> str:
    """The content blocks as text, one per line; binary blocks are described in brackets."""
    return "\n".join(_block_text(block) for block in result.content)


def _block_text(block: object) -> str:
    kind = getattr(block, "type", "")
    if kind == "text":
        return str(getattr(block, "text", ""))
    if kind in ("image", "audio"):
        return f"[{kind}: {getattr(block, 'mime_type', None) or 'unknown type'}]"
    if kind == "resource_link":
        return f"[resource link: {getattr(block, 'uri', '')}]"
    if kind == "resource":
        resource = getattr(block, "resource", None)
        text = getattr(resource, "text", None)
        if isinstance(text, str):
            return text
        return f"[resource: {getattr(resource, 'uri', '')}]"
    return f"[{kind or type(block).__name__}]"

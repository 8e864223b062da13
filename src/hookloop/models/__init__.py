"""Models: the protocol, the provider adapters, and test doubles in ``models.testing``.

The adapters load on first use, and their clients only when a model is built: ``import
hookloop`` and ``from hookloop.models import OpenAIModel`` work without any extra, and
``OpenAIModel(...)`` without the ``openai`` extra raises
:class:`~hookloop.errors.MissingExtraError` naming it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .base import (
    FinishReason,
    Model,
    ModelSettings,
    OutputFormat,
    ProviderRequest,
    ProviderResponse,
    ResponseAccumulator,
    StreamEnd,
    StreamPart,
    TextDelta,
    ToolCallDelta,
    ToolDefinition,
)

if TYPE_CHECKING:
    from .anthropic import AnthropicModel
    from .local import LocalModel
    from .openai import OpenAIModel
    from .openai_responses import OpenAIResponsesModel
    from .spec import model_from_spec

_LAZY = {
    "AnthropicModel": ".anthropic",
    "LocalModel": ".local",
    "OpenAIModel": ".openai",
    "OpenAIResponsesModel": ".openai_responses",
    "model_from_spec": ".spec",
}

__all__ = [
    "AnthropicModel",
    "FinishReason",
    "LocalModel",
    "Model",
    "ModelSettings",
    "OpenAIModel",
    "OpenAIResponsesModel",
    "OutputFormat",
    "ProviderRequest",
    "ProviderResponse",
    "ResponseAccumulator",
    "StreamEnd",
    "StreamPart",
    "TextDelta",
    "ToolCallDelta",
    "ToolDefinition",
    "model_from_spec",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""Models: the protocol every adapter implements, and test doubles in ``models.testing``."""

from .base import (
    FinishReason,
    Model,
    ModelSettings,
    ProviderRequest,
    ProviderResponse,
    ResponseAccumulator,
    StreamEnd,
    StreamPart,
    TextDelta,
    ToolCallDelta,
    ToolDefinition,
)

__all__ = [
    "FinishReason",
    "Model",
    "ModelSettings",
    "ProviderRequest",
    "ProviderResponse",
    "ResponseAccumulator",
    "StreamEnd",
    "StreamPart",
    "TextDelta",
    "ToolCallDelta",
    "ToolDefinition",
]

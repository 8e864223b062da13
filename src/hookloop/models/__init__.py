"""Models: the protocol, the provider adapters, and what decides a context overflow.

The adapters load on first use, and their clients only when a model is built: ``import
hookloop`` and ``from hookloop.models import OpenAIModel`` work without any extra, and
``OpenAIModel(...)`` without the ``openai`` extra raises
:class:`~hookloop.MissingExtraError` naming it. Test doubles (``ScriptedModel``,
``FunctionModel``) are in :mod:`hookloop.testing`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._extras import lazy_dir as _lazy_dir
from .._extras import lazy_getattr as _lazy_getattr
from ._base import (
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
from ._overflow import OVERFLOW_MARKERS, is_context_overflow

if TYPE_CHECKING:
    from ._anthropic import AnthropicModel
    from ._local import LocalModel, LocalModelError
    from ._openai import OpenAIModel
    from ._openai_responses import OpenAIResponsesModel
    from ._spec import ModelSpecError, model_from_spec

_LAZY = {
    "AnthropicModel": "._anthropic",
    "LocalModel": "._local",
    "LocalModelError": "._local",
    "ModelSpecError": "._spec",
    "OpenAIModel": "._openai",
    "OpenAIResponsesModel": "._openai_responses",
    "model_from_spec": "._spec",
}

__all__ = [
    "OVERFLOW_MARKERS",
    "AnthropicModel",
    "FinishReason",
    "LocalModel",
    "LocalModelError",
    "Model",
    "ModelSettings",
    "ModelSpecError",
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
    "is_context_overflow",
    "model_from_spec",
]


__getattr__ = _lazy_getattr(__name__, _LAZY)
__dir__ = _lazy_dir(__name__, _LAZY)

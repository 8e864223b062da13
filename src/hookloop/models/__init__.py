"""Models: the protocol, the provider adapters, and what decides a context overflow.

The adapters load on first use, and their clients only when a model is built: ``import
hookloop`` and ``from hookloop.models import OpenAIModel`` work without any extra, and
``OpenAIModel(...)`` without the ``openai`` extra raises
:class:`~hookloop.MissingExtraError` naming it. Test doubles (``ScriptedModel``,
``FunctionModel``) are in :mod:`hookloop.testing`; the sampling settings an agent passes
(:class:`~hookloop.ModelSettings`) and the deltas a model streams, which a chat stream
yields too (:class:`~hookloop.TextDelta`, :class:`~hookloop.ToolCallDelta`), are at the root.
"""

from typing import TYPE_CHECKING as _TYPE_CHECKING

from .._extras import lazy_dir as _lazy_dir
from .._extras import lazy_getattr as _lazy_getattr
from .._publish import publish as _publish
from ._base import (
    FinishReason,
    Model,
    OutputFormat,
    ProviderRequest,
    ProviderResponse,
    ResponseAccumulator,
    StreamEnd,
    StreamPart,
    ToolDefinition,
)
from ._overflow import OVERFLOW_MARKERS, is_context_overflow

if _TYPE_CHECKING:
    from ._anthropic import AnthropicModel
    from ._bedrock import BedrockModel
    from ._gemini import GeminiModel
    from ._local import LocalModel
    from ._openai import OpenAIModel
    from ._openai_responses import OpenAIResponsesModel
    from ._spec import model_from_spec

_LAZY = {
    "AnthropicModel": "._anthropic",
    "GeminiModel": "._gemini",
    "LocalModel": "._local",
    "BedrockModel": "._bedrock",
    "OpenAIModel": "._openai",
    "OpenAIResponsesModel": "._openai_responses",
    "model_from_spec": "._spec",
}

__all__ = [
    "OVERFLOW_MARKERS",
    "AnthropicModel",
    "BedrockModel",
    "FinishReason",
    "GeminiModel",
    "LocalModel",
    "Model",
    "OpenAIModel",
    "OpenAIResponsesModel",
    "OutputFormat",
    "ProviderRequest",
    "ProviderResponse",
    "ResponseAccumulator",
    "StreamEnd",
    "StreamPart",
    "ToolDefinition",
    "is_context_overflow",
    "model_from_spec",
]


__getattr__ = _lazy_getattr(__name__, _LAZY)
__dir__ = _lazy_dir(__name__, _LAZY)

_publish(globals(), __all__)

"""Name a model in one string, as the ``hookloop`` command's ``--model`` does.

===================================  ==================================================
Spec                                 Model
===================================  ==================================================
``local``                            :class:`~hookloop.models.local.LocalModel`, the
                                     bundled SmolLM2-135M-Instruct
``local:/path/to/model.gguf``        :class:`~hookloop.models.local.LocalModel` on a file
``openai:NAME``                      :class:`~hookloop.models.openai.OpenAIModel` (Chat
                                     Completions), key from ``OPENAI_API_KEY``
``openai-responses:NAME``            :class:`~hookloop.models.openai_responses.OpenAIResponsesModel`
``anthropic:NAME``                   :class:`~hookloop.models.anthropic.AnthropicModel`, key
                                     from ``ANTHROPIC_API_KEY``
``http://HOST:PORT/v1#NAME``         an OpenAI-compatible server (vLLM, Ollama, llama.cpp,
                                     LM Studio, ...); ``#NAME`` is the model it serves
===================================  ==================================================
"""

from __future__ import annotations

import os

from ..errors import UsageError
from .base import Model

__all__ = ["ModelSpecError", "model_from_spec"]


class ModelSpecError(UsageError, ValueError):
    """A model spec names no known provider, or its provider cannot be used as named."""


_FORMS = (
    "local, local:PATH.gguf, openai:NAME, openai-responses:NAME, anthropic:NAME, "
    "or an OpenAI-compatible URL such as http://localhost:11434/v1#qwen3:0.6b"
)


def model_from_spec(spec: str) -> Model:
    """The model a spec string names (see the module's table).

    Raises:
        ModelSpecError: The spec is malformed, names an unknown provider, or a hosted
            provider's key is not set.

    Example:
        >>> model_from_spec("http://localhost:8080/v1#qwen3")
        OpenAIModel('qwen3', base_url='http://localhost:8080/v1/')
    """
    spec = spec.strip()
    if spec.startswith(("http://", "https://")):
        url, _, name = spec.partition("#")
        from .openai import OpenAIModel

        return OpenAIModel(name or "default", base_url=url)
    provider, sep, name = spec.partition(":")
    if provider == "local":
        from .local import LocalModel

        return LocalModel(os.path.expanduser(name)) if sep and name else LocalModel()
    if not sep or not name:
        raise ModelSpecError(f"unknown model spec {spec!r}; use {_FORMS}")
    if provider in ("openai", "openai-responses"):
        _require_key("OPENAI_API_KEY", spec)
        if provider == "openai":
            from .openai import OpenAIModel

            return OpenAIModel(name)
        from .openai_responses import OpenAIResponsesModel

        return OpenAIResponsesModel(name)
    if provider == "anthropic":
        _require_key("ANTHROPIC_API_KEY", spec)
        from .anthropic import AnthropicModel

        return AnthropicModel(name)
    raise ModelSpecError(f"unknown provider {provider!r} in {spec!r}; use {_FORMS}")


def _require_key(variable: str, spec: str) -> None:
    if not os.environ.get(variable):
        raise ModelSpecError(f"{spec} needs an API key: set {variable}")

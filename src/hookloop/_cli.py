"""The ``hookloop`` command: run an agent from the shell.

``hookloop run "prompt"`` answers once and exits (``run -`` reads the prompt from standard
input); ``hookloop chat`` talks until you leave, streaming the answer as it comes and showing
each tool call on a line of its own. In ``chat``, Ctrl-C during an answer stops that answer
and keeps the conversation; Ctrl-C at the prompt, Ctrl-D or ``/exit`` leaves. ``--model``
picks the model (see :func:`hookloop.models.model_from_spec`; ``local`` is the default),
``--trace`` writes every hook event of each step to stderr as a timeline. The model gets the
built-in calculator unless ``--tool``, ``--mcp`` or ``--no-tools`` says otherwise; ``--mcp``
adds the tools of an MCP server (a command line run over stdio, or a streamable-HTTP URL;
``--mcp NAME=SERVER`` names it).
When the model calls a tool that needs approval, ``chat`` asks about each such call: ``y``
runs it, ``n`` denies it with a reason, ``e`` runs it with arguments typed as JSON.

``--trace-file run.jsonl`` records every hook event as JSON lines, ``run --trace-html
run.html`` writes the page that shows them once the run ends (however it ends), and
``hookloop trace view run.jsonl -o run.html`` makes that page from a recorded file (see
:mod:`hookloop.observe`). ``hookloop mcp serve module:attribute`` serves hookloop tools, or
an agent's, to MCP clients.

Every failure is one line on stderr (``--debug`` shows the traceback); a trace or page that
cannot be written is one more line, and the answer and the exit code stay the run's. Exit
codes: 0 done (``mcp serve --http`` stopped by SIGTERM too); 1 the run failed (the provider,
``--max-iterations``); 2 bad usage (arguments, a model that cannot be used); 3 a usage limit
was reached (``--max-cost``, ``--max-requests``: they cap the whole run, or all the answers of
a ``chat``, which shows what was spent after each answer); 130 interrupted; while
recording a trace, 143 and 129 when SIGTERM or SIGHUP ended it (once the trace and the page
were written).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import itertools
import os
import re
import signal
import sys
import threading
from collections.abc import Awaitable, Callable, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, TextIO, cast

from ._agent import Agent
from ._approval import ApprovalDecision, PendingApproval
from ._approval_log import check_edit
from ._builtin_tools import BUILTIN_TOOLS
from ._cli_serve import add_serve_command
from ._cli_trace import check_trace_targets, recording, trace_view
from ._cli_worker import add_worker_command
from ._errors import (
    AuthenticationError,
    ChatCancelledError,
    ProviderError,
    RunError,
    UsageError,
    UsageLimitExceeded,
    error_line,
)
from ._extras import import_attribute
from ._limits import Spend, UsageLimits
from ._messages import ToolMessage
from ._session_limits import session_spend
from ._stream_events import ModelRetry, ToolCallFinished
from ._tools import Tool, tool
from ._trace import TracePlugin
from ._version import VERSION
from .hooks._contexts import AfterModelCallContext
from .models._base import Model, ModelSettings, TextDelta
from .models._spec import model_from_spec

if TYPE_CHECKING:
    from .mcp import MCPToolset, ToolSource
    from .models._local import LocalModel

__all__ = ["main"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_LIMIT, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
_NAMED = re.compile(r"[A-Za-z0-9_-]{1,64}")  # --mcp NAME=SERVER

_SPINNER = "|/-\\"
_CHOICES = ("auto", "required", "none")


class _Usage(UsageError):
    """Bad arguments found after parsing (an empty prompt, an unknown tool choice)."""


class _Terminated(Exception):
    """SIGTERM or SIGHUP ended the command once what was recorded was written."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _printable(stream: TextIO) -> None:
    """Text the stream's encoding cannot hold (a non-UTF-8 locale) is escaped, not fatal."""
    if isinstance(stream, io.TextIOWrapper):
        stream.reconfigure(errors="backslashreplace")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command with ``argv`` (``sys.argv[1:]`` by default); return the exit code."""
    args = _parser().parse_args(argv)
    _user_modules_importable()
    _printable(sys.stdout)
    try:
        code: int = asyncio.run(_command(args))
        return code
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return EXIT_INTERRUPTED
    except _Terminated as stop:
        return 128 + stop.signum
    except (UsageError, ImportError) as exc:  # ImportError: a provider's extra is missing
        if args.debug:
            raise
        print(f"hookloop: {error_line(exc)}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as exc:
        if args.debug:
            raise
        print(f"hookloop: {_failure(exc, args)}", file=sys.stderr)
        return EXIT_LIMIT if isinstance(exc, UsageLimitExceeded) else EXIT_FAILED


def _user_modules_importable() -> None:
    """Let ``module:attribute`` arguments name modules of the current directory (``python -m``)."""
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())


async def _command(args: argparse.Namespace) -> int:
    """The command's handler; while it records a trace, SIGTERM and SIGHUP end it as Ctrl-C does.

    The task is cancelled, so what was recorded is written on the way out; then the process
    ends with 128 + the signal's number.
    """
    if not (getattr(args, "trace_file", None) or getattr(args, "trace_html", None)):
        code: int = await args.handler(args)
        return code
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    received: list[int] = []

    def stop(signum: int) -> None:
        if not received and task is not None:
            received.append(signum)
            task.cancel()

    installed = []
    for signum in _TERMINATIONS:
        with contextlib.suppress(NotImplementedError, RuntimeError):  # not the main thread
            loop.add_signal_handler(signum, stop, signum)
            installed.append(signum)
    try:
        done: int = await args.handler(args)
    except asyncio.CancelledError:
        if not received:
            raise
        raise _Terminated(received[0]) from None
    finally:
        for signum in installed:
            loop.remove_signal_handler(signum)
    return done


_TERMINATIONS = (signal.SIGTERM, signal.SIGHUP)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hookloop", description="Run an LLM agent whose every step you can watch."
    )
    parser.add_argument("--version", action="version", version=f"hookloop {VERSION}")
    commands = parser.add_subparsers(required=True, metavar="COMMAND")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--model",
        default="local",
        help="local (default), local:FILE.gguf, openai:NAME, openai-responses:NAME, "
        "anthropic:NAME, gemini:NAME, bedrock:MODEL_ID, or an OpenAI-compatible URL like "
        "http://localhost:11434/v1#NAME",
    )
    common.add_argument(
        "--api-key-env",
        metavar="VAR",
        help="the environment variable holding the key for the --model server (default: the "
        "provider's own variable, or HOOKLOOP_API_KEY for a URL)",
    )
    common.add_argument("--system", help="the system prompt")
    common.add_argument(
        "--trace", action="store_true", help="write every hook event to stderr as a timeline"
    )
    common.add_argument(
        "--trace-file",
        metavar="FILE",
        help="record every hook event as JSON lines in FILE (the conversation's text included)",
    )
    common.add_argument(
        "--debug", action="store_true", help="show the traceback of a failure, not one line"
    )
    common.add_argument(
        "--tool",
        action="append",
        default=[],
        metavar="TOOL",
        help="offer a tool: a built-in name (calculator, clock) or module:attribute of a "
        "hookloop Tool or function (modules in the current directory included); "
        "repeatable (default: calculator)",
    )
    common.add_argument(
        "--mcp",
        action="append",
        default=[],
        metavar="SERVER",
        help='offer the tools of an MCP server: a command line such as "python server.py" '
        "(run over stdio) or a streamable-HTTP URL; repeatable; its tools are named "
        "NAME_TOOL, NAME being the script's name or the URL's host, or the NAME given "
        'as NAME=SERVER ("files=python server.py")',
    )
    common.add_argument(
        "--mcp-timeout",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="seconds an MCP server may take to answer one call (default 60)",
    )
    common.add_argument(
        "--mcp-connect-timeout",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="seconds an MCP server may take to start and connect (default 60)",
    )
    common.add_argument("--no-tools", action="store_true", help="offer the model no tools")
    common.add_argument(
        "--tool-choice",
        help="auto (default), required, none, or an offered tool's name; forcing applies to "
        "the first model call of each answer",
    )
    common.add_argument(
        "--temperature",
        type=float,
        help="sampling temperature (default: the model's; the local model decodes greedily)",
    )
    common.add_argument("--max-tokens", type=int, help="most tokens per model answer")
    common.add_argument(
        "--max-iterations", type=int, default=10, help="model calls per answer (default 10)"
    )
    common.add_argument(
        "--max-cost",
        type=_dollars,
        metavar="USD",
        help="the most the whole run (or chat session) may cost in US dollars; the model "
        "needs a known price",
    )
    common.add_argument(
        "--max-requests",
        type=int,
        metavar="N",
        help="the most model requests of the whole run (or chat session), retries included",
    )
    run = commands.add_parser(
        "run", parents=[common], help="answer one prompt and exit", description="Answer once."
    )
    run.add_argument("prompt", help="what to ask; - reads it from standard input")
    run.add_argument(
        "--trace-html",
        metavar="FILE",
        help="write the run's trace page (one self-contained HTML file) to FILE",
    )
    run.set_defaults(handler=_run)
    chat = commands.add_parser(
        "chat",
        parents=[common],
        help="talk interactively",
        description="Talk; Ctrl-C stops an answer, Ctrl-D or /exit leaves, /reset forgets.",
    )
    chat.set_defaults(handler=_chat)
    trace = commands.add_parser(
        "trace", help="work with recorded traces", description="Work with recorded traces."
    )
    trace_commands = trace.add_subparsers(required=True, metavar="ACTION")
    view = trace_commands.add_parser(
        "view",
        help="write the page that shows a --trace-file recording",
        description="Write one self-contained HTML page that shows a JSON-lines trace.",
    )
    view.add_argument("trace_file", metavar="TRACE", help="a file written by --trace-file")
    view.add_argument(
        "-o", "--output", metavar="FILE", help="the page to write (default: TRACE with .html)"
    )
    view.add_argument(
        "--debug", action="store_true", help="show the traceback of a failure, not one line"
    )
    view.set_defaults(handler=trace_view)
    mcp = commands.add_parser("mcp", help="MCP: serve hookloop tools to MCP clients")
    mcp_commands = mcp.add_subparsers(required=True, metavar="COMMAND")
    serve = mcp_commands.add_parser(
        "serve",
        help="serve tools over MCP (stdio by default)",
        description="Serve hookloop tools over MCP: the tools of MODULE:ATTRIBUTE, which names "
        "a Tool, a function, a list of them, or an Agent (its tools). Over stdio by default; "
        "--http serves streamable HTTP on 127.0.0.1 and prints the URL on stderr.",
    )
    serve.add_argument("source", metavar="MODULE:ATTRIBUTE", help="the tools or agent to serve")
    serve.add_argument(
        "--http", action="store_true", help="serve streamable HTTP on 127.0.0.1, not stdio"
    )
    serve.add_argument("--port", type=int, default=0, help="the HTTP port (default: a free one)")
    serve.add_argument("--name", default="hookloop", help="the server's name for clients")
    serve.add_argument(
        "--allow-unapproved",
        action="store_true",
        help="run calls of tools that need a person's approval (refused by default: no one "
        "is there to approve them)",
    )
    serve.add_argument(
        "--debug", action="store_true", help="show the traceback of a failure, not one line"
    )
    serve.set_defaults(handler=_mcp_serve)
    add_worker_command(commands)
    add_serve_command(commands)
    return parser


async def _run(args: argparse.Namespace) -> int:
    if args.prompt == "-":
        prompt = sys.stdin.read().rstrip()
        if not prompt.strip():
            raise _Usage("the prompt is empty (nothing on standard input)")
    elif not args.prompt.strip():
        raise _Usage("the prompt is empty")
    else:
        prompt = args.prompt
    agent = await _agent(args, _Screen())
    try:
        with recording(args, agent):
            response = await agent.chat(prompt)
    finally:
        await _close(agent)
    try:
        print(response.text)
    except BrokenPipeError:  # `hookloop run ... | head -1` closed the pipe: nothing to say
        sys.stderr.close()
    return EXIT_OK


async def _chat(args: argparse.Namespace) -> int:
    screen = _Screen()
    agent = await _agent(args, screen)
    print(
        f"hookloop chat with {agent.model.name}: Ctrl-C stops an answer, Ctrl-D leaves, "
        "/reset forgets.",
        file=sys.stderr,
    )
    loop = asyncio.get_running_loop()
    reading: asyncio.Future[str] | None = None

    def interrupt() -> None:
        if reading is not None and not reading.done():  # at a prompt: leave
            reading.set_exception(EOFError())
        else:  # during an answer: stop it
            agent.cancel("Ctrl-C")

    async def read(prompt: str) -> str:
        """Every prompt of the chat (``you>``, the approval questions): Ctrl-C leaves."""
        nonlocal reading
        reading = _read_line(prompt)
        try:
            return await reading
        finally:
            reading = None

    with contextlib.suppress(NotImplementedError, RuntimeError):  # not the main thread
        loop.add_signal_handler(signal.SIGINT, interrupt)
    traces = contextlib.ExitStack()
    try:
        traces.enter_context(recording(args, agent))
        while True:
            try:
                line = (await read("you> ")).strip()
            except EOFError:
                print(file=sys.stderr)
                return EXIT_OK
            if line in ("/exit", "/quit"):
                return EXIT_OK
            if line == "/reset":
                agent.history.clear_history()
                print("(history cleared)", file=sys.stderr)
                continue
            if line:
                try:
                    await _answer(agent, line, screen, args, read)
                except EOFError:  # Ctrl-D or Ctrl-C while a call waited for a decision: leave
                    print(file=sys.stderr)
                    return EXIT_OK
                except UsageLimitExceeded as exc:  # the session's budget is spent: leave
                    screen.note(f"hookloop: {_failure(exc, args)}")
                    screen.note(f"({spend_line(await session_spend(agent))})")
                    return EXIT_LIMIT
                screen.note(f"({spend_line(await session_spend(agent))})")
    finally:
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.remove_signal_handler(signal.SIGINT)
        traces.close()
        await _close(agent)


def _read_line(prompt: str) -> asyncio.Future[str]:
    """``input(prompt)`` as a future that does not hold up the event loop or Ctrl-C.

    A daemon thread reads, so setting the future (Ctrl-C at the prompt) ends the wait at
    once instead of waiting for the thread to see the next Enter.
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
    return answer


def _settle(future: asyncio.Future[str], line: str | None, error: BaseException | None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(line or "")


class _Screen:
    """The terminal of one command: the answer on stdout, notes (tools, trace) on stderr.

    A note never lands in the middle of a line of answer: an open answer line is ended first.
    """

    def __init__(self, out: TextIO | None = None, err: TextIO | None = None) -> None:
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.open = False  # an answer line is started and not ended

    def text(self, text: str) -> None:
        if not self.open:
            self.out.write("model> ")
            self.open = True
        self.out.write(text)
        self.out.flush()

    def end(self) -> None:
        if self.open:
            self.out.write("\n")
            self.out.flush()
            self.open = False

    def note(self, line: str) -> None:
        self.end()
        print(line, file=self.err, flush=True)


async def _answer(
    agent: Agent,
    line: str,
    screen: _Screen,
    args: argparse.Namespace,
    read: Callable[[str], Awaitable[str]],
) -> None:
    try:
        async with agent.chat_stream(line) as stream:
            async for event in stream:
                if isinstance(event, TextDelta):
                    screen.text(event.text)
                elif isinstance(event, ToolCallFinished):
                    result = event.message.content
                    mark = "!" if event.message.is_error else "->"
                    screen.note(f"  {event.call.name}({event.call.arguments}) {mark} {result}")
                elif isinstance(event, ModelRetry) and screen.open:
                    screen.note("  (the answer so far came from a failed attempt)")
        response = stream.response
        while response is not None and response.pending_approvals:
            screen.end()
            decisions = [await _decide(agent, p, screen, read) for p in response.pending_approvals]
            response = await agent.resume(decisions)
            for message in response.messages:
                if isinstance(message, ToolMessage):
                    mark = "!" if message.is_error else "->"
                    screen.note(f"  {message.tool_name} {mark} {message.content}")
            if response.text:
                screen.text(response.text)
    except ChatCancelledError:
        screen.note("(stopped)")
    except UsageLimitExceeded:
        screen.end()
        raise
    except RunError as exc:
        screen.note(f"hookloop: {_failure(exc, args)}")
    screen.end()


def spend_line(spent: Spend) -> str:
    """What a session spent, for a person: ``"spent 3 requests, 1,234 tokens, $0.0012"``.

    An unknown cost (a model without a price) says so; it is never shown as $0.
    """
    usage = spent.usage
    cost = "cost unknown" if usage.cost is None else f"${usage.cost.normalize():f}"
    requests = f"{spent.requests} request{'s' * (spent.requests != 1)}"
    tokens = f"{usage.input_tokens:,} tokens in / {usage.output_tokens:,} out"
    return f"spent {requests}, {tokens}, {cost}"


async def _decide(
    agent: Agent,
    pending: PendingApproval,
    screen: _Screen,
    read: Callable[[str], Awaitable[str]],
) -> ApprovalDecision:
    """Ask at the terminal about one call that waits for approval: y, n (why) or e (JSON).

    An edit the tool cannot take is shown to the person, who is asked again: it never
    reaches the model as if the model had made it.
    """
    why = f" ({pending.reason})" if pending.reason else ""
    screen.note(f"  {pending.tool_name}({pending.arguments}) needs approval{why}")
    if pending.rewritten:
        screen.note(f"  (the model asked for {pending.model_arguments})")
    while True:
        choice = (await read("  run it? [y]es, [n]o, [e]dit: ")).strip().lower()
        if choice in ("y", "yes"):
            return pending.approve()
        if choice in ("n", "no"):
            reason = (await read("  why not? ")).strip()
            return pending.deny(reason or "the user said no")
        if choice in ("e", "edit"):
            text = (await read("  arguments as JSON: ")).strip()
            try:
                decision = pending.edit(text)
                check_edit(decision, pending.tool_name, agent.scopes)
            except UsageError as exc:  # not a JSON object, or not what the tool takes
                screen.note(f"  {exc}")
                continue
            return decision


def _dollars(text: str) -> Decimal:
    """``--max-cost``: an amount of dollars, exact (``0.10`` is ten cents, not a float)."""
    try:
        return Decimal(text)
    except ArithmeticError:
        raise argparse.ArgumentTypeError(f"not an amount of dollars: {text!r}") from None


def _check_numbers(args: argparse.Namespace) -> None:
    """Refuse settings no model accepts before one is loaded."""
    if args.max_tokens is not None and args.max_tokens < 1:
        raise _Usage(f"--max-tokens must be at least 1 (got {args.max_tokens})")
    if args.temperature is not None and not args.temperature >= 0:  # NaN included
        raise _Usage(f"--temperature must be 0 or more (got {args.temperature:g})")
    if args.max_iterations < 1:
        raise _Usage(f"--max-iterations must be at least 1 (got {args.max_iterations})")
    if args.max_requests is not None and args.max_requests < 1:
        raise _Usage(f"--max-requests must be at least 1 (got {args.max_requests})")
    if args.max_cost is not None and not (args.max_cost.is_finite() and args.max_cost > 0):
        raise _Usage(f"--max-cost must be an amount of dollars above 0 (got {args.max_cost})")


async def _agent(args: argparse.Namespace, screen: _Screen) -> Agent:
    _check_numbers(args)
    check_trace_targets(args.trace_file, getattr(args, "trace_html", None))
    default = [] if args.mcp else ["calculator"]
    tools = [] if args.no_tools else [_load_tool(spec) for spec in args.tool or default]
    model = model_from_spec(args.model, api_key_env=args.api_key_env)
    toolsets = (
        [] if args.no_tools else _toolsets(args.mcp, args.mcp_timeout, args.mcp_connect_timeout)
    )
    try:
        return await _assemble(args, screen, model, tools, toolsets)
    except BaseException:
        for toolset in toolsets:  # their servers started while the tools were listed
            await toolset.aclose()
        raise


async def _assemble(
    args: argparse.Namespace,
    screen: _Screen,
    model: Model,
    tools: list[Tool],
    toolsets: list[MCPToolset],
) -> Agent:
    offered = [t.name for t in tools]
    for toolset in toolsets:  # listed now: a server that fails does so before the model loads
        offered += [t.name for t in await toolset.list_tools()]
    choice = args.tool_choice or "auto"
    if choice not in _CHOICES and choice not in offered:
        raise _Usage(
            f"--tool-choice {choice!r} is not auto, required, none or an offered tool "
            f"({', '.join(offered) or 'none offered'})"
        )
    settings = ModelSettings(
        temperature=args.temperature, max_tokens=args.max_tokens, tool_choice=choice
    )
    agent = Agent(
        model,
        system_prompt=args.system,
        tools=tools,
        max_iterations=args.max_iterations,
        settings=settings,
        plugins=toolsets,
        # The command's whole run, or all the answers of a chat, is the session.
        session_limits=UsageLimits(cost=args.max_cost, requests=args.max_requests),
    )
    attempts = getattr(agent.retry_strategy, "max_attempts", None)
    where = _where(args)

    def retrying(ctx: AfterModelCallContext) -> None:
        if ctx.error is not None and ctx.retry:
            of = f"/{attempts}" if attempts else ""
            screen.note(
                f"hookloop: {where}: {error_line(ctx.error)}; attempt {ctx.attempt + 1}{of}"
            )

    agent.add_hook("after_model_call", retrying)
    if args.trace:
        agent.use(TracePlugin(write=screen.note))
    local = sys.modules.get("hookloop.models._local")  # imported only if the spec named it
    if local is not None and isinstance(model, local.LocalModel):
        await _load(model, sys.stderr)
    return agent


def _where(args: argparse.Namespace) -> str:
    """The server a ``--model`` talks to, for messages: its URL, or the spec."""
    spec: str = args.model.strip()
    return spec.partition("#")[0] if spec.startswith(("http://", "https://")) else spec


def _failure(exc: BaseException, args: argparse.Namespace) -> str:
    """A failed run as one line: the error, the model's server, and the attempts made."""
    line = f"{type(exc).__name__}: {error_line(exc)}"
    if isinstance(exc, ProviderError):
        tries = len(exc.attempts) if exc.attempts else 1
        line += f" ({_where(args)}, {tries} attempt{'s' * (tries > 1)})"
    if isinstance(exc, AuthenticationError) and args.api_key_env is None:
        line += _key_hint(args)
    return line


def _key_hint(args: argparse.Namespace) -> str:
    """Why a compatible server refused the key: a provider's own is not sent to it."""
    spec: str = args.model.strip()
    if not spec.startswith(("http://", "https://")):
        return ""
    held = [name for name in _PROVIDER_KEYS if os.environ.get(name)]
    if not held:
        return ""
    return (
        f"; {' and '.join(held)} {'is' if len(held) == 1 else 'are'} sent only to the "
        f"provider's own host, not to {_where(args)}: name this server's key with "
        "--api-key-env VAR or HOOKLOOP_API_KEY"
    )


_PROVIDER_KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")


def _load_tool(spec: str) -> Tool:
    """A built-in tool by name, or ``module:attribute`` naming a Tool or a function."""
    if spec in BUILTIN_TOOLS:
        return BUILTIN_TOOLS[spec]
    if ":" not in spec:
        names = ", ".join(BUILTIN_TOOLS)
        raise UsageError(f"unknown tool {spec!r}: use one of {names}, or module:attribute")
    value = import_attribute(spec, "tool")
    if isinstance(value, Tool):
        return value
    if not callable(value):
        raise UsageError(f"cannot load tool {spec!r}: {type(value).__name__} is not a function")
    return tool(value)


def _toolsets(
    servers: Sequence[str], timeout: float = 60.0, connect_timeout: float = 60.0
) -> list[MCPToolset]:
    """One toolset per ``--mcp`` server, each with a scope name of its own."""
    from .mcp import MCPToolset

    for flag, seconds in (("--mcp-timeout", timeout), ("--mcp-connect-timeout", connect_timeout)):
        if not seconds > 0:  # NaN included
            raise _Usage(f"{flag} must be a positive number of seconds (got {seconds:g})")
    made: list[MCPToolset] = []
    for given in servers:
        name, _, server = given.partition("=")
        named = server and _NAMED.fullmatch(name) and not given.startswith(("http:", "https:"))
        if named and name in {t.name for t in made}:
            raise _Usage(f"--mcp: two servers are named {name!r}")
        if not named:
            name, server = MCPToolset(given).name, given
            taken = {t.name for t in made}
            if name in taken:  # two servers named alike: the second is name_2, ...
                name = next(f"{name}_{n}" for n in itertools.count(2) if f"{name}_{n}" not in taken)
        made.append(MCPToolset(server, name=name, timeout=timeout, connect_timeout=connect_timeout))
    return made


async def _mcp_serve(args: argparse.Namespace) -> int:
    from .mcp import serve
    from .mcp._serve import stdout_to_stderr

    # Over stdio, standard output is the protocol's: a print at import must not reach it.
    with contextlib.nullcontext() if args.http else stdout_to_stderr():
        source = import_attribute(args.source, "tools")
    if not 0 <= args.port <= 65535:
        raise _Usage(f"--port must be between 0 and 65535 (got {args.port})")

    def ready(where: str) -> None:
        if where != "stdio":  # standard output is the protocol's over stdio: stay quiet
            print(f"hookloop: serving MCP at {where}", file=sys.stderr, flush=True)

    tools = cast("ToolSource", source)  # mcp_server() says what it cannot serve
    await serve(
        tools,
        http=args.http,
        port=args.port,
        name=args.name,
        on_ready=ready,
        allow_unapproved=args.allow_unapproved,
    )
    return EXIT_OK


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
    try:
        await model.start(progress)
    finally:
        if live:  # overwrite the spinner line
            out.write("\r" + " " * 40 + "\r")
            out.flush()
    print(f"local model ready in {waited:.1f}s", file=out, flush=True)


async def _close(agent: Agent) -> None:
    """Close the agent's connections (MCP servers) and its model's; failures are not news."""
    with contextlib.suppress(Exception):
        await agent.aclose()
    with contextlib.suppress(Exception):
        await agent.model.aclose()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

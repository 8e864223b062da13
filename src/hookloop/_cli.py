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
a limit); 2 bad usage (arguments, a model that cannot be used); 130 interrupted; while
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
from collections.abc import Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, TextIO, cast

from ._agent import Agent
from ._approval import ApprovalDecision, PendingApproval
from ._approval_log import check_edit
from ._builtin_tools import BUILTIN_TOOLS
from ._errors import (
    AuthenticationError,
    ChatCancelledError,
    ProviderError,
    RunError,
    UsageError,
    WorkerFencedError,
)
from ._extras import import_attribute
from ._messages import ToolMessage
from ._stream_events import ModelRetry, ToolCallFinished
from ._tools import Tool, tool
from ._trace import TracePlugin
from ._version import VERSION
from .hooks._contexts import AfterModelCallContext
from .models._base import Model, ModelSettings, TextDelta
from .models._spec import model_from_spec
from .observe import JsonLinesTracePlugin, write_trace_page

if TYPE_CHECKING:
    from .mcp import MCPToolset, ToolSource
    from .models._local import LocalModel

__all__ = ["main"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
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
        print(f"hookloop: {_one_line(exc)}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as exc:
        if args.debug:
            raise
        print(f"hookloop: {_failure(exc, args)}", file=sys.stderr)
        return EXIT_FAILED


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
        "anthropic:NAME, or an OpenAI-compatible URL like http://localhost:11434/v1#NAME",
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
    view.set_defaults(handler=_trace_view)
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
    _worker_parser(commands)
    return parser


def _worker_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    worker = commands.add_parser(
        "worker",
        help="run a worker for durable chat turns (hookloop[dbos], PostgreSQL)",
        description="Run the durable chat turns submitted to the session queue of a PostgreSQL "
        "database, one turn of a session at a time, and take over the turns of workers that "
        "died. SIGTERM or Ctrl-C stops it: running turns get --grace seconds to finish, and "
        "a live worker resumes those still running at once.",
    )
    worker.add_argument(
        "--database", required=True, metavar="URL", help="the workers' postgresql:// database"
    )
    worker.add_argument(
        "--agent",
        required=True,
        metavar="MODULE:FUNCTION",
        help="the function that builds each turn's Agent (modules in the current directory "
        "included)",
    )
    worker.add_argument(
        "--executor-id",
        metavar="ID",
        help="this worker's id, unique among live workers (default: HOST-PID; a live "
        "worker's id is refused); a worker restarted with its old id resumes its own turns",
    )
    worker.add_argument(
        "--heartbeat", type=float, default=1.0, metavar="S", help="seconds between beats (1)"
    )
    worker.add_argument(
        "--dead-after",
        type=float,
        default=5.0,
        metavar="S",
        help="seconds of silence after which a worker is dead and its turns move (5)",
    )
    worker.add_argument(
        "--grace",
        type=float,
        default=30.0,
        metavar="S",
        help="seconds running turns get to finish when the worker stops (30)",
    )
    worker.add_argument(
        "--app-name",
        default="hookloop",
        metavar="NAME",
        help="the DBOS application name, the same in all workers and submitters (hookloop)",
    )
    worker.add_argument(
        "--application-version",
        metavar="VERSION",
        help="the pinned DBOS application version, the same in all workers and submitters "
        "(default: hookloop's own, see docs/durable.md)",
    )
    worker.add_argument(
        "--pool-size",
        type=int,
        metavar="N",
        help="the most connections DBOS opens to the database (20); see docs/scaling.md",
    )
    worker.add_argument(
        "--sessions-pool",
        type=int,
        metavar="N",
        help="the most connections the session store opens to the database (10)",
    )
    worker.add_argument(
        "--debug", action="store_true", help="show the traceback of a failure, not one line"
    )
    worker.set_defaults(handler=_worker)


def _end_process(message: str, status: int) -> NoReturn:
    """Print ``message`` and end the process now: no exit handler shuts DBOS down under turns."""
    print(message, file=sys.stderr, flush=True)
    sys.stdout.flush()
    os._exit(status)


async def _worker(args: argparse.Namespace) -> int:
    from .durable._dbos import APPLICATION_VERSION
    from .durable._workers import Worker, WorkerTimings, run_worker

    timings = WorkerTimings(heartbeat=args.heartbeat, dead_after=args.dead_after)
    stop, hurry = asyncio.Event(), asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_signal() -> None:  # the second one cuts the grace short
        if stop.is_set():
            hurry.set()
            return
        stop.set()
        print(
            f"hookloop worker: stopping, running turns get {args.grace} s to finish "
            "(SIGTERM or Ctrl-C again: at once)",
            file=sys.stderr,
            flush=True,
        )

    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, on_signal)

    def ready(worker: Worker) -> None:
        print(
            f"hookloop worker {worker.executor_id}: taking turns "
            f"(heartbeat {timings.heartbeat} s, dead after {timings.dead_after} s); "
            "SIGTERM or Ctrl-C stops it, a second one at once",
            file=sys.stderr,
            flush=True,
        )

    # Turns still running at the end of --grace, or all of them when another worker took this
    # one for dead, run elsewhere now: the process ends at once, as a kill would end it.
    try:
        left = await run_worker(
            args.database,
            args.agent,
            executor_id=args.executor_id,
            app_name=args.app_name,
            application_version=args.application_version or APPLICATION_VERSION,
            timings=timings,
            grace=args.grace,
            pool_size=args.pool_size,
            sessions_pool=args.sessions_pool,
            stop=stop,
            hurry=hurry,
            on_ready=ready,
        )
    except WorkerFencedError as exc:
        _end_process(f"hookloop: WorkerFencedError: {exc}", EXIT_FAILED)
    if left:
        _end_process(f"hookloop worker: left {left} running turns to a live worker", EXIT_OK)
    print("hookloop worker: stopped", file=sys.stderr, flush=True)
    return EXIT_OK


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
        with _recording(args, agent):
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
    recording = contextlib.ExitStack()
    try:
        recording.enter_context(_recording(args, agent))
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
    finally:
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.remove_signal_handler(signal.SIGINT)
        recording.close()
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
    except RunError as exc:
        screen.note(f"hookloop: {_failure(exc, args)}")
    screen.end()


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


def _check_numbers(args: argparse.Namespace) -> None:
    """Refuse settings no model accepts before one is loaded."""
    if args.max_tokens is not None and args.max_tokens < 1:
        raise _Usage(f"--max-tokens must be at least 1 (got {args.max_tokens})")
    if args.temperature is not None and not args.temperature >= 0:  # NaN included
        raise _Usage(f"--temperature must be 0 or more (got {args.temperature:g})")
    if args.max_iterations < 1:
        raise _Usage(f"--max-iterations must be at least 1 (got {args.max_iterations})")


async def _agent(args: argparse.Namespace, screen: _Screen) -> Agent:
    _check_numbers(args)
    _check_trace_targets(args.trace_file, getattr(args, "trace_html", None))
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
    )
    attempts = getattr(agent.retry_strategy, "max_attempts", None)
    where = _where(args)

    def retrying(ctx: AfterModelCallContext) -> None:
        if ctx.error is not None and ctx.retry:
            of = f"/{attempts}" if attempts else ""
            screen.note(f"hookloop: {where}: {_one_line(ctx.error)}; attempt {ctx.attempt + 1}{of}")

    agent.add_hook("after_model_call", retrying)
    if args.trace:
        agent.use(TracePlugin(write=screen.note))
    local = sys.modules.get("hookloop.models._local")  # imported only if the spec named it
    if local is not None and isinstance(model, local.LocalModel):
        await _load(model, sys.stderr)
    return agent


@contextlib.contextmanager
def _recording(args: argparse.Namespace, agent: Agent) -> Iterator[None]:
    """``--trace-file`` / ``--trace-html``: record the events; write the page at the end.

    However the command ends (done, failed, Ctrl-C, SIGTERM, SIGHUP), what was recorded is
    written; a trace or page that cannot be written is one line on stderr and changes
    neither the answer nor the exit code.
    """
    html: str | None = getattr(args, "trace_html", None)
    if not (args.trace_file or html):
        yield
        return
    sink = _TraceSink(args.trace_file, html)
    agent.use(JsonLinesTracePlugin(sink.write))
    try:
        yield
    finally:
        for problem in sink.close(title=f"hookloop run: {agent.name}"):
            print(f"hookloop: {problem}", file=sys.stderr)


class _TraceSink:
    """Where the records go: the ``--trace-file`` as they come, and the page's lines.

    Both files are checked before the run: the trace file is opened (an unwritable one is
    refused before anything else is touched), the page is only tried (appended to, so an
    earlier page stays whole until the new one replaces it).
    """

    def __init__(self, trace_file: str | None, page: str | None) -> None:
        _check_trace_targets(trace_file, page)
        self.page = page
        self.lines: list[str] | None = [] if page else None
        self.failure: OSError | None = None
        try:
            self.file = open(trace_file, "w", encoding="utf-8") if trace_file else None  # noqa: SIM115
        except OSError as exc:
            raise _Usage(f"cannot write the trace: {exc}") from exc

    def write(self, line: str) -> None:
        if self.lines is not None:
            self.lines.append(line)
        if self.file is not None and self.failure is None:
            try:
                self.file.write(line + "\n")
            except OSError as exc:
                self.failure = exc

    def close(self, *, title: str) -> list[str]:
        """Flush the trace file, write the page; what could not be written, as lines."""
        problems: list[str] = []
        if self.file is not None:
            try:
                self.file.close()
            except OSError as exc:
                self.failure = self.failure or exc
            if self.failure is not None:
                problems.append(f"the trace could not be written: {self.failure}")
        if self.page and self.lines is not None:
            try:
                page = write_trace_page(self.lines, self.page, title=title)
            except Exception as exc:  # the run's outcome stands: say so, in one line
                problems.append(f"the trace page could not be written: {_one_line(exc)}")
            else:
                print(f"trace page: open {page.resolve().as_uri()} in a browser", file=sys.stderr)
        return problems


def _check_trace_targets(trace_file: str | None, page: str | None) -> None:
    """Refuse trace files that cannot be written, before anything is loaded or emptied.

    Nothing is truncated here: each file is only opened to be appended to (and one that
    did not exist is removed again).
    """
    if trace_file and page and _same_file(trace_file, page):
        raise _Usage(f"--trace-file and --trace-html name the same file ({page})")
    try:
        for target in filter(None, (trace_file, page)):
            _try_writing(Path(target))
    except OSError as exc:
        raise _Usage(f"cannot write the trace: {exc}") from exc


def _same_file(first: str, second: str) -> bool:
    try:
        return os.path.samefile(first, second)
    except OSError:  # one of them does not exist (yet): compare where they would be
        return os.path.realpath(first) == os.path.realpath(second)


def _try_writing(path: Path) -> None:
    """Raise the OSError writing ``path`` would raise, leaving what it holds as it is."""
    existed = path.exists()
    with path.open("a", encoding="utf-8"):
        pass
    if not existed:
        path.unlink(missing_ok=True)


async def _trace_view(args: argparse.Namespace) -> int:
    source = Path(args.trace_file)
    output = Path(args.output) if args.output else source.with_suffix(".html")
    if _same_file(str(source), str(output)):
        how = "-o names" if args.output else "the default page (TRACE with .html) is"
        raise _Usage(f"{how} the trace itself ({source}): name the page with -o FILE")
    try:
        page = write_trace_page(source, output)
    except OSError as exc:  # the page cannot be written (the trace's own errors are typed)
        raise _Usage(f"cannot write {output}: {exc.strerror or exc}") from exc
    print(f"trace page: open {page.resolve().as_uri()} in a browser", file=sys.stderr)
    return EXIT_OK


def _where(args: argparse.Namespace) -> str:
    """The server a ``--model`` talks to, for messages: its URL, or the spec."""
    spec: str = args.model.strip()
    return spec.partition("#")[0] if spec.startswith(("http://", "https://")) else spec


def _failure(exc: BaseException, args: argparse.Namespace) -> str:
    """A failed run as one line: the error, the model's server, and the attempts made."""
    line = f"{type(exc).__name__}: {_one_line(exc)}"
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


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


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

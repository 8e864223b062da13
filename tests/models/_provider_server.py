"""A real HTTP server on 127.0.0.1 that answers with scripted or recorded provider responses.

The official clients talk to it over a socket exactly as they talk to the provider. Each
request takes the next :class:`Reply` from the queue; every request is recorded. Streams
go out with chunked transfer encoding in small pieces, so the clients' SSE parsing sees
partial lines; a reply can also cut the connection mid-way, hang, or fail to parse.
"""

from __future__ import annotations

import json
import os
import re
import ssl
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.models import _bedrock_wire as bedrock
from tests.models import _gemini_wire
from tests.models._bedrock_wire import (
    EVENT_STREAM,
    STREAM_HEADERS,
    Frame,
    encode_frames,
    recorded_body,
)

FIXTURES = Path(__file__).parents[1] / "fixtures" / "provider-traffic"


@dataclass
class Reply:
    """One scripted answer."""

    status: int = 200
    body: str | bytes = ""  # bytes go out as they are (a body that is not valid UTF-8)
    headers: dict[str, str] = field(default_factory=dict)
    piece: int = 0  # >0: write the body in pieces of this many bytes (chunked)
    cut_after: int | None = None  # drop the connection after this many body bytes
    delay: float = 0.0  # seconds to wait before answering
    stall_after: int | None = None  # stop writing for `stall` seconds after this many bytes
    stall: float = 0.0
    drip: float = 0.0  # seconds between pieces: a server that never stops, nor goes on

    @classmethod
    def json(cls, payload: Any, status: int = 200, **kwargs: Any) -> Reply:
        headers = {"content-type": "application/json", **kwargs.pop("headers", {})}
        return cls(status=status, body=json.dumps(payload), headers=headers, **kwargs)

    @classmethod
    def sse(cls, events: list[Any], *, done: bool = True, **kwargs: Any) -> Reply:
        """An OpenAI-style stream of ``data:`` lines (``(event, data)`` pairs name the event).

        Bedrock's frames (``_bedrock_wire.Frame``) go out as the AWS event stream instead.
        """
        if events and isinstance(events[0], Frame):
            kwargs.setdefault("piece", 7)
            return cls(body=encode_frames(events), headers=dict(STREAM_HEADERS), **kwargs)
        lines = []
        for item in events:
            if isinstance(item, tuple):
                lines.append(f"event: {item[0]}\ndata: {json.dumps(item[1])}\n\n")
            else:
                lines.append(f"data: {json.dumps(item)}\n\n")
        if done:
            lines.append("data: [DONE]\n\n")
        headers = {"content-type": "text/event-stream", **kwargs.pop("headers", {})}
        kwargs.setdefault("piece", 7)
        return cls(body="".join(lines), headers=headers, **kwargs)

    @classmethod
    def recorded(cls, case: dict[str, Any], **kwargs: Any) -> Reply:
        """The response of a recorded case, as the provider sent it."""
        response = case["response"]
        content_type = response["headers"].get("content-type", "")
        streaming = content_type.startswith(("text/event-stream", EVENT_STREAM))
        return cls(
            status=response["status"],
            body=recorded_body(response),
            headers=dict(response["headers"]),
            piece=5 if streaming else 0,
            **kwargs,
        )


@dataclass
class Received:
    """One request the server got."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any


@contextmanager
def quick_client_tls(directory: Path) -> Iterator[None]:
    """Let new clients build their TLS context from one CA certificate, while inside.

    Every official client loads the system's whole CA bundle when it is made (about 0.1 s);
    the tests make a fresh client per test and speak plain HTTP, so one certificate (written
    to ``directory``, named by ``SSL_CERT_FILE``, which the clients honour) is enough.
    """
    previous = os.environ.get("SSL_CERT_FILE")
    paths = ssl.get_default_verify_paths()
    bundle = Path(previous or paths.cafile or paths.openssl_cafile)
    found = _PEM.search(bundle.read_text(errors="replace")) if bundle.is_file() else None
    if found is None:
        yield  # no bundle to take a certificate from: leave the clients as they are
        return
    single = directory / "one-ca.pem"
    single.write_text(found.group(0) + "\n")
    os.environ["SSL_CERT_FILE"] = str(single)
    try:
        yield
    finally:
        if previous is None:
            del os.environ["SSL_CERT_FILE"]
        else:
            os.environ["SSL_CERT_FILE"] = previous


_PEM = re.compile(r"-----BEGIN CERTIFICATE-----.+?-----END CERTIFICATE-----", re.S)


def load_case(name: str) -> dict[str, Any]:
    """A recorded case from the fixtures, by id."""
    data: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text())
    return data


def case_names(prefix: str = "") -> list[str]:
    """Ids of the recorded cases whose id starts with ``prefix``."""
    return sorted(p.stem for p in FIXTURES.glob(f"{prefix}*.json"))


_DROPPED = {"content-length", "transfer-encoding", "content-encoding", "connection"}


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that gave up (a timeout test) resets its connection while the handler
        # waits for the next request line. No one to answer; and a traceback printed from
        # this thread would race pytest's parsing of source (see _answer).
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class ProviderServer:
    """The server; use as a context manager or call :meth:`close`."""

    def __init__(self) -> None:
        self.replies: deque[Reply] = deque()
        self.received: list[Received] = []
        self.finished: list[Reply] = []  # the replies sent to their end
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self._answer()

            def do_POST(self) -> None:
                self._answer()

            def _answer(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body: Any = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode(errors="replace")
                with server._lock:
                    server.received.append(
                        Received(self.command, self.path, dict(self.headers.items()), body)
                    )
                    reply = server.replies.popleft() if server.replies else None
                if reply is None:
                    reply = Reply.json({"error": {"message": "no reply scripted"}}, status=599)
                if reply.delay:
                    time.sleep(reply.delay)
                try:
                    self._send(reply)
                    with server._lock:
                        server.finished.append(reply)
                except (BrokenPipeError, ConnectionResetError):
                    # The client gave up (a timeout test): no one to answer. Printing the
                    # traceback from this thread would also race pytest's parsing of source
                    # (CPython 3.11 formats tracebacks with the ast module, not thread-safe).
                    self.close_connection = True

            def _send(self, reply: Reply) -> None:
                data = reply.body if isinstance(reply.body, bytes) else reply.body.encode()
                chunked = (
                    reply.piece > 0
                    or reply.cut_after is not None
                    or bool(reply.stall)
                    or bool(reply.drip)
                )
                self.send_response(reply.status)
                for key, value in reply.headers.items():
                    if key.lower() not in _DROPPED:
                        self.send_header(key, value)
                if chunked:
                    self.send_header("transfer-encoding", "chunked")
                else:
                    self.send_header("content-length", str(len(data)))
                self.end_headers()
                if not chunked:
                    self.wfile.write(data)
                    return
                if reply.cut_after is not None:
                    data = data[: reply.cut_after]
                step = reply.piece or 64
                stall_at = reply.stall_after
                for start in range(0, len(data), step):
                    if stall_at is not None and start >= stall_at:
                        time.sleep(reply.stall)  # a stream that stops mid-way, then goes on
                        stall_at = None
                    if reply.drip and start:
                        time.sleep(reply.drip)
                    part = data[start : start + step]
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
                    self.wfile.flush()
                if reply.cut_after is not None:
                    self.close_connection = True
                    self.wfile.flush()
                    self.connection.shutdown(2)
                    return
                self.wfile.write(b"0\r\n\r\n")

        self._httpd = _QuietServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        """The server's base URL."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def add(self, *replies: Reply) -> None:
        """Queue replies, answered in order."""
        with self._lock:
            self.replies.extend(replies)

    def reset(self) -> None:
        """Forget the queued replies and the requests received (to share one server)."""
        with self._lock:
            self.replies.clear()
            self.received.clear()
            self.finished.clear()

    def close(self) -> None:
        """Stop serving."""
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> ProviderServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# --- scripted answers of each API -------------------------------------------------------
# Minimal, well-formed answers of the three APIs ("chat.completions", "messages",
# "responses"), whole or streamed, for tests that script a conversation rather than replay a
# recording. A tool call is ``(id, name, arguments JSON text)``.

APIS = ("chat.completions", "messages", "responses", "gemini", "bedrock.converse")

ToolCallSpec = tuple[str, str, str]


def adapter(api: str, server: ProviderServer, *, prefix: str | None = None, **kwargs: Any) -> Any:
    """The hookloop adapter for ``api`` (model ``"m"``), talking to ``server``.

    ``prefix`` is the API root's path on the server; by default the provider's own
    (``/v1`` for OpenAI, none for Anthropic, whose client adds ``/v1``). Anthropic's prompt
    caching is off unless ``cache`` is given: the tests of what each adapter sends compare
    whole bodies, and ``test_prompt_cache.py`` checks the breakpoints.
    """
    from hookloop.models import AnthropicModel, GeminiModel, OpenAIModel, OpenAIResponsesModel

    kwargs.setdefault("api_key", "k")
    if api == "chat.completions":
        return OpenAIModel("m", base_url=server.url + _or(prefix, "/v1"), **kwargs)
    if api == "messages":
        kwargs.setdefault("cache", None)
        return AnthropicModel("m", base_url=server.url + _or(prefix, ""), **kwargs)
    if api == "responses":
        return OpenAIResponsesModel("m", base_url=server.url + _or(prefix, "/v1"), **kwargs)
    if api == "bedrock.converse":
        from hookloop.models import BedrockModel

        del kwargs["api_key"]  # AWS credentials: the fake ones of tests/conftest.py
        kwargs.setdefault("cache", None)
        return BedrockModel("m", endpoint_url=server.url + _or(prefix, ""), **kwargs)
    if api == "gemini":  # the client adds /v1beta/models/m:generateContent
        return GeminiModel("m", base_url=server.url + _or(prefix, ""), **kwargs)
    raise ValueError(f"unknown api {api!r}")


def _or(value: str | None, default: str) -> str:
    return default if value is None else value


def answer(
    api: str,
    text: str = "",
    calls: tuple[ToolCallSpec, ...] = (),
    *,
    stream: bool = False,
    usage: tuple[int, int] = (11, 7),
    **kwargs: Any,
) -> Reply:
    """A whole or streamed answer of ``api`` with ``text`` and tool ``calls``."""
    if api == "bedrock.converse" and not stream:
        return Reply.json(bedrock.whole_answer(text, calls, usage=usage), **kwargs)
    if stream:
        events = answer_events(api, text, calls, usage=usage)
        return Reply.sse(events, done=api == "chat.completions", **kwargs)
    return Reply.json(whole_answer(api, text, calls, usage=usage), **kwargs)


def whole_answer(
    api: str, text: str = "", calls: tuple[ToolCallSpec, ...] = (), *, usage: tuple[int, int]
) -> dict[str, Any]:
    """The JSON body of a non-streamed answer."""
    if api == "bedrock.converse":
        return bedrock.whole_answer(text, calls, usage=usage)
    if api == "gemini":
        return _gemini_wire.whole_answer(text, calls, usage=usage)
    tokens_in, tokens_out = usage
    if api == "chat.completions":
        message: dict[str, Any] = {"role": "assistant", "content": text or None}
        if calls:
            message["tool_calls"] = [
                {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                for i, n, a in calls
            ]
        return {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 0,
            "model": "m-served",
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if calls else "stop",
                }
            ],
            "usage": {
                "prompt_tokens": tokens_in,
                "completion_tokens": tokens_out,
                "total_tokens": tokens_in + tokens_out,
            },
        }
    if api == "messages":
        blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        blocks += [
            {"type": "tool_use", "id": i, "name": n, "input": json.loads(a)} for i, n, a in calls
        ]
        return {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "m-served",
            "content": blocks,
            "stop_reason": "tool_use" if calls else "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": tokens_in, "output_tokens": tokens_out},
        }
    output: list[dict[str, Any]] = []
    if text:
        output.append(
            {
                "type": "message",
                "id": "msg_1",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        )
    output += [
        {
            "type": "function_call",
            "id": f"fc_{i}",
            "call_id": i,
            "name": n,
            "arguments": a,
            "status": "completed",
        }
        for i, n, a in calls
    ]
    return {
        "id": "resp_1",
        "object": "response",
        "created_at": 0,
        "model": "m-served",
        "status": "completed",
        "output": output,
        "usage": {
            "input_tokens": tokens_in,
            "output_tokens": tokens_out,
            "total_tokens": tokens_in + tokens_out,
        },
    }


def answer_events(
    api: str,
    text: str = "",
    calls: tuple[ToolCallSpec, ...] = (),
    *,
    usage: tuple[int, int] = (11, 7),
    finished: bool = True,
) -> list[Any]:
    """The events of a streamed answer, text and arguments in pieces of 4 characters.

    ``finished=False`` leaves out what says the model finished (the ``finish_reason``,
    ``message_stop``, ``response.completed``): a stream that ends cleanly but too early.
    """
    if api == "bedrock.converse":
        return list(bedrock.answer_events(text, calls, usage=usage, finished=finished))
    if api == "gemini":
        return _gemini_wire.answer_events(text, calls, usage=usage, finished=finished)
    tokens_in, tokens_out = usage
    if api == "chat.completions":

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            choice = {"index": 0, "delta": delta, "finish_reason": finish}
            return {**_CHUNK, "choices": [choice]}

        events: list[Any] = [chunk({"role": "assistant", "content": ""})]
        events += [chunk({"content": piece}) for piece in _pieces(text)]
        for index, (i, n, a) in enumerate(calls):
            start = {"index": index, "id": i, "type": "function"}
            events.append(chunk({"tool_calls": [{**start, "function": {"name": n}}]}))
            events += [
                chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
                for piece in _pieces(a)
            ]
        if finished:
            events.append(chunk({}, "tool_calls" if calls else "stop"))
        events.append(
            {
                **_CHUNK,
                "choices": [],
                "usage": {
                    "prompt_tokens": tokens_in,
                    "completion_tokens": tokens_out,
                    "total_tokens": tokens_in + tokens_out,
                },
            }
        )
        return events
    if api == "messages":
        start = {**whole_answer(api, usage=(tokens_in, 1)), "content": [], "stop_reason": None}
        events = [("message_start", {"type": "message_start", "message": start})]
        blocks: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []
        if text:
            deltas = [{"type": "text_delta", "text": p} for p in _pieces(text)]
            blocks.append(({"type": "text", "text": ""}, deltas))
        for i, n, a in calls:
            deltas = [{"type": "input_json_delta", "partial_json": p} for p in _pieces(a)]
            blocks.append(({"type": "tool_use", "id": i, "name": n, "input": {}}, deltas))
        for index, (block, deltas) in enumerate(blocks):
            events.append(
                (
                    "content_block_start",
                    {"type": "content_block_start", "index": index, "content_block": block},
                )
            )
            events += [
                (
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": delta},
                )
                for delta in deltas
            ]
            events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
        stop = {"stop_reason": "tool_use" if calls else "end_turn", "stop_sequence": None}
        events.append(
            (
                "message_delta",
                {"type": "message_delta", "delta": stop, "usage": {"output_tokens": tokens_out}},
            )
        )
        if finished:
            events.append(("message_stop", {"type": "message_stop"}))
        return events
    final = whole_answer(api, text, calls, usage=usage)
    pending = {**final, "status": "in_progress", "output": [], "usage": None}
    events = [("response.created", {"type": "response.created", "response": pending})]
    for index, item in enumerate(final["output"]):
        if item["type"] == "message":
            opened = {**item, "status": "in_progress", "content": []}
            events.append(_responses_event("response.output_item.added", index, item=opened))
            events += [
                _responses_event(
                    "response.output_text.delta",
                    index,
                    item_id=item["id"],
                    content_index=0,
                    delta=piece,
                )
                for piece in _pieces(text)
            ]
        else:
            opened = {**item, "status": "in_progress", "arguments": ""}
            events.append(_responses_event("response.output_item.added", index, item=opened))
            events += [
                _responses_event(
                    "response.function_call_arguments.delta",
                    index,
                    item_id=item["id"],
                    delta=piece,
                )
                for piece in _pieces(item["arguments"])
            ]
        events.append(_responses_event("response.output_item.done", index, item=item))
    if finished:
        events.append(("response.completed", {"type": "response.completed", "response": final}))
    return [
        (name, {**data, "sequence_number": number}) for number, (name, data) in enumerate(events)
    ]


_CHUNK: dict[str, Any] = {
    "id": "chatcmpl-1",
    "object": "chat.completion.chunk",
    "created": 0,
    "model": "m-served",
}


def _responses_event(kind: str, index: int, **fields: Any) -> tuple[str, dict[str, Any]]:
    return kind, {"type": kind, "output_index": index, **fields}


def _pieces(text: str, size: int = 4) -> list[str]:
    return [text[start : start + size] for start in range(0, len(text), size)]

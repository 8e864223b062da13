"""hookloop's chat handler for llama.cpp's server: ChatML with tool calls a small model follows.

:mod:`hookloop.models._serve_local` registers :func:`handle` under :data:`CHAT_FORMAT` in the
server process before the server starts; :class:`~hookloop.models.LocalModel` selects
it by name. The prompt it writes:

- the tools are listed in the system turn whether or not there is a system prompt, each with
  its description and JSON parameters, with the two ways to answer (``functions.NAME:`` and
  JSON arguments, or ``message:`` and text);
- an assistant's tool calls are written back exactly as the model wrote them (no escaping);
- a call's arguments start as written (``{"expression": "``) and only the rest is generated
  under the tool's JSON-schema grammar;
- a tool's result is shown as a user turn (``The answer from NAME is ...``, or ``NAME failed:
  ...`` for an error): a small model answers from a result it reads there, and ignores one in
  a turn of a role it never saw;
- in a prompt without tools (the one text answers are written from) earlier calls are left
  out, so the model never sees, and never echoes, the ``functions.NAME:`` syntax.

Generation: a forced tool (``tool_choice`` naming it, or ``"required"`` with one tool) is
prefilled and its arguments are generated under the tool's JSON-schema grammar; ``"auto"``
first lets the model choose a line ``Tool: NAME`` or ``Tool: none`` under a tiny grammar
(``"required"`` with several tools: a tool only), a line that is not kept; then it
writes the arguments under the schema grammar or the text freely. Text (chosen, or
``"none"``) is written from the prompt without the tool guide: shown the guide, a small model
talks about the tools instead of answering. One tool call per answer. A text answer asked for
as ``response_format={"type": "json_object", "schema": ...}`` is generated under the schema's
grammar, its start prefilled as a call's arguments are.

Usage: the input tokens an answer reports are those of the request as sent, its tools listed
(the prompt with the tool guide), also for an answer in words written from the smaller prompt
without it, so that a context budget calibrated on them holds for the next request; the
tokens a decision line generated count as output.

Only the server process calls it (it needs ``llama-cpp-python``, imported when used).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

__all__ = ["CHAT_FORMAT", "handle", "register", "render"]

CHAT_FORMAT = "hookloop-tools"
"""The name :func:`register` gives the handler in llama.cpp's registry."""

_END = "<|im_end|>"
_MESSAGE = "message:"
_DECIDE = "Tool: "
_Json = dict[str, Any]


def register() -> None:
    """Make :data:`CHAT_FORMAT` a chat format of this process's llama.cpp server."""
    from llama_cpp.llama_chat_format import LlamaChatCompletionHandlerRegistry

    handler: Any = handle  # the protocol's TypedDicts say no more than these dicts
    registry: Any = LlamaChatCompletionHandlerRegistry  # an untyped singleton
    registry().register_chat_completion_handler(CHAT_FORMAT, handler, overwrite=True)


def render(messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]) -> str:
    r"""The ChatML prompt for ``messages`` with ``tools`` offered, up to the assistant's turn.

    Example:
        >>> render([{"role": "user", "content": "Hi"}], [])
        '<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n'
    """
    system = "\n\n".join(_text(m.get("content")) for m in messages if m["role"] == "system")
    if tools:
        system = "\n\n".join(part for part in (system, _tool_guide(tools)) if part)
    turns = [("system", system)] if system else []
    names: dict[str, str] = {}
    for message in messages:
        role = message["role"]
        if role == "user":
            turns.append(("user", _text(message.get("content"))))
        elif role == "assistant":
            text = _assistant(message, names, tools=bool(tools))
            if text:  # without tools a turn of calls only is left out
                turns.append(("assistant", text))
        elif role in ("tool", "function"):
            name = names.get(str(message.get("tool_call_id")), str(message.get("name") or "tool"))
            turns.append(("user", _result(name, _text(message.get("content")))))
    body = "".join(f"<|im_start|>{role}\n{text}{_END}\n" for role, text in turns)
    return body + "<|im_start|>assistant\n"


def handle(
    *,
    llama: Any,
    messages: list[_Json],
    tools: list[_Json] | None = None,
    tool_choice: str | _Json | None = None,
    functions: list[_Json] | None = None,
    function_call: str | _Json | None = None,
    stream: bool = False,
    stop: str | list[str] | None = None,
    max_tokens: int | None = None,
    response_format: _Json | None = None,
    **sampling: Any,
) -> _Json | Iterator[_Json]:
    """Answer one chat request (llama-cpp-python's chat-handler protocol).

    Returns:
        A chat completion, or an iterator of chat completion chunks when ``stream``.

    Raises:
        ValueError: ``tool_choice`` names a tool that is not offered.
    """
    if functions and not tools:  # the legacy form of the same request
        tools = [{"type": "function", "function": f} for f in functions]
        tool_choice = function_call if tool_choice is None else tool_choice
    offered = [t["function"] for t in tools or []]
    stops = [_END, *([stop] if isinstance(stop, str) else stop or [])]
    params = {key: sampling[key] for key in _SAMPLING if key in sampling}

    def complete(
        text: str, *, grammar: Any = None, streaming: bool = False, limit: Any = None
    ) -> Any:
        return llama.create_completion(
            prompt=text,
            stream=streaming,
            stop=stops,
            max_tokens=max_tokens if limit is None else limit,
            grammar=grammar,
            **params,
        )

    def text_answer() -> _Json | Iterator[_Json]:
        # Without the tool guide: shown it, a small model talks about the tools.
        prompt = render(messages, [])
        if not response_format or response_format.get("type") != "json_object":
            return _text_answer(complete(prompt, streaming=stream), stream=stream)
        start, grammar = _arguments_grammar(response_format.get("schema"))
        completion = complete(prompt + start, grammar=grammar, streaming=stream)
        return _text_answer(completion, stream=stream, start=start)

    choice = _choice(tool_choice, offered)
    prompt = render(messages, offered)
    if choice is None:
        return _counted(text_answer(), llama, prompt if offered else "")
    function: _Json | None = choice if isinstance(choice, dict) else None
    decided: _Json | None = None
    if function is None:
        # Asked to pick a line "Tool: NAME" or "Tool: none", a small model tells greetings
        # from sums; asked to pick "functions.NAME:" or "message:", it calls a tool for
        # nearly every first message (measured: 2 of 10 greetings answered in words).
        names = [f["name"] for f in offered] + (["none"] if choice == "auto" else [])
        options = " | ".join(json.dumps(f"{_DECIDE}{name}") for name in names)
        decided = complete(prompt, grammar=_grammar(f"root ::= {options}"), limit=32)
        picked = decided["choices"][0]["text"].removeprefix(_DECIDE)
        function = next((f for f in offered if f["name"] == picked), None)
    if function is None:  # "Tool: none"
        return _counted(text_answer(), llama, prompt, decided)
    start, grammar = _arguments_grammar(function.get("parameters"))
    completion = complete(f"{prompt}functions.{function['name']}:\n{start}", grammar=grammar)
    return _counted(
        _tool_answer(function["name"], start, completion, stream=stream), llama, "", decided
    )


def _counted(
    answer: _Json | Iterator[_Json], llama: Any, prompt: str, decided: _Json | None = None
) -> _Json | Iterator[_Json]:
    """``answer`` with the usage of the request as sent.

    An answer in words is written from a prompt without the tool guide, which is smaller
    than the request: its input tokens are those of ``prompt`` (the request with its tools)
    when that is larger. The tokens a decision (``Tool: NAME``) generated count as output.
    A stream carries no usage.
    """
    if not isinstance(answer, dict):
        return answer
    usage = dict(answer["usage"])
    if prompt:
        listed = len(llama.tokenize(prompt.encode("utf-8"), special=True))
        usage["prompt_tokens"] = max(usage["prompt_tokens"], listed)
    if decided is not None:
        usage["completion_tokens"] += decided["usage"]["completion_tokens"]
    usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
    return {**answer, "usage": usage}


_SAMPLING = (
    "temperature", "top_p", "top_k", "min_p", "typical_p", "presence_penalty",
    "frequency_penalty", "repeat_penalty", "tfs_z", "mirostat_mode", "mirostat_tau",
    "mirostat_eta", "model", "logits_processor", "seed", "logit_bias",
)  # fmt: skip


def _choice(tool_choice: str | _Json | None, offered: list[_Json]) -> _Json | str | None:
    """``None`` for text only, ``"auto"``, ``"required"`` (one of several), or the function."""
    if not offered or tool_choice in (None, "none"):
        return None
    if isinstance(tool_choice, dict):
        name = (tool_choice.get("function") or tool_choice).get("name")
        for function in offered:
            if function["name"] == name:
                return function
        raise ValueError(f"tool_choice names {name!r}, which is not among the tools offered")
    if tool_choice == "required":
        return offered[0] if len(offered) == 1 else "required"
    return "auto"


def _tool_guide(tools: Sequence[Mapping[str, Any]]) -> str:
    listing = "\n".join(
        f"functions.{t['name']}: {t.get('description') or ''}\n"
        f"  parameters: {json.dumps(t.get('parameters') or {}, separators=(',', ':'))}"
        for t in tools
    )
    return (
        f"You can use these tools:\n{listing}\n\n"
        "To use a tool, answer with its name and JSON arguments:\n"
        'functions.NAME:\n{"argument": "value"}\n'
        "The tool's result comes back to you in the next message.\n"
        "To answer the user in words, begin with:\n"
        "message:"
    )


def _assistant(message: Mapping[str, Any], names: dict[str, str], *, tools: bool) -> str:
    parts: list[str] = []
    content = _text(message.get("content"))
    if content:
        parts.append(f"{_MESSAGE}\n{content}" if tools else content)
    for call in message.get("tool_calls") or []:
        function = call["function"]
        names[str(call.get("id"))] = function["name"]
        if tools:  # in a prompt for words the model would echo this syntax to the user
            parts.append(f"functions.{function['name']}:\n{function.get('arguments') or '{}'}")
    return "\n".join(parts)


def _result(name: str, content: str) -> str:
    """A tool's result as the user turn that shows it: an answer, or a failure."""
    failures = {
        f"tool {name!r} failed: ": "",  # hookloop's texts for a tool that raised or was misused
        f"invalid arguments for tool {name!r}: ": "invalid arguments: ",
    }
    for failed, reason in failures.items():
        if content.startswith(failed):
            return f"{name} failed: {reason}{content.removeprefix(failed)}"
    return f"The answer from {name} is {content}."


def _text(content: Any) -> str:
    """A message's content as text (the text parts of a list of parts)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if isinstance(part, Mapping))


def _grammar(source: str) -> Any:
    from llama_cpp.llama_grammar import LlamaGrammar

    return LlamaGrammar.from_string(source, verbose=False)


def _arguments_grammar(schema: Any) -> tuple[str, Any]:
    """The fixed start of a call's arguments, and the grammar of the rest.

    The start, ``{"<first property>": `` (and a string value's opening quote), is written
    into the prompt rather than generated: under the bare schema grammar a small model's
    preferred tokens around the forced opening quote let a stray ``.`` into the value
    (``".24 * 18"`` for 18 * 24). The rest is the schema's grammar with its first key taken
    off the root rule.
    """
    from llama_cpp.llama_grammar import JSON_GBNF, json_schema_to_gbnf

    try:
        source = json_schema_to_gbnf(json.dumps(schema or {}))
    except Exception:  # a schema the converter does not handle: any JSON object
        return "", _grammar(JSON_GBNF)
    rules: dict[str, str] = {}
    for rule in filter(None, map(_RULE.fullmatch, source.splitlines())):
        rules[rule[1]] = rule[2]
    root = _FIRST_KEY.fullmatch(rules.get("root", ""))
    pair = _KEY_VALUE.fullmatch(rules.get(root[1], "")) if root else None
    if root is None or pair is None:  # no fixed first key (no required property)
        return "", _grammar(source)
    try:
        key = json.loads(f'"{pair[1]}"')
    except ValueError:  # an escape GBNF and JSON spell differently: generate it all
        return "", _grammar(source)
    start, value = f"{{{json.dumps(key)}: ", rules.get(pair[2], pair[2])
    if value.startswith(_QUOTE):  # a string: its opening quote is fixed too
        start, value = start + '"', value.removeprefix(_QUOTE)
    rules["root"] = f"{value} {root[2]}"
    return start, _grammar("\n".join(f"{name} ::= {body}" for name, body in rules.items()))


_RULE = re.compile(r"([\w-]+) ::= (.*)")
_FIRST_KEY = re.compile(r'"\{" space ([\w-]+) (.*)')  # root ::= "{" space first-kv rest
_QUOTE = '"\\"" '
_KEY_VALUE = re.compile(r'"\\"((?:[^"\\]|\\.)*?)\\"" space ":" space (.+)')


def _text_answer(completion: Any, *, stream: bool, start: str = "") -> _Json | Iterator[_Json]:
    if not stream:
        choice = completion["choices"][0]
        return _chat(
            completion,
            {"role": "assistant", "content": start + choice["text"]},
            choice["finish_reason"],
        )
    return _text_chunks(completion, start)


def _text_chunks(chunks: Iterator[_Json], start: str = "") -> Iterator[_Json]:
    first = True
    for chunk in chunks:
        if first:  # the prefilled start of a JSON answer comes first
            yield _chunk(chunk, {"role": "assistant", "content": start}, None)
            first = False
        choice = chunk["choices"][0]
        finish = choice["finish_reason"]
        yield _chunk(chunk, {"content": choice["text"]} if choice["text"] else {}, finish)


def _tool_answer(
    name: str, start: str, completion: _Json, *, stream: bool
) -> _Json | Iterator[_Json]:
    call = {
        "id": f"call_{completion['id']}",
        "type": "function",
        "function": {"name": name, "arguments": start + completion["choices"][0]["text"]},
    }
    if not stream:
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
        return _chat(completion, message, "tool_calls")
    return iter(
        [
            _chunk(completion, {"role": "assistant", "content": None}, None),
            _chunk(completion, {"tool_calls": [{"index": 0, **call}]}, None),
            _chunk(completion, {}, "tool_calls"),
        ]
    )


def _chat(completion: _Json, message: _Json, finish: str | None) -> _Json:
    return {
        "id": f"chat{completion['id']}",
        "object": "chat.completion",
        "created": completion.get("created", int(time.time())),
        "model": completion["model"],
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
        "usage": completion["usage"],
    }


def _chunk(source: _Json, delta: _Json, finish: str | None) -> _Json:
    return {
        "id": f"chat{source['id']}",
        "object": "chat.completion.chunk",
        "created": source.get("created", int(time.time())),
        "model": source["model"],
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
    }

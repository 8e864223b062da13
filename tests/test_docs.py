"""Every docs page's Python examples run, as written, and print what the page shows.

The convention every page follows (docs/*.md and README.md):

- All the ```python blocks of a page, top to bottom, are ONE script: a later block may use
  what an earlier one defined. Blocks inside list items may be indented; they are dedented.
- The script runs with this checkout's Python in a fresh, empty working directory, and then
  once more in the same directory: it must not depend on files a previous run left.
- A python block may be followed by a paragraph that starts with "prints" and then a plain
  (or ```text) block: that is exactly what the python block prints. A python block with no
  such paragraph must print nothing. In the shown output, ``...`` matches any text (as
  doctest's ELLIPSIS), for parts that vary such as timings.
- A block that needs a key or a server says so on the page. The runner gives it one: the
  official clients' ``OPENAI_BASE_URL`` / ``ANTHROPIC_BASE_URL`` point at the local provider
  test server with placeholder keys, and ``DATABASE_URL`` / ``REDIS_URL`` name the
  PostgreSQL and Redis that ``scripts/test-services`` started (``TEMPORAL_ADDRESS``: its
  Temporal dev server). With a real provider the
  words vary, so such a page says "prints something like"; the local server is scripted
  (``PROVIDER_REPLIES``) to answer with the words shown.
- A block that cannot run at all here is preceded by the line ``<!-- docs: not run -->``;
  such blocks are counted and reported, and at most ``NOT_RUN_ALLOWED`` may exist.

Each block is followed in the script by a marker line, so the test knows which blocks ran
and which block printed what; a page fails if any block did not run.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import FAKE_AWS
from tests.models._provider_server import ProviderServer, Reply, answer, whole_answer

ROOT = Path(__file__).resolve().parent.parent
PAGES = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]
NOT_RUN = "<!-- docs: not run -->"
NOT_RUN_ALLOWED = 2

_FENCE = re.compile(
    r"^(?P<indent>[ ]*)```(?P<lang>\w*)\n(?P<body>.*?)^(?P=indent)```[ ]*$", re.M | re.S
)
_MARK = "<<docs: end of block {}>>"


def _cached(text: str, *, written: int, read: int) -> Reply:
    """An Anthropic answer whose usage reports prompt-cache writes and reads."""
    body = whole_answer("messages", text, usage=(12, 9))
    body["usage"].update(cache_creation_input_tokens=written, cache_read_input_tokens=read)
    return Reply.json(body)


def _thinking(reply: Reply) -> Reply:
    """A Gemini answer whose usage reports thinking tokens."""
    body = json.loads(reply.body)
    body["usageMetadata"]["thoughtsTokenCount"] = 21
    return Reply.json(body)


# What the local provider server answers, per run, to the pages whose examples need a key.
PROVIDER_REPLIES: dict[str, list[Reply]] = {
    "docs/providers.md": [
        answer("messages", calls=(("toolu_1", "calculator", '{"expression": "17 * 23"}'),)),
        answer("messages", "17 * 23 = 391."),
        # The Gemini example: a call of the calculator, then the answer (with thinking).
        answer("gemini", calls=(("call_1", "calculator", '{"expression": "17 * 23"}'),)),
        _thinking(answer("gemini", "17 * 23 = 391.")),
        # The Bedrock example: Nova calls the calculator, then answers.
        answer(
            "bedrock.converse", calls=(("tooluse_1", "calculator", '{"expression": "17 * 23"}'),)
        ),
        answer("bedrock.converse", "17 * 23 = 391."),
        # The prompt-caching example: the first chat writes the prompt, the second reads it.
        _cached("Refunds take five working days.", written=4012, read=0),
        _cached("Damaged parcels are refunded at once.", written=31, read=4012),
    ],
    "docs/agent.md": [
        answer("chat.completions", "The chart shows sales rising every month from January to June.")
    ],
}


@dataclass(frozen=True, kw_only=True)
class Block:
    """One ```python block of a page and the output the page shows for it."""

    line: int  # the line of the block's first code line, 1-based
    code: str
    shown: str  # "" when the page shows no output
    run: bool  # False when marked NOT_RUN


def blocks(page: Path) -> list[Block]:
    """The python blocks of a page, in order, each with the output the page shows for it."""
    text = page.read_text()
    fences = list(_FENCE.finditer(text))
    found = []
    for number, fence in enumerate(fences):
        if fence.group("lang") != "python":
            continue
        shown = ""
        following = fences[number + 1] if number + 1 < len(fences) else None
        if following is not None and following.group("lang") in ("", "text"):
            between = text[fence.end() : following.start()].strip()
            if between.startswith("prints"):
                shown = textwrap.dedent(following.group("body"))
        before = text[: fence.start()].rstrip("\n ").rsplit("\n", 1)[-1].strip()
        found.append(
            Block(
                line=text.count("\n", 0, fence.start("body")) + 1,
                code=textwrap.dedent(fence.group("body")),
                shown=shown,
                run=before != NOT_RUN,
            )
        )
    return found


def script(page_blocks: list[Block]) -> str:
    """The page's runnable blocks as one script, each at its own line of the page.

    Tracebacks then name the page's own line numbers; after each block a marker is printed.
    """
    lines: list[str] = []
    for number, block in enumerate(page_blocks):
        if not block.run:
            continue
        lines.extend([""] * (block.line - 1 - len(lines)))
        lines.extend(block.code.splitlines())
        lines.append(f"print({_MARK.format(number)!r}, flush=True)")
    return "\n".join(lines) + "\n"


def matches(shown: str, printed: str) -> bool:
    """Whether ``printed`` is ``shown``, where ``...`` in ``shown`` stands for any text."""
    pattern = ".*?".join(re.escape(part) for part in shown.split("..."))
    return re.fullmatch(pattern, printed, re.S) is not None


def test_the_convention_reads_blocks_marks_and_output(tmp_path: Path) -> None:
    page = "\n".join(
        [
            "```python",
            "print('a')",
            "```",
            "",
            "prints",
            "",
            "```",
            "a",
            "```",
            "",
            "- item:",
            "",
            "  ```python",
            "  x = 1",
            "  ```",
            "",
            NOT_RUN,
            "```python",
            "import nowhere",
            "```",
            "",
        ]
    )
    path = tmp_path / "page.md"
    path.write_text(page)
    found = blocks(path)
    assert found == [
        Block(line=2, code="print('a')\n", shown="a\n", run=True),
        Block(line=14, code="x = 1\n", shown="", run=True),
        Block(line=19, code="import nowhere\n", shown="", run=False),
    ]
    assert script(found).splitlines()[1] == "print('a')"
    assert script(found).splitlines()[13] == "x = 1"
    assert "nowhere" not in script(found)
    assert matches("... ms  done\n", "   12.5 ms  done\n")
    assert not matches("a\n", "a\nb\n")


# A page that names one of these variables needs that server; its address comes from the
# fixture (scripts/test-services), which skips (or fails under CI) without one.
_DATABASES = {
    "DATABASE_URL": "postgres_isolated_dsn",
    "REDIS_URL": "redis_url",
    "TEMPORAL_ADDRESS": "temporal_address",
}
# The Temporal SDK sometimes aborts a process at interpreter exit, after its work is done (an
# open SDK issue; docs/durable.md): a page that uses it is judged by what every block printed.
_EXIT_ABORTS = (-signal.SIGABRT, -signal.SIGSEGV)


def _environment(
    server: ProviderServer, page: str, request: pytest.FixtureRequest
) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _DATABASES}
    env.update(
        OPENAI_API_KEY="sk-docs-placeholder",
        OPENAI_BASE_URL=server.url + "/v1",
        ANTHROPIC_API_KEY="sk-ant-docs-placeholder",
        ANTHROPIC_BASE_URL=server.url,
        GEMINI_API_KEY="docs-placeholder",
        GOOGLE_GEMINI_BASE_URL=server.url,
        AWS_ENDPOINT_URL_BEDROCK_RUNTIME=server.url,
        **FAKE_AWS,
        PYTHONDONTWRITEBYTECODE="1",
    )
    for variable, fixture in _DATABASES.items():
        if variable in page:
            env[variable] = request.getfixturevalue(fixture)
    return env


def _printed_per_block(stdout: str, page_blocks: list[Block]) -> dict[int, str]:
    printed: dict[int, str] = {}
    rest = stdout
    for number, block in enumerate(page_blocks):
        if not block.run:
            continue
        mark = _MARK.format(number) + "\n"
        if mark not in rest:
            break
        printed[number], rest = rest.split(mark, 1)
    return printed


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_the_page_runs_and_prints_what_it_shows(
    page: Path, tmp_path: Path, server: ProviderServer, request: pytest.FixtureRequest
) -> None:
    page_blocks = blocks(page)
    source = tmp_path / "script" / (page.name + ".py")
    source.parent.mkdir()
    source.write_text(script(page_blocks))
    workdir = tmp_path / "empty"
    workdir.mkdir()
    name = page.relative_to(ROOT).as_posix()
    env = _environment(server, page.read_text(), request)
    for run in ("first run", "second run in the same directory"):
        server.reset()
        server.add(*PROVIDER_REPLIES.get(name, []))
        done = run_script(source, workdir, env)
        if "TEMPORAL_ADDRESS" in env and done.returncode in _EXIT_ABORTS:
            done.returncode = 0  # every block's output is still checked
        _check_run(f"{name} ({run})", page_blocks, done)
        assert len(server.received) == len(PROVIDER_REPLIES.get(name, [])), name
    if name == "docs/agent.md":  # the image went out as an OpenAI image_url part
        assert server.received[0].body["messages"] == [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What does this chart show?"},
                    {
                        "type": "image_url",
                        "image_url": {"url": "https://example.com/sales-chart.png"},
                    },
                ],
            }
        ]


def run_script(
    source: Path, workdir: Path, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    """Run a page's script with this checkout's Python in ``workdir``."""
    return subprocess.run(
        [sys.executable, str(source)],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_a_block_that_fails_or_prints_otherwise_fails_the_page(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    shown = "```python\nprint('a')\n```\n\nprints\n\n```\na\n```\n"
    page.write_text(shown + "```python\nraise SystemExit(3)\n```\n```python\nx = 1\n```\n")
    source = tmp_path / "page.py"
    source.write_text(script(blocks(page)))
    done = run_script(source, tmp_path, dict(os.environ))
    with pytest.raises(AssertionError, match="page: 1 of 3 python blocks ran \\(exit status 3\\)"):
        _check_run("page", blocks(page), done)
    page.write_text(shown.replace("print('a')", "print('b')"))
    source.write_text(script(blocks(page)))
    done = run_script(source, tmp_path, dict(os.environ))
    with pytest.raises(AssertionError, match=r"the block at line 2 printed:\n\s*b\n"):
        _check_run("page", blocks(page), done)


def _check_run(name: str, page_blocks: list[Block], done: subprocess.CompletedProcess[str]) -> None:
    printed = _printed_per_block(done.stdout, page_blocks)
    runnable = [n for n, b in enumerate(page_blocks) if b.run]
    assert sorted(printed) == runnable, (
        f"{name}: {len(printed)} of {len(runnable)} python blocks ran "
        f"(exit status {done.returncode}):\n{done.stderr}"
    )
    assert done.returncode == 0, f"{name}: exit status {done.returncode}\n{done.stderr}"
    for number in runnable:
        block = page_blocks[number]
        assert matches(block.shown, printed[number]), (
            f"{name}, the block at line {block.line} printed:\n{printed[number]}\n"
            f"the page shows:\n{block.shown}"
        )


@given(st.text())
def test_shown_output_matches_itself_and_ellipsis_matches_anything(text: str) -> None:
    assert matches(text, text)
    assert matches("...", text)
    assert matches("<" + "..." + ">", "<" + text + ">")
    assert not matches(text, text + "\n") or "..." in text


def test_every_python_block_is_run_or_marked_not_run(capsys: pytest.CaptureFixture[str]) -> None:
    counts = {page.relative_to(ROOT).as_posix(): blocks(page) for page in PAGES}
    total = sum(len(found) for found in counts.values())
    skipped = [
        f"{name}:{block.line}" for name, found in counts.items() for block in found if not block.run
    ]
    with capsys.disabled():
        print(
            f"\ndocs: {total} python blocks on {len(counts)} pages, "
            f"{total - len(skipped)} run, {len(skipped)} marked not run {skipped}"
        )
    raw = sum(page.read_text().count("```python") for page in PAGES)
    assert total == raw, "a ```python fence the runner does not recognise"
    assert len(skipped) <= NOT_RUN_ALLOWED, f"too many blocks marked not run: {skipped}"


def test_the_readmes_documentation_list_names_each_page_once() -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("\n## Documentation\n", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"^- \[(docs/[^\]]+\.md)\]", section, re.M)
    pages = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md"))
    assert sorted(listed) == pages  # each page once, none missing

"""The command's traces: ``--trace-file`` and ``--trace-html`` while it runs, ``trace view`` after.

What was recorded is written however the command ends; a trace or page that cannot be written
is a line on stderr and changes neither the answer nor the exit code. Files that cannot be
written at all are refused before the run starts, and nothing is emptied to find out.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from ._errors import UsageError, error_line
from .hooks._host import AgentHost
from .observe import JsonLinesTracePlugin, write_trace_page

__all__ = ["check_trace_targets", "recording", "trace_view"]


@contextlib.contextmanager
def recording(args: argparse.Namespace, agent: AgentHost) -> Iterator[None]:
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
        check_trace_targets(trace_file, page)
        self.page = page
        self.lines: list[str] | None = [] if page else None
        self.failure: OSError | None = None
        try:
            self.file = open(trace_file, "w", encoding="utf-8") if trace_file else None  # noqa: SIM115
        except OSError as exc:
            raise UsageError(f"cannot write the trace: {exc}") from exc

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
                problems.append(f"the trace page could not be written: {error_line(exc)}")
            else:
                print(f"trace page: open {page.resolve().as_uri()} in a browser", file=sys.stderr)
        return problems


def check_trace_targets(trace_file: str | None, page: str | None) -> None:
    """Refuse trace files that cannot be written, before anything is loaded or emptied.

    Nothing is truncated here: each file is only opened to be appended to (and one that
    did not exist is removed again).
    """
    if trace_file and page and _same_file(trace_file, page):
        raise UsageError(f"--trace-file and --trace-html name the same file ({page})")
    try:
        for target in filter(None, (trace_file, page)):
            _try_writing(Path(target))
    except OSError as exc:
        raise UsageError(f"cannot write the trace: {exc}") from exc


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


async def trace_view(args: argparse.Namespace) -> int:
    from ._cli import EXIT_OK  # here: the command imports this module

    source = Path(args.trace_file)
    output = Path(args.output) if args.output else source.with_suffix(".html")
    if _same_file(str(source), str(output)):
        how = "-o names" if args.output else "the default page (TRACE with .html) is"
        raise UsageError(f"{how} the trace itself ({source}): name the page with -o FILE")
    try:
        page = write_trace_page(source, output)
    except OSError as exc:  # the page cannot be written (the trace's own errors are typed)
        raise UsageError(f"cannot write {output}: {exc.strerror or exc}") from exc
    print(f"trace page: open {page.resolve().as_uri()} in a browser", file=sys.stderr)
    return EXIT_OK

"""Run llama.cpp's OpenAI-compatible server, and stop it when the parent process goes.

The server gets hookloop's chat format (:mod:`hookloop.models._chat_handler`) registered
before it starts, so ``--chat_format hookloop-tools`` selects it.

:class:`~hookloop.models.LocalModel` starts this module instead of
``llama_cpp.server`` itself, with a pipe as its stdin. When the parent exits in any way
(even ``kill -9``, when no ``atexit`` handler runs) the pipe closes, the read below returns,
and the server ends with it instead of staying behind, holding a core and a gigabyte.
"""

from __future__ import annotations

import os
import runpy
import sys
import threading

from ._chat_handler import register

LOAD_FAILED = "hookloop: the llama.cpp server failed: "
"""How the one line this module prints when the server fails (the model did not load) begins."""


def _exit_with_parent() -> None:
    sys.stdin.buffer.read()  # returns at end of file: the parent closed the pipe or died
    os._exit(0)


def main() -> None:
    """Serve with ``llama_cpp.server``'s own command line (``sys.argv[1:]``)."""
    threading.Thread(target=_exit_with_parent, name="parent-watch", daemon=True).start()
    register()  # hookloop's chat format, selectable by --chat_format like llama.cpp's own
    sys.argv = ["llama_cpp.server", *sys.argv[1:]]
    try:
        runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
    except Exception as exc:  # the model did not load: a truncated or corrupt file
        print(f"{LOAD_FAILED}{type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        os._exit(1)  # now: a normal exit races the stdin reader into a fatal error


if __name__ == "__main__":
    main()

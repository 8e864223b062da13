"""Tools for ``hookloop mcp serve`` whose module and tool write to standard output.

Over stdio, standard output is the protocol's channel: none of this may reach it.
"""

from __future__ import annotations

import os
import sys

from hookloop import tool

print("loading the noisy tools", flush=True)
print("a buffered line at import")
os.write(1, b"a write to the descriptor at import\n")


@tool
def loud(text: str) -> str:
    """Print while answering."""
    print("printing during the call", flush=True)
    sys.stdout.write("writing during the call\n")
    return text.upper()


TOOLS = [loud]

"""A client process for the reconnect tests: POST /agui and print the stream, line by line.

``python -m tests.serve._sse_client URL BODY_JSON``; the test kills it mid-stream.
"""

from __future__ import annotations

import json
import sys

import httpx2


def main(url: str, body: str) -> None:
    with (
        httpx2.Client(timeout=None) as client,
        client.stream("POST", url + "/agui", json=json.loads(body)) as response,
    ):
        for line in response.iter_lines():
            print(line, flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])

"""The command line every test server shares, kept free of heavy imports so servers start fast.

`python <file> [stdio|http|sse] [--port N] [--host 127.0.0.1]`, stdio by default; `--port 0`
(the default) lets the OS pick a free port, which the server then prints on stderr.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")  # no auth here: never listen beyond this machine
TRANSPORTS = ("stdio", "http", "sse")


def parse_args(
    argv: Sequence[str] | None = None,
    *,
    transports: Sequence[str] = TRANSPORTS,
    default: str = "stdio",
    extra: Callable[[argparse.ArgumentParser], None] | None = None,
) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("transport", nargs="?", default=default, choices=list(transports))
    parser.add_argument("--port", type=int, default=0, help="0 (default) picks a free port")
    parser.add_argument("--host", default="127.0.0.1", choices=LOOPBACK_HOSTS)
    if extra is not None:
        extra(parser)
    return parser.parse_args(argv)

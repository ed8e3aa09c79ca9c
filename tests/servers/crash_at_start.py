"""Test server that dies before the MCP handshake, like a server whose database is missing.

`python crash_at_start.py [stdio|http|sse] [--port N]`: whatever the transport, it writes a
recognisable message to stderr and exits with status 3 before reading a single request (and,
for http/sse, before it listens). Clients must report the exit and the tail of stderr.
"""

from __future__ import annotations

import sys

from _cli import parse_args

EXIT_STATUS = 3
MESSAGE = "fatal: database file missing: /var/lib/notes/notes.db (run `notes init` first)"


def main() -> None:
    parse_args()
    print("notes-server 1.0.0 starting", file=sys.stderr)
    print(MESSAGE, file=sys.stderr, flush=True)
    sys.exit(EXIT_STATUS)


if __name__ == "__main__":
    main()

"""MCP client layer, shared by `record` (generator) and `run`/`serve` (runtime).

`sessions.py`: one live MCP connection per configured server (stdio, Streamable HTTP, SSE),
raw wire JSON in and out, with the errors callers map (`ConnectError`, `CallError`, ...);
`stdio.py`: the hardened stdio transport under the SDK's dispatcher. Nothing here imports the
generator or the runtime (tests/test_engine.py enforces the import direction).
"""

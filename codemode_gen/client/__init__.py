"""MCP client layer, shared by `record` (generator) and `run`/`serve` (runtime).

`sessions.py`: one live MCP connection per configured server (stdio, Streamable HTTP, SSE),
raw wire JSON in and out; `mcp_session.py` one connection's requests, `transports.py` how a
transport is opened, `session_errors.py` the errors callers map (`ConnectError`, `CallError`,
...); `stdio.py`: the hardened stdio transport under the SDK's dispatcher; `oauth*.py` and
`tokenstore.py`: OAuth logins; `mcp_private.py`: the only door to private `mcp` names. Nothing
here imports the generator or the runtime (tests/runtime/sandbox/test_engine.py enforces the import direction).
"""

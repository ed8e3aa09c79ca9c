"""Test server: FastMCP of the `mcp` SDK (renamed `MCPServer` in mcp 2.x) boxing non-object returns.

`python fastmcp_boxed.py [stdio|http|sse] [--port N]`. The SDK wraps a return value that is not
an object in a model `<function>Output` with one required field `result`
(`func_metadata._create_wrapped_model`) and puts no marker in the outputSchema; codemode-gen
recognises that shape. Tools (all read-only):

- `word_count` {text} -> int: the number of words (`{"result": 3}` on the wire);
- `tags` {} -> list[str]: three fixed tags (`{"result": ["a", "b", "c"]}`);
- `stats` {} -> a model (an object): NOT boxed, for contrast.
"""

from __future__ import annotations

from _serve import run_mcpserver
from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations
from pydantic import BaseModel

READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)


class Stats(BaseModel):
    words: int
    lines: int


def build_server() -> MCPServer:
    app = MCPServer("fastmcp-boxed", version="1.0.0", log_level="WARNING")

    @app.tool(annotations=READ_ONLY)
    def word_count(text: str) -> int:
        """Count the words of a text."""
        return len(text.split())

    @app.tool(annotations=READ_ONLY)
    def tags() -> list[str]:
        """List the known tags."""
        return ["a", "b", "c"]

    @app.tool(annotations=READ_ONLY)
    def stats() -> Stats:
        """Word and line counts of the sample text."""
        return Stats(words=3, lines=1)

    return app


if __name__ == "__main__":
    run_mcpserver(build_server())

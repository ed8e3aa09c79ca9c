"""The MCP front-ends: `serve` over stdio, `serve --http`, the served prompt and `replay`."""

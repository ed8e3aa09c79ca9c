"""Live layer: MCP sessions, the QuickJS sandbox and the bridge between them."""

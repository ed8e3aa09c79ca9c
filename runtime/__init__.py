"""Live layer: the QuickJS sandbox, the bridge to the MCP sessions (codemode_gen.client), CodeMode and serve."""

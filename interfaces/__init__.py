"""gpufinops: interfaces (the command line, the HTTP API, the MCP server)."""

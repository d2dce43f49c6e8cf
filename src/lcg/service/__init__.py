"""Transports over the engine: the method registry now; JSON-RPC, MCP and HTTP build on it."""

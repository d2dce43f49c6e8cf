"""JSON-RPC 2.0 over a Unix socket: `protocol` (sans-I/O), `server` (anyio), `client` (sync)."""

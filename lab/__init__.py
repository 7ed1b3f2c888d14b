"""The fault-injection lab: real MCP Streamable HTTP traffic with each failure injected (§7)."""

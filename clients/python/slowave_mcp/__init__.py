"""slowave-mcp: the Slowave tools (`slowave_activate` … `slowave_commit`) as an MCP server.

The bridge speaks the seed documents' JSON shapes to the agent and `slowave.v1.MemoryService` to the
server. `json_contract` holds the whole translation (behaviour §4.6) and knows nothing of MCP or the
network; `server` is the thin MCP layer around it.
"""

"""Slowave MemoryService: long-term memory for AI agents, over gRPC."""

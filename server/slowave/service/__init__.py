"""Use cases: one module per RPC (plus the reaper and consolidation), each one unit of work."""

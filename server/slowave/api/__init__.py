"""The gRPC edge: validation, conversion, the thin servicer, status mapping, metrics, the server."""

"""The rules of the service in plain Python: no gRPC, no SQL. One module per rule family."""

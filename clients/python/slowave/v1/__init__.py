"""Generated protobuf stubs for the slowave.v1 contract (produced by the build from protos/)."""

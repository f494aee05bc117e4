"""The server span of every unary RPC, continuing the caller's W3C `traceparent` (and `tracestate`,
`baggage`) from the call's metadata, named `slowave.v1.MemoryService/Activate` with the semantic
conventions' rpc.* attributes and the call's status code. Installed outermost (before the access
log), so every line and child span of the call belongs to it."""

from __future__ import annotations

import grpc
from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from slowave.tracing import TRACER

# The codes that mean the server failed (OpenTelemetry's gRPC conventions for server spans); the
# others are the caller's mistakes and leave the span's status unset.
_SERVER_ERRORS = frozenset(
    {
        grpc.StatusCode.UNKNOWN,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.UNIMPLEMENTED,
        grpc.StatusCode.INTERNAL,
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DATA_LOSS,
    }
)


def _carrier(metadata) -> dict[str, str]:
    return {k: v for k, v in metadata or () if isinstance(v, str)}


class TracingInterceptor(grpc.ServerInterceptor):
    def intercept_service(self, continuation, handler_call_details):
        handler = continuation(handler_call_details)
        if handler is None or handler.unary_unary is None:
            return handler
        method = handler_call_details.method.lstrip("/")
        service, _, name = method.partition("/")
        parent = propagate.extract(_carrier(handler_call_details.invocation_metadata))
        behavior = handler.unary_unary

        def traced(request, context):
            attributes = {"rpc.system": "grpc", "rpc.service": service, "rpc.method": name}
            with TRACER.start_as_current_span(
                method, context=parent, kind=SpanKind.SERVER, attributes=attributes, record_exception=False
            ) as span:
                failed = False
                try:
                    return behavior(request, context)
                except BaseException:
                    failed = True
                    raise
                finally:
                    code = context.code() or (grpc.StatusCode.UNKNOWN if failed else grpc.StatusCode.OK)
                    span.set_attribute("rpc.grpc.status_code", code.value[0])
                    if code in _SERVER_ERRORS:
                        span.set_status(Status(StatusCode.ERROR, code.name))

        return grpc.unary_unary_rpc_method_handler(
            traced,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )


def trace_id() -> str | None:
    """The current span's trace id (32 hex digits), when a span is recording this call."""
    context = trace.get_current_span().get_span_context()
    return format(context.trace_id, "032x") if context.is_valid else None

"""Logs: one structured line per RPC, and the process's log configuration (stdlib `logging` only).

`SLOWAVE_LOG_FORMAT=json` (default) writes one JSON object per line on stderr; `text` writes the
classic `time level logger: message`. `SLOWAVE_LOG_LEVEL` (default INFO) sets the root level.

The access line of every unary RPC (logger `slowave.access`) has the fields `ts` (UTC, ISO 8601),
`level`, `logger`, `msg` ("rpc"), `method` (`slowave.v1.MemoryService/Activate`), `code`
(`OK`, `INVALID_ARGUMENT`…), `latency_ms`, `tenant`, `session_id`, `request_id`, `trace_id` and
`peer`. `trace_id` is the call's OpenTelemetry trace (api.tracing) when tracing is on, else the
caller's W3C `traceparent` trace id, else null: a line can be found from a trace either way. It never
carries request or response contents (claims, tasks, summaries, feedback texts), at any level.
Health checks are logged at DEBUG (orchestrators probe every few seconds); other calls at INFO, or
WARNING / ERROR for codes that signal an overloaded or failing server. Every other log line written
while an RPC is served carries the same `request_id`, `tenant` and `session_id`.

`request_id` is the caller's `x-request-id` metadata when it is a plausible id (1–128 printable ASCII
characters), else a generated one; it is echoed in the response's trailing metadata `x-request-id`,
errors included.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
import time
from collections.abc import Mapping
from typing import Any

import grpc

from slowave.api import request_context
from slowave.api.tracing import trace_id

ACCESS_LOGGER = "slowave.access"
REQUEST_ID_HEADER = "x-request-id"
_PLAUSIBLE_ID = re.compile(r"[\x21-\x7e]{1,128}")
_TRACEPARENT = re.compile(r"[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}")

_ERROR_CODES = frozenset(
    {grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN, grpc.StatusCode.DATA_LOSS, grpc.StatusCode.UNIMPLEMENTED}
)
_WARNING_CODES = frozenset(
    {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.DEADLINE_EXCEEDED}
)

_TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


_second: tuple[int, str] = (-1, "")  # the last formatted second and its text (strftime is slow)


def _utc_iso(created: float) -> str:
    global _second
    seconds = int(created)
    cached_second, text = _second
    if cached_second != seconds:
        text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
        _second = (seconds, text)
    return f"{text}.{int((created - seconds) * 1000):03d}Z"


class JsonFormatter(logging.Formatter):
    """One JSON object per record: ts, level, logger, pid, msg, the RPC fields of an access line, the
    request context of a line written during an RPC, and `exc` for a traceback."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {"ts": _utc_iso(record.created), "level": record.levelname, "logger": record.name}
        out["pid"] = record.process  # which of the server processes (SLOWAVE_PROCESSES) wrote it
        rpc = getattr(record, "rpc", None)
        if rpc is not None:
            out["msg"] = "rpc"
            out.update(rpc)
        else:
            out["msg"] = record.getMessage()
            for key, var in (
                ("request_id", request_context.request_id),
                ("tenant", request_context.tenant),
                ("session_id", request_context.session_id),
            ):
                value = var.get()
                if value is not None:
                    out[key] = value
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        elif record.exc_text:
            out["exc"] = record.exc_text
        if record.stack_info:
            out["stack"] = self.formatStack(record.stack_info)
        return json.dumps(out, ensure_ascii=False, separators=(",", ":"), default=str)


def configure_logging(env: Mapping[str, str] | None = None, stream: Any = None) -> None:
    """Root handler on stderr with the format and level the environment asks for."""
    env = os.environ if env is None else env
    fmt = (env.get("SLOWAVE_LOG_FORMAT") or "json").strip().lower()
    raw_level = (env.get("SLOWAVE_LOG_LEVEL") or "INFO").strip().upper()
    level = logging.getLevelName(raw_level)
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(logging.Formatter(_TEXT_FORMAT) if fmt == "text" else JsonFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level if isinstance(level, int) else logging.INFO)
    if fmt not in ("json", "text"):
        logging.getLogger("slowave").warning("SLOWAVE_LOG_FORMAT=%r is neither json nor text; using json", fmt)
    if not isinstance(level, int):
        logging.getLogger("slowave").warning("SLOWAVE_LOG_LEVEL=%r is not a level name; using INFO", raw_level)


def _request_id(metadata: Any) -> str:
    for key, value in metadata or ():
        if key == REQUEST_ID_HEADER:
            if isinstance(value, bytes):
                value = value.decode("latin-1")
            if _PLAUSIBLE_ID.fullmatch(value):
                return value
            break
    return os.urandom(16).hex()


def _caller_trace_id(metadata: Any) -> str | None:
    for key, value in metadata or ():
        if key == "traceparent" and isinstance(value, str):
            match = _TRACEPARENT.fullmatch(value.strip())
            if match and match.group(1) != "0" * 32:
                return match.group(1)
            break
    return None


def _session_of(message: Any) -> str | None:
    """The session a request names or a response reports (Feedback: its scalar record's session)."""
    descriptor = getattr(type(message), "DESCRIPTOR", None)
    if descriptor is None:
        return None
    fields = descriptor.fields_by_name
    if "session_id" in fields:
        return message.session_id or None
    if "record" in fields and message.WhichOneof("result") == "record":
        return message.record.session_id or None
    return None


class AccessLogInterceptor(grpc.ServerInterceptor):
    """Outermost interceptor: sets the request context, writes the access line, echoes the request id.

    The context variables are set before the inner interceptors run (the auth interceptor fills in
    the tenant) and reset after the line is written, so nothing leaks into the thread's next call.
    """

    def __init__(self, logger: logging.Logger | None = None) -> None:
        self.log = logger or logging.getLogger(ACCESS_LOGGER)

    def intercept_service(self, continuation, handler_call_details):
        handler = continuation(handler_call_details)
        if handler is None or handler.unary_unary is None:
            return handler
        method = handler_call_details.method.lstrip("/")
        ok_level = logging.DEBUG if method.startswith("grpc.health.") else logging.INFO
        request_id = _request_id(handler_call_details.invocation_metadata)
        caller_trace = _caller_trace_id(handler_call_details.invocation_metadata)
        behavior = handler.unary_unary
        log = self.log

        def wrapped(request, context):
            rid_token = request_context.request_id.set(request_id)
            tenant_token = request_context.tenant.set(None)
            session_token = request_context.session_id.set(_session_of(request))
            start = time.perf_counter()
            response = None
            failed = False
            try:
                response = behavior(request, context)
                return response
            except BaseException:
                failed = True
                raise
            finally:
                latency = time.perf_counter() - start
                try:
                    trailing = context.trailing_metadata() or ()
                    context.set_trailing_metadata((*trailing, (REQUEST_ID_HEADER, request_id)))
                    code = context.code() or (grpc.StatusCode.UNKNOWN if failed else grpc.StatusCode.OK)
                    level = (
                        logging.ERROR
                        if code in _ERROR_CODES
                        else logging.WARNING
                        if code in _WARNING_CODES
                        else ok_level
                    )
                    if log.isEnabledFor(level):
                        session_id = request_context.session_id.get() or _session_of(response)
                        tenant = request_context.tenant.get()
                        peer = context.peer()
                        trace = trace_id() or caller_trace
                        fields = {
                            "method": method,
                            "code": code.name,
                            "latency_ms": round(latency * 1000, 3),
                            "tenant": tenant,
                            "session_id": session_id,
                            "request_id": request_id,
                            "trace_id": trace,
                            "peer": peer,
                        }
                        # makeRecord + handle: Logger.log would walk the stack for a caller nobody reads.
                        record = log.makeRecord(
                            log.name,
                            level,
                            "access_log",
                            0,
                            "rpc %s %s %.3fms tenant=%s session_id=%s request_id=%s trace_id=%s peer=%s",
                            (method, code.name, latency * 1000, tenant, session_id, request_id, trace, peer),
                            None,
                            extra={"rpc": fields},
                        )
                        log.handle(record)
                except Exception:
                    logging.getLogger(__name__).debug("access line not written", exc_info=True)
                finally:
                    request_context.session_id.reset(session_token)
                    request_context.tenant.reset(tenant_token)
                    request_context.request_id.reset(rid_token)

        return grpc.unary_unary_rpc_method_handler(
            wrapped, request_deserializer=handler.request_deserializer, response_serializer=handler.response_serializer
        )

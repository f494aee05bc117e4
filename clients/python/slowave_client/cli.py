"""`slowave`: the MemoryService from the shell, built on the SDK.

    slowave health
    slowave activate --task "Fix the flaky deploy" --goal "Diagnose timeouts" --scope project:infra
    slowave remember --session sess_… --scope project:infra --content "Staging listens on 8443." --type fact
    slowave feedback --retrieval ctx_… --memory sch_1=used --coverage complete
    slowave commit --json @commit.json
    echo '{"session_id": "sess_…", "scope": "project:infra", "query": "ports"}' | slowave recall --json -

Each command takes flags for the common fields and/or `--json` with the whole request (protobuf field
names, enums as seed names: the SDK's `Client.call` format); flags override the document's keys.
Results print as JSON, or with `--format table` as text for people. Failures print
`{"error": {...}}` to stderr and exit with a code from EXIT_CODES.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

import grpc

from slowave_client import tables
from slowave_client.client import DEFAULT_TIMEOUT, Client
from slowave_client.connection import DEFAULT_TARGET, TlsConfig
from slowave_client.errors import IncompleteFeedbackError, SlowaveError
from slowave_client.results import ActivateResult, RecallResult, as_json
from slowave_client.retry import NO_RETRIES, RetryPolicy

HEALTH_TIMEOUT = 5.0

EXIT_CODES = {
    "ok": 0,
    "failure": 1,  # anything not below: INTERNAL, UNKNOWN…; `health`: not SERVING
    "usage": 2,  # bad flags, unreadable or malformed --json document
    "invalid_input": 3,  # INVALID_ARGUMENT, from the server or found before sending
    "not_found": 4,  # NOT_FOUND: unknown session, cursor or retrieval
    "failed_precondition": 5,  # session ended, scope mismatch
    "incomplete_feedback": 6,  # Commit refused by the feedback gate: send the outstanding feedback
    "auth": 7,  # UNAUTHENTICATED, PERMISSION_DENIED
    "unavailable": 8,  # UNAVAILABLE, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED, CANCELLED: try later
}

_EXIT_BY_STATUS = {
    grpc.StatusCode.INVALID_ARGUMENT: "invalid_input",
    grpc.StatusCode.NOT_FOUND: "not_found",
    grpc.StatusCode.FAILED_PRECONDITION: "failed_precondition",
    grpc.StatusCode.UNAUTHENTICATED: "auth",
    grpc.StatusCode.PERMISSION_DENIED: "auth",
    grpc.StatusCode.UNAVAILABLE: "unavailable",
    grpc.StatusCode.DEADLINE_EXCEEDED: "unavailable",
    grpc.StatusCode.RESOURCE_EXHAUSTED: "unavailable",
    grpc.StatusCode.CANCELLED: "unavailable",
}


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """Usage errors as the same JSON error object as every other failure."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{message} (see `{self.prog} --help`)")


# ------------------------------------------------------------------------------------- arguments


def _connection_options(parser: argparse.ArgumentParser, defaults: bool) -> None:
    """Global options, accepted before or after the command (after it they override)."""
    d = (lambda value: value) if defaults else (lambda _value: argparse.SUPPRESS)
    env = os.environ
    g = parser.add_argument_group("connection")
    g.add_argument(
        "--target",
        default=d(env.get("SLOWAVE_TARGET") or DEFAULT_TARGET),
        help=f"host:port of the server (env SLOWAVE_TARGET, default {DEFAULT_TARGET})",
    )
    g.add_argument(
        "--api-key",
        default=d(env.get("SLOWAVE_API_KEY")),
        help="API key, sent as `authorization: Bearer <key>` (env SLOWAVE_API_KEY)",
    )
    g.add_argument("--tls", action="store_true", default=d(False), help="use TLS with the system's trusted roots")
    g.add_argument(
        "--tls-ca", default=d(None), metavar="FILE", help="PEM roots for the server certificate (implies TLS)"
    )
    g.add_argument("--tls-cert", default=d(None), metavar="FILE", help="PEM client certificate for mutual TLS")
    g.add_argument("--tls-key", default=d(None), metavar="FILE", help="PEM private key of --tls-cert")
    g.add_argument(
        "--tls-server-name",
        default=d(None),
        metavar="NAME",
        help="name expected in the server certificate, when it differs from the target host",
    )
    g.add_argument(
        "--timeout",
        type=float,
        default=d(None),
        metavar="SECONDS",
        help=f"deadline of the call, retries included (default {DEFAULT_TIMEOUT:g}; health {HEALTH_TIMEOUT:g})",
    )
    g.add_argument(
        "--max-attempts",
        type=int,
        default=d(None),
        metavar="N",
        help="attempts for calls safe to retry on UNAVAILABLE (default 5; health 1)",
    )
    g.add_argument(
        "--format", choices=("json", "table"), default=d("json"), help="output: JSON (default) or a table for people"
    )


def _json_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--json",
        dest="json_doc",
        metavar="DOC",
        default=None,
        help="the whole request as JSON: inline, @FILE, or - for stdin; flags override its keys",
    )


def _field(parser: argparse.ArgumentParser, *flags: str, dest: str, **kw: Any) -> None:
    """A flag that sets one request field only when given (absent flags must not erase --json keys)."""
    parser.add_argument(*flags, dest=f"field:{dest}", default=argparse.SUPPRESS, **kw)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="slowave",
        description="Slowave MemoryService client.",
        epilog="Exit codes: " + ", ".join(f"{v} {k}" for k, v in EXIT_CODES.items()),
    )
    _connection_options(parser, defaults=True)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)

    def command(name: str, help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text)
        _connection_options(p, defaults=False)
        return p

    p = command("health", "Exit 0 iff the server reports SERVING (gRPC health protocol).")
    p.add_argument("--service", default="", help='service to check (default "": the whole server)')

    p = command("activate", "Open a session for a task; print the memories and procedures that fit it.")
    _json_option(p)
    _field(p, "--task", dest="task", help="the user's request verbatim")
    _field(p, "--goal", "--initial-goal", dest="initial_goal", help="a concise interpretation of the task")
    _field(p, "--scope", dest="scope", help="kind:id, e.g. project:my-repo")
    _field(p, "--page-size", dest="page_size", type=int, help="memories per page, 1..10")
    _field(p, "--continuity-id", dest="continuity_id", help="token from an earlier Activate of the conversation")
    _field(
        p,
        "--context",
        "--task-context",
        dest="task_context",
        type=_json_object,
        metavar="JSON",
        help="task context as a JSON object (or @FILE)",
    )
    _field(p, "--semantic-context", dest="semantic_context", help="clarifies the information need")

    p = command("remember", "Store a durable claim (batch: --json with `memories`).")
    _json_option(p)
    _field(p, "--session", "--session-id", dest="session_id", help="the session from activate")
    _field(p, "--scope", dest="scope", help="the session's scope")
    _field(p, "--content", dest="content", help="the claim, meaningful without context")
    _field(
        p,
        "--type",
        dest="type",
        help="fact, preference, decision, constraint, instruction, lesson, warning, open_question, task, artifact",
    )
    _field(p, "--occurred-at", dest="occurred_at", metavar="RFC3339", help="when the fact was observed")

    p = command("recall", "Look something up mid-task (--query), or read the next page (--continue-from).")
    _json_option(p)
    _field(p, "--session", "--session-id", dest="session_id", help="the session from activate")
    _field(p, "--scope", dest="scope", help="the session's scope")
    _field(p, "--query", dest="query", help="the lookup (fresh mode)")
    _field(p, "--page-size", dest="page_size", type=int, help="memories per page, 1..10")
    _field(
        p,
        "--context",
        "--task-context",
        dest="task_context",
        type=_json_object,
        metavar="JSON",
        help="task context to merge, as a JSON object (or @FILE)",
    )
    _field(p, "--semantic-context", dest="semantic_context", help="clarifies the query")
    _field(p, "--evidence", "--evidence-mode", dest="evidence_mode", help="references (default) or full")
    _field(p, "--continue-from", dest="continue_from", help="cursor of the next page")

    p = command("feedback", "Assess what a retrieval exposed (batch: --json with `items`).")
    _json_option(p)
    _field(p, "--retrieval", "--retrieval-id", dest="retrieval_id", help="ctx_… or rec_… id")
    p.add_argument(
        "--memory",
        dest="memories",
        action="append",
        default=[],
        metavar="ID=ASSESSMENT",
        help="e.g. sch_1=used, sch_2=irrelevant (repeatable; richer entries via --json)",
    )
    _field(
        p, "--coverage", dest="coverage", help="partial (default) or complete: complete covers everything unmentioned"
    )
    _field(p, "--quality", "--retrieval-quality", dest="retrieval_quality", help="free text about the whole result")
    p.add_argument(
        "--missing",
        dest="missing",
        action="append",
        default=[],
        metavar="TEXT",
        help="knowledge expected but absent (repeatable)",
    )

    p = command("commit", "Close the task with its outcome (procedure and trajectory: --json).")
    _json_option(p)
    _field(p, "--session", "--session-id", dest="session_id", help="the session from activate")
    _field(p, "--final-goal", dest="final_goal", help="the goal as understood at the end")
    _field(p, "--outcome", dest="outcome", help="success, partial or failure")
    _field(p, "--summary", "--outcome-summary", dest="outcome_summary", help="a standalone sentence on what happened")
    p.add_argument(
        "--verification", dest="verification_status", default=None, help="verified, partially_verified or unverified"
    )
    p.add_argument("--verification-summary", default=None, help="what verification was done and what it showed")
    p.add_argument(
        "--evidence-ref",
        dest="evidence_refs",
        action="append",
        default=[],
        metavar="REF",
        help="test-run id, CI URL, log file (repeatable)",
    )
    return parser


def _read_doc(text: str) -> str:
    if text == "-":
        return sys.stdin.read()
    if text.startswith("@"):
        try:
            return Path(text[1:]).read_text(encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"cannot read {text[1:]}: {exc.strerror}") from None
    return text


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(_read_doc(text))
    except json.JSONDecodeError as exc:
        raise UsageError(f"not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise UsageError("the JSON document must be an object")
    return value


def request_of(args: argparse.Namespace) -> dict[str, Any]:
    """The request document: --json, then flags on top."""
    request = _json_object(args.json_doc) if args.json_doc is not None else {}
    for key, value in vars(args).items():
        if key.startswith("field:"):
            request[key[len("field:") :]] = value
    if args.command == "feedback":
        entries = []
        for spec in args.memories:
            memory_id, sep, assessment = spec.partition("=")
            if not sep or not memory_id.strip() or not assessment.strip():
                raise UsageError(f"--memory expects ID=ASSESSMENT, got {spec!r}")
            entries.append({"memory_id": memory_id.strip(), "assessment": assessment.strip()})
        if entries:
            request["memory_feedback"] = [*request.get("memory_feedback", []), *entries]
        if args.missing:
            request["missing"] = [*request.get("missing", []), *args.missing]
    if args.command == "commit":
        flags = {
            k: v
            for k, v in (
                ("status", args.verification_status),
                ("summary", args.verification_summary),
                ("evidence_refs", args.evidence_refs or None),
            )
            if v is not None
        }
        if flags:
            base = request.get("verification")
            request["verification"] = {**(base if isinstance(base, dict) else {}), **flags}
    return request


# ---------------------------------------------------------------------------------------- output


def _error_object(error: SlowaveError) -> dict[str, Any]:
    body: dict[str, Any] = {
        "status": error.status.name if error.status is not None else None,
        "code": error.code,
        "reason": error.reason,
        "message": error.message,
        "retryable": error.retryable,
    }
    if error.field_violations:
        body["field_errors"] = [{"path": v.field, "message": v.description} for v in error.field_violations]
    if isinstance(error, IncompleteFeedbackError):
        body["outstanding"] = as_json(list(error.outstanding))
    return {"error": {k: v for k, v in body.items() if v is not None}}


def exit_code_of(error: SlowaveError) -> int:
    if isinstance(error, IncompleteFeedbackError):
        return EXIT_CODES["incomplete_feedback"]
    if error.status is None:
        return EXIT_CODES["invalid_input"]
    return EXIT_CODES[_EXIT_BY_STATUS.get(error.status, "failure")]


def _render(result: Any, fmt: str) -> str:
    if fmt == "table":
        if isinstance(result, (ActivateResult, RecallResult)):
            return tables.retrieval(result)
        if isinstance(result, list):
            return "\n\n".join(tables.fields(r) for r in result)
        return tables.fields(result)
    body = {"results": as_json(result)} if isinstance(result, list) else as_json(result)
    return json.dumps(body, indent=2, ensure_ascii=False)


# ------------------------------------------------------------------------------------------ main


def _client(args: argparse.Namespace) -> Client:
    tls: TlsConfig | bool | None = None
    if args.tls_ca or args.tls_cert or args.tls_key or args.tls_server_name:
        tls = TlsConfig(
            ca_file=args.tls_ca, cert_file=args.tls_cert, key_file=args.tls_key, server_name=args.tls_server_name
        )
    elif args.tls:
        tls = True
    health = args.command == "health"
    timeout = args.timeout if args.timeout is not None else (HEALTH_TIMEOUT if health else DEFAULT_TIMEOUT)
    if args.max_attempts is not None:
        retry = RetryPolicy(max_attempts=args.max_attempts)
    else:
        # A container health check must answer fast and repeatably: one attempt, no backoff.
        retry = NO_RETRIES if health else RetryPolicy()
    return Client(args.target, api_key=args.api_key, tls=tls, timeout=timeout, retry=retry)


def _run(args: argparse.Namespace, out: TextIO) -> int:
    with _client(args) as client:
        if args.command == "health":
            status = client.health(args.service)
            out.write((status if args.format == "table" else json.dumps({"status": status})) + "\n")
            return EXIT_CODES["ok"] if status == "serving" else EXIT_CODES["failure"]
        method = args.command.capitalize()
        result = client.call(method, request_of(args))
        out.write(_render(result, args.format) + "\n")
        return EXIT_CODES["ok"]


def main(argv: Sequence[str] | None = None, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out, err = out or sys.stdout, err or sys.stderr

    def fail(body: dict[str, Any]) -> None:
        err.write(json.dumps(body, ensure_ascii=False) + "\n")

    try:
        args = build_parser().parse_args(argv)
        return _run(args, out)
    except UsageError as exc:
        fail({"error": {"code": "usage", "message": str(exc)}})
        return EXIT_CODES["usage"]
    except SlowaveError as exc:
        fail(_error_object(exc))
        return exit_code_of(exc)
    except (OSError, ValueError) as exc:  # unreadable TLS files, an invalid API key
        fail({"error": {"code": "usage", "message": str(exc)}})
        return EXIT_CODES["usage"]


if __name__ == "__main__":
    sys.exit(main())

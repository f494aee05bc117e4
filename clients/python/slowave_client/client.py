"""The blocking client: one method per RPC, plain values in, result dataclasses out.

    with Client("127.0.0.1:50051", api_key="…") as memory:
        task = memory.activate("Fix the flaky deploy", "Diagnose deploy timeouts", "project:infra")
        memory.remember(task.session_id, "project:infra", "Staging listens on 8443.", "fact")
        memory.feedback(task.retrieval_id, {m.memory_id: "used" for m in task.memories}, coverage="complete")
        memory.commit(task.session_id, "Diagnose deploy timeouts", "success", "It was the port.",
                      {"status": "verified", "summary": "curl answered 200"})

Every failure raises a `slowave_client.errors.SlowaveError` subclass.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import grpc
from google.protobuf.message import Message

from slowave_client import calls
from slowave_client.calls import MemoryFeedback, PreparedCall
from slowave_client.connection import DEFAULT_TARGET, TlsConfig, auth_metadata, open_channel, trace_metadata
from slowave_client.errors import NotFound
from slowave_client.inputs import (
    Enum,
    FeedbackItemInput,
    ProcedureFeedbackInput,
    ProcedureInput,
    RememberItemInput,
    Time,
    TrajectoryEntryInput,
    VerificationInput,
)
from slowave_client.results import (
    ActivateResult,
    CommitResult,
    FeedbackItemResult,
    FeedbackRecord,
    RecallResult,
    RememberItemResult,
    RememberResult,
)
from slowave_client.retry import Attempts, RetryEvent, RetryPolicy, run_with_retries

T = TypeVar("T")
DEFAULT_TIMEOUT = 30.0


class CallPolicy:
    """What both clients apply to every call: API key, deadline, retries, wait-for-ready."""

    def __init__(
        self,
        api_key: str | None,
        timeout: float | None,
        retry: RetryPolicy | None,
        wait_for_ready: bool,
        on_retry: Callable[[RetryEvent], None] | None,
    ) -> None:
        self._auth = auth_metadata(api_key)
        self.timeout = timeout
        self.retry = retry if retry is not None else RetryPolicy()
        self.wait_for_ready = wait_for_ready
        self.on_retry = on_retry

    def metadata(self) -> tuple[tuple[str, str], ...]:
        """A call's metadata: the API key, and the caller's trace context at the time of the call."""
        return (*self._auth, *trace_metadata())

    def attempts(self, call: PreparedCall[Any], timeout: float | None) -> Attempts:
        return Attempts(
            call.method,
            self.retry,
            call.idempotent,
            self.timeout if timeout is None else timeout,
            on_retry=self.on_retry,
        )


class Client:
    """A blocking Slowave client.

    Args:
        target: `host:port` of the server.
        api_key: sent as `authorization: Bearer <key>` on every call.
        tls: None/False for plaintext, True for TLS with the system's roots, or a TlsConfig.
        timeout: default deadline of each call in seconds, retries and waits included; None for none.
        retry: automatic retries of UNAVAILABLE for calls safe to repeat (see slowave_client.retry);
            `slowave_client.retry.NO_RETRIES` disables them.
        wait_for_ready: calls wait (within their deadline) for the server to become reachable instead
            of failing at once with UNAVAILABLE; useful right after starting a server.
        on_retry: called before each automatic retry (for logging).
        channel: an existing channel to use instead of opening one (it is not closed by `close`).
        options: extra gRPC channel options.
    """

    def __init__(
        self,
        target: str = DEFAULT_TARGET,
        *,
        api_key: str | None = None,
        tls: TlsConfig | bool | None = None,
        timeout: float | None = DEFAULT_TIMEOUT,
        retry: RetryPolicy | None = None,
        wait_for_ready: bool = False,
        on_retry: Callable[[RetryEvent], None] | None = None,
        channel: grpc.Channel | None = None,
        options: Sequence[tuple[str, Any]] = (),
    ) -> None:
        self.policy = CallPolicy(api_key, timeout, retry, wait_for_ready, on_retry)
        self._owns_channel = channel is None
        self.channel = channel if channel is not None else open_channel(target, tls=tls, options=options)
        self._methods: dict[str, Any] = {}

    def close(self) -> None:
        if self._owns_channel:
            self.channel.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # ----------------------------------------------------------------------------------- calls

    def run(self, call: PreparedCall[T], timeout: float | None = None) -> T:
        """Sends a prepared call (see slowave_client.calls) with this client's policy."""
        method = self._methods.get(call.path)
        if method is None:
            method = self.channel.unary_unary(
                call.path,
                request_serializer=type(call.request).SerializeToString,
                response_deserializer=call.response_type.FromString,
            )
            self._methods[call.path] = method

        def invoke(attempt_timeout: float | None) -> Any:
            return method(
                call.request,
                timeout=attempt_timeout,
                metadata=self.policy.metadata(),
                wait_for_ready=self.policy.wait_for_ready,
            )

        return call.convert(run_with_retries(invoke, self.policy.attempts(call, timeout)))

    def call(self, method: str, request: Mapping[str, Any] | Message, *, timeout: float | None = None) -> Any:
        """Any MemoryService RPC from a whole request: a dict with protobuf field names (enums as
        seed names) or the request message. Returns the result in the response's form."""
        return self.run(calls.prepare(method, request), timeout)

    def activate(
        self,
        task: str,
        initial_goal: str,
        scope: str,
        *,
        page_size: int | None = None,
        continuity_id: str | None = None,
        task_context: Mapping[str, Any] | None = None,
        semantic_context: str | None = None,
        timeout: float | None = None,
    ) -> ActivateResult:
        """Opens a session for a task; returns the first page of what fits it."""
        return self.run(
            calls.activate(
                task,
                initial_goal,
                scope,
                page_size=page_size,
                continuity_id=continuity_id,
                task_context=task_context,
                semantic_context=semantic_context,
            ),
            timeout,
        )

    def remember(
        self,
        session_id: str,
        scope: str,
        content: str,
        type: Enum,
        *,
        occurred_at: Time | None = None,
        timeout: float | None = None,
    ) -> RememberResult:
        """Stores one claim (`type`: fact, preference, decision, constraint, instruction, lesson…)."""
        return self.run(calls.remember(session_id, scope, content, type, occurred_at=occurred_at), timeout)

    def remember_batch(
        self,
        session_id: str,
        scope: str,
        memories: Iterable[RememberItemInput | tuple[str, Enum] | Message],
        *,
        timeout: float | None = None,
    ) -> list[RememberItemResult]:
        """Stores up to 100 claims, each independently: check each item's `ok`."""
        return self.run(calls.remember_batch(session_id, scope, memories), timeout)

    def recall(
        self,
        session_id: str,
        scope: str,
        query: str | None = None,
        *,
        page_size: int | None = None,
        task_context: Mapping[str, Any] | None = None,
        semantic_context: str | None = None,
        evidence_mode: Enum | None = None,
        continue_from: str | None = None,
        timeout: float | None = None,
    ) -> RecallResult:
        """A fresh lookup (`query`) or the next page of an earlier retrieval (`continue_from`)."""
        return self.run(
            calls.recall(
                session_id,
                scope,
                query,
                page_size=page_size,
                task_context=task_context,
                semantic_context=semantic_context,
                evidence_mode=evidence_mode,
                continue_from=continue_from,
            ),
            timeout,
        )

    def feedback(
        self,
        retrieval_id: str,
        memory_feedback: MemoryFeedback | None = None,
        procedure_feedback: Iterable[ProcedureFeedbackInput | Message] | None = None,
        *,
        coverage: Enum | None = None,
        retrieval_quality: str | None = None,
        missing: Iterable[str] | None = None,
        timeout: float | None = None,
    ) -> FeedbackRecord:
        """Assesses what a retrieval exposed. `memory_feedback` is a list of entries or the shorthand
        `{memory_id: assessment}`; `coverage="complete"` covers every target not mentioned."""
        return self.run(
            calls.feedback(
                retrieval_id,
                memory_feedback,
                procedure_feedback,
                coverage=coverage,
                retrieval_quality=retrieval_quality,
                missing=missing,
            ),
            timeout,
        )

    def feedback_batch(
        self, items: Iterable[FeedbackItemInput | Message], *, timeout: float | None = None
    ) -> list[FeedbackItemResult]:
        """Up to 100 feedback items, each recorded independently: check each item's `ok`."""
        return self.run(calls.feedback_batch(items), timeout)

    def commit(
        self,
        session_id: str,
        final_goal: str,
        outcome: Enum,
        outcome_summary: str,
        verification: VerificationInput | Message,
        *,
        procedure: ProcedureInput | Message | None = None,
        trajectory: Iterable[TrajectoryEntryInput | Message] | None = None,
        timeout: float | None = None,
    ) -> CommitResult:
        """Closes the task. Raises IncompleteFeedbackError (with `outstanding`) while exposed targets
        lack feedback."""
        return self.run(
            calls.commit(
                session_id,
                final_goal,
                outcome,
                outcome_summary,
                verification,
                procedure=procedure,
                trajectory=trajectory,
            ),
            timeout,
        )

    def health(self, service: str = "", *, timeout: float | None = None) -> str:
        """`serving`, `not_serving`, `service_unknown` or `unknown` (gRPC health protocol)."""
        try:
            return self.run(calls.health(service), timeout)
        except NotFound:
            return "service_unknown"

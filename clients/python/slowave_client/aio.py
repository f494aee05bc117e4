"""The asyncio client (grpc.aio): the same methods as `Client`, awaited.

    async with AsyncClient("127.0.0.1:50051") as memory:
        task = await memory.activate("Fix the flaky deploy", "Diagnose deploy timeouts", "project:infra")

Create it inside the event loop that uses it (grpc.aio channels belong to one loop).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import grpc
from google.protobuf.message import Message

from slowave_client import calls
from slowave_client.calls import MemoryFeedback, PreparedCall
from slowave_client.client import DEFAULT_TIMEOUT, CallPolicy
from slowave_client.connection import DEFAULT_TARGET, TlsConfig, open_channel
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
from slowave_client.retry import RetryEvent, RetryPolicy, run_with_retries_async

T = TypeVar("T")


class AsyncClient:
    """An asyncio Slowave client; arguments as for `slowave_client.Client`."""

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
        channel: grpc.aio.Channel | None = None,
        options: Sequence[tuple[str, Any]] = (),
    ) -> None:
        self.policy = CallPolicy(api_key, timeout, retry, wait_for_ready, on_retry)
        self._owns_channel = channel is None
        self.channel = (
            channel if channel is not None else open_channel(target, tls=tls, asynchronous=True, options=options)
        )
        self._methods: dict[str, Any] = {}

    async def close(self) -> None:
        if self._owns_channel:
            await self.channel.close()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    # ----------------------------------------------------------------------------------- calls

    async def run(self, call: PreparedCall[T], timeout: float | None = None) -> T:
        method = self._methods.get(call.path)
        if method is None:
            method = self.channel.unary_unary(
                call.path,
                request_serializer=type(call.request).SerializeToString,
                response_deserializer=call.response_type.FromString,
            )
            self._methods[call.path] = method

        async def invoke(attempt_timeout: float | None) -> Any:
            return await method(
                call.request,
                timeout=attempt_timeout,
                metadata=self.policy.metadata(),
                wait_for_ready=self.policy.wait_for_ready,
            )

        return call.convert(await run_with_retries_async(invoke, self.policy.attempts(call, timeout)))

    async def call(self, method: str, request: Mapping[str, Any] | Message, *, timeout: float | None = None) -> Any:
        return await self.run(calls.prepare(method, request), timeout)

    async def activate(
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
        return await self.run(
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

    async def remember(
        self,
        session_id: str,
        scope: str,
        content: str,
        type: Enum,
        *,
        occurred_at: Time | None = None,
        timeout: float | None = None,
    ) -> RememberResult:
        return await self.run(calls.remember(session_id, scope, content, type, occurred_at=occurred_at), timeout)

    async def remember_batch(
        self,
        session_id: str,
        scope: str,
        memories: Iterable[RememberItemInput | tuple[str, Enum] | Message],
        *,
        timeout: float | None = None,
    ) -> list[RememberItemResult]:
        return await self.run(calls.remember_batch(session_id, scope, memories), timeout)

    async def recall(
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
        return await self.run(
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

    async def feedback(
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
        return await self.run(
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

    async def feedback_batch(
        self, items: Iterable[FeedbackItemInput | Message], *, timeout: float | None = None
    ) -> list[FeedbackItemResult]:
        return await self.run(calls.feedback_batch(items), timeout)

    async def commit(
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
        return await self.run(
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

    async def health(self, service: str = "", *, timeout: float | None = None) -> str:
        try:
            return await self.run(calls.health(service), timeout)
        except NotFound:
            return "service_unknown"

"""The MemoryService servicer: protobuf in, domain call, protobuf out. No rules live here."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

import grpc
from google.protobuf.message import Message

from slowave.api import request_context, validation
from slowave.api.metrics import Metrics
from slowave.api.status import abort, internal_status, to_status
from slowave.domain.errors import DomainError
from slowave.service.activate import activate
from slowave.service.commit import commit
from slowave.service.context import ServiceContext
from slowave.service.feedback import feedback
from slowave.service.recall import recall
from slowave.service.remember import remember
from slowave.storage.database import CallerGone, caller_deadline
from slowave.v1 import memory_service_pb2 as pb
from slowave.v1 import memory_service_pb2_grpc as pb_grpc
from slowave.v1 import resources_pb2 as res

log = logging.getLogger(__name__)
T = TypeVar("T")


class MemoryServicer(pb_grpc.MemoryServiceServicer):
    def __init__(self, ctx: ServiceContext, metrics: Metrics, on_commit: Callable[[], None] | None = None) -> None:
        self.ctx = ctx
        self.metrics = metrics
        self.on_commit = on_commit or (lambda: None)

    def _run(self, context: grpc.ServicerContext, call: Callable[[], T]) -> T:
        try:
            # A call whose client gave up (deadline passed, cancelled) does no further work: it is
            # not started, and none of its units of work commits (storage.database.caller_deadline).
            if not _caller_waiting(context):
                raise CallerGone()
            with caller_deadline(lambda: _caller_waiting(context)):
                return call()
        except CallerGone:
            remaining = context.time_remaining()
            expired = remaining is not None and remaining <= 0
            context.abort(
                grpc.StatusCode.DEADLINE_EXCEEDED if expired else grpc.StatusCode.CANCELLED,
                "the caller gave up before the work was committed; nothing was stored",
            )
        except DomainError as exc:
            self.metrics.request_refused(exc)
            abort(context, to_status(exc))
        except Exception:
            log.exception("unexpected failure")
            abort(context, internal_status())
        raise AssertionError("unreachable")

    def _tenant(self, context: grpc.ServicerContext) -> str:
        # Set by the authentication interceptor in this handler thread (api/auth.py).
        return request_context.tenant.get() or self.ctx.settings.tenant

    def Activate(self, request: pb.ActivateRequest, context: grpc.ServicerContext) -> pb.ActivateResponse:
        def call() -> pb.ActivateResponse:
            result = activate(self.ctx, self._tenant(context), validation.activate_command(request))
            self.metrics.retrieval(result)
            return result

        return self._run(context, call)

    def Remember(self, request: pb.RememberRequest, context: grpc.ServicerContext) -> pb.RememberResponse:
        def call() -> pb.RememberResponse:
            cmd = validation.remember_command(request)
            results = remember(self.ctx, self._tenant(context), cmd)
            self.metrics.stored_claims(results)
            if not cmd.batch:
                return pb.RememberResponse(memory=results[0])
            items = [pb.RememberItemResult(index=i, **_outcome(r)) for i, r in enumerate(results)]
            return pb.RememberResponse(batch=pb.RememberBatch(results=items))

        return self._run(context, call)

    def Recall(self, request: pb.RecallRequest, context: grpc.ServicerContext) -> pb.RecallResponse:
        def call() -> pb.RecallResponse:
            result = recall(self.ctx, self._tenant(context), validation.recall_command(request))
            self.metrics.retrieval(result)
            return result

        return self._run(context, call)

    def Feedback(self, request: pb.FeedbackRequest, context: grpc.ServicerContext) -> pb.FeedbackResponse:
        def call() -> pb.FeedbackResponse:
            cmd = validation.feedback_command(request)
            results = feedback(self.ctx, self._tenant(context), cmd)
            self.metrics.feedback(cmd, results)
            if not cmd.batch:
                return pb.FeedbackResponse(record=results[0])
            items = [pb.FeedbackItemResult(**_outcome(r)) for r in results]
            return pb.FeedbackResponse(batch=pb.FeedbackBatch(results=items))

        return self._run(context, call)

    def Commit(self, request: pb.CommitRequest, context: grpc.ServicerContext) -> pb.CommitResponse:
        def call() -> pb.CommitResponse:
            result = commit(self.ctx, self._tenant(context), validation.commit_command(request))
            self.metrics.committed(result)
            self.on_commit()
            return result

        return self._run(context, call)


def _outcome(result: Message) -> dict[str, Message]:
    """A batch item's `result` oneof: the item's data, or the error that failed it."""
    return {"error": result} if isinstance(result, res.ItemError) else {"data": result}


def _caller_waiting(context: grpc.ServicerContext) -> bool:
    """The client still waits for the answer: its deadline (if any) has not passed and it has not
    cancelled. gRPC reports these to the client itself (DEADLINE_EXCEEDED, CANCELLED)."""
    remaining = context.time_remaining()
    return context.is_active() and (remaining is None or remaining > 0)

"""One full cognitive cycle against a running server, with the generated Python stubs.

    python clients/python/walkthrough.py [host:port]

Activate → Remember → Activate (a second task finds the claim) → Commit refused until feedback →
Feedback → Commit. Prints each step; exits non-zero on any unexpected result.
"""

from __future__ import annotations

import sys
import uuid

import grpc
from grpc_status import rpc_status

from slowave.v1 import errors_pb2
from slowave.v1 import memory_service_pb2 as pb
from slowave.v1 import memory_service_pb2_grpc as pb_grpc
from slowave.v1 import resources_pb2 as res


def main(address: str = "127.0.0.1:50051") -> None:
    stub = pb_grpc.MemoryServiceStub(grpc.insecure_channel(address))
    scope = f"project:walkthrough-{uuid.uuid4().hex[:6]}"
    claim = "The staging deploy listens on port 8443."

    # 1. Activate: a session for the first task (the scope is empty: COLD_START).
    first = stub.Activate(
        pb.ActivateRequest(
            task="Find out why staging deploys time out", initial_goal="Diagnose staging timeouts", scope=scope
        ),
        timeout=10,
    )
    print("activate:", first.session_id, res.MemoryState.Name(first.memory_state))

    # 2. Remember a durable claim learned during the task.
    stored = stub.Remember(
        pb.RememberRequest(session_id=first.session_id, scope=scope, content=claim, type=res.MEMORY_TYPE_FACT),
        timeout=10,
    ).memory
    print("remember:", stored.memory_id, pb.Disposition.Name(stored.disposition))

    # 5. Commit the first task (it exposed nothing, so no feedback is owed).
    done = stub.Commit(
        pb.CommitRequest(
            session_id=first.session_id,
            final_goal="Diagnose staging timeouts",
            outcome=res.OUTCOME_SUCCESS,
            outcome_summary="Staging timeouts came from probing the wrong port; the deploy listens on 8443.",
            verification=pb.Verification(
                status=res.VERIFICATION_STATUS_VERIFIED, summary="curl to :8443 answered 200."
            ),
        ),
        timeout=10,
    )
    print("commit:", pb.CommitOperation.Name(done.operation))

    # A later task whose cue contains the claim gets it back, exposed for feedback.
    second = stub.Activate(
        pb.ActivateRequest(
            task=f"Configure the health check. {claim}", initial_goal="Configure the health check", scope=scope
        ),
        timeout=10,
    )
    print("activate:", [(m.memory_id, m.ranking.score) for m in second.memories])

    # Commit is refused while an exposed memory lacks feedback; the detail lists what is owed.
    request = pb.CommitRequest(
        session_id=second.session_id,
        final_goal="Configure the health check",
        outcome=res.OUTCOME_SUCCESS,
        outcome_summary="The staging health check now probes port 8443.",
        verification=pb.Verification(status=res.VERIFICATION_STATUS_VERIFIED, summary="Probe is green."),
    )
    try:
        stub.Commit(request, timeout=10)
        raise SystemExit("commit should have been refused")
    except grpc.RpcError as err:
        status = rpc_status.from_call(err)
        owed = errors_pb2.IncompleteFeedback()
        next(d for d in status.details if d.Is(owed.DESCRIPTOR)).Unpack(owed)
        print("commit refused:", err.code().name, err.details(), [o.memory_ids[:] for o in owed.outstanding])

    # 4. Feedback: the memory was used and helped.
    fb = stub.Feedback(
        pb.FeedbackRequest(
            retrieval_id=second.retrieval_id,
            coverage=pb.COVERAGE_COMPLETE,
            memory_feedback=[pb.MemoryFeedbackEntry(memory_id=stored.memory_id, assessment=pb.MEMORY_ASSESSMENT_USED)],
        ),
        timeout=10,
    ).record
    print("feedback: strengthened", list(fb.applied.strengthened))

    # 5. The identical commit now succeeds.
    done = stub.Commit(request, timeout=10)
    print("commit:", pb.CommitOperation.Name(done.operation), pb.FeedbackStatus.Name(done.feedback_status))


if __name__ == "__main__":
    main(*sys.argv[1:2])

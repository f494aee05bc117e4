"""SDK retry policy: which failures are retried, backoff bounds, deadline budget (fake clock, no sleeps)."""

from __future__ import annotations

import asyncio

import grpc
import pytest
from google.rpc import code_pb2, error_details_pb2

from slowave_client.errors import DeadlineExceeded, Unavailable, error_from_status
from slowave_client.retry import (
    NO_RETRIES,
    Attempts,
    RetryEvent,
    RetryPolicy,
    run_with_retries,
    run_with_retries_async,
    should_retry,
)
from tests.unit.test_sdk_errors import FakeRpcError, info, status


class FakeTime:
    """A clock that only moves when the code under test sleeps."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    async def async_sleep(self, seconds: float) -> None:
        self.sleep(seconds)


def transport_unavailable() -> FakeRpcError:
    return FakeRpcError(grpc.StatusCode.UNAVAILABLE, "failed to connect to all addresses")


def service_unavailable(retry_delay_ms: int | None = None) -> FakeRpcError:
    details: list[object] = [info("INTERNAL_ERROR", "internal_error", True)]
    if retry_delay_ms is not None:
        hint = error_details_pb2.RetryInfo()
        hint.retry_delay.FromMilliseconds(retry_delay_ms)
        details.append(hint)
    return FakeRpcError(
        grpc.StatusCode.UNAVAILABLE,
        "the database is unavailable",
        status(code_pb2.UNAVAILABLE, "the database is unavailable", *details),
    )


def scripted(failures: list[FakeRpcError], result: str = "ok"):
    """An invoke() that fails with `failures` in turn, then returns `result`; records each timeout."""
    timeouts: list[float | None] = []

    def invoke(timeout: float | None) -> str:
        timeouts.append(timeout)
        if failures:
            raise failures.pop(0)
        return result

    return invoke, timeouts


def test_backoff_follows_the_grpc_retry_design():
    policy = RetryPolicy(max_attempts=6, initial_backoff=0.2, max_backoff=1.0, multiplier=2.0)
    assert [policy.backoff(n, rng=lambda: 1.0) for n in range(1, 6)] == [0.2, 0.4, 0.8, 1.0, 1.0]
    assert policy.backoff(3, rng=lambda: 0.25) == pytest.approx(0.2)
    assert all(policy.backoff(1, rng=lambda: 0.0) == 0.0 for _ in range(3))


def test_policy_rejects_nonsense():
    with pytest.raises(ValueError):
        RetryPolicy(max_attempts=0)
    with pytest.raises(ValueError):
        RetryPolicy(initial_backoff=0)
    with pytest.raises(ValueError):
        RetryPolicy(multiplier=0.5)


def test_only_unavailable_is_retried_and_ambiguous_failures_only_for_idempotent_calls():
    transport = error_from_status(grpc.StatusCode.UNAVAILABLE, "reset", None)
    from_service = error_from_status(
        grpc.StatusCode.UNAVAILABLE,
        "db down",
        status(code_pb2.UNAVAILABLE, "db down", info("INTERNAL_ERROR", "internal_error", True)),
    )
    assert should_retry(transport, idempotent=True) and not should_retry(transport, idempotent=False)
    # The service rolled its transaction back: even a call that opens a session may be repeated.
    assert should_retry(from_service, idempotent=False)
    for code in (
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.INTERNAL,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        grpc.StatusCode.FAILED_PRECONDITION,
    ):
        assert not should_retry(error_from_status(code, "m", None), idempotent=True)
    incomplete = error_from_status(
        grpc.StatusCode.FAILED_PRECONDITION,
        "feedback is incomplete",
        status(code_pb2.FAILED_PRECONDITION, "m", info("INCOMPLETE_FEEDBACK", "incomplete_feedback", True)),
    )
    assert incomplete.retryable and not should_retry(incomplete, idempotent=True)


def test_idempotent_call_is_retried_until_it_succeeds():
    t = FakeTime()
    events: list[RetryEvent] = []
    invoke, timeouts = scripted([transport_unavailable(), transport_unavailable()])
    attempts = Attempts(
        "Commit",
        RetryPolicy(max_attempts=5, initial_backoff=0.1, max_backoff=1.0),
        True,
        30.0,
        clock=t.clock,
        rng=lambda: 1.0,
        on_retry=events.append,
    )
    assert run_with_retries(invoke, attempts, sleep=t.sleep) == "ok"
    assert t.sleeps == [0.1, 0.2]
    assert [(e.method, e.attempt, e.delay) for e in events] == [("Commit", 1, 0.1), ("Commit", 2, 0.2)]
    assert isinstance(events[0].error, Unavailable)
    # Each attempt gets what is left of the call's deadline, not a fresh 30 s.
    assert timeouts == [30.0, pytest.approx(29.9), pytest.approx(29.7)]


def test_retries_stop_at_max_attempts_with_the_typed_error():
    t = FakeTime()
    invoke, timeouts = scripted([transport_unavailable() for _ in range(10)])
    attempts = Attempts("Remember", RetryPolicy(max_attempts=3), True, None, clock=t.clock, rng=lambda: 0.5)
    with pytest.raises(Unavailable) as raised:
        run_with_retries(invoke, attempts, sleep=t.sleep)
    assert len(timeouts) == 3 and len(t.sleeps) == 2 and timeouts == [None, None, None]
    assert isinstance(raised.value.__cause__, grpc.RpcError)


def test_non_idempotent_call_is_not_repeated_after_a_transport_failure():
    t = FakeTime()
    invoke, timeouts = scripted([transport_unavailable()])
    with pytest.raises(Unavailable):
        run_with_retries(invoke, Attempts("Activate", RetryPolicy(), False, 30.0, clock=t.clock), sleep=t.sleep)
    assert len(timeouts) == 1 and t.sleeps == []


def test_non_idempotent_call_is_repeated_when_the_service_itself_was_unavailable():
    t = FakeTime()
    invoke, timeouts = scripted([service_unavailable()])
    attempts = Attempts("Activate", RetryPolicy(), False, 30.0, clock=t.clock, rng=lambda: 0.0)
    assert run_with_retries(invoke, attempts, sleep=t.sleep) == "ok"
    assert len(timeouts) == 2


def test_server_retry_delay_is_a_floor():
    t = FakeTime()
    invoke, _ = scripted([service_unavailable(retry_delay_ms=700)])
    attempts = Attempts("Commit", RetryPolicy(initial_backoff=0.1), True, 30.0, clock=t.clock, rng=lambda: 1.0)
    run_with_retries(invoke, attempts, sleep=t.sleep)
    assert t.sleeps == [0.7]


def test_no_retry_that_could_not_finish_before_the_deadline():
    t = FakeTime()
    invoke, timeouts = scripted([transport_unavailable() for _ in range(10)])
    attempts = Attempts(
        "Feedback",
        RetryPolicy(max_attempts=10, initial_backoff=1.0, max_backoff=1.0),
        True,
        2.5,
        clock=t.clock,
        rng=lambda: 1.0,
    )
    with pytest.raises(Unavailable):
        run_with_retries(invoke, attempts, sleep=t.sleep)
    assert t.sleeps == [1.0, 1.0] and timeouts == [2.5, 1.5, 0.5]


def test_non_retryable_errors_are_raised_at_once():
    t = FakeTime()
    invoke, timeouts = scripted([FakeRpcError(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded")])
    with pytest.raises(DeadlineExceeded):
        run_with_retries(invoke, Attempts("Commit", RetryPolicy(), True, 1.0, clock=t.clock), sleep=t.sleep)
    assert len(timeouts) == 1


def test_no_retries_policy_makes_one_attempt():
    t = FakeTime()
    invoke, timeouts = scripted([transport_unavailable()])
    with pytest.raises(Unavailable):
        run_with_retries(invoke, Attempts("Check", NO_RETRIES, True, 5.0, clock=t.clock), sleep=t.sleep)
    assert len(timeouts) == 1


def test_async_twin_behaves_the_same():
    t = FakeTime()
    failures = [transport_unavailable(), transport_unavailable()]
    seen: list[float | None] = []

    async def invoke(timeout: float | None) -> str:
        seen.append(timeout)
        if failures:
            raise failures.pop(0)
        return "ok"

    attempts = Attempts("Recall", RetryPolicy(initial_backoff=0.5), True, 10.0, clock=t.clock, rng=lambda: 1.0)
    assert asyncio.run(run_with_retries_async(invoke, attempts, sleep=t.async_sleep)) == "ok"
    assert t.sleeps == [0.5, 1.0] and seen == [10.0, 9.5, 8.5]

    async def activate(timeout: float | None) -> str:
        raise transport_unavailable()

    with pytest.raises(Unavailable):
        asyncio.run(
            run_with_retries_async(
                activate, Attempts("Activate", RetryPolicy(), False, 10.0, clock=t.clock), sleep=t.async_sleep
            )
        )
    assert t.sleeps == [0.5, 1.0]

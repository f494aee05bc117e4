"""Automatic retries: which failures, which calls, how long to wait.

Only UNAVAILABLE is retried (AIP-194): every other status either needs the caller to change
something (INVALID_ARGUMENT, NOT_FOUND, FAILED_PRECONDITION — including `incomplete_feedback`, which
is "retryable" only after the agent sends feedback), or may mean the server already acted
(DEADLINE_EXCEEDED, INTERNAL). Overload (RESOURCE_EXHAUSTED) is not retried automatically either:
immediate retries only add load to a server that is shedding it; the error says `retryable`, so the
caller can back off at its own level.

An UNAVAILABLE seen by the client does not always mean nothing happened: the connection may have
dropped after the server committed. So whether a call is retried depends on what repeating it does.

Always retried (repeating is harmless):
* health: read-only;
* Recall in continuation mode (`continue_from`): cursors are deterministic and reusable, and
  re-serving a page exposes nothing new;
* Remember: a repeated claim is MATCHED to the stored memory (same `memory_id`), never duplicated;
* Feedback: the ledger is append-only and only the first accepted assessment of a target counts, so
  a repeat changes no ranking (its `missing` entries would count twice as knowledge-gap occurrences);
* Commit: a repeat of a commit that went through is an update of the ended session with the same
  values (the response then says `operation: updated`).

Retried only when the service itself said UNAVAILABLE (each call creates something):
* Activate: each call opens a new session;
* Recall in fresh mode (`query`): each call creates a retrieval whose exposures must get feedback
  before Commit.

"The service said UNAVAILABLE itself" means the status carried the service's ErrorInfo (its
database was unreachable): the contract (4.5) guarantees that the failed unit's writes were rolled
back, so nothing happened. For a server that is not up yet, use `wait_for_ready=True` on the client
instead: the call then waits for the connection (within its deadline) and is sent only once.

The backoff is gRPC's own retry design (gRFC A6): before retry n the client waits
`random(0, min(initial_backoff * multiplier**(n-1), max_backoff))`, or the server's RetryInfo delay
if that is longer; the whole call, retries and waits included, stays within its timeout.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import grpc

from slowave_client.errors import SlowaveError, error_from_rpc

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently UNAVAILABLE is retried (for calls that are safe to repeat)."""

    max_attempts: int = 5
    """Attempts in total, the first included; 1 disables retries."""
    initial_backoff: float = 0.2
    """Upper bound of the first wait, in seconds."""
    max_backoff: float = 3.0
    """Upper bound of any wait, in seconds."""
    multiplier: float = 2.0
    """Growth of the bound from one retry to the next."""

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if self.initial_backoff <= 0 or self.max_backoff <= 0 or self.multiplier < 1:
            raise ValueError("backoffs must be positive and the multiplier at least 1")

    def backoff(self, retry: int, rng: Callable[[], float] = random.random) -> float:
        """The wait before retry number `retry` (1 = the first retry)."""
        bound = min(self.initial_backoff * self.multiplier ** (retry - 1), self.max_backoff)
        return rng() * bound


NO_RETRIES = RetryPolicy(max_attempts=1)


def should_retry(error: SlowaveError, idempotent: bool) -> bool:
    """Whether a failed attempt may be sent again automatically (see the module docstring)."""
    if error.status != grpc.StatusCode.UNAVAILABLE:
        return False
    return idempotent or error.from_service


@dataclass(frozen=True)
class RetryEvent:
    """Passed to a client's `on_retry` hook just before it waits and tries again."""

    method: str
    attempt: int
    """The attempt that failed (1 = the first)."""
    error: SlowaveError
    delay: float
    """Seconds the client is about to wait."""


class Attempts:
    """The attempts of one call: each one's timeout, and whether and when to try again."""

    def __init__(
        self,
        method: str,
        policy: RetryPolicy,
        idempotent: bool,
        timeout: float | None,
        *,
        clock: Callable[[], float] = time.monotonic,
        rng: Callable[[], float] = random.random,
        on_retry: Callable[[RetryEvent], None] | None = None,
    ) -> None:
        self.method, self.policy, self.idempotent = method, policy, idempotent
        self.clock, self.rng, self.on_retry = clock, rng, on_retry
        self.deadline = None if timeout is None else clock() + timeout
        self.attempt = 0

    def start(self) -> float | None:
        """Begins the next attempt and returns its timeout: whatever is left of the call's deadline."""
        self.attempt += 1
        return None if self.deadline is None else max(0.0, self.deadline - self.clock())

    def after_failure(self, error: SlowaveError) -> float | None:
        """The wait before the next attempt, or None when `error` is final."""
        if self.attempt >= self.policy.max_attempts or not should_retry(error, self.idempotent):
            return None
        delay = self.policy.backoff(self.attempt, self.rng)
        if error.retry_delay is not None:
            delay = max(delay, error.retry_delay)
        if self.deadline is not None and self.clock() + delay >= self.deadline:
            return None  # a retry could not finish in time; the caller gets the real error now
        if self.on_retry is not None:
            self.on_retry(RetryEvent(self.method, self.attempt, error, delay))
        return delay


def run_with_retries(
    invoke: Callable[[float | None], T], attempts: Attempts, sleep: Callable[[float], None] = time.sleep
) -> T:
    """Calls `invoke(timeout)` until it succeeds or fails for good; raises the typed SlowaveError."""
    while True:
        timeout = attempts.start()
        try:
            return invoke(timeout)
        except grpc.RpcError as exc:
            error, cause = error_from_rpc(exc), exc
        delay = attempts.after_failure(error)
        if delay is None:
            raise error from cause
        sleep(delay)


async def run_with_retries_async(
    invoke: Callable[[float | None], Awaitable[T]],
    attempts: Attempts,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> T:
    """The asyncio twin of `run_with_retries`."""
    while True:
        timeout = attempts.start()
        try:
            return await invoke(timeout)
        except grpc.RpcError as exc:
            error, cause = error_from_rpc(exc), exc
        delay = attempts.after_failure(error)
        if delay is None:
            raise error from cause
        await sleep(delay)

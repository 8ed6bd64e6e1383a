"""Riding through what clusters do: the "jetstream" source's and sink's retry policy.

How it works: a `RetryPolicy` (plain data, pickled to the tasks with the settings it is
part of) runs a call on the calling thread, the driver's data source process or a read
or write task's thread in a Python worker, and runs it again, with tenacity's
exponential backoff, while it fails the way a cluster fails for a moment: a node
restarts (no reply within the call's timeout, a connection being remade), a stream
or the JetStream meta group elects a new leader (no responders, 503 "temporarily
unavailable", 500 "cluster can not handle request", "stream is offline"). Its time
budget (option ``retryTimeout``) counts from the first failure of a stall, or, for a
read or write that keeps going, from the last time it got anywhere. The first wait of
a stall is logged once at WARNING, saying what it waits for; a stall that ends is
logged at INFO; past the budget the call fails with `ClusterRetryTimeoutError`, which
names the call, the servers and the budget, and chains the last error. A write task
sends its rows again from a `KeptInput` (message ids make the stream store them once).
State: none but the policy's numbers; each call's tenacity object and each task's kept
input live for that call or task.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TypeVar

import pyarrow as pa
import tenacity

from nats_sync import errors
from nats_sync.jetstream.errors import APIError, JetStreamNotEnabledError, NoStreamResponseError
from nats_sync.spark import _defaults as sd

logger = logging.getLogger("nats_sync.spark")

T = TypeVar("T")

#: JetStream API errors a cluster answers with while a node restarts or a leader is
#: being elected (nats-server's errors.json): temporarily unavailable (10008),
#: insufficient resources or no peers for an R>1 placement (10023, 10005), incomplete
#: results (10004), expected-last-sequence not ready (10163), peer remap (10075), cluster
#: can not handle the request or not assigned here (10009, 10007), stream or consumer
#: offline (10118, 10119, 10194, 10195), consumer create failed (10012: raft proposals
#: refused mid-election).
TRANSIENT_ERR_CODES = frozenset(
    {10004, 10005, 10007, 10008, 10009, 10012, 10023, 10075, 10118, 10119, 10163, 10194, 10195}
)
#: A call not answered in time, nobody answering yet, and connection states a client
#: leaves by itself (a closed one is made again by the worker's client cache on the
#: next attempt).
_TRANSIENT = (
    errors.TimeoutError,
    errors.NoRespondersError,
    errors.ConnectionClosedError,
    errors.ConnectionReconnectingError,
    errors.NoServersError,
    errors.StaleConnectionError,
    errors.OutboundBufferLimitError,
)


class ClusterRetryTimeoutError(errors.TimeoutError):
    """A "jetstream" source or sink call kept failing for longer than ``retryTimeout``.

    The message names the call, the servers and the budget; ``__cause__`` is the last
    error.
    """


def is_transient(error: BaseException) -> bool:
    """Whether ``error``, or an error it was raised from, is one a cluster gets over by
    itself: a timeout, no responders, a connection being remade, or a JetStream API
    answer of `TRANSIENT_ERR_CODES` (or any other 503 but "JetStream not enabled").

    A spent budget (`ClusterRetryTimeoutError`) is not: a call made of retried calls
    does not retry the ones that already gave up.
    """
    for cause in causes_of(error):
        if isinstance(cause, ClusterRetryTimeoutError):
            return False
        if _transient_itself(cause):
            return True
    return False


def is_transient_publish(error: BaseException) -> bool:
    """`is_transient`, or a JetStream publish that no stream answered
    (``NoStreamResponseError`` in the chain): what a publish meets while the stream's
    leader is being elected. A subject no stream stores fails the same way, once the
    budget is spent.
    """
    return is_transient(error) or any(
        isinstance(cause, NoStreamResponseError) for cause in causes_of(error)
    )


def causes_of(error: BaseException) -> Iterable[BaseException]:
    """``error`` and the chain of errors it was raised from (``__cause__``)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__


def _transient_itself(error: BaseException) -> bool:
    if isinstance(error, APIError):
        if isinstance(error, JetStreamNotEnabledError):
            return False
        return error.err_code in TRANSIENT_ERR_CODES or (error.code == 503 and not error.err_code)
    return isinstance(error, _TRANSIENT)


@dataclass(frozen=True)
class RetryPolicy:
    """How long a call may keep retrying transient failures, and how it waits.

    Attributes:
        budget: seconds a stall may last before the call fails (0: no retry).
        servers: the servers the call goes to (named in the error past the budget).
        first_wait: seconds before the first retry; the waits double from there.
        max_wait: the longest wait between two tries.
    """

    budget: float
    servers: tuple[str, ...] = ()
    first_wait: float = sd.SPARK_JS_RETRY_FIRST_WAIT
    max_wait: float = sd.SPARK_JS_RETRY_MAX_WAIT

    def call(
        self,
        what: str,
        attempt: Callable[[], T],
        *,
        retry_if: Callable[[BaseException], bool] = is_transient,
    ) -> T:
        """``attempt()``, run again while it fails with an error ``retry_if`` accepts,
        within the budget.

        Args:
            what: the call, as the log and the error name it ("STREAM.INFO of 'IN'").
            attempt: the call; it must be safe to run again.
            retry_if: which errors are worth another try.

        Raises:
            ClusterRetryTimeoutError: the budget was spent; ``__cause__`` is the last error.
            Exception: the first error ``retry_if`` refuses, as it was raised.
        """
        retrying = self.retrying(what, retry_if=retry_if)
        result: T = retrying(attempt)
        _log_recovered(what, retrying.statistics)
        return result

    def retrying(
        self,
        what: str,
        *,
        retry_if: Callable[[BaseException], bool] = is_transient,
        last_progress: Callable[[], float] | None = None,
    ) -> tenacity.Retrying:
        """The tenacity object of one call, for code that iterates its attempts (a
        read or write that resumes where it got to).

        Args:
            what: the call, as the log and the error name it.
            retry_if: which errors are worth another try.
            last_progress: where given, the ``time.monotonic()`` of the call's last
                progress: the budget then counts from the later of it and the first
                failure.
        """
        budget = self.budget
        failed_at: list[float] = []
        warned_at_progress: list[float] = []

        def spent(state: tenacity.RetryCallState) -> bool:
            if not failed_at:
                failed_at.append(time.monotonic())
            since = failed_at[0]
            if last_progress is not None:
                since = max(since, last_progress())
            return time.monotonic() - since >= budget

        def give_up(state: tenacity.RetryCallState) -> None:
            # Called only when retry_if took the last error and the budget is spent.
            assert state.outcome is not None
            last = state.outcome.exception()
            raise ClusterRetryTimeoutError(
                f"{what} on {', '.join(self.servers) or 'the servers'}: still failing after "
                f"the retry budget of {budget:g}s (option 'retryTimeout'; "
                f"{state.attempt_number} tries): {last}"
            ) from last

        def log_wait(state: tenacity.RetryCallState) -> None:
            # Once per stall at WARNING: the first failure, or the first after progress.
            progress = last_progress() if last_progress is not None else 0.0
            first_of_stall = not warned_at_progress or warned_at_progress[-1] != progress
            warned_at_progress[:] = [progress]
            _log_wait(what, self, state, logging.WARNING if first_of_stall else logging.DEBUG)

        return tenacity.Retrying(
            retry=tenacity.retry_if_exception(retry_if) if budget > 0 else tenacity.retry_never,
            stop=spent,
            wait=tenacity.wait_exponential(multiplier=self.first_wait, max=self.max_wait)
            + tenacity.wait_random(0, self.first_wait),
            before_sleep=log_wait,
            retry_error_callback=give_up,
        )


class KeptInput:
    """A write task's input, kept (up to ``max_bytes``) so that a retry sends it again.

    `batches` gives the input from its start each time: the batches kept, then the
    rest of Spark's iterator. Past ``max_bytes`` nothing more is kept and `complete`
    turns false: the task can then no longer send its rows again itself (Spark's retry
    of the whole task is what is left).
    """

    def __init__(self, source: Iterator[pa.RecordBatch], max_bytes: int) -> None:
        self._source = source
        self._max_bytes = max_bytes
        self._kept: list[pa.RecordBatch] = []
        self._kept_bytes = 0
        self.complete = True

    def batches(self) -> Iterator[pa.RecordBatch]:
        """The input from its first batch."""
        yield from list(self._kept)
        for batch in self._source:
            if self.complete:
                self._kept_bytes += batch.nbytes
                if self._kept_bytes > self._max_bytes:
                    self.complete = False
                    self._kept.clear()
                else:
                    self._kept.append(batch)
            yield batch


def _log_wait(what: str, policy: RetryPolicy, state: tenacity.RetryCallState, level: int) -> None:
    outcome = state.outcome
    error = outcome.exception() if outcome is not None else None
    logger.log(
        level,
        "%s failed on %s (%s); waiting for the cluster, retrying for up to %gs "
        "(option 'retryTimeout')",
        what,
        ", ".join(policy.servers) or "the servers",
        error,
        policy.budget,
    )


def _log_recovered(what: str, statistics: dict[str, object]) -> None:
    tries = statistics.get("attempt_number")
    if isinstance(tries, int) and tries > 1:
        logger.info(
            "%s went through after %d tries (%ss)",
            what,
            tries,
            statistics.get("delay_since_first_attempt"),
        )


__all__ = [
    "TRANSIENT_ERR_CODES",
    "ClusterRetryTimeoutError",
    "KeptInput",
    "RetryPolicy",
    "causes_of",
    "is_transient",
    "is_transient_publish",
]

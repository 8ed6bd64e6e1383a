"""``publishMode`` "async": one write task's rows with ``publish_async``, then every
acknowledgement awaited.

How it works: in the write task's thread, each row of each Arrow batch (as ``rows``
lists) goes out with the JetStream context's ``publish_async`` (at most
``maxPendingAcks`` awaited at once; the acks settle on the client's reader thread and
the context's ack timer thread). A ``_Tally`` counts the futures in publish order as
they settle, then waits for the rest: each settles by its ack timeout, or is taken as
lost ``SPARK_JS_ACKS_AFTER_RECONNECT`` seconds after the client reconnected (its ack
went to the old connection's inbox) or after a later publish found no stream answering
(the stream's leader that had it is gone; a new one is being elected). A negative, failed or missing
acknowledgement fails the call with a `RuntimeError` saying how many rows were
acknowledged; ``sink.publish_acknowledged`` decides whether the task sends its rows
again. State: the tally, one per call, touched by the task's thread only.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from concurrent.futures import wait as wait_futures

import pyarrow as pa

from nats_sync import errors
from nats_sync.client import Client
from nats_sync.errors import Error, InvalidArgumentError
from nats_sync.jetstream import JetStream, PubAck
from nats_sync.jetstream.errors import NoStreamResponseError
from nats_sync.spark import _defaults as sd
from nats_sync.spark._jetstream.rows import SINK, WriteSettings, batch_columns

_SINK = SINK


class _Tally:
    """One task's acknowledgements, counted in publish order as they settle.

    ``reconnects`` reads the count of the client's reconnections: an ack still awaited
    a moment after the connection was remade is taken as lost (its reply went to the
    old connection's inbox interest, which died with it), so the task sends its rows
    again at once instead of waiting out every ack timeout. So is an ack still awaited
    a moment after a publish was answered "no responders": the stream had no leader
    then, so the one that took the earlier rows is gone, and their acks with it.
    """

    def __init__(self, reconnects: Callable[[], int]) -> None:
        self.sent = 0
        self.acked = 0
        self.duplicates = 0
        self.failure: tuple[str, BaseException] | None = None
        self.pending: deque[tuple[Future[PubAck], str]] = deque()
        self._reconnects = reconnects
        self._reconnects_at_start = reconnects()
        #: When a publish was first answered "no responders" (time.monotonic()).
        self.leaderless_at: float | None = None

    def add(self, future: Future[PubAck], subject: str) -> None:
        self.sent += 1
        self.pending.append((future, subject))

    def collect_done(self) -> None:
        """Counts the settled futures at the head (acks come nearly in order)."""
        pending = self.pending
        while pending and pending[0][0].done():
            self._count(*pending.popleft())

    def settle(self, timeout: float) -> None:
        """Waits for every future still pending (each settles by its ack timeout), or
        until ``SPARK_JS_ACKS_AFTER_RECONNECT`` seconds after a reconnection or a
        publish answered "no responders"."""
        deadline = time.monotonic() + timeout
        reconnected_at: float | None = None
        while self.pending:
            now = time.monotonic()
            if reconnected_at is None and self._reconnects() != self._reconnects_at_start:
                reconnected_at = now
            signs_of_loss = [at for at in (reconnected_at, self.leaderless_at) if at is not None]
            end = deadline
            if signs_of_loss:
                end = min(deadline, min(signs_of_loss) + sd.SPARK_JS_ACKS_AFTER_RECONNECT)
            if now >= end:
                break
            wait_futures(
                [future for future, _ in self.pending],
                timeout=min(end - now, sd.SPARK_JS_RECONNECT_CHECK_INTERVAL),
            )
            self.collect_all_done()
        wait = f"{sd.SPARK_JS_ACKS_AFTER_RECONNECT:g}s"
        if reconnected_at is not None:
            lost = (
                f"no ack within {wait} of the connection being remade: the ack was lost "
                "with the old connection"
            )
        elif self.leaderless_at is not None:
            lost = (
                f"no ack within {wait} of a later publish finding no stream: the ack was "
                "lost with the stream leader that took the message"
            )
        else:
            lost = f"no ack and no error within {timeout}s"
        while self.pending:
            future, subject = self.pending.popleft()
            if future.done():
                self._count(future, subject)
            elif self.failure is None:
                self.failure = (subject, errors.TimeoutError(lost))

    def collect_all_done(self) -> None:
        """Counts every settled future, not only those at the head: a "no responders"
        answer behind an ack still awaited is what tells the latter is lost."""
        still: deque[tuple[Future[PubAck], str]] = deque()
        for future, subject in self.pending:
            if future.done():
                self._count(future, subject)
            else:
                still.append((future, subject))
        self.pending = still

    def _count(self, future: Future[PubAck], subject: str) -> None:
        error = future.exception()
        if error is None:
            self.acked += 1
            if future.result().duplicate:
                self.duplicates += 1
            return
        if self.leaderless_at is None and isinstance(error, NoStreamResponseError):
            self.leaderless_at = time.monotonic()
        if self.failure is None:
            self.failure = (subject, error)


def publish_async(
    js: JetStream, client: Client, settings: WriteSettings, batches: Iterator[pa.RecordBatch]
) -> tuple[int, int]:
    """``publishMode`` "async": every row with ``publish_async``, then every ack awaited.

    Returns (rows acknowledged, duplicates among them). Raises as
    `publish_acknowledged`.
    """
    tally = _Tally(lambda: int(client.stats["reconnects"]))
    try:
        for batch in batches:
            _publish_batch(js, settings, batch, tally)
            if tally.failure is not None:
                break
    except Error as error:
        if isinstance(error, InvalidArgumentError):
            raise
        tally.settle(settings.timeout + sd.SPARK_JS_SETTLE_GRACE)
        raise RuntimeError(
            f"{_SINK}: could not publish to {', '.join(settings.servers)} "
            f"({tally.acked} of the {tally.sent} rows sent by this task were acknowledged "
            f"before the failure): {error}"
        ) from error
    tally.settle(settings.timeout + sd.SPARK_JS_SETTLE_GRACE)
    if tally.failure is not None:
        subject, cause = tally.failure
        raise RuntimeError(
            f"{_SINK}: only {tally.acked} of the {tally.sent} rows sent by this task were "
            f"acknowledged; the first failure, on subject {subject!r}: {cause} "
            "(Spark retries the task; with message ids the retry stores nothing twice)"
        ) from cause
    return tally.acked, tally.duplicates


def _publish_batch(
    js: JetStream, settings: WriteSettings, batch: pa.RecordBatch, tally: _Tally
) -> None:
    columns = batch_columns(batch, settings.subject, settings.msg_id_columns, tally.sent)
    subjects, headers, msg_ids = columns.subjects, columns.headers, columns.msg_ids
    default_subject = settings.subject
    publish = js.publish_async
    for index, payload in enumerate(columns.data):
        subject = subjects[index] if subjects is not None else default_subject
        assert subject is not None  # batch_columns made sure every row has one
        tally.add(
            publish(
                subject,
                payload,
                headers=headers[index] if headers is not None else None,
                msg_id=msg_ids[index] if msg_ids is not None else None,
            ),
            subject,
        )
        if index % 256 == 255:
            tally.collect_done()
            if tally.failure is not None:
                return
    tally.collect_done()


__all__ = ["publish_async"]

"""``publishMode`` "fast": one write task's rows as one fast-ingest batch (ADR-50).

How it works: in the write task, the rows of each Arrow batch (as ``rows`` lists)
go to ``fast_publisher().add`` in order, with gap ``fail``: the server stores them in
order and ends the batch at the first gap or refused message. The last row of each
Arrow batch is held back until the next one comes, so that the task's very last row
is the batch's ``commit`` (stored, and answered with the batch's `BatchAck`); a task
with no rows opens no batch. The server's ``BatchAck.count`` (rows stored, duplicates
by message id counted as taken) must equal the rows the task sent: any difference,
or a batch the server ended early (the next ``add`` raises `BatchClosedError`, and
``close()`` then gives the server's count), fails the task with both numbers, and Spark
retries it (with message ids the retry stores nothing twice within the stream's
duplicate window).

Why the loops are split by columns: at 100,000 rows/s a task has a few microseconds
per row, most of them in ``add``; the common shapes (one subject, with or without
message ids) get a loop that only calls ``add``.

A task whose input stalls (a slow UDF or source upstream) keeps its batch: the
publisher pings a batch idle on the client's timer thread, before the server's 10 s
batch timeout would drop it (and Spark would retry the task into the same stall).

Limit (fails the task with ``FastBatchUnknownError`` and a hint, and Spark retries it):
every row of a task must go to one stream (a batch belongs to the stream storing its
first row's subject; another stream refuses its rows as a batch it does not know). One
batch per task is what makes the count check whole.

A batch that fails part-way for a reason of the moment (`FastBatchShortError` with
``transient``, a timeout, a connection being remade) is sent again whole by the task
itself, as ``sink.publish_acknowledged`` and its retry policy say, and past that by
Spark's retry of the task, not from the publisher's ``ack_sequence``: the same rule as
the resume recipe of docs/guides/jetstream.md, in that every row not known stored is
sent again and message ids make the stream store it once (the rows known stored are
sent again too: a task has no cheaper way to skip them, and the duplicate window drops
them).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import pyarrow as pa

from nats_sync.errors import Error, InvalidArgumentError
from nats_sync.jetstream import (
    BatchAck,
    BatchClosedError,
    BatchGapError,
    BatchMessageError,
    FastBatchNotEnabledError,
    FastBatchUnknownError,
    FastPublisher,
    JetStream,
    JetStreamError,
)
from nats_sync.spark import _defaults as sd
from nats_sync.spark._jetstream.retry import is_transient
from nats_sync.spark._jetstream.rows import SINK, RowColumns, WriteSettings, batch_columns

_Row = tuple[str, bytes, "dict[str, str] | None", "str | None"]


def publish_fast(
    js: JetStream, settings: WriteSettings, batches: Iterator[pa.RecordBatch]
) -> tuple[int, int | None]:
    """Publishes every row of ``batches`` as one fast batch and checks the server's count.

    Runs in a write task. Returns (rows stored, duplicates among them: the rows when
    the stream stored none of them anew (an all-duplicate batch), else None: a fast
    batch does not say).

    Raises:
        RuntimeError: the stream took fewer (or more) rows than the task sent, the
            batch could not be published, or the stream does not allow fast batches;
            the message says which, with both counts.
        InvalidArgumentError: a row has no subject, or a null or empty message id.
    """
    publisher: FastPublisher | None = None
    sent = 0
    held: _Row | None = None
    default_subject = settings.subject
    refusals = _FirstRefusal()
    subjects: set[str] = set()  # one subject: a batch the server forgets was lost by it
    try:
        for batch in batches:
            rows = batch.num_rows
            if not rows:
                continue
            columns = batch_columns(batch, default_subject, settings.msg_id_columns, sent)
            if len(subjects) < 2:
                subjects.update(columns.subjects or (default_subject or "",))
            if publisher is None:
                publisher = js.fast_publisher(
                    flow=sd.SPARK_JS_FAST_FLOW,
                    max_outstanding_acks=sd.SPARK_JS_FAST_MAX_OUTSTANDING_ACKS,
                    continue_on_gap=False,
                    ack_timeout=settings.timeout,
                    error_cb=refusals,
                )
            add = publisher.add
            if held is not None:
                add(held[0], held[1], headers=held[2], msg_id=held[3])
            _add_rows(add, columns, rows - 1, default_subject)
            held = columns.row(rows - 1, default_subject)
            sent += rows
        if publisher is None or held is None:
            return 0, 0
        ack: BatchAck = publisher.commit(held[0], held[1], headers=held[2], msg_id=held[3])
    except InvalidArgumentError:
        raise
    except FastBatchNotEnabledError as error:
        raise _not_enabled(error) from error
    except BatchClosedError as error:
        cause = error.__cause__
        if isinstance(cause, FastBatchNotEnabledError):
            raise _not_enabled(cause) from error
        if publisher is None:  # only a publisher raises it
            raise
        # The server ended the batch before the task's last row: its count is final.
        added = publisher.batch_sequence
        reason = refusals.first or cause or error
        raise FastBatchShortError(
            f"{SINK}: publishMode 'fast': the stream took {_final_count(publisher)} of the "
            f"{added} rows this task sent before the batch ended early ({reason})"
            f"{_unknown_batch_hint(reason, cause)}; {_RETRIED}",
            transient=_of_the_moment(refusals.first, cause, one_subject=len(subjects) == 1),
        ) from error
    except Error as error:
        added = publisher.batch_sequence if publisher is not None else 0
        raise RuntimeError(
            f"{SINK}: publishMode 'fast': could not publish to {', '.join(settings.servers)} "
            f"after {added} rows of this task were sent: {error}"
            f"{_unknown_batch_hint(error, refusals.first)}"
        ) from error
    finally:
        if publisher is not None and not publisher.is_closed:
            # The batch failed part-way: end it (an EOB commit stores nothing more).
            with contextlib.suppress(Error):
                publisher.close()
    if ack.count != sent:
        # Gap "fail": the server stored rows 1..count in order and ended the batch at
        # the first one lost or refused, so the rest of the task's rows are not stored.
        why = refusals.first or "a gap: a message was lost on the way"
        raise FastBatchShortError(
            f"{SINK}: publishMode 'fast': the stream took {ack.count} of the {sent} rows "
            f"this task sent (batch {ack.batch_id}: it ended early, at {why})"
            f"{_unknown_batch_hint(refusals.first)}; {_RETRIED}",
            transient=_of_the_moment(refusals.first, one_subject=len(subjects) == 1),
        )
    return sent, (sent if ack.seq == 0 else None)


_RETRIED = "the task sends its rows again (with message ids nothing is stored twice)"


class FastBatchShortError(RuntimeError):
    """The stream stored fewer of a task's rows than it sent: it ended the batch early.

    Attributes:
        transient: whether the reason is of the moment (a gap on the way, a batch a new
            stream leader does not know, no answer in time), so sending the rows again
            may get them all stored; false for a message the stream refused as such.
    """

    def __init__(self, detail: str, *, transient: bool) -> None:
        super().__init__(detail)
        self.transient = transient


def _of_the_moment(*reasons: BaseException | None, one_subject: bool) -> bool:
    """Whether a batch that ended early did so for a reason a second try may not meet:
    none given (a gap), a gap, a transient error, or a batch the server does not know
    where every row had one subject (so one stream: the server lost it, at a restart or
    a new leader; rows for two streams are refused the same way, and always will be)."""
    for reason in reasons:
        if reason is None or isinstance(reason, BatchGapError):
            continue
        error = reason.error if isinstance(reason, BatchMessageError) else reason
        if isinstance(error, FastBatchUnknownError) and one_subject:
            continue
        if is_transient(error or reason):
            continue
        return False
    return True


class _FirstRefusal:
    """The fast publisher's ``error_cb``: keeps the first gap or refused message, to
    say in the task's error why the batch ended (the publisher would only log it)."""

    def __init__(self) -> None:
        self.first: JetStreamError | None = None

    def __call__(self, error: JetStreamError) -> None:
        if self.first is None:
            self.first = error


def _not_enabled(error: BaseException) -> RuntimeError:
    return RuntimeError(
        f"{SINK}: publishMode 'fast' needs a stream that allows fast-ingest batches "
        f"(allow_batched, nats-server 2.14+): {error}; enable it on the stream or use "
        "publishMode 'async'"
    )


def _final_count(publisher: FastPublisher) -> str:
    """The server's count of a batch it ended, as text."""
    try:
        ack: BatchAck = publisher.close()
    except Error:
        return "an unknown number"
    return str(ack.count)


def _unknown_batch_hint(*errors: BaseException | None) -> str:
    """Why the server may not know the batch, if one of ``errors`` says it does not
    (itself, or as the server's answer to one refused message)."""
    for given in errors:
        error = given.error if isinstance(given, BatchMessageError) else given
        if isinstance(error, FastBatchUnknownError):
            return (
                "; the server knows no such batch: a stream other than the one of "
                "the task's first row never had it (the rows of a task must all go to "
                "one stream; use publishMode 'async' for such writes), or the server "
                "lost it (a restart or a new stream leader; an idle batch is kept "
                "alive)"
            )
    return ""


def _add_rows(
    add: Callable[..., object], columns: RowColumns, stop: int, default_subject: str | None
) -> None:
    """Adds rows ``0 .. stop-1`` of ``columns`` to the batch, in order."""
    data = columns.data[:stop] if stop < len(columns.data) else columns.data
    ids = columns.msg_ids
    if columns.subjects is None and columns.headers is None:
        if ids is None:
            for payload in data:
                add(default_subject, payload)
        else:
            for payload, msg_id in zip(data, ids, strict=False):
                add(default_subject, payload, msg_id=msg_id)
        return
    row = columns.row
    for index in range(stop):
        subject, body, headers, row_id = row(index, default_subject)
        add(subject, body, headers=headers, msg_id=row_id)


__all__ = ["FastBatchShortError", "publish_fast"]

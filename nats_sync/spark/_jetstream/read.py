"""The "jetstream" source's executor side: one planned sequence range as Arrow batches.

How it works: Spark runs `read_range_batches` in a Python worker's task thread for each
`JsRange` the driver planned. It reads ``[lo, hi)`` of the stream through the worker's
shared client and hands Spark a record batch per run of messages: by default with a
temporary consumer (``Stream.get_msg_columns``, columns without an object per message:
about twice the rate of direct gets on one client), or by batched direct gets
(``readMode=direct``, ``Stream.get_msgs``). It keeps nothing between calls. Where the
range starts at the stream's head and the first message read is past ``lo``, it asks the
stream's state once more: messages removed between planning and reading are data loss,
reported as the driver would. Where the read ends short of ``hi``, one request to the
stream's leader tells deletes at the tail from a replica still catching up. A read cut
by a cluster's transient failure goes on from where it got to (``retry``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.compute as pc

from nats_sync.jetstream import JetStream, StoredColumns, StoredMsg, Stream
from nats_sync.jetstream._streams.wire import ns_from_time
from nats_sync.jetstream.errors import (
    ConsumerDeletedError,
    ConsumerNotFoundError,
    JetStreamError,
    MessageNotFoundError,
    StatusError,
)
from nats_sync.spark import _defaults as sd
from nats_sync.spark._jetstream.plan import SOURCE, JsRange, Planner
from nats_sync.spark._jetstream.retry import causes_of, is_transient
from nats_sync.spark._options import flat_headers

JS_READ_SCHEMA = (
    "stream string, seq long, subject string, data binary, headers map<string,string>, "
    "timestamp timestamp"
)
ARROW_SCHEMA = pa.schema(
    [
        ("stream", pa.string()),
        ("seq", pa.int64()),
        ("subject", pa.string()),
        ("data", pa.binary()),
        ("headers", pa.map_(pa.string(), pa.string())),
        ("timestamp", pa.timestamp("us", tz="UTC")),
    ]
)
_HEADERS_TYPE = ARROW_SCHEMA.field("headers").type
_TIMESTAMP_TYPE = ARROW_SCHEMA.field("timestamp").type


def read_range_batches(part: JsRange) -> Iterator[pa.RecordBatch]:
    """Yields the stored messages of ``part`` as record batches of `ARROW_SCHEMA`.

    A read cut by a cluster's transient failure (a node restart, a new leader for the
    stream or its reading consumer) goes on from the first sequence it had not yielded,
    with a new consumer, for as long as ``retryTimeout`` allows since it last got
    anywhere.

    Raises:
        DataLossError: messages at the head of the range went before they were read
            and ``failOnDataLoss`` is true.
        JetStreamError: the replica that answered stayed behind the stream's leader for
            longer than the read timeout.
        ClusterRetryTimeoutError: the read got nowhere for ``retryTimeout`` seconds.
    """
    settings = part.settings
    progress = _Progress(part.lo)
    retrying = settings.retry.retrying(
        f"{SOURCE}: reading sequences {part.lo}..{part.hi - 1} of stream {settings.stream!r}",
        retry_if=_resumable,
        last_progress=lambda: progress.at,
    )
    for attempt in retrying:
        with attempt:
            yield from _read_from(part, progress)


class _Progress:
    """How far one range's read got: the next sequence to yield, and when it moved."""

    def __init__(self, next_seq: int) -> None:
        self.next_seq = next_seq
        self.at = time.monotonic()

    def advance(self, next_seq: int) -> None:
        self.next_seq = next_seq
        self.at = time.monotonic()


def _resumable(error: BaseException) -> bool:
    """A cut a read goes on from: transient, or its consumer gone with a node or a new
    leader (409 Consumer Deleted or Leadership Change, 503 no responders to a pull)."""
    if is_transient(error):
        return True
    return any(
        isinstance(cause, ConsumerDeletedError | ConsumerNotFoundError)
        or (isinstance(cause, StatusError) and cause.status in (409, 503))
        for cause in causes_of(error)
    )


def _read_from(part: JsRange, progress: _Progress) -> Iterator[pa.RecordBatch]:
    """One attempt at the rest of ``part``, from ``progress.next_seq``."""
    settings = part.settings
    js = settings.jetstream()
    stream = js.stream(settings.stream)
    behind_since: float | None = None
    while progress.next_seq < part.hi:
        for run in _runs(stream, part, progress.next_seq):
            if progress.next_seq == part.lo and part.check_head and run.seqs[0] > part.lo:
                _check_head(part)
            progress.advance(run.seqs[-1] + 1)
            yield _batch(settings.stream, run, settings.include_headers)
        if progress.next_seq == part.lo and part.check_head:
            _check_head(part)
        if progress.next_seq >= part.hi:
            return
        # The read ended short of the range. Messages deleted or filtered out at its tail
        # are fine; a replica (consumer or direct get) behind the leader that planned the
        # range is not: ask the leader what is stored next, and read again if it is ours.
        missing = _next_stored_seq(
            js, settings.stream, progress.next_seq, settings.subject, settings.timeout
        )
        if missing is None or missing >= part.hi:
            return
        now = time.monotonic()
        behind_since = behind_since if behind_since is not None else now
        if now - behind_since > settings.timeout:
            raise JetStreamError(
                f"{SOURCE}: stream {settings.stream!r}: the replica read stays behind its "
                f"leader (sequence {missing} is stored but was not delivered within "
                f"{settings.timeout}s)"
            )
        time.sleep(sd.SPARK_JS_LAG_RETRY_WAIT)
        progress.next_seq = missing


def _runs(stream: Stream, part: JsRange, start: int) -> Iterator[StoredColumns]:
    settings = part.settings
    batch = min(settings.fetch_batch, part.hi - start)
    if part.direct:
        return _direct_runs(
            stream.get_msgs(
                start,
                subject=settings.subject,
                end_seq=part.hi - 1,
                batch=batch,
                direct=True,
                timeout=settings.timeout,
            )
        )
    return stream.get_msg_columns(
        start, subject=settings.subject, end_seq=part.hi - 1, batch=batch, timeout=settings.timeout
    )


def _next_stored_seq(
    js: JetStream, stream: str, seq: int, subject: str | None, timeout: float
) -> int | None:
    """The leader's answer: the first stored sequence >= ``seq`` (on ``subject``)."""
    try:
        reply = js.api.request(
            f"STREAM.MSG.GET.{stream}", {"seq": seq, "next_by_subj": subject or ">"}, timeout
        )
    except MessageNotFoundError:
        return None
    found = (reply.get("message") or {}).get("seq")
    return found if isinstance(found, int) else None


def _direct_runs(messages: Iterator[StoredMsg]) -> Iterator[StoredColumns]:
    """Direct-get reads (one object per message) as runs of columns."""
    run = StoredColumns()
    for message in messages:
        run.seqs.append(message.seq)
        run.subjects.append(message.subject)
        run.datas.append(message.data)
        run.headers.append(message.headers)
        run.times_ns.append(0 if message.time is None else ns_from_time(message.time))
        if len(run) >= sd.SPARK_JS_ROWS_PER_BATCH:
            yield run
            run = StoredColumns()
    if run.seqs:
        yield run


def _check_head(part: JsRange) -> None:
    planner = Planner(part.settings)
    info = planner.info()
    if info.state.first_seq > part.lo:
        planner.checked_start(planner.offset(part.lo, info), info)


def _batch(stream: str, run: StoredColumns, include_headers: bool) -> pa.RecordBatch:
    count = len(run.seqs)
    headers = (
        pa.array([flat_headers(h) if h else None for h in run.headers], _HEADERS_TYPE)
        if include_headers
        else pa.nulls(count, _HEADERS_TYPE)
    )
    # Server stamps are nanoseconds; Spark keeps microseconds.
    micros = pc.divide(pa.array(run.times_ns, pa.int64()), 1000)
    return pa.RecordBatch.from_arrays(
        [
            pa.array([stream] * count, pa.string()) if count else pa.array([], pa.string()),
            pa.array(run.seqs, pa.int64()),
            pa.array(run.subjects, pa.string()),
            pa.array(run.datas, pa.binary()),
            headers,
            micros.cast(_TIMESTAMP_TYPE),
        ],
        schema=ARROW_SCHEMA,
    )


__all__ = ["ARROW_SCHEMA", "JS_READ_SCHEMA", "read_range_batches"]

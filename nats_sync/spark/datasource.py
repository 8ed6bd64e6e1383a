"""The "nats" Python data source: batch and streaming writes, streaming reads.

How it works: Spark pickles `NatsDataSource` (by reference to this module) to its
Python workers. Writers run in task processes: each task publishes its rows through the
worker's shared client (see ``_worker``), flushes, and returns its row count; a flush
that fails fails the task, so Spark's task retry gives at-least-once delivery. The
streaming reader lives in one long-lived Python process across micro-batches and holds a
subscription there; its delivery thread stamps each message and puts it in a bounded
buffer that each micro-batch empties. Core NATS keeps no history, so the read side is
at-most-once: what the buffer drops (counted, logged) or holds when the query stops is
lost.
"""

from __future__ import annotations

import logging
import queue
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    SimpleDataSourceStreamReader,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from nats_sync._core.components.subscription import Subscription
from nats_sync.errors import Error, InvalidArgumentError
from nats_sync.msg import Msg
from nats_sync.spark._options import (
    SourceSettings,
    check_message_columns,
    flat_headers,
    parse_source_options,
)
from nats_sync.spark._worker import worker_client

logger = logging.getLogger("nats_sync.spark")

READ_SCHEMA = (
    "subject string, reply string, data binary, headers map<string,string>, received_at timestamp"
)
_WRITE_COLUMNS = {"data", "subject", "reply", "headers"}


@dataclass
class NatsCommitMessage(WriterCommitMessage):
    """What one write task reports to the driver."""

    rows: int
    partition_id: int


class NatsDataSource(DataSource):
    """``format("nats")``: see `nats_sync.spark` for the options and columns."""

    @classmethod
    def name(cls) -> str:
        """The format name, ``"nats"``."""
        return "nats"

    def schema(self) -> str:
        """The columns a streaming read yields."""
        return READ_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        """Refuses batch reads: core NATS keeps no history to read back."""
        raise InvalidArgumentError(
            "the nats data source has no batch read: core NATS keeps no history; "
            "use spark.readStream.format('nats') to consume live messages"
        )

    def writer(self, schema: StructType, overwrite: bool) -> NatsBatchWriter:
        """A writer that publishes every row; only ``mode("append")`` is accepted."""
        return NatsBatchWriter(self._write_settings(schema, overwrite))

    def streamWriter(self, schema: StructType, overwrite: bool) -> NatsStreamWriter:
        """The streaming counterpart of `writer`, committing per micro-batch."""
        return NatsStreamWriter(self._write_settings(schema, overwrite))

    def simpleStreamReader(self, schema: StructType) -> NatsStreamReader:
        """A reader holding one subscription for the life of the query."""
        return NatsStreamReader(parse_source_options(self.options, need_subject=True))

    def _write_settings(self, schema: StructType, overwrite: bool) -> SourceSettings:
        if overwrite:
            raise InvalidArgumentError("the nats data source only appends: use .mode('append')")
        settings = parse_source_options(self.options, need_subject=False)
        check_write_schema(schema, has_subject_option=settings.subject is not None)
        return settings


def check_write_schema(schema: StructType, *, has_subject_option: bool) -> None:
    """Checks the columns of a DataFrame to be published, before any task starts.

    Raises:
        InvalidArgumentError: a missing ``data`` column, an unknown column, a column of the wrong
            type, or no subject at all (neither option nor column).
    """
    columns = {field.name: field.dataType for field in schema.fields}
    unknown = sorted(set(columns) - _WRITE_COLUMNS)
    if "data" in columns and unknown:
        raise InvalidArgumentError(
            f"nats data source: unknown column(s) {unknown}; "
            "allowed are data, subject, reply, headers"
        )
    check_message_columns(
        "nats data source", columns, ("subject", "reply"), has_subject_option=has_subject_option
    )


def publish_batches(settings: SourceSettings, batches: Iterator[pa.RecordBatch]) -> int:
    """Publishes every row of ``batches`` and flushes; returns how many rows were sent.

    Raises:
        RuntimeError: a row could not be published or the final flush failed; the
            message says how many rows were sent and why.
    """
    client = worker_client(list(settings.servers), settings.connect_kwargs)
    sent = 0
    try:
        for batch in batches:
            sent += _publish_batch(client, settings, batch, first_row=sent)
        client.flush(settings.timeout)
    except Error as error:
        raise RuntimeError(
            f"nats data source: could not publish to {', '.join(settings.servers)} "
            f"({sent} rows sent in this task before the failure): {error}"
        ) from error
    return sent


def _publish_batch(
    client: Any, settings: SourceSettings, batch: pa.RecordBatch, first_row: int
) -> int:
    names = batch.schema.names
    data = batch.column("data").to_pylist()
    subjects = _column(batch, names, "subject")
    replies = _column(batch, names, "reply")
    headers = _column(batch, names, "headers")
    for index, value in enumerate(data):
        subject = (subjects[index] if subjects else None) or settings.subject
        if subject is None:
            raise InvalidArgumentError(
                f"nats data source: row {first_row + index} has a null 'subject' "
                "and no 'subject' option is set"
            )
        payload = value.encode() if isinstance(value, str) else value
        row_headers = headers[index] if headers else None
        client.publish(
            subject,
            payload or b"",
            reply=(replies[index] if replies else None) or "",
            headers=dict(row_headers) if row_headers else None,
        )
    return len(data)


def _column(batch: pa.RecordBatch, names: Sequence[str], name: str) -> list[Any] | None:
    return batch.column(name).to_pylist() if name in names else None


def _partition_id() -> int:
    context = TaskContext.get()
    return context.partitionId() if context is not None else -1


class NatsBatchWriter(DataSourceArrowWriter):
    """Publishes the rows of one ``df.write.format("nats")`` job."""

    def __init__(self, settings: SourceSettings) -> None:
        self.settings = settings

    def write(self, iterator: Iterator[pa.RecordBatch]) -> NatsCommitMessage:
        """Publishes one task's rows (runs in a worker)."""
        return NatsCommitMessage(publish_batches(self.settings, iterator), _partition_id())

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Logs the total once every task has flushed (runs on the driver)."""
        total = sum(m.rows for m in messages if isinstance(m, NatsCommitMessage))
        logger.info("nats data source: published %d rows in %d tasks", total, len(messages))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Logs what the successful tasks had already published before the job failed."""
        total = sum(m.rows for m in messages if isinstance(m, NatsCommitMessage))
        logger.warning("nats data source: write failed after %d rows were published", total)


class NatsStreamWriter(DataSourceStreamArrowWriter):
    """Publishes the rows of each micro-batch of ``df.writeStream.format("nats")``."""

    def __init__(self, settings: SourceSettings) -> None:
        self.settings = settings

    def write(self, iterator: Iterator[pa.RecordBatch]) -> NatsCommitMessage:
        """Publishes one task's rows of a micro-batch (runs in a worker)."""
        return NatsCommitMessage(publish_batches(self.settings, iterator), _partition_id())

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Logs the micro-batch's total (runs on the driver)."""
        total = sum(m.rows for m in messages if isinstance(m, NatsCommitMessage))
        logger.info("nats data source: micro-batch %d published %d rows", batchId, total)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Logs a failed micro-batch."""
        logger.warning("nats data source: micro-batch %d failed", batchId)


class NatsStreamReader(SimpleDataSourceStreamReader):
    """Feeds live messages of one subject into a streaming query.

    The offset is the count of messages handed to Spark so far. Messages arriving while
    the buffer holds ``max_buffered`` are dropped, counted in `dropped` and logged (the
    subscription in front of the buffer has the same bound and reports its own drops as
    slow-consumer errors).
    """

    def __init__(self, settings: SourceSettings) -> None:
        self.settings = settings
        self.buffer_dropped = 0
        self._subscription: Subscription | None = None
        # Made on first use: Spark pickles the reader before it runs, and a live buffer
        # (a lock inside) cannot travel.
        self._buffer: queue.Queue[tuple[Any, ...]] | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {
            "settings": self.settings,
            "buffer_dropped": 0,
            "_subscription": None,
            "_buffer": None,
        }

    @property
    def dropped(self) -> int:
        """Messages lost so far: by the full buffer, or by the subscription in front of it."""
        in_transit = self._subscription.dropped if self._subscription is not None else 0
        return self.buffer_dropped + in_transit

    def _subscribe(self) -> queue.Queue[tuple[Any, ...]]:
        # Spark calls initialOffset/read/commit one at a time, from one thread.
        if self._buffer is not None:
            return self._buffer
        buffer: queue.Queue[tuple[Any, ...]] = queue.Queue(self.settings.max_buffered)
        self._buffer = buffer
        client = worker_client(list(self.settings.servers), self.settings.connect_kwargs)
        assert self.settings.subject is not None
        self._subscription = client.subscribe(
            self.settings.subject,
            queue=self.settings.queue,
            cb=self._on_message,
            pending_msgs_limit=self.settings.max_buffered,
        )
        client.flush(self.settings.timeout)  # interest is registered before we report
        return buffer

    def _on_message(self, msg: Msg) -> None:
        row = (
            msg.subject,
            msg.reply or None,
            msg.data,
            flat_headers(msg.headers),
            datetime.now(timezone.utc),
        )
        assert self._buffer is not None  # subscribed only after the buffer exists
        try:
            self._buffer.put_nowait(row)
        except queue.Full:
            self.buffer_dropped += 1
            if self.buffer_dropped == 1 or self.buffer_dropped % 10_000 == 0:
                logger.warning(
                    "nats data source: buffer of %d messages full on %r, %d dropped so far",
                    self.settings.max_buffered,
                    self.settings.subject,
                    self.dropped,
                )

    def initialOffset(self) -> dict[str, int]:
        """Subscribes and starts counting from zero."""
        self._subscribe()
        return {"received": 0}

    def read(self, start: dict[str, int]) -> tuple[Iterator[tuple[Any, ...]], dict[str, int]]:
        """Hands over what is buffered (at most ``max_rows_per_batch`` rows)."""
        buffer = self._subscribe()
        rows: list[tuple[Any, ...]] = []
        while len(rows) < self.settings.max_rows_per_batch:
            try:
                rows.append(buffer.get_nowait())
            except queue.Empty:
                break
        return iter(rows), {"received": int(start.get("received", 0)) + len(rows)}

    def readBetweenOffsets(
        self, start: dict[str, int], end: dict[str, int]
    ) -> Iterator[tuple[Any, ...]]:
        """Cannot replay: core NATS keeps no history, so a recovered batch is empty."""
        logger.warning(
            "nats data source: cannot replay messages %s..%s after a restart "
            "(core NATS is at-most-once); they are lost",
            start,
            end,
        )
        return iter([])

    def commit(self, end: dict[str, int]) -> None:
        """Nothing to acknowledge in core NATS."""

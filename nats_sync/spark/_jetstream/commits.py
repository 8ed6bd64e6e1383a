"""The commit log of streaming writes: which micro-batches of which query are written.

Why: Spark replays a micro-batch whose commit it did not record in the checkpoint (the
driver died after the tasks wrote, or the checkpoint's ``commits/<n>`` file is lost).
Message ids make the stream drop the replayed rows only within its
``duplicate_window``; this log makes the replay write nothing at any later time.

How it works: one key-value bucket (option ``commitBucket``, default ``spark_commits``,
created on the driver when the query starts if it is missing; an existing bucket is used
as it is, so a deployment may make it beforehand with a ``ttl`` longer than its longest
restart, to bound its size: one small entry per micro-batch). Key
``<queryId>.<batchId>``: the query id is the checkpoint's persistent ``id`` (the same
across restarts, unlike the ``runId``), which Spark passes to every task of a
micro-batch as the local property ``sql.streaming.queryId`` beside
``streaming.sql.batchId``. Each write task first looks its key up: found, it writes
nothing. The driver's ``commit(messages, batchId)`` puts the key once every task has
written (a put, so a commit Spark repeats is harmless). State: a `PerClient` cache of
bound buckets per process.

Failure handling (decided here, documented in the sink):

- A task that cannot read the log fails (Spark retries it): writing without knowing
  could write a recorded batch twice.
- A failed record on the driver is logged as a warning and the commit goes on: Spark
  then records the batch in the checkpoint, so it is not replayed. Failing the commit
  instead would make Spark replay a batch that the log does not hold, the very case the
  log is for.
- The window that remains: the driver dies (or the record fails and the checkpoint's
  commit is then lost too) after the tasks wrote and before the record. The replay then
  writes the batch again, and only message ids within the stream's duplicate window
  keep it from being stored twice.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable, Sequence

from pyspark import TaskContext

from nats_sync.client import Client
from nats_sync.errors import Error
from nats_sync.jetstream import BucketNotFoundError, JetStream, KeyNotFoundError, KeyValue
from nats_sync.spark._jetstream.retry import RetryPolicy, is_transient_publish
from nats_sync.spark._worker import PerClient

logger = logging.getLogger("nats_sync.spark")

DEFAULT_COMMIT_BUCKET = "spark_commits"
#: Local properties Spark's micro-batch execution sets for every task of a batch.
QUERY_ID_PROPERTY = "sql.streaming.queryId"
RUN_ID_PROPERTY = "sql.streaming.runId"
BATCH_ID_PROPERTY = "streaming.sql.batchId"
#: Key characters the log keeps as they are; any other becomes ``_`` (``.`` too: it
#: separates the query id from the batch id).
_UNSAFE_KEY_CHARS = re.compile(r"[^-_=a-zA-Z0-9]")

_buckets: PerClient[KeyValue] = PerClient()


def commit_key(query_id: str, batch_id: int) -> str:
    """The log's key of micro-batch ``batch_id`` of query ``query_id``.

    The query id (a UUID from Spark) is sanitized to valid key characters.
    """
    return f"{_UNSAFE_KEY_CHARS.sub('_', query_id) or '_'}.{batch_id}"


def current_micro_batch() -> tuple[str, int, str | None] | None:
    """(query id, batch id, run id) of the micro-batch the calling task writes.

    None outside a streaming task (a batch write, or a Spark that sets no such
    properties).
    """
    context = TaskContext.get()
    if context is None:
        return None
    query_id = context.getLocalProperty(QUERY_ID_PROPERTY)
    batch_id = context.getLocalProperty(BATCH_ID_PROPERTY)
    if not query_id or batch_id is None:
        return None
    try:
        return str(query_id), int(batch_id), context.getLocalProperty(RUN_ID_PROPERTY)
    except ValueError:
        return None


def open_log(js: JetStream, bucket: str) -> KeyValue:
    """The bucket, created (one value per key, file storage) if missing: on the driver.

    Raises:
        nats_sync.Error: the bucket could not be bound or created.
    """
    try:
        return js.key_value(bucket)
    except BucketNotFoundError:
        # Two queries starting at once may both create it: the same config is fine.
        return js.create_key_value(
            bucket=bucket, history=1, description="nats_sync Spark streaming commit log"
        )


def bound_log(client: Client, js: JetStream, bucket: str) -> KeyValue:
    """This process's handle on the bucket (bound once per client; ``js`` is a context
    on ``client``)."""
    return _buckets.get(client, (bucket, js.domain, js.timeout), lambda: js.key_value(bucket))


def is_recorded(log: KeyValue, key: str) -> bool:
    """Whether the log holds ``key`` (a deleted or purged key counts as not recorded).

    Raises:
        nats_sync.Error: the log could not be read.
    """
    try:
        log.get(key)
    except KeyNotFoundError:
        return False
    return True


def record(
    open_log: Callable[[], KeyValue],
    retry: RetryPolicy,
    key: str,
    *,
    rows: int,
    tasks: int,
    run_ids: Sequence[str],
) -> bool:
    """Puts ``key`` in the log ``open_log()`` gives, riding through transient failures
    as ``retry`` allows; on failure (binding the bucket or the put) logs a warning (see
    the module doc) and returns False."""
    value = json.dumps(
        {"rows": rows, "tasks": tasks, "run_ids": sorted(run_ids), "committed_at": time.time()}
    ).encode()
    try:
        retry.call(
            f"jetstream sink: recording micro-batch {key} in the commit log",
            lambda: open_log().put(key, value),
            # The bucket was bound, so no stream answering is its stream electing a leader.
            retry_if=is_transient_publish,
        )
    except Error as error:
        logger.warning(
            "jetstream sink: could not record micro-batch %s in the commit log (%s); the "
            "commit goes on, so Spark's checkpoint still records it, but a replay of this "
            "batch (its checkpoint commit lost) would write it again, stored once only "
            "within the stream's duplicate_window with message ids",
            key,
            error,
        )
        return False
    return True


__all__ = [
    "BATCH_ID_PROPERTY",
    "DEFAULT_COMMIT_BUCKET",
    "QUERY_ID_PROPERTY",
    "RUN_ID_PROPERTY",
    "bound_log",
    "commit_key",
    "current_micro_batch",
    "is_recorded",
    "open_log",
    "record",
]

"""The "jetstream" sink: ``df.write`` / ``df.writeStream`` ``.format("jetstream")``.

How it works: on the driver, `batch_writer` / `stream_writer` check the options and the
DataFrame's columns (so a typo fails before any task starts), settle ``publishMode``
("auto": one stream lookup of the ``subject`` option) and, for streaming, make sure the
commit log's bucket exists; they return a writer holding only plain settings (Spark
pickles it to the tasks). In each write task (a Spark Python worker, on the task's
thread) the worker's one client (``_worker``) gives a JetStream context, cached per
process for that client and settings; a streaming task first asks the commit log
whether its micro-batch was written already (then it writes nothing). The rows (each
Arrow batch made into lists by ``rows``) are published in one of two ways:

- ``publishMode`` "async": every row with ``publish_async`` (at most ``maxPendingAcks``
  acknowledgements awaited at once, on the context's reply subscription and ack timer
  threads), then the task waits for every acknowledgement. A negative, failed or
  missing acknowledgement (no stream stores the subject, the stream refused the
  message, no ack within ``timeout``) fails the task with a `RuntimeError` saying how
  many of its rows were acknowledged, and Spark runs the task again. An ack still
  awaited ``SPARK_JS_ACKS_AFTER_RECONNECT`` seconds after the client reconnected, or
  after a later publish found no stream answering, is taken as lost with the old
  connection or the dead stream leader (a transient failure: the task sends its rows
  again within ``retryTimeout``).
- ``publishMode`` "fast" (``fast``): the task's rows as one fast-ingest batch with
  gap ``fail``, its last row the commit; the server's count of stored rows must equal
  the rows sent, or the task fails naming both numbers.
- "auto" (the default) is "fast" where the stream storing the ``subject`` option allows
  batched publishing (``allow_batched``), else "async"; without a ``subject`` option
  (rows name their subjects) it is "async".

The task reports its rows (and, when known, the duplicates the stream ignored) to the
driver, which logs them in ``commit``. State touched: the worker's client cache and this
module's cache of JetStream contexts (``_worker.PerClient``).

Exactly-once into JetStream: give each row a message id (a ``msg_id`` column, or option
``msgIdColumns``: columns whose values joined with ``:`` make the id, e.g.
``"stream,seq"`` of a ``format("jetstream")`` read). The stream stores a message id once
within its ``duplicate_window`` (default 2 minutes; set when the stream is created):
a retried task that publishes the same ids again within that window stores nothing
twice (the acks say ``duplicate``; a fast batch counts them as taken). Streaming writes
also keep a commit log (``commits``, option ``commitBucket``): a micro-batch the
log holds is not written again when Spark replays it, however late, so a replay does
not depend on the window; what remains is a crash after the tasks wrote and before the
driver recorded the batch, where the window and the message ids still apply. Without
message ids the sink is at-least-once.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ByteType,
    DataType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructType,
)

from nats_sync import _defaults as d
from nats_sync._core.proto import publish_subject
from nats_sync.errors import Error, InvalidArgumentError
from nats_sync.jetstream import JetStream, KeyValue
from nats_sync.jetstream._streams.wire import check_bucket_name, check_domain
from nats_sync.spark import _defaults as sd
from nats_sync.spark._jetstream import commits
from nats_sync.spark._jetstream.async_publish import publish_async
from nats_sync.spark._jetstream.fast import FastBatchShortError, publish_fast
from nats_sync.spark._jetstream.retry import (
    ClusterRetryTimeoutError,
    KeptInput,
    RetryPolicy,
    causes_of,
    is_transient,
    is_transient_publish,
)
from nats_sync.spark._jetstream.rows import SINK
from nats_sync.spark._options import (
    CONNECT_OPTIONS,
    check_known,
    check_message_columns,
    connection_options,
    lowered_options,
    positive_float,
    positive_int,
    retry_timeout,
)
from nats_sync.spark._worker import PerClient, worker_client

logger = logging.getLogger("nats_sync.spark")

_SINK = SINK
DEFAULT_MAX_PENDING_ACKS = d.DEFAULT_JS_MAX_PENDING_ACKS
#: ``publishMode`` values; "auto" is settled on the driver into one of the other two.
PUBLISH_MODES = ("auto", "fast", "async")
DEFAULT_PUBLISH_MODE = "auto"
#: Option names as users write them; Spark hands them over in any case.
_OPTION_NAMES = {
    "subject": "subject",
    "timeout": "timeout",
    "domain": "domain",
    "msgidcolumns": "msgIdColumns",
    "maxpendingacks": "maxPendingAcks",
    "publishmode": "publishMode",
    "commitbucket": "commitBucket",
    "retrytimeout": "retryTimeout",
}
_COLUMNS = ("data", "subject", "headers", "msg_id")
_MSG_ID_PART_TYPES = (StringType, ByteType, ShortType, IntegerType, LongType)


@dataclass(frozen=True)
class SinkSettings:
    """Validated settings of one JetStream write (picklable: plain data only)."""

    servers: tuple[str, ...]
    connect_options: tuple[tuple[str, Any], ...] = ()
    subject: str | None = None
    timeout: float = sd.SPARK_JS_ACK_TIMEOUT
    domain: str | None = None
    max_pending_acks: int = DEFAULT_MAX_PENDING_ACKS
    msg_id_columns: tuple[str, ...] = ()
    publish_mode: str = DEFAULT_PUBLISH_MODE
    commit_bucket: str = commits.DEFAULT_COMMIT_BUCKET
    retry_timeout: float = sd.SPARK_JS_RETRY_TIMEOUT

    @property
    def connect_kwargs(self) -> dict[str, Any]:
        """The keywords for `worker_client` (``servers`` excluded)."""
        return dict(self.connect_options)

    @property
    def retry(self) -> RetryPolicy:
        """How the sink's calls ride through a cluster's transient failures."""
        return RetryPolicy(budget=self.retry_timeout, servers=self.servers)


@dataclass
class JetStreamCommitMessage(WriterCommitMessage):
    """What one write task reports to the driver.

    Attributes:
        rows: rows the stream acknowledged (duplicates included).
        duplicates: of those, the ones the stream had already stored (same message id
            within its duplicate window): a retried task's or a replayed batch's rows;
            None where the publish mode does not say (a fast batch that stored some).
        partition_id: the task's partition.
        publish_mode: "fast" or "async".
        query_id: a streaming write's persistent query id (None for a batch write).
        batch_id: a streaming write's micro-batch id (None for a batch write).
        run_id: the query run that wrote (it changes on each restart).
        skipped: the commit log held the micro-batch already: the task wrote nothing.
    """

    rows: int
    duplicates: int | None
    partition_id: int
    publish_mode: str = "async"
    query_id: str | None = None
    batch_id: int | None = None
    run_id: str | None = None
    skipped: bool = False


# --- the driver: options and columns ---------------------------------------------------


def parse_sink_options(
    options: Mapping[str, str], schema: StructType, overwrite: bool, *, streaming: bool = False
) -> SinkSettings:
    """Checks the options and the DataFrame's columns before any task starts.

    Nothing is asked of the server here (``publishMode`` "auto" stays "auto"; see
    `resolve_publish_mode`).

    Args:
        options: what Spark passes to the data source (keys in any case).
        schema: the columns of the DataFrame being written.
        overwrite: whether the write is not in append mode.
        streaming: whether it is a streaming write (``commitBucket`` is only for those).

    Returns:
        The settings the tasks use.

    Raises:
        InvalidArgumentError: overwrite mode, an unknown option or column, a value of the
            wrong kind, a column of the wrong type, no subject at all, a ``reply``
            column, ``msgIdColumns`` naming a missing column or given beside a
            ``msg_id`` column, a ``publishMode`` other than auto, fast or async, or a
            ``commitBucket`` that is not a bucket name or given to a batch write; the
            message names it.
    """
    if overwrite:
        raise InvalidArgumentError(f"{_SINK}: a stream is only appended to: use .mode('append')")
    given = lowered_options(options)
    check_known(_SINK, given, set(CONNECT_OPTIONS) | set(_OPTION_NAMES))
    servers, connect = connection_options(_SINK, given)
    subject = given.get("subject") or None
    if subject is not None:
        _check_subject_option(subject)
    domain = given.get("domain") or None
    try:
        check_domain(domain)
    except InvalidArgumentError as bad:
        raise InvalidArgumentError(f"{_SINK}: option 'domain': {bad}") from None
    id_columns = tuple(
        name.strip() for name in given.get("msgidcolumns", "").split(",") if name.strip()
    )
    if "msgidcolumns" in given and not id_columns:
        raise InvalidArgumentError(
            f"{_SINK}: option 'msgIdColumns' names no column (comma-separated column names)"
        )
    check_sink_schema(schema, has_subject_option=subject is not None, msg_id_columns=id_columns)
    mode = given.get("publishmode", DEFAULT_PUBLISH_MODE).strip().lower()
    if mode not in PUBLISH_MODES:
        raise InvalidArgumentError(
            f"{_SINK}: option 'publishMode' must be one of {', '.join(PUBLISH_MODES)}, "
            f"got {given['publishmode']!r}"
        )
    return SinkSettings(
        servers=servers,
        connect_options=connect,
        subject=subject,
        timeout=positive_float(
            "timeout", given.get("timeout", str(sd.SPARK_JS_ACK_TIMEOUT)), _SINK
        ),
        domain=domain,
        max_pending_acks=positive_int(
            "maxPendingAcks", given.get("maxpendingacks", str(DEFAULT_MAX_PENDING_ACKS)), _SINK
        ),
        msg_id_columns=id_columns,
        publish_mode=mode,
        commit_bucket=_commit_bucket_option(given, streaming),
        retry_timeout=retry_timeout(given, _SINK),
    )


def _commit_bucket_option(given: Mapping[str, str], streaming: bool) -> str:
    if "commitbucket" not in given:
        return commits.DEFAULT_COMMIT_BUCKET
    if not streaming:
        # Said rather than ignored: a batch write keeps no log, and nothing should
        # suggest that it is exactly-once across re-runs beyond the duplicate window.
        raise InvalidArgumentError(
            f"{_SINK}: option 'commitBucket' is for streaming writes (writeStream) only; "
            "a batch write keeps no commit log"
        )
    try:
        return check_bucket_name(given["commitbucket"])
    except InvalidArgumentError as bad:
        raise InvalidArgumentError(f"{_SINK}: option 'commitBucket': {bad}") from None


def resolve_publish_mode(settings: SinkSettings) -> SinkSettings:
    """Settles ``publishMode`` on the driver: "auto" becomes "fast" or "async", and
    "fast" is checked against the stream where the driver can know it.

    With a ``subject`` option, one request (``STREAM.LIST`` filtered by the subject:
    the stream's info) gives the stream's config: "auto" is "fast" if it has
    ``allow_batched``. Without one the rows name their subjects: "auto" is "async" and
    "fast" is checked by the tasks. No stream for the subject: "auto" is "async" (the
    tasks then fail saying so, as before), "fast" fails here.

    Raises:
        InvalidArgumentError: "fast" and the stream storing the subject does not allow
            batched publishing, or no stream stores it.
        RuntimeError: the stream could not be looked up (the server is unreachable...).
    """
    if settings.subject is None or settings.publish_mode == "async":
        if settings.publish_mode != "auto":
            return settings
        return dataclasses.replace(settings, publish_mode="async")
    subject = settings.subject

    def lookup() -> Any:
        found = next(iter(_api_calls(settings).list_streams(subject)), None)
        if found is None and settings.publish_mode == "fast":
            # While a node restarts the listing may miss a stream it holds: asked for
            # "fast", a missing stream is asked about again within the retry budget.
            raise _NoStreamListed(f"no stream stores subject {subject!r}")
        return found

    try:
        stream = settings.retry.call(
            f"{_SINK}: STREAM.LIST of the stream storing {subject!r}",
            lookup,
            retry_if=_worth_looking_up_again,
        )
    except ClusterRetryTimeoutError as spent:
        if isinstance(spent.__cause__, _NoStreamListed):
            raise InvalidArgumentError(
                f"{_SINK}: publishMode 'fast': no stream stores subject {subject!r} "
                f"(asked for {settings.retry_timeout:g}s, option 'retryTimeout')"
            ) from None
        raise RuntimeError(
            f"{_SINK}: publishMode {settings.publish_mode!r}: could not look up the stream "
            f"storing {subject!r} on {', '.join(settings.servers)}: {spent}"
        ) from spent
    except Error as error:
        raise RuntimeError(
            f"{_SINK}: publishMode {settings.publish_mode!r}: could not look up the stream "
            f"storing {subject!r} on {', '.join(settings.servers)}: {error}"
        ) from error
    allowed = stream is not None and bool(stream.config.allow_batched)
    if settings.publish_mode == "fast" and not allowed:
        if stream is None:
            raise InvalidArgumentError(
                f"{_SINK}: publishMode 'fast': no stream stores subject {subject!r}"
            )
        raise InvalidArgumentError(
            f"{_SINK}: publishMode 'fast' needs a stream that allows fast-ingest batches, "
            f"but stream {stream.config.name!r} (storing {subject!r}) has allow_batched "
            "off; create or update it with allow_batched=True (nats-server 2.14+), or use "
            "publishMode 'async'"
        )
    mode = "fast" if allowed else "async"
    logger.info(
        "%s: publishMode %s for subject %r (stream %s)",
        _SINK,
        mode,
        subject,
        stream.config.name if stream is not None else "none",
    )
    return dataclasses.replace(settings, publish_mode=mode)


class _NoStreamListed(Exception):  # noqa: N818 (a signal to the retry)
    """The stream listing named no stream for the sink's subject (maybe for a moment).

    Raised out only with no retry budget: to `stream_writer`, when a later micro-batch's
    writer asks once.
    """


def _worth_looking_up_again(error: BaseException) -> bool:
    """A stream lookup that failed for a moment: transient, or no stream listed."""
    return is_transient(error) or isinstance(error, _NoStreamListed)


def _check_subject_option(subject: str) -> None:
    try:
        publish_subject(subject)
    except InvalidArgumentError as bad:
        raise InvalidArgumentError(f"{_SINK}: option 'subject': {bad}") from None


def check_sink_schema(
    schema: StructType, *, has_subject_option: bool, msg_id_columns: Sequence[str]
) -> None:
    """Checks the columns of a DataFrame to be published to JetStream.

    ``data`` (binary or string) is required; ``subject`` (string), ``headers``
    (map<string,string>) and ``msg_id`` (string) are optional; the columns named by
    ``msgIdColumns`` (string or integer) are allowed besides.

    Raises:
        InvalidArgumentError: what is wrong, naming the column.
    """
    columns: dict[str, DataType] = {field.name: field.dataType for field in schema.fields}
    if "reply" in columns:
        raise InvalidArgumentError(
            f"{_SINK}: column 'reply' is not allowed: a JetStream publish has no reply "
            "subject (the stream's acknowledgement is the reply); drop the column or write "
            "with format('nats')"
        )
    if "data" not in columns:
        raise InvalidArgumentError(f"{_SINK}: the DataFrame needs a 'data' column")
    missing = [name for name in msg_id_columns if name not in columns]
    if missing:
        raise InvalidArgumentError(
            f"{_SINK}: option 'msgIdColumns' names column(s) {missing} the DataFrame does "
            f"not have (it has {sorted(columns)})"
        )
    if msg_id_columns and "msg_id" in columns:
        raise InvalidArgumentError(
            f"{_SINK}: give either a 'msg_id' column or option 'msgIdColumns', not both"
        )
    unknown = sorted(set(columns) - set(_COLUMNS) - set(msg_id_columns))
    if unknown:
        raise InvalidArgumentError(
            f"{_SINK}: unknown column(s) {unknown}; allowed are data, subject, headers, "
            "msg_id and the columns named in option 'msgIdColumns'"
        )
    for name in msg_id_columns:
        if not isinstance(columns[name], _MSG_ID_PART_TYPES):
            raise InvalidArgumentError(
                f"{_SINK}: column {name!r} of option 'msgIdColumns' must be a string or an "
                f"integer, not {columns[name]}"
            )
    check_message_columns(
        _SINK, columns, ("subject", "msg_id"), has_subject_option=has_subject_option
    )


# --- the tasks: publishing with acknowledgements -------------------------------------------

#: This process's JetStream contexts, one per client and settings: one ack subscription
#: for all the tasks this worker runs, instead of one per task lingering until it idles.
_contexts: PerClient[JetStream] = PerClient()


def _jetstream(settings: SinkSettings) -> JetStream:
    client = worker_client(list(settings.servers), settings.connect_kwargs)
    # stall_wait = the ack timeout: a full window frees up as acks come or expire.
    return _contexts.get(
        client,
        (settings.domain, settings.timeout, settings.max_pending_acks),
        lambda: client.jetstream(
            domain=settings.domain,
            timeout=settings.timeout,
            max_pending_acks=settings.max_pending_acks,
            stall_wait=settings.timeout,
        ),
    )


def _api_calls(settings: SinkSettings) -> JetStream:
    """The context of the sink's API calls (stream lookup, the commit log): each waits
    at most the source's per-call default, shorter than an ack may take, so a call a
    dead node's leader never answers is asked again sooner, within ``retryTimeout``."""
    client = worker_client(list(settings.servers), settings.connect_kwargs)
    timeout = min(settings.timeout, sd.SPARK_JS_TIMEOUT)
    return _contexts.get(
        client,
        (settings.domain, timeout, "api calls"),
        lambda: client.jetstream(domain=settings.domain, timeout=timeout),
    )


def _commit_log(settings: SinkSettings) -> KeyValue:
    """This process's handle on the streaming commit log's bucket."""
    client = worker_client(list(settings.servers), settings.connect_kwargs)
    return commits.bound_log(client, _api_calls(settings), settings.commit_bucket)


def publish_acknowledged(
    settings: SinkSettings, batches: Iterator[pa.RecordBatch]
) -> tuple[int, int | None]:
    """Publishes every row of ``batches`` the way ``settings.publish_mode`` says.

    Runs in a write task. A write cut by a cluster's transient failure (no ack in
    time, a fast batch a new stream leader does not know, a connection being remade)
    sends the task's rows again, for as long as ``retryTimeout`` allows: the task keeps
    its input for that, up to ``SPARK_JS_RETRY_KEEP_BYTES`` (past it Spark retries the
    whole task). With message ids the stream stores each row once; without them a row
    whose ack was lost may be stored twice, as under Spark's own task retry.

    Returns (rows acknowledged, duplicates among them: None where the mode does not
    tell).

    Raises:
        RuntimeError: a row was not acknowledged (no stream for its subject, refused,
            no ack in time), could not be published, or (fast) the stream's count of
            stored rows differs from the rows sent; the message says how many rows of
            the task were acknowledged and why.
        InvalidArgumentError: a row has no subject, or a null or empty message id; the
            message names the row.
        ClusterRetryTimeoutError: transient failures went on for ``retryTimeout``.
    """
    kept = KeptInput(batches, sd.SPARK_JS_RETRY_KEEP_BYTES)

    def publish_once() -> tuple[int, int | None]:
        if settings.publish_mode == "fast":
            return publish_fast(_jetstream(settings), settings, kept.batches())
        client = worker_client(list(settings.servers), settings.connect_kwargs)
        return publish_async(_jetstream(settings), client, settings, kept.batches())

    return settings.retry.call(
        f"{_SINK}: publishing this task's rows",
        publish_once,
        retry_if=lambda error: kept.complete and _worth_sending_again(error),
    )


def _worth_sending_again(error: BaseException) -> bool:
    """A failed write a second try may get through: a fast batch the stream ended short
    for a reason of the moment (a gap, a new leader), or, but for a bad row, a transient
    failure or no stream answering (`is_transient_publish`)."""
    if isinstance(error, FastBatchShortError):
        return error.transient
    if any(isinstance(cause, InvalidArgumentError) for cause in causes_of(error)):
        return False
    return is_transient_publish(error)


def _partition_id() -> int:
    context = TaskContext.get()
    return context.partitionId() if context is not None else -1


def _done(messages: Sequence[WriterCommitMessage | None]) -> list[JetStreamCommitMessage]:
    return [m for m in messages if isinstance(m, JetStreamCommitMessage)]


def _totals(messages: Sequence[WriterCommitMessage | None]) -> tuple[int, str]:
    """(rows, the duplicates as text: "unknown" where a fast batch did not say)."""
    done = _done(messages)
    counts = [m.duplicates for m in done]
    known = [count for count in counts if count is not None]
    duplicates = str(sum(known)) if len(known) == len(counts) else "unknown"
    return sum(m.rows for m in done), duplicates


def _modes(messages: Sequence[WriterCommitMessage | None]) -> str:
    return "/".join(sorted({m.publish_mode for m in _done(messages)})) or "-"


# --- the writers Spark calls ----------------------------------------------------------------


class JetStreamBatchWriter(DataSourceArrowWriter):
    """Publishes the rows of one ``df.write.format("jetstream")`` job."""

    def __init__(self, settings: SinkSettings) -> None:
        self.settings = settings

    def write(self, iterator: Iterator[pa.RecordBatch]) -> JetStreamCommitMessage:
        """Publishes one task's rows and waits for their acks (runs in a worker)."""
        rows, duplicates = publish_acknowledged(self.settings, iterator)
        return JetStreamCommitMessage(rows, duplicates, _partition_id(), self.settings.publish_mode)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Logs the totals once every task is acknowledged (runs on the driver)."""
        rows, duplicates = _totals(messages)
        logger.info(
            "%s: %d rows acknowledged in %d tasks (publishMode %s), %s of them "
            "duplicates the stream had already stored",
            _SINK,
            rows,
            len(messages),
            _modes(messages),
            duplicates,
        )

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Logs what the successful tasks had stored before the job failed."""
        rows, _ = _totals(messages)
        logger.warning("%s: the write failed after %d rows were acknowledged", _SINK, rows)


class JetStreamStreamWriter(DataSourceStreamArrowWriter):
    """Publishes each micro-batch of ``df.writeStream.format("jetstream")``, once.

    A micro-batch the commit log (``commitBucket``) holds is not written again; the
    driver's `commit` records each written one (see ``commits``).
    """

    def __init__(self, settings: SinkSettings) -> None:
        self.settings = settings

    def write(self, iterator: Iterator[pa.RecordBatch]) -> JetStreamCommitMessage:
        """Publishes one task's rows of a micro-batch and waits for their acks, unless
        the commit log holds the micro-batch (a replay): then it writes nothing.

        Raises:
            RuntimeError: the commit log could not be read (the task fails and Spark
                retries it: writing without knowing could write the batch twice), or
                as `publish_acknowledged`.
        """
        settings = self.settings
        batch = commits.current_micro_batch()
        if batch is None:  # no query id from Spark: the message ids are all there is
            logger.warning(
                "%s: no streaming query id in this task: the commit log is not used", _SINK
            )
            rows, duplicates = publish_acknowledged(settings, iterator)
            return JetStreamCommitMessage(rows, duplicates, _partition_id(), settings.publish_mode)
        query_id, batch_id, run_id = batch
        key = commits.commit_key(query_id, batch_id)
        try:
            recorded = settings.retry.call(
                f"{_SINK}: reading commit bucket {settings.commit_bucket!r}",
                lambda: commits.is_recorded(_commit_log(settings), key),
            )
        except Error as error:
            raise RuntimeError(
                f"{_SINK}: could not read commit bucket {settings.commit_bucket!r} for "
                f"micro-batch {key}: {error}"
            ) from error
        if recorded:
            for _ in iterator:  # the input is consumed all the same, as Spark expects
                pass
            return JetStreamCommitMessage(
                0,
                0,
                _partition_id(),
                settings.publish_mode,
                query_id,
                batch_id,
                run_id,
                skipped=True,
            )
        rows, duplicates = publish_acknowledged(settings, iterator)
        return JetStreamCommitMessage(
            rows, duplicates, _partition_id(), settings.publish_mode, query_id, batch_id, run_id
        )

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Records the written micro-batch in the commit log (runs on the driver).

        A micro-batch every task skipped (the log held it) is not recorded again. A
        failed record is logged, not raised (see ``commits``).
        """
        done = _done(messages)
        if done and all(message.skipped for message in done):
            logger.info(
                "%s: micro-batch %d was written before (commit log %r): nothing written again",
                _SINK,
                batchId,
                self.settings.commit_bucket,
            )
            return
        rows, duplicates = _totals(messages)
        logger.info(
            "%s: micro-batch %d: %d rows acknowledged (publishMode %s), %s of them duplicates",
            _SINK,
            batchId,
            rows,
            _modes(messages),
            duplicates,
        )
        query_ids = {m.query_id for m in done if m.query_id is not None}
        if not query_ids:
            return  # no task saw a query id: nothing to key the record by
        run_ids = sorted({m.run_id for m in done if m.run_id})
        for query_id in sorted(query_ids):
            commits.record(
                lambda: _commit_log(self.settings),
                self.settings.retry,
                commits.commit_key(query_id, batchId),
                rows=rows,
                tasks=len(done),
                run_ids=run_ids,
            )

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Logs a failed micro-batch (not recorded: its replay writes it again)."""
        rows, _ = _totals(messages)
        logger.warning(
            "%s: micro-batch %d failed after %d rows were acknowledged", _SINK, batchId, rows
        )


def batch_writer(
    options: Mapping[str, str], schema: StructType, overwrite: bool
) -> DataSourceArrowWriter:
    """The writer of ``df.write.format("jetstream")`` (called on the driver).

    Raises:
        InvalidArgumentError: see `parse_sink_options` and `resolve_publish_mode`.
        RuntimeError: see `resolve_publish_mode`.
    """
    return JetStreamBatchWriter(
        resolve_publish_mode(parse_sink_options(options, schema, overwrite))
    )


def stream_writer(
    options: Mapping[str, str], schema: StructType, overwrite: bool
) -> DataSourceStreamArrowWriter:
    """The writer of ``df.writeStream.format("jetstream")`` (called on the driver when
    the query starts, and again by Spark for each micro-batch's commit).

    Makes the commit log's bucket if it is missing. The first writer of these options in
    this process rides through transient failures within ``retryTimeout``; the later
    ones (one per micro-batch) ask the servers once, and while the cluster cannot answer
    (a node down, a leader being elected) go on with what the last writer found: the
    publish mode, the stream and a bucket that was there.

    Raises:
        InvalidArgumentError: see `parse_sink_options` and `resolve_publish_mode`.
        RuntimeError: see `resolve_publish_mode`; or the commit bucket could not be
            bound or made.
    """
    parsed = parse_sink_options(options, schema, overwrite, streaming=True)
    key = (tuple(sorted(options.items())), schema.json(), overwrite)
    with _known_lock:
        known = _known_stream_writers.get(key)
    if known is None:
        settings = _stream_writer_settings(parsed)
    else:
        try:
            asked = _stream_writer_settings(dataclasses.replace(parsed, retry_timeout=0))
        except Exception as error:
            if not _worth_looking_up_again(error):
                raise
            logger.info(
                "%s: the servers could not say this micro-batch's publish mode and commit "
                "bucket (%s); going on with the last micro-batch's",
                _SINK,
                error,
            )
            settings = known
        else:
            settings = dataclasses.replace(asked, retry_timeout=parsed.retry_timeout)
    with _known_lock:
        _known_stream_writers[key] = settings
    return JetStreamStreamWriter(settings)


#: The settings the last stream writer of the same options was made with, in this
#: process (the driver's sink runner): Spark makes a writer for every micro-batch, and
#: its two API calls (the stream lookup, the commit bucket's bind) would otherwise wait
#: out every leader election the cluster goes through.
_known_stream_writers: dict[tuple[object, ...], SinkSettings] = {}
_known_lock = threading.Lock()


def _stream_writer_settings(parsed: SinkSettings) -> SinkSettings:
    """The publish mode settled, and the commit bucket bound or made, as ``parsed.retry``
    allows."""
    settings = resolve_publish_mode(parsed)
    try:
        settings.retry.call(
            f"{_SINK}: binding commit bucket {settings.commit_bucket!r}",
            lambda: commits.open_log(_api_calls(settings), settings.commit_bucket),
        )
    except Error as error:
        raise RuntimeError(
            f"{_SINK}: could not bind or create commit bucket {settings.commit_bucket!r} "
            f"(option 'commitBucket') on {', '.join(settings.servers)}: {error}"
        ) from error
    return settings


__all__ = [
    "DEFAULT_PUBLISH_MODE",
    "PUBLISH_MODES",
    "JetStreamBatchWriter",
    "JetStreamCommitMessage",
    "JetStreamStreamWriter",
    "SinkSettings",
    "batch_writer",
    "check_sink_schema",
    "parse_sink_options",
    "publish_acknowledged",
    "resolve_publish_mode",
    "stream_writer",
]

"""PySpark integration: the "jetstream" and "nats" data sources and lookup UDFs.

Needs the ``spark`` extra (``pip install 'nats-sync[spark]'``: pyspark >= 4.1, pandas,
pyarrow) wherever Spark runs Python: the driver and every worker (``PYSPARK_PYTHON``;
on a local master `register` and the UDF factories check it), or, under Spark Connect,
the server's. Nothing in the core imports this package, and importing it starts no
thread: Spark forks its Python workers, and each worker makes its one client on first
use.

- `register`: makes ``format("jetstream")`` and ``format("nats")`` available, to reads
  and writes started on any thread of the session. Optional where the package is
  installed: Spark (4.0+) finds both formats itself through the top-level modules
  ``pyspark_nats_sync_jetstream`` and ``pyspark_nats_sync_nats`` (its lookup imports
  every installed ``pyspark_*`` module and takes its ``DefaultSource``, once per driver
  JVM, in a Python worker of ``PYSPARK_PYTHON``). Without ``register`` a classic
  session writes to them only from the thread that built it: Spark looks a write's
  source up in the starting thread's active session, which other threads lack.
  Spark Connect serves every thread either way.
- `kv_lookup_udf`: a vectorised UDF giving each key's current value in a key-value
  bucket (null where absent), the keys of a batch looked up together; bytes, or text
  with ``decode="utf-8"``.
- `request_udf`: a vectorised UDF sending one request per row, pipelined per batch.
- `request_df`: adds ``reply`` and ``error`` columns to a DataFrame.
- `nats_sync.spark.testing.SparkStandaloneCluster`: a standalone master and worker from
  pyspark's own jars on loopback, for trying a job on a real cluster.

Connection options of both sources: ``servers`` (required; commas between URLs),
``name``, ``user``, ``password``, ``token``, ``creds``, ``nkeys_seed``, ``tls_ca``,
``connect_timeout``.

``format("jetstream")``, read (``spark.read`` and ``spark.readStream``): replayable;
offsets are stream sequences checkpointed by Spark. Columns ``stream``, ``seq``,
``subject``, ``data``, ``headers``, ``timestamp``. Options: ``stream`` (required),
``subject`` (a filter, wildcards allowed), ``startingOffsets`` (``earliest``,
``latest`` (streaming only), or JSON ``{"<stream>": <next sequence>}``; default
``latest`` for streaming and ``earliest`` for batch, as Spark's Kafka source),
``startingTimestamp`` (ms since the epoch), ``endingOffsets`` (batch; ``latest`` or
JSON, exclusive), ``maxOffsetsPerTrigger`` (sequences per micro-batch; gaps make fewer
rows), ``minPartitions`` (tasks per range at least; one task reads at most 100,000
sequences), ``failOnDataLoss`` (default true: unread messages that went, or a stream
deleted and made again, fail the query naming the range), ``includeHeaders`` (default
true), ``readMode`` (``auto``: a temporary consumer, direct gets for work-queue
streams; ``consumer``; ``direct``), ``fetchBatch`` (messages per pull, default 5,000),
``domain``, ``timeout`` (seconds per server call, default 5) and ``retryTimeout``.

``format("jetstream")``, write (batch and streaming): columns ``data``, optional
``subject``, ``headers``, ``msg_id``; options ``subject`` (the default subject),
``msgIdColumns``, ``publishMode`` (``fast``: each task's rows as one fast-ingest batch,
the stream's count of stored rows checked against the rows sent; ``async``:
``publish_async`` per row; ``auto``, the default: ``fast`` where the stream storing the
``subject`` option allows batched publishing), ``timeout`` (seconds for the
acknowledgements, default 10), ``maxPendingAcks`` (async, default 4,000),
``domain`` and ``retryTimeout``; streaming writes also ``commitBucket`` (default
``spark_commits``). Every
row is acknowledged or the task fails; with message ids a retried task stores nothing
twice within the stream's ``duplicate_window``. Streaming writes record each committed
micro-batch (persistent query id, batch id) in the ``commitBucket`` key-value bucket
(made if missing), and a replayed micro-batch already recorded writes nothing, however
late; only a crash between the tasks' writes and that record leaves the replay to the
message ids and the duplicate window.

``retryTimeout`` (both "jetstream" sources, default 60): seconds a driver call, a read
task or a write task may stall on what a cluster gets over by itself (a node restart, a
leader election: no reply in time, no responders, "temporarily unavailable") before the
query fails; meanwhile it retries with backoff, a read goes on from where it got to, and
a write sends its unacknowledged rows again (stored once with message ids). ``0``: no
retrying. Give every node's URL in ``servers``.

``format("nats")`` (core NATS): batch and streaming writes with columns ``data``,
``subject``, ``reply``, ``headers``; streaming reads yielding ``subject``, ``reply``,
``data``, ``headers``, ``received_at``. Options: ``subject`` (required to read; the
default subject to write), ``queue`` (read), ``timeout`` (seconds a write task may take
to flush, default 10), ``max_buffered`` (messages a streaming read holds between
micro-batches, default 100,000) and ``max_rows_per_batch`` (default 10,000). Delivery:
writes are at-least-once under task retry; streaming reads are at-most-once (core NATS
keeps no history).
"""

from __future__ import annotations

from typing import Any

try:
    import pyarrow  # noqa: F401
    import pyspark  # noqa: F401
except ImportError as missing:  # pragma: no cover - depends on the environment
    raise ImportError(
        "nats_sync.spark needs the spark extra: pip install 'nats-sync[spark]'"
    ) from missing

from nats_sync.spark import _active_session
from nats_sync.spark._kv_udf import kv_lookup_udf
from nats_sync.spark._worker_python import check_session_workers
from nats_sync.spark.datasource import NatsDataSource
from nats_sync.spark.errors import SparkWorkerPythonError
from nats_sync.spark.jetstream import JetStreamDataSource
from nats_sync.spark.udf import request_df, request_udf

__all__ = [
    "JetStreamDataSource",
    "NatsDataSource",
    "SparkWorkerPythonError",
    "kv_lookup_udf",
    "register",
    "request_df",
    "request_udf",
]


def register(spark: Any) -> None:
    """Registers the ``"nats"`` and ``"jetstream"`` data sources with a SparkSession.

    Optional where the package is installed (Spark finds both formats itself), but it
    also lets a classic session write to them from any thread: Spark looks a Python
    data source up, for a write, in the active session of the thread starting it, and
    only the thread that built the session has one. After ``register``, pyspark's
    ``DataFrameWriter.save`` and ``DataStreamWriter.start`` make their own session the
    active one for the call. Calling it again, from any thread, is harmless (Spark logs
    that the registration replaced the previous one).

    On a local master it first checks that Spark's Python workers can import
    nats_sync: they run ``PYSPARK_PYTHON`` (``python3`` when unset), not the driver's
    interpreter.

    Args:
        spark: the `pyspark.sql.SparkSession` (classic or Spark Connect).

    Raises:
        SparkWorkerPythonError: the session runs on a local master and its workers'
            interpreter is missing or cannot import nats_sync (the message names it and
            the fix: set ``PYSPARK_PYTHON`` before the session is made).
    """
    check_session_workers(spark)
    if not type(spark).__module__.startswith("pyspark.sql.connect"):
        # Spark Connect's server runs each request with its session active already.
        _active_session.install()
    spark.dataSource.register(NatsDataSource)
    spark.dataSource.register(JetStreamDataSource)

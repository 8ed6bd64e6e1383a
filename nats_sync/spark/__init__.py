"""PySpark integration: request-reply UDFs and the "nats" data source.

Needs the ``spark`` extra (``pip install 'nats-sync[spark]'``: pyspark >= 4.1, pandas,
pyarrow). Nothing in the core imports this package, and importing it starts no thread:
Spark forks its Python workers, and each worker makes its one client on first use.

- `request_udf`: a vectorised UDF sending one request per row, pipelined per batch.
- `request_df`: adds ``reply`` and ``error`` columns to a DataFrame.
- `kv_lookup_udf`: a vectorised UDF giving each key's current value in a key-value
  bucket (null where absent), the keys of a batch looked up together.
- `register`: makes ``format("nats")`` available (batch and streaming writes with
  columns ``data``, ``subject``, ``reply``, ``headers``; streaming reads yielding
  ``subject``, ``reply``, ``data``, ``headers``, ``received_at``).

Data source options: ``servers`` (required; commas between URLs), ``subject``
(required to read; the default subject to write), ``queue`` (read), ``name``, ``user``,
``password``, ``token``, ``creds``, ``nkeys_seed``, ``tls_ca``, ``connect_timeout``,
``timeout`` (seconds a write task may take to flush, default 10), ``max_buffered``
(messages a streaming read holds between micro-batches, default 100,000) and
``max_rows_per_batch`` (default 10,000). Delivery: writes are at-least-once under task
retry; streaming reads are at-most-once (core NATS keeps no history).
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

from nats_sync.spark._kv_udf import kv_lookup_udf
from nats_sync.spark.datasource import NatsDataSource
from nats_sync.spark.jetstream import JetStreamDataSource
from nats_sync.spark.udf import request_df, request_udf

__all__ = [
    "JetStreamDataSource", "NatsDataSource", "kv_lookup_udf", "register", "request_df",
    "request_udf",
]


def register(spark: Any) -> None:
    """Registers the ``"nats"`` and ``"jetstream"`` data sources with a SparkSession.

    Args:
        spark: the `pyspark.sql.SparkSession`.
    """
    spark.dataSource.register(NatsDataSource)
    spark.dataSource.register(JetStreamDataSource)

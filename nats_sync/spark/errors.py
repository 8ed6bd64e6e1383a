"""The Spark extension's errors, under :class:`nats_sync.Error` like every other.

As in ``nats_sync.errors``, the detail is the one positional argument, so every error
pickles (Spark ships exceptions between processes).
"""

from __future__ import annotations

from nats_sync.errors import Error

__all__ = ["SparkWorkerPythonError"]


class SparkWorkerPythonError(Error):
    """Spark's Python workers would run an interpreter that cannot import nats_sync.

    Raised on the driver by `nats_sync.spark.register` and the Spark UDF factories when
    the session runs on a local master (its workers are processes of this machine) and
    the interpreter Spark starts them with (``PYSPARK_PYTHON``, else ``python3``) is
    missing or cannot ``import nats_sync``. The message names that interpreter and the
    fix, in one line, instead of Spark's page of ``No module named 'nats_sync'`` from
    every task.
    """

    label = "Spark's Python workers cannot use nats_sync"

"""Writes from any driver thread: a write runs with its own session active on its thread.

Why: classic Spark (4.x; read in 4.3's bytecode) finds a Python data source by name, for
a write, only in the *active session of the JVM thread* that starts it
(``DataSource.lookupDataSource``: ``SparkSession.getActiveSession.exists(_.sessionState
.dataSourceManager.dataSourceExists(name))``); a read asks its own session's manager
instead. PySpark's pinned-thread
mode (its default since 3.2) runs each Python thread's calls on a JVM thread of its own,
and the active session is a JVM thread-local that only the thread that built the session
(or called ``createDataFrame`` on it) has set. So ``df.write.format("jetstream").save()``
or ``writeStream...start()`` started on any other Python thread fails with
``DATA_SOURCE_NOT_FOUND``, however the source was registered or installed; calling
``register`` there again does not help, as registration is per session, not per thread.

How it works: `install`, called by ``register`` on a classic session, wraps pyspark's two
write entry points, ``DataFrameWriter.save`` and ``DataStreamWriter.start``, once per
process. The wrapped call makes the writer's own session the active one on the calling
thread's JVM thread, as pyspark does for its own worker threads (``pyspark.ml.connect
.tuning``) and Spark's ``SparkSession.withActive`` does around execution, and puts back
what was active there before (or nothing) when the call returns. Thread: any driver thread
that starts a write; state: the wrapped methods on pyspark's two classes, replaced once
under a lock. Spark Connect needs none of this: its server runs each request with the
request's session active.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

__all__ = ["install", "session_active_on_this_thread"]

_T = TypeVar("_T")
#: Marks a pyspark method already wrapped here, so a second ``install`` leaves it be.
_WRAPPED = "__nats_sync_active_session__"
_install_lock = threading.Lock()


def install() -> None:
    """Makes classic pyspark's writes find Python data sources from any thread (idempotent)."""
    from pyspark.sql.readwriter import DataFrameWriter  # noqa: PLC0415 - pyspark is loaded
    from pyspark.sql.streaming.readwriter import DataStreamWriter  # noqa: PLC0415

    with _install_lock:
        for writer_class, name in ((DataFrameWriter, "save"), (DataStreamWriter, "start")):
            method = getattr(writer_class, name)
            if not getattr(method, _WRAPPED, False):
                setattr(writer_class, name, _with_writer_session_active(method))


def _with_writer_session_active(method: Callable[..., _T]) -> Callable[..., _T]:
    """``method`` of a pyspark writer, run with the writer's session active on its thread."""

    @functools.wraps(method)
    def run(writer: Any, *args: Any, **kwargs: Any) -> _T:
        with session_active_on_this_thread(writer._spark):
            return method(writer, *args, **kwargs)

    setattr(run, _WRAPPED, True)
    return run


@contextmanager
def session_active_on_this_thread(spark: Any) -> Iterator[None]:
    """Makes classic ``spark`` the active session of this thread's JVM thread, then restores.

    Args:
        spark: a classic `pyspark.sql.SparkSession`.
    """
    # The JVM class of the session itself (org.apache.spark.sql.classic.SparkSession in
    # Spark 4), whose static methods hold the thread's active session.
    sessions = getattr(spark._jvm, spark._jsparkSession.getClass().getName())
    before = sessions.getActiveSession()
    sessions.setActiveSession(spark._jsparkSession)
    try:
        yield
    finally:
        if before.isDefined():
            sessions.setActiveSession(before.get())
        else:
            sessions.clearActiveSession()

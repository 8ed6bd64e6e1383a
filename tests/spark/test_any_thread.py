"""format("jetstream") and format("nats") from any thread, and with no ``register`` at all.

Classic Spark finds a Python data source, for a write, only in the active session of the
JVM thread that starts it, and pinned-thread pyspark gives each Python thread a JVM thread
of its own with none: a write started on a ``threading.Thread`` failed with
``DATA_SOURCE_NOT_FOUND`` (see ``nats_sync/spark/_active_session.py``). The DataFrames
here are made with ``spark.range`` or on the main thread: ``createDataFrame`` on the
thread would set the thread's active session itself and hide the failure.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F

import nats_sync
from nats_sync.jetstream import JetStream
from nats_sync.spark import register
from nats_sync.testing import NatsServer

pytestmark = pytest.mark.timeout(180)

QUERY_TIMEOUT = 120
JOB = Path(__file__).with_name("no_register_job.py")
JOB_TIMEOUT = 200.0  # a fresh JVM and a Spark job; ~40 s alone, ~75 s on a busy machine


def _on_threads(work: Callable[[], Any], count: int = 1) -> list[Any]:
    """What ``work`` returns on each of ``count`` new threads run at once; an exception
    of one is raised here."""
    results: list[Any] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            results.append(work())
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=run, name=f"spark-{n}") for n in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(QUERY_TIMEOUT)
    assert not any(thread.is_alive() for thread in threads), "a thread did not finish in time"
    if errors:
        raise errors[0]
    return results


def _numbers(spark: Any, count: int) -> Any:
    return spark.range(count, numPartitions=2).select(F.col("id").cast("string").alias("data"))


def _batch_write(df: Any, fmt: str, url: str, subject: str) -> None:
    df.write.format(fmt).mode("append").option("servers", url).option("subject", subject).save()


def _jvm_thread_has_active_session(spark: Any) -> bool:
    """Whether this thread's JVM thread has an active session, as Spark's lookup asks."""
    return bool(spark._jvm.org.apache.spark.sql.SparkSession.getActiveSession().isDefined())


def _stream_of(js: JetStream, name: str, subject: str, count: int) -> None:
    """Stream ``name`` on ``subject``, holding the numbers 0 to ``count - 1``."""
    js.create_stream(name=name, subjects=[subject])
    for index in range(count):
        js.publish_async(subject, str(index).encode())
    js.publish_async_completed(60)


def _stream_to(fmt: str, spark: Any, url: str, source: str, subject: str, checkpoint: Path) -> None:
    """An availableNow query copying stream ``source`` to ``subject`` in format ``fmt``."""
    rows = (
        spark.readStream.format("jetstream")
        .option("servers", url)
        .option("stream", source)
        .option("startingOffsets", "earliest")
        .load()
        .select("data")
    )
    query = (
        rows.writeStream.format(fmt)
        .option("servers", url)
        .option("subject", subject)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(QUERY_TIMEOUT), "the query did not finish in time"
        assert query.exception() is None
    finally:
        query.stop()


def test_batch_writes_from_another_thread_after_register(
    spark: Any, js_server: NatsServer, js: JetStream
) -> None:
    js.create_stream(name="THREAD_BATCH", subjects=["thread.batch.>"])
    with nats_sync.connect(js_server.url, name="thread-batch") as nc:
        core = nc.subscribe("thread.core")
        nc.flush()

        def write_both() -> tuple[bool, bool]:
            before = _jvm_thread_has_active_session(spark)
            _batch_write(_numbers(spark, 40), "jetstream", js_server.url, "thread.batch.js")
            _batch_write(_numbers(spark, 30), "nats", js_server.url, "thread.core")
            return before, _jvm_thread_has_active_session(spark)

        [(active_before, active_after)] = _on_threads(write_both)
        received = sorted(int(core.next_msg(timeout=20).data) for _ in range(30))
    assert received == list(range(30))
    assert js.stream_info("THREAD_BATCH").state.messages == 40
    # The thread had no active session (the failing case), and the writes made theirs
    # active for the call only: they left the thread as they found it.
    assert (active_before, active_after) == (False, False)


def test_streaming_writes_from_another_thread_after_register(
    spark: Any, js_server: NatsServer, js: JetStream, tmp_path: Path
) -> None:
    _stream_of(js, "THREAD_SOURCE", "thread.source", 50)
    js.create_stream(name="THREAD_STREAMED", subjects=["thread.streamed"])
    with nats_sync.connect(js_server.url, name="thread-stream") as nc:
        core = nc.subscribe("thread.core.streamed")
        nc.flush()
        _on_threads(
            lambda: _stream_to(
                "jetstream",
                spark,
                js_server.url,
                "THREAD_SOURCE",
                "thread.streamed",
                tmp_path / "js-cp",
            )
        )
        _on_threads(
            lambda: _stream_to(
                "nats",
                spark,
                js_server.url,
                "THREAD_SOURCE",
                "thread.core.streamed",
                tmp_path / "cp",
            )
        )
        received = sorted(int(core.next_msg(timeout=20).data) for _ in range(50))
    assert js.stream_info("THREAD_STREAMED").state.messages == 50
    assert received == list(range(50))


def test_register_again_from_two_threads_at_once_is_harmless(
    spark: Any, js_server: NatsServer, js: JetStream
) -> None:
    from pyspark.sql.readwriter import DataFrameWriter

    together = threading.Barrier(2)

    def register_with_the_other() -> None:
        together.wait(30)
        register(spark)

    _on_threads(register_with_the_other, count=2)
    # pyspark's writer is wrapped once, however often register ran.
    assert not hasattr(DataFrameWriter.save.__wrapped__, "__wrapped__")
    js.create_stream(name="REGISTERED_TWICE", subjects=["twice.>"])
    _on_threads(lambda: _batch_write(_numbers(spark, 10), "jetstream", js_server.url, "twice.t"))
    _batch_write(_numbers(spark, 10), "jetstream", js_server.url, "twice.main")
    read = spark.read.format("jetstream").option("servers", js_server.url)
    assert read.option("stream", "REGISTERED_TWICE").load().count() == 20


def _run_job_without_register(mode: str, js_server: NatsServer, tmp_path: Path) -> dict[str, Any]:
    """What no_register_job.py reports, run in a fresh process with its own Spark JVM.

    Spark's lookup imports the ``pyspark_*`` modules it lists on its worker's
    ``sys.path``. A wheel puts them in site-packages; setuptools' default editable
    install serves them through an import hook that this listing cannot see, so the
    job's ``PYTHONPATH`` names their folder, as a wheel's site-packages would. The job
    runs in ``tmp_path``: a worker started in the checkout would see them anyway.
    """
    import pyspark_nats_sync_jetstream

    found_in = str(Path(pyspark_nats_sync_jetstream.__file__).parent)
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    env["PYTHONPATH"] = found_in + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    done = subprocess.run(
        [sys.executable, str(JOB), mode, js_server.url],
        capture_output=True,
        text=True,
        timeout=JOB_TIMEOUT,
        cwd=tmp_path,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


@pytest.mark.timeout(JOB_TIMEOUT + 30)
@pytest.mark.parametrize(
    ("mode", "thread_write"),
    [
        # A fact of Spark, not of nats_sync: with no register (the driver never imported
        # nats_sync, so nothing makes the writer's session active), classic Spark looks a
        # write from another thread up in that thread's active session, and it has none.
        # If this becomes "ok", Spark's write lookup became session-based and the Spark
        # guide's note on threads can go.
        ("classic", "DATA_SOURCE_NOT_FOUND"),
        # A Connect server runs every request with its session active.
        pytest.param("connect", "ok", marks=pytest.mark.slow),
    ],
)
def test_found_without_register_in_a_fresh_session(
    mode: str, thread_write: str, js_server: NatsServer, js: JetStream, tmp_path: Path
) -> None:
    _stream_of(js, f"NOREG_{mode.upper()}", f"noreg.{mode}.in", 7)
    copies = f"NOREG_{mode.upper()}_COPIES"
    js.create_stream(name=copies, subjects=[f"noreg.{mode}.copy", f"noreg.{mode}.thread"])
    with nats_sync.connect(js_server.url, name="noreg") as nc:
        core = nc.subscribe(f"noreg.{mode}.core")
        nc.flush()
        report = _run_job_without_register(mode, js_server, tmp_path)
        received = sorted(int(core.next_msg(timeout=20).data) for _ in range(5))
    assert report == {
        "read": 7,
        "jetstream write": "ok",
        "nats write": "ok",
        "thread write": thread_write,
        "nats_sync imported": False,
    }
    assert received == list(range(5))
    assert js.stream_info(copies).state.messages == (10 if thread_write == "ok" else 5)

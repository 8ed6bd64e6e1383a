"""The "jetstream" sink's fast mode when a task's input pauses or its batch fails
part-way (issue 32). The server drops a fast batch idle for 10 s, so before the
publisher kept its batch alive a write task whose rows stalled that long failed (and was
retried into the same stall). A task whose batch failed part-way is retried whole: with
message ids the rows its first attempt stored are not stored again (the resume rule of
the JetStream guide)."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F

import nats_sync
from nats_sync.jetstream import JetStream
from nats_sync.msg import Msg
from nats_sync.testing import NatsServer

pytestmark = pytest.mark.timeout(240)

ROWS = 2_000
#: The row the input stalls on (a JVM-side sleep: ``reflect`` of Thread.sleep).
PAUSED_ROW = 1_000
#: Long enough that, less what a loaded worker still had to send when it began (seen:
#: 2.5 s in a full suite on a busy machine), the gap passes the server's 10 s batch timeout.
PAUSE_MS = 15_000
#: Rows per Arrow batch of the sink's input, so that the rows before the pause reach the
#: sink before it: with ~1 KiB rows, far more than the 64 KiB buffered between the JVM
#: and the Python worker.
ARROW_ROWS = 100
PADDING = "x" * 1_000


@pytest.mark.slow
def test_a_streaming_write_whose_task_pauses_15s_stores_every_row_once(
    spark: Any, js_server: NatsServer, js: JetStream, tmp_path: Path
) -> None:
    js.create_stream(name="PAUSED", subjects=["paused.rows"], allow_batched=True, allow_direct=True)
    source = tmp_path / "in"
    source.mkdir()
    lines = [json.dumps({"data": f"row-{n:04d}-{PADDING}"}) for n in range(ROWS)]
    (source / "rows.json").write_text("\n".join(lines))  # one file: one task
    # A slow source or UDF upstream, inside the task: row PAUSED_ROW takes 15 s.
    sleep = F.expr(
        f"substr(reflect('java.lang.Thread', 'sleep', cast({PAUSE_MS} as bigint)), 1, 0)"
    )
    paused = F.col("data").startswith(f"row-{PAUSED_ROW:04d}-")
    arrivals = _Arrivals(js_server.url, "paused.rows")
    previous = spark.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch")
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", str(ARROW_ROWS))
    try:
        query = (
            spark.readStream.schema("data string")
            .json(str(source))
            .select(
                F.when(paused, F.concat(F.col("data"), sleep))
                .otherwise(F.col("data"))
                .alias("data")
            )
            .writeStream.format("jetstream")
            .option("servers", js_server.url)
            .option("subject", "paused.rows")
            .option("publishMode", "fast")
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(180)
        assert query.exception() is None
    finally:
        spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", previous)
        arrivals.close()
    state = js.stream("PAUSED").info().state
    assert (state.messages, state.last_seq) == (ROWS, ROWS)
    stored = [msg.data.decode()[:8] for msg in js.stream("PAUSED").get_msgs(1, batch=ROWS)]
    assert stored == [f"row-{n:04d}" for n in range(ROWS)]
    # The pause fell inside the task's batch: rows before it, then no row for longer
    # than the server's 10 s batch timeout (the 15 s pause, less what the sink still
    # had to add), then the rest. Meanwhile the publisher pinged: its first look at an
    # idle batch pings within 2 intervals (5 s), then every 2.5 s, so 2 at least.
    seen = (
        f"{arrivals.rows_before_the_longest_gap} rows, then {arrivals.longest_gap:.1f} s "
        f"without one, {arrivals.pings} pings"
    )
    assert arrivals.rows_before_the_longest_gap >= ARROW_ROWS, seen
    assert arrivals.longest_gap > 10.5, seen
    assert arrivals.pings >= 2, seen


_RETRY_SCRIPT = """
import os, sys
os.environ["PYSPARK_PYTHON"] = sys.executable
from pyspark import TaskContext
from pyspark.sql import SparkSession, functions as F
from nats_sync.spark import register

url = sys.argv[1]
spark = (SparkSession.builder.master("local[2,4]").appName("nats-sync-fast-retry-test")
         .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.execution.arrow.maxRecordsPerBatch", "200").getOrCreate())
spark.sparkContext.setLogLevel("OFF")
register(spark)

def step(batches):
    for index, batch in enumerate(batches):
        if index == 6 and TaskContext.get().attemptNumber() == 0:
            raise RuntimeError("first attempt fails on purpose")
        yield batch

df = spark.range(4000, numPartitions=2).select(
    F.concat(F.col("id").cast("string"), F.lit(":"), F.repeat(F.lit("x"), 1000)).alias("data"),
    F.concat(F.lit("t-"), F.col("id").cast("string")).alias("msg_id"))
for subject, frame in (("fastretry.ids", df), ("fastretry.plain", df.drop("msg_id"))):
    (frame.mapInArrow(step, frame.schema).write.format("jetstream").mode("append")
     .option("servers", url).option("subject", subject).option("publishMode", "fast")
     .save())
spark.stop()
print("WRITTEN")
"""


@pytest.mark.slow
def test_a_fast_task_retried_after_failing_part_way_stores_nothing_twice(
    js_server: NatsServer, js: JetStream
) -> None:
    """Spark's own task retry (local[2,4]: four attempts), in a Spark of its own: a
    process holds one SparkContext, and the shared one (local[2]) retries nothing."""
    for name, subject in (
        ("FAST_RETRY_IDS", "fastretry.ids"),
        ("FAST_RETRY_PLAIN", "fastretry.plain"),
    ):
        js.create_stream(name=name, subjects=[subject], allow_batched=True, allow_direct=True)
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_RETRY_SCRIPT), js_server.url],
        capture_output=True,
        text=True,
        timeout=150,
        check=False,
    )
    assert "WRITTEN" in done.stdout, done.stderr[-3000:]
    with_ids = js.stream("FAST_RETRY_IDS").get_msgs(1, batch=4_000)
    assert sorted(int(msg.data.split(b":")[0]) for msg in with_ids) == list(range(4_000))
    assert js.stream("FAST_RETRY_IDS").info().state.last_seq == 4_000
    # The same job without message ids: what the failed first attempts' batches had
    # stored is stored again by the retries (so they did store part of their rows).
    assert js.stream("FAST_RETRY_PLAIN").info().state.messages > 4_000


class _Arrivals:
    """A plain subscriber on the sink's subject: when rows came, and the fast-batch
    pings (op 4) between them."""

    def __init__(self, url: str, subject: str) -> None:
        self._lock = threading.Lock()
        self._row_times: list[float] = []
        self.pings = 0
        self._nc = nats_sync.connect(url)
        self._nc.subscribe(subject, cb=self._on_msg)
        self._nc.flush()

    def _on_msg(self, msg: Msg) -> None:
        with self._lock:
            if msg.reply.endswith(".4.$FI"):
                self.pings += 1
            else:
                self._row_times.append(time.monotonic())

    def close(self) -> None:
        self._nc.close()

    def _gaps(self) -> list[tuple[float, int]]:
        times = self._row_times
        return [
            (later - earlier, index + 1)
            for index, (earlier, later) in enumerate(itertools.pairwise(times))
        ]

    @property
    def longest_gap(self) -> float:
        """Seconds of the longest wait between two rows."""
        return max(self._gaps())[0]

    @property
    def rows_before_the_longest_gap(self) -> int:
        return max(self._gaps())[1]

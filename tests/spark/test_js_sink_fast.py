"""The "jetstream" sink's ``publishMode``: fast-ingest batches (one per task, the
server's count checked), "auto" choosing by the stream's ``allow_batched``, and the
errors when a stream does not allow fast batches or cuts one short."""

from __future__ import annotations

import time
from typing import Any

import pytest
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType, StructField, StructType

import nats_sync
from nats_sync.jetstream import JetStream
from nats_sync.spark.jetstream import JetStreamDataSource
from nats_sync.testing import NatsServer

pytestmark = pytest.mark.timeout(240)

ROW_BYTES = 128


def _write(df: Any, url: str, **options: str) -> None:
    writer = df.write.format("jetstream").mode("append").option("servers", url)
    for key, value in options.items():
        writer = writer.option(key, value)
    writer.save()


def _rows(spark: Any, count: int, partitions: int, prefix: str = "row") -> Any:
    """``count`` rows of ROW_BYTES bytes (the row number, zero-padded) with a msg_id."""
    return spark.range(count, numPartitions=partitions).select(
        F.format_string(f"%0{ROW_BYTES}d", "id").cast("binary").alias("data"),
        F.format_string(f"{prefix}-%d", "id").alias("msg_id"),
    )


@pytest.mark.slow
def test_fast_writes_100k_rows_once_in_task_order_and_a_second_write_stores_nothing_new(
    spark: Any, js_server: NatsServer, js: JetStream
) -> None:
    js.create_stream(
        name="FAST_100K", subjects=["fast.100k"], allow_batched=True, allow_direct=True
    )
    df = _rows(spark, 100_000, 2).cache()
    df.count()
    try:
        _write(df, js_server.url, subject="fast.100k", publishMode="fast")
        state = js.stream("FAST_100K").info().state
        assert (state.messages, state.last_seq) == (100_000, 100_000)
        # The same rows again: every message id is a duplicate the batch counts as
        # taken (so the count check passes) and the stream stores nothing new.
        _write(df, js_server.url, subject="fast.100k", publishMode="fast")
    finally:
        df.unpersist()
    state = js.stream("FAST_100K").info().state
    assert (state.messages, state.last_seq) == (100_000, 100_000)
    numbers = [int(msg.data) for msg in js.stream("FAST_100K").get_msgs(1, batch=5_000)]
    assert sorted(numbers) == list(range(100_000))
    # Each task's batch is stored in the task's order (interleaved with the other task).
    first_half = [n for n in numbers if n < 50_000]
    second_half = [n for n in numbers if n >= 50_000]
    assert first_half == sorted(first_half) and second_half == sorted(second_half)


def _writer_mode(url: str, subject: str, mode: str | None = None) -> str:
    """The publish mode the driver settles for a write to ``subject`` (what Spark's
    driver calls before any task; the tasks get these settings pickled)."""
    options = {"servers": url, "subject": subject}
    if mode is not None:
        options["publishMode"] = mode
    writer = JetStreamDataSource(options).writer(
        StructType([StructField("data", BinaryType())]), False
    )
    return str(writer.settings.publish_mode)


def _replies_seen(url: str, subject: str, write: Any, count: int) -> list[str]:
    """The reply subjects of the ``count`` messages ``write()`` publishes to
    ``subject``, as a plain subscriber sees them."""
    with nats_sync.connect(url) as nc:
        sub = nc.subscribe(subject)
        nc.flush()
        write()
        replies: list[str] = []
        deadline = time.monotonic() + 30
        while len(replies) < count and time.monotonic() < deadline:
            replies += [msg.reply or "" for msg in sub.next_msgs(count, timeout=1.0)]
        return replies


def test_auto_picks_fast_on_an_allow_batched_stream_and_async_otherwise(
    spark: Any, js_server: NatsServer, js: JetStream
) -> None:
    js.create_stream(name="AUTO_FAST", subjects=["auto.fast"], allow_batched=True)
    js.create_stream(name="AUTO_ASYNC", subjects=["auto.async"])
    url = js_server.url
    assert _writer_mode(url, "auto.fast") == "fast"
    assert _writer_mode(url, "auto.async") == "async"
    assert _writer_mode(url, "auto.fast", "async") == "async"
    df = _rows(spark, 1_000, 2)
    # What went over the wire: a fast-ingest message's reply subject ends in ".$FI"
    # (ADR-50), a publish_async one is a plain inbox.
    fast_replies = _replies_seen(
        url, "auto.fast", lambda: _write(df, url, subject="auto.fast"), 1_000
    )
    async_replies = _replies_seen(
        url, "auto.async", lambda: _write(df, url, subject="auto.async"), 1_000
    )
    assert len(fast_replies) == len(async_replies) == 1_000
    assert all(reply.endswith(".$FI") for reply in fast_replies)
    assert not any(reply.endswith(".$FI") for reply in async_replies)
    for name in ("AUTO_FAST", "AUTO_ASYNC"):
        state = js.stream(name).info().state
        assert (state.messages, state.last_seq) == (1_000, 1_000), name


def test_fast_on_a_stream_without_allow_batched_fails_before_any_task(
    spark: Any, js_server: NatsServer, js: JetStream
) -> None:
    js.create_stream(name="NOT_BATCHED", subjects=["notbatched.>"])
    df = _rows(spark, 100, 1)
    with pytest.raises(
        Exception,
        match=r"publishMode 'fast' needs a stream that allows "
        r"fast-ingest batches, but stream 'NOT_BATCHED'.*"
        r"allow_batched",
    ):
        _write(df, js_server.url, subject="notbatched.a", publishMode="fast")
    assert js.stream("NOT_BATCHED").info().state.messages == 0


def test_fast_with_a_subject_column_on_a_stream_without_allow_batched_fails_the_task(
    spark: Any, js_server: NatsServer, js: JetStream
) -> None:
    """Rows that name their subjects: the driver cannot look the stream up, so the first
    task's first message finds out (the server refuses the batch)."""
    js.create_stream(name="NOT_BATCHED_COL", subjects=["notbatchedcol.>"])
    df = _rows(spark, 100, 1).withColumn("subject", F.lit("notbatchedcol.a"))
    with pytest.raises(
        Exception,
        match=r"publishMode 'fast' needs a stream that allows "
        r"fast-ingest batches.*use publishMode 'async'",
    ):
        _write(df, js_server.url, publishMode="fast")
    assert js.stream("NOT_BATCHED_COL").info().state.messages == 0


def test_a_batch_the_stream_cuts_short_fails_the_task_naming_both_counts(
    spark: Any, js_server: NatsServer, js: JetStream
) -> None:
    """A real mismatch: the stream holds at most 50 messages and refuses the rest
    (discard "new"), so the server ends the task's batch at message 51 and its final
    ack counts 50 of the 300 rows."""
    js.create_stream(
        name="CUT_SHORT", subjects=["cut.short"], allow_batched=True, max_msgs=50, discard="new"
    )
    df = _rows(spark, 300, 1)
    with pytest.raises(
        Exception,
        match=r"the stream took 50 of the \d+ rows this task "
        r"sent.*maximum messages exceeded",
    ):
        _write(df, js_server.url, subject="cut.short", publishMode="fast")
    assert js.stream("CUT_SHORT").info().state.messages == 50


def test_fast_writes_rows_with_subjects_and_headers_and_an_empty_partition(
    spark: Any, js_server: NatsServer, js: JetStream
) -> None:
    js.create_stream(
        name="FAST_ROWS", subjects=["fast.rows.>"], allow_batched=True, allow_direct=True
    )
    rows = [(b"one", "fast.rows.a", {"k": "v"}), (None, None, None), (b"", None, {"x": "y"})]
    # Three rows in four partitions: at least one task has no row and opens no batch.
    df = spark.createDataFrame(
        spark.sparkContext.parallelize(rows, 4),
        "data binary, subject string, headers map<string,string>",
    )
    assert df.rdd.getNumPartitions() == 4
    _write(df, js_server.url, subject="fast.rows.default", publishMode="fast")
    got = sorted(
        (msg.subject, msg.data, sorted((msg.headers or {}).items()))
        for msg in js.stream("FAST_ROWS").get_msgs(1)
    )
    assert got == [
        ("fast.rows.a", b"one", [("k", "v")]),
        ("fast.rows.default", b"", []),
        ("fast.rows.default", b"", [("x", "y")]),
    ]


@pytest.mark.parametrize("rows_for_b", [10, 5_000])
def test_fast_rows_of_one_task_for_two_streams_fail_the_task_saying_why(
    spark: Any, js_server: NatsServer, js: JetStream, rows_for_b: int
) -> None:
    """A fast batch belongs to the stream of the task's first row: the other stream
    refuses the rest as a batch it does not know. The task learns it at its commit (few
    rows for B) or at an add (many), and says why either way."""
    stream_a, stream_b = f"TWO_A_{rows_for_b}", f"TWO_B_{rows_for_b}"
    js.create_stream(name=stream_a, subjects=[f"two.{rows_for_b}.a"], allow_batched=True)
    js.create_stream(name=stream_b, subjects=[f"two.{rows_for_b}.b"], allow_batched=True)
    df = spark.range(10 + rows_for_b, numPartitions=1).select(
        F.col("id").cast("string").alias("data"),
        F.when(F.col("id") < 10, f"two.{rows_for_b}.a")
        .otherwise(f"two.{rows_for_b}.b")
        .alias("subject"),
    )
    with pytest.raises(
        Exception,
        match=r"batch publish ID unknown.*the rows of a task "
        r"must all go to one stream",
    ):
        _write(df, js_server.url, publishMode="fast")
    assert js.stream(stream_a).info().state.messages == 10
    assert js.stream(stream_b).info().state.messages == 0

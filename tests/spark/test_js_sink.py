"""The "jetstream" sink: acknowledged batch and streaming writes, message ids and what a
task retry, a re-run or a replayed micro-batch stores (nothing twice), option errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F

from nats_sync.jetstream import JetStream, StoredMsg
from nats_sync.testing import NatsServer

pytestmark = pytest.mark.timeout(180)


def _stream(js: JetStream, name: str, subjects: str) -> None:
    js.create_stream(name=name, subjects=[subjects], allow_direct=True)


def _stored(js: JetStream, name: str) -> list[StoredMsg]:
    return list(js.stream(name).get_msgs(1))


def _write(df: Any, url: str, **options: str) -> None:
    writer = df.write.format("jetstream").mode("append").option("servers", url)
    for key, value in options.items():
        writer = writer.option(key, value)
    writer.save()


def test_batch_write_stores_every_row_with_its_subject_headers_and_msg_id(
    spark: Any, js_server: NatsServer, js: JetStream
) -> None:
    _stream(js, "SINK_BATCH", "sink.batch.>")
    df = spark.range(3_000, numPartitions=3).select(
        F.col("id").cast("string").alias("data"),
        F.concat(F.lit("sink.batch."), (F.col("id") % 3).cast("string")).alias("subject"),
        F.create_map(F.lit("n"), F.col("id").cast("string")).alias("headers"),
        F.concat(F.lit("m-"), F.col("id").cast("string")).alias("msg_id"),
    )
    _write(df, js_server.url)
    stored = _stored(js, "SINK_BATCH")
    assert len(stored) == 3_000
    assert sorted(int(msg.data) for msg in stored) == list(range(3_000))
    for msg in stored:
        n = int(msg.data)
        assert msg.subject == f"sink.batch.{n % 3}"
        assert msg.headers == {"n": str(n), "Nats-Msg-Id": f"m-{n}"}


def test_null_data_is_an_empty_payload_and_the_subject_option_is_the_default(
    spark: Any, js_server: NatsServer, js: JetStream
) -> None:
    _stream(js, "SINK_ROWS", "sink.rows.>")
    df = spark.createDataFrame(
        [(b"one", "sink.rows.a", {"k": "v"}), (None, None, None), (b"", None, {"x": "y"})],
        "data binary, subject string, headers map<string,string>",
    )
    _write(df.coalesce(1), js_server.url, subject="sink.rows.default")
    got = sorted(
        (msg.subject, msg.data, sorted((msg.headers or {}).items()))
        for msg in _stored(js, "SINK_ROWS")
    )
    assert got == [
        ("sink.rows.a", b"one", [("k", "v")]),
        ("sink.rows.default", b"", []),
        ("sink.rows.default", b"", [("x", "y")]),
    ]


def test_a_row_with_no_subject_fails_the_write_naming_the_row(
    spark: Any, js_server: NatsServer, js: JetStream
) -> None:
    _stream(js, "SINK_NOSUBJ", "sink.nosubj")
    df = spark.createDataFrame([("x", "sink.nosubj"), ("y", None)], "data string, subject string")
    with pytest.raises(Exception, match=r"row 1 of this task has a null 'subject'"):
        _write(df.coalesce(1), js_server.url)


def test_writing_the_same_rows_twice_with_msg_id_columns_stores_them_once(
    spark: Any, js_server: NatsServer, js: JetStream
) -> None:
    _stream(js, "SINK_TWICE", "sink.twice")
    df = spark.range(1_000, numPartitions=2).select(
        F.lit("SRC").alias("source"),
        F.col("id").alias("seq"),
        F.col("id").cast("string").alias("data"),
    )
    _write(df, js_server.url, subject="sink.twice", msgIdColumns="source, seq")
    _write(df, js_server.url, subject="sink.twice", msgIdColumns="source, seq")
    state = js.stream("SINK_TWICE").info().state
    assert (state.messages, state.last_seq) == (1_000, 1_000)  # duplicates take no sequence
    ids = {msg.headers["Nats-Msg-Id"] for msg in _stored(js, "SINK_TWICE") if msg.headers}
    assert ids == {f"SRC:{n}" for n in range(1_000)}


def _failing_once(marker: str) -> Any:
    """A mapInArrow step that, the first time it runs anywhere, yields six batches, waits
    for the sink to publish those that reached it, then fails (later runs pass every
    batch). Spark hands the sink a batch some batches behind the step, hence six."""

    def step(batches: Iterator[Any]) -> Iterator[Any]:
        import time as _time

        for index, batch in enumerate(batches):
            if index == 6 and not os.path.exists(marker):
                with open(marker, "w"):
                    pass
                _time.sleep(2.0)
                raise RuntimeError("failing once on purpose")
            yield batch

    return step


def test_a_rerun_after_a_task_failed_midway_stores_nothing_twice(
    spark: Any, js_server: NatsServer, js: JetStream, tmp_path: Path
) -> None:
    _stream(js, "SINK_RERUN", "sink.rerun")
    # Rows of ~1 kB in batches of 200, so that Spark's buffers pass a few batches on to
    # the sink before the step fails.
    df = spark.range(2_000, numPartitions=1).select(
        F.concat(F.col("id").cast("string"), F.lit(":"), F.repeat(F.lit("x"), 1000)).alias("data"),
        F.concat(F.lit("r-"), F.col("id").cast("string")).alias("msg_id"),
    )
    failing = df.mapInArrow(_failing_once(str(tmp_path / "failed")), df.schema)
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "200")
    try:
        with pytest.raises(Exception, match="failing once on purpose"):
            _write(failing, js_server.url, subject="sink.rerun")
        partial = js.stream("SINK_RERUN").info().state.messages
        _write(failing, js_server.url, subject="sink.rerun")
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    assert 0 < partial < 2_000, "the failed run should have stored part of its rows"
    stored = _stored(js, "SINK_RERUN")
    assert sorted(int(msg.data.split(b":")[0]) for msg in stored) == list(range(2_000))


_RETRY_SCRIPT = """
import os, sys
os.environ["PYSPARK_PYTHON"] = sys.executable
from pyspark import TaskContext
from pyspark.sql import SparkSession, functions as F
from nats_sync.spark import register

url = sys.argv[1]
spark = (SparkSession.builder.master("local[2,4]").appName("nats-sync-retry-test")
         .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.execution.arrow.maxRecordsPerBatch", "200").getOrCreate())
spark.sparkContext.setLogLevel("OFF")
register(spark)

def step(batches):
    import time
    for index, batch in enumerate(batches):
        if index == 6 and TaskContext.get().attemptNumber() == 0:
            time.sleep(2.0)
            raise RuntimeError("first attempt fails on purpose")
        yield batch

df = spark.range(4000, numPartitions=2).select(
    F.concat(F.col("id").cast("string"), F.lit(":"), F.repeat(F.lit("x"), 1000)).alias("data"),
    F.concat(F.lit("t-"), F.col("id").cast("string")).alias("msg_id"))
for subject, frame in (("sink.retry.ids", df), ("sink.retry.plain", df.drop("msg_id"))):
    (frame.mapInArrow(step, frame.schema).write.format("jetstream").mode("append")
     .option("servers", url).option("subject", subject).save())
spark.stop()
print("WRITTEN")
"""


def test_a_retried_task_stores_nothing_twice(js_server: NatsServer, js: JetStream) -> None:
    """Spark's own task retry (local[2,4]: four attempts), in a Spark of its own: a
    process holds one SparkContext, and the shared one (local[2]) retries nothing."""
    _stream(js, "SINK_RETRY_IDS", "sink.retry.ids")
    _stream(js, "SINK_RETRY_PLAIN", "sink.retry.plain")
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_RETRY_SCRIPT), js_server.url],
        capture_output=True,
        text=True,
        timeout=150,
        check=False,
    )
    assert "WRITTEN" in done.stdout, done.stderr[-3000:]
    with_ids = _stored(js, "SINK_RETRY_IDS")
    assert sorted(int(msg.data.split(b":")[0]) for msg in with_ids) == list(range(4_000))
    assert js.stream("SINK_RETRY_IDS").info().state.last_seq == 4_000
    # The same job without message ids: what the failed first attempts had stored is
    # stored again by the retries (so the first attempts did publish part of their rows).
    assert js.stream("SINK_RETRY_PLAIN").info().state.messages > 4_000


def test_streaming_write_and_a_replayed_micro_batch_store_every_row_once(
    spark: Any, js_server: NatsServer, js: JetStream, tmp_path: Path
) -> None:
    _stream(js, "SINK_STREAM", "sink.stream")
    source = tmp_path / "in"
    source.mkdir()
    for part in range(2):
        lines = [json.dumps({"data": f"{part}-{n}", "msg_id": f"{part}-{n}"}) for n in range(300)]
        (source / f"part-{part}.json").write_text("\n".join(lines))
    checkpoint = tmp_path / "checkpoint"

    def run() -> None:
        query = (
            spark.readStream.schema("data string, msg_id string")
            .option("maxFilesPerTrigger", 1)
            .json(str(source))
            .writeStream.format("jetstream")
            .option("servers", js_server.url)
            .option("subject", "sink.stream")
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(120)
        assert query.exception() is None

    run()
    assert js.stream("SINK_STREAM").info().state.messages == 600
    # Forget that micro-batch 1 committed: the restarted query replays it.
    for name in ("1", ".1.crc"):
        (checkpoint / "commits" / name).unlink(missing_ok=True)
    run()
    state = js.stream("SINK_STREAM").info().state
    assert (state.messages, state.last_seq) == (600, 600)
    stored = {msg.data.decode() for msg in _stored(js, "SINK_STREAM")}
    assert stored == {f"{part}-{n}" for part in range(2) for n in range(300)}


def test_rows_no_stream_acknowledges_fail_the_job_saying_so(
    spark: Any, js_server: NatsServer
) -> None:
    df = spark.range(20, numPartitions=1).select(F.col("id").cast("string").alias("data"))
    # Asked again within retryTimeout (as while a stream's leader is being elected),
    # then the error names the budget and the last failure.
    with pytest.raises(
        Exception, match=r"retry budget of 3s.*0 of the 20 rows .* acknowledged.*no stream stores"
    ):
        _write(df, js_server.url, subject="sink.nowhere", timeout="1", retryTimeout="3")


@pytest.mark.parametrize(
    ("options", "extra_columns", "message"),
    [
        ({"subject": "a", "colour": "red"}, [], "unknown option"),
        ({"subject": "a"}, ["reply"], "column 'reply' is not allowed"),
        ({"subject": "a", "msgIdColumns": "nope"}, [], "msgIdColumns.*nope"),
    ],
)
def test_bad_options_and_columns_fail_the_write_before_any_task(
    spark: Any,
    js_server: NatsServer,
    options: dict[str, str],
    extra_columns: list[str],
    message: str,
) -> None:
    # Subject "a" has no stream: a task that ran would fail with another message.
    df = spark.createDataFrame([("x",)] * 3, "data string")
    df = df.select("data", *[F.lit("x").alias(name) for name in extra_columns])
    with pytest.raises(Exception, match=message):
        _write(df, js_server.url, **options)


@pytest.mark.parametrize(
    ("options", "schema", "message"),
    [
        ({}, "data string", "give option 'subject'"),
        ({"subject": "a"}, "payload string", "needs a 'data' column"),
        ({"subject": "a"}, "data string, extra int", "unknown column"),
        ({"subject": "a"}, "data int", "binary or string"),
        ({"subject": "a"}, "data string, msg_id long", "'msg_id' must be a string"),
        ({"subject": "a"}, "data string, headers map<string,int>", "map<string,string>"),
        ({"subject": "a", "msgIdColumns": "k"}, "data string, k string, msg_id string", "not both"),
        ({"subject": "a", "msgIdColumns": "k"}, "data string, k double", "string or an integer"),
        ({"subject": "a", "msgIdColumns": " , "}, "data string", "names no column"),
        ({"subject": "a.*"}, "data string", "option 'subject'"),
        ({"subject": "a", "timeout": "soon"}, "data string", "number of seconds"),
        ({"subject": "a", "maxPendingAcks": "0"}, "data string", "maxPendingAcks"),
        ({"subject": "a", "domain": "x.y"}, "data string", "domain"),
        ({"subject": "a", "servers": ""}, "data string", "'servers' is required"),
        (
            {"subject": "a", "publishMode": "turbo"},
            "data string",
            r"option 'publishMode' must be one of auto, fast, async, got 'turbo'",
        ),
        (
            {"subject": "a", "commitBucket": "log"},
            "data string",
            r"'commitBucket' is for streaming writes \(writeStream\) only",
        ),
    ],
)
def test_the_driver_checks_name_the_bad_option_or_column(
    spark: Any, options: dict[str, str], schema: str, message: str
) -> None:
    from nats_sync.errors import InvalidArgumentError
    from nats_sync.spark._jetstream.sink import parse_sink_options

    struct = spark.createDataFrame([], schema).schema
    with pytest.raises(InvalidArgumentError, match=message):
        parse_sink_options({"servers": "nats://127.0.0.1:4222", **options}, struct, False)


def test_a_streaming_write_names_a_commit_bucket_that_is_not_a_bucket_name(spark: Any) -> None:
    from nats_sync.errors import InvalidArgumentError
    from nats_sync.spark._jetstream.sink import parse_sink_options

    struct = spark.createDataFrame([], "data string").schema
    options = {"servers": "nats://127.0.0.1:4222", "subject": "a", "commitBucket": "my.log"}
    with pytest.raises(InvalidArgumentError, match=r"option 'commitBucket': .*'my.log'"):
        parse_sink_options(options, struct, False, streaming=True)
    settings = parse_sink_options(
        {**options, "commitBucket": "my_log", "publishMode": "Fast"}, struct, False, streaming=True
    )
    assert (settings.commit_bucket, settings.publish_mode) == ("my_log", "fast")


def test_overwrite_mode_is_refused(spark: Any, js_server: NatsServer) -> None:
    df = spark.createDataFrame([("x",)], "data string")
    writer = df.write.format("jetstream").mode("overwrite").option("servers", js_server.url)
    with pytest.raises(Exception, match="append"):
        writer.option("subject", "a").save()

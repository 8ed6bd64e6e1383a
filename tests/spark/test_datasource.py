"""The "nats" data source: batch and streaming writes, streaming reads, option errors."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F

import nats_sync
from nats_sync.testing import NatsServer

pytestmark = pytest.mark.timeout(180)


def _collect(sub: nats_sync.Subscription, count: int, timeout: float = 20.0) -> list[nats_sync.Msg]:
    """Exactly the messages ``sub`` holds once ``count`` arrived (then checks nothing else does)."""
    received = [sub.next_msg(timeout=timeout) for _ in range(count)]
    with pytest.raises(nats_sync.TimeoutError):
        sub.next_msg(timeout=0.3)
    return received


def _write(df: Any, server_url: str, **options: str) -> None:
    writer = df.write.format("nats").mode("append").option("servers", server_url)
    for key, value in options.items():
        writer = writer.option(key, value)
    writer.save()


def test_batch_write_publishes_every_row_exactly_once(
    spark: Any, server: NatsServer, client: nats_sync.Client
) -> None:
    sub = client.subscribe("ds.batch", pending_msgs_limit=100_000)
    client.flush()
    df = spark.range(3_000, numPartitions=3).select(F.col("id").cast("string").alias("data"))
    _write(df, server.url, subject="ds.batch")
    payloads = sorted(int(msg.data) for msg in _collect(sub, 3_000))
    assert payloads == list(range(3_000))


def test_per_row_subject_reply_and_headers_are_honoured(
    spark: Any, server: NatsServer, client: nats_sync.Client
) -> None:
    sub = client.subscribe("ds.rows.>")
    client.flush()
    df = spark.createDataFrame(
        [
            (b"one", "ds.rows.a", "back.1", {"k": "v1"}),
            (b"two", "ds.rows.b", None, None),
            (b"", None, None, {"x": "y"}),  # no subject column value: the option applies
        ],
        "data binary, subject string, reply string, headers map<string,string>",
    )
    _write(df.coalesce(1), server.url, subject="ds.rows.default")
    by_subject = {msg.subject: msg for msg in _collect(sub, 3)}
    assert set(by_subject) == {"ds.rows.a", "ds.rows.b", "ds.rows.default"}
    first = by_subject["ds.rows.a"]
    assert (first.data, first.reply, first.headers) == (b"one", "back.1", {"k": "v1"})
    assert by_subject["ds.rows.b"].headers is None and by_subject["ds.rows.b"].reply == ""
    assert by_subject["ds.rows.default"].headers == {"x": "y"}


def test_write_against_a_dead_server_fails_the_query_clearly(spark: Any) -> None:
    with NatsServer() as dead:
        url = dead.url
    df = spark.createDataFrame([("x",)], "data string")
    with pytest.raises(Exception, match=r"could not publish|no servers"):
        _write(df, url, subject="ds.dead", connect_timeout="0.5")


@pytest.mark.parametrize(
    ("options", "schema", "message"),
    [
        ({"subject": "a", "colour": "red"}, "data string", "unknown option"),
        ({}, "data string", "subject"),
        ({"subject": "a"}, "payload string", "needs a 'data' column"),
        ({"subject": "a"}, "data string, extra int", "unknown column"),
        ({"subject": "a"}, "data int", "binary or string"),
        ({"subject": "a", "timeout": "soon"}, "data string", "number of seconds"),
    ],
)
def test_bad_options_and_columns_fail_before_any_task(
    spark: Any, server: NatsServer, options: dict[str, str], schema: str, message: str
) -> None:
    df = spark.createDataFrame([], schema)
    with pytest.raises(Exception, match=message):
        _write(df, server.url, **options)


def test_overwrite_mode_is_refused(spark: Any, server: NatsServer) -> None:
    df = spark.createDataFrame([("x",)], "data string")
    writer = df.write.format("nats").mode("overwrite").option("servers", server.url)
    with pytest.raises(Exception, match="append"):
        writer.option("subject", "a").save()


def test_batch_read_is_refused_with_a_pointer_to_read_stream(
    spark: Any, server: NatsServer
) -> None:
    reader = spark.read.format("nats").option("servers", server.url).option("subject", "a")
    with pytest.raises(Exception, match="readStream"):
        reader.load().collect()


def test_streaming_write_publishes_each_micro_batch(
    spark: Any, server: NatsServer, client: nats_sync.Client, tmp_path: Path
) -> None:
    source = tmp_path / "in"
    source.mkdir()
    for part in range(3):
        lines = [json.dumps({"data": f"{part}-{n}"}) for n in range(200)]
        (source / f"part-{part}.json").write_text("\n".join(lines))
    sub = client.subscribe("ds.stream.out", pending_msgs_limit=10_000)
    client.flush()
    query = (
        spark.readStream.schema("data string")
        .option("maxFilesPerTrigger", 1)
        .json(str(source))
        .writeStream.format("nats")
        .option("servers", server.url)
        .option("subject", "ds.stream.out")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120)
    payloads = {msg.data.decode() for msg in _collect(sub, 600)}
    assert payloads == {f"{part}-{n}" for part in range(3) for n in range(200)}


def test_streaming_read_delivers_published_messages_to_the_query(
    spark: Any, server: NatsServer, client: nats_sync.Client, tmp_path: Path
) -> None:
    query = (
        spark.readStream.format("nats")
        .option("servers", server.url)
        .option("subject", "ds.in.>")
        .load()
        .writeStream.format("memory")
        .queryName("nats_in")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(processingTime="500 milliseconds")
        .start()
    )
    try:
        deadline = time.monotonic() + 60
        while query.lastProgress is None:  # the first micro-batch means we are subscribed
            assert time.monotonic() < deadline, "the streaming query never ran a batch"
            time.sleep(0.2)
        for n in range(5_000):
            client.publish(f"ds.in.{n % 2}", str(n).encode(), headers={"n": str(n)})
        client.flush()
        count = 0
        while count < 5_000:
            assert time.monotonic() < deadline + 60, f"only {count} of 5000 arrived"
            time.sleep(0.5)
            count = spark.sql("select count(*) from nats_in").first()[0]
        rows = spark.sql("select * from nats_in").collect()
    finally:
        query.stop()
    assert len(rows) == 5_000
    assert sorted(int(row.data) for row in rows) == list(range(5_000))
    sample = next(row for row in rows if row.data == b"7")
    assert sample.subject == "ds.in.1" and sample.headers == {"n": "7"}
    assert sample.reply is None and sample.received_at is not None

"""spark.readStream.format("jetstream"): checkpoints, replay, limits and data loss.

Every query runs with a bounded wait (``awaitTermination(timeout)`` or a polling deadline)
and is stopped in ``finally``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from nats_sync.jetstream import JetStream
from nats_sync.spark._jetstream import source
from nats_sync.testing import NatsServer

#: maxOffsetsPerTrigger needs Spark's admission control, new in pyspark 4.2; on 4.1 (the
#: lowest declared, make test-min) the source refuses the option with a clear error.
ADMISSION_CONTROL = source.ReadMaxRows is not None
needs_admission_control = pytest.mark.skipif(
    not ADMISSION_CONTROL, reason="maxOffsetsPerTrigger needs pyspark >= 4.2"
)

QUERY_TIMEOUT = 120


def _publish(js: JetStream, stream: str, first: int, count: int) -> None:
    for index in range(first, first + count):
        js.publish_async(f"{stream.lower()}.{index % 3}", f"order-{index}".encode())
    js.publish_async_completed(60)


def _stream_df(spark: Any, url: str, stream: str, **options: str) -> Any:
    reader = spark.readStream.format("jetstream").option("servers", url).option("stream", stream)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def _run_available_now(df: Any, writer_setup: Any) -> None:
    query = writer_setup(df.writeStream).trigger(availableNow=True).start()
    try:
        assert query.awaitTermination(QUERY_TIMEOUT), "the query did not finish in time"
        assert query.exception() is None
    finally:
        query.stop()


@needs_admission_control
def test_stopped_part_way_and_restarted_lands_every_message_once(
    spark: Any, js_server: NatsServer, js: JetStream, tmp_path: Path
) -> None:
    js.create_stream(name="ORDERS", subjects=["orders.>"])
    _publish(js, "ORDERS", 0, 6_000)
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")
    df = _stream_df(
        spark, js_server.url, "ORDERS", startingOffsets="earliest", maxOffsetsPerTrigger="1000"
    ).select("stream", "seq", "data")
    query = (
        df.writeStream.format("parquet")
        .option("path", out)
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime="0 seconds")
        .start()
    )
    try:
        deadline = time.monotonic() + QUERY_TIMEOUT
        while len(query.recentProgress) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(query.recentProgress) >= 2, "no two micro-batches in time"
    finally:
        query.stop()  # part-way: at most a few of the six batches are done
    first_run = spark.read.parquet(out).count()
    assert 0 < first_run < 6_000
    _publish(js, "ORDERS", 6_000, 4_000)
    _run_available_now(
        _stream_df(
            spark, js_server.url, "ORDERS", startingOffsets="latest", maxOffsetsPerTrigger="3000"
        ).select("stream", "seq", "data"),
        lambda w: w.format("parquet").option("path", out).option("checkpointLocation", checkpoint),
    )
    landed = spark.read.parquet(out)
    assert landed.count() == 10_000
    assert landed.select("seq").distinct().count() == 10_000
    seqs = {row.seq for row in landed.select("seq").collect()}
    assert seqs == set(range(1, 10_001))
    datas = {bytes(row.data) for row in landed.select("data").collect()}
    assert datas == {f"order-{index}".encode() for index in range(10_000)}


@needs_admission_control
def test_a_replayed_batch_reads_exactly_its_range(
    spark: Any, js_server: NatsServer, js: JetStream, tmp_path: Path
) -> None:
    js.create_stream(name="REPLAY", subjects=["replay.>"])
    _publish(js, "REPLAY", 0, 2_500)
    checkpoint = tmp_path / "checkpoint"
    seen = tmp_path / "seen"
    seen.mkdir()

    def record(batch_df: Any, batch_id: int) -> None:
        seqs = sorted(row.seq for row in batch_df.select("seq").collect())
        (seen / f"{batch_id}-{time.monotonic_ns()}.json").write_text(json.dumps(seqs))

    def writer(w: Any) -> Any:
        return w.foreachBatch(record).option("checkpointLocation", str(checkpoint))

    df = _stream_df(
        spark, js_server.url, "REPLAY", startingOffsets="earliest", maxOffsetsPerTrigger="1000"
    )
    _run_available_now(df, writer)
    batches = sorted(seen.iterdir())
    assert len(batches) == 3
    last_id = max(int(path.name.split("-")[0]) for path in batches)
    last_seqs = json.loads(next(p for p in batches if p.name.startswith(f"{last_id}-")).read_text())
    assert last_seqs == list(range(2_001, 2_501))
    # As if the query died after planning its last batch and before committing it.
    (checkpoint / "commits" / str(last_id)).unlink()
    (checkpoint / "commits" / f".{last_id}.crc").unlink(missing_ok=True)
    _publish(js, "REPLAY", 2_500, 100)  # newer messages must not join the replayed batch
    _run_available_now(df, writer)
    runs = sorted(seen.iterdir())
    replays = [p for p in runs if p.name.startswith(f"{last_id}-")]
    assert len(replays) == 2
    assert [json.loads(p.read_text()) for p in replays] == [last_seqs, last_seqs]
    after = [json.loads(p.read_text()) for p in runs if int(p.name.split("-")[0]) > last_id]
    assert sorted(seq for seqs in after for seq in seqs) == list(range(2_501, 2_601))


def test_starting_offsets_latest_and_json(
    spark: Any, js_server: NatsServer, js: JetStream, tmp_path: Path
) -> None:
    js.create_stream(name="START", subjects=["start.>"])
    _publish(js, "START", 0, 50)
    earliest = {"startingOffsets": "earliest"}
    if ADMISSION_CONTROL:  # pyspark 4.1 has no maxOffsetsPerTrigger: one batch there
        earliest["maxOffsetsPerTrigger"] = "7"
    for name, options, expected in (
        ("latest", {"startingOffsets": "latest"}, []),
        ("json", {"startingOffsets": '{"START": 41}'}, list(range(41, 51))),
        ("earliest", earliest, list(range(1, 51))),
    ):
        _run_available_now(
            _stream_df(spark, js_server.url, "START", **options).select("seq"),
            lambda w, name=name: (
                w.format("parquet")
                .option("path", str(tmp_path / name))
                .option("checkpointLocation", str(tmp_path / f"{name}-cp"))
            ),
        )
        got = sorted(row.seq for row in spark.read.parquet(str(tmp_path / name)).collect())
        assert got == expected, name
    # maxOffsetsPerTrigger=7 made ceil(50 / 7) micro-batches; without it, one.
    commits = [
        p for p in (tmp_path / "earliest-cp" / "commits").iterdir() if not p.name.startswith(".")
    ]
    assert len(commits) == (8 if ADMISSION_CONTROL else 1)


def _checkpointed_then_purged(
    spark: Any, url: str, js: JetStream, stream: str, tmp_path: Path
) -> tuple[Any, Any]:
    js.create_stream(name=stream, subjects=[f"{stream.lower()}.>"])
    _publish(js, stream, 0, 100)
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "cp")

    def writer(w: Any) -> Any:
        return w.format("parquet").option("path", out).option("checkpointLocation", checkpoint)

    _run_available_now(
        _stream_df(spark, url, stream, startingOffsets="earliest").select("seq"), writer
    )
    _publish(js, stream, 100, 100)
    js.stream(stream).purge(keep=30)  # 101..170 go unread
    return writer, out


def test_fail_on_data_loss_true_names_the_lost_range(
    spark: Any, js_server: NatsServer, js: JetStream, tmp_path: Path
) -> None:
    writer, _ = _checkpointed_then_purged(spark, js_server.url, js, "LOSSA", tmp_path)
    query = writer(_stream_df(spark, js_server.url, "LOSSA").select("seq").writeStream)
    query = query.trigger(availableNow=True).start()
    try:
        with pytest.raises(
            Exception,
            match=r"messages 101\.\.170 of stream 'LOSSA' were "
            r"removed",
        ):
            query.awaitTermination(QUERY_TIMEOUT)
    finally:
        query.stop()


def test_fail_on_data_loss_false_goes_on_from_the_head(
    spark: Any, js_server: NatsServer, js: JetStream, tmp_path: Path
) -> None:
    writer, out = _checkpointed_then_purged(spark, js_server.url, js, "LOSSB", tmp_path)
    _run_available_now(
        _stream_df(spark, js_server.url, "LOSSB", failOnDataLoss="false").select("seq"), writer
    )
    got = sorted(row.seq for row in spark.read.parquet(out).collect())
    assert got == list(range(1, 101)) + list(range(171, 201))


def test_a_stream_made_again_is_data_loss(
    spark: Any, js_server: NatsServer, js: JetStream, tmp_path: Path
) -> None:
    js.create_stream(name="AGAIN", subjects=["again.>"])
    _publish(js, "AGAIN", 0, 20)
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "cp")

    def writer(w: Any) -> Any:
        return w.format("parquet").option("path", out).option("checkpointLocation", checkpoint)

    _run_available_now(
        _stream_df(spark, js_server.url, "AGAIN", startingOffsets="earliest").select("seq", "data"),
        writer,
    )
    js.delete_stream("AGAIN")
    time.sleep(0.01)  # a different creation time
    js.create_stream(name="AGAIN", subjects=["again.>"])
    _publish(js, "AGAIN", 100, 30)
    query = (
        writer(_stream_df(spark, js_server.url, "AGAIN").select("seq", "data").writeStream)
        .trigger(availableNow=True)
        .start()
    )
    try:
        with pytest.raises(Exception, match="was deleted and made again"):
            query.awaitTermination(QUERY_TIMEOUT)
    finally:
        query.stop()
    _run_available_now(
        _stream_df(spark, js_server.url, "AGAIN", failOnDataLoss="false").select("seq", "data"),
        writer,
    )
    datas = sorted(bytes(row.data) for row in spark.read.parquet(out).collect())
    assert datas == sorted(
        [f"order-{i}".encode() for i in range(20)]
        + [f"order-{i}".encode() for i in range(100, 130)]
    )

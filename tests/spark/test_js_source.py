"""format("jetstream") reads: batch ranges, filters, read modes, starting offsets, data loss.

Each test makes its own stream on one JetStream server per module and reads it with the
session's local[2] Spark; the expected rows come from nats_sync's own ``get_msgs``.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from nats_sync.jetstream import JetStream
from nats_sync.testing import NatsServer


def _fill(
    js: JetStream, stream: str, count: int, *, subjects: int = 4, headers_every: int = 3
) -> None:
    for index in range(count):
        headers = {"n": str(index)} if index % headers_every == 0 else None
        js.publish_async(
            f"{stream.lower()}.{index % subjects}", f"m{index}".encode(), headers=headers
        )
    js.publish_async_completed(60)


def _read(spark: Any, url: str, stream: str, **options: str) -> list[Any]:
    reader = spark.read.format("jetstream").option("servers", url).option("stream", stream)
    for key, value in options.items():
        reader = reader.option(key, value)
    return sorted(reader.load().collect(), key=lambda row: row.seq)


def _expected(js: JetStream, stream: str, subject: str | None = None) -> list[tuple[Any, ...]]:
    return [
        (
            message.seq,
            message.subject,
            message.data,
            {k: v if isinstance(v, str) else ",".join(v) for k, v in message.headers.items()}
            if message.headers
            else None,
        )
        for message in js.stream(stream).get_msgs(1, subject=subject)
    ]


def _rows(rows: list[Any]) -> list[tuple[Any, ...]]:
    return [(row.seq, row.subject, bytes(row.data), row.headers) for row in rows]


def test_batch_read_equals_the_stream_across_a_purge_gap(
    spark: Any, js_server: NatsServer, js: JetStream
) -> None:
    js.create_stream(name="GAP", subjects=["gap.>"], allow_direct=True)
    _fill(js, "GAP", 20_000)
    js.stream("GAP").purge(subject="gap.1")  # a hole every fourth sequence
    for seq in range(5_000, 5_200):
        if (seq - 1) % 4 != 1:  # not purged already
            js.stream("GAP").delete_msg(seq)
    expected = _expected(js, "GAP")
    assert len(expected) == 20_000 - 5_000 - 150
    rows = _read(spark, js_server.url, "GAP", minPartitions="3")
    assert _rows(rows) == expected
    assert {row.stream for row in rows} == {"GAP"}
    assert all(row.timestamp is not None for row in rows)
    # The direct-get reading (the other path) gives the same rows.
    assert _rows(_read(spark, js_server.url, "GAP", readMode="direct")) == expected


def test_read_modes_agree_on_timestamps_and_headers(
    spark: Any, js_server: NatsServer, js: JetStream
) -> None:
    js.create_stream(name="MODES", subjects=["modes.>"], allow_direct=True)
    _fill(js, "MODES", 300, headers_every=2)
    by_consumer = _read(spark, js_server.url, "MODES", readMode="consumer")
    by_direct = _read(spark, js_server.url, "MODES", readMode="direct")
    assert [tuple(row) for row in by_consumer] == [tuple(row) for row in by_direct]
    stored = js.stream("MODES").get_msg(8)
    assert stored.time is not None
    eighth = by_consumer[7]
    assert eighth.seq == 8 and eighth.headers is None
    assert by_consumer[0].headers == {"n": "0"}
    # Spark shows timestamps in the session's time zone, naive; compare the instants.
    assert abs(eighth.timestamp.timestamp() - stored.time.timestamp()) < 1e-6


def test_filtered_read_and_ending_offsets(spark: Any, js_server: NatsServer, js: JetStream) -> None:
    js.create_stream(name="FILT", subjects=["filt.>"])
    _fill(js, "FILT", 2_000)
    rows = _read(spark, js_server.url, "FILT", subject="filt.2")
    assert _rows(rows) == _expected(js, "FILT", subject="filt.2")
    assert {row.subject for row in rows} == {"filt.2"}
    window = _read(
        spark, js_server.url, "FILT", startingOffsets='{"FILT": 101}', endingOffsets='{"FILT": 201}'
    )
    assert [row.seq for row in window] == list(range(101, 201))  # the end is exclusive
    no_headers = _read(
        spark, js_server.url, "FILT", includeHeaders="false", endingOffsets='{"FILT": 10}'
    )
    assert [row.headers for row in no_headers] == [None] * 9


def test_starting_timestamp(spark: Any, js_server: NatsServer, js: JetStream) -> None:
    js.create_stream(name="TIME", subjects=["time.>"])
    _fill(js, "TIME", 50)
    time.sleep(0.05)
    cut = int(time.time() * 1000)
    time.sleep(0.05)
    _fill(js, "TIME", 20)
    rows = _read(spark, js_server.url, "TIME", startingTimestamp=str(cut))
    assert [row.seq for row in rows] == list(range(51, 71))
    later = _read(spark, js_server.url, "TIME", startingTimestamp=str(cut + 3_600_000))
    assert later == []


def test_bad_options_name_what_is_wrong(spark: Any, js_server: NatsServer, js: JetStream) -> None:
    js.create_stream(name="OPTS", subjects=["opts.>"])
    cases = [
        ({}, "'stream' is required"),
        ({"stream": "OPTS", "startingOffsets": "yesterday"}, "startingOffsets must be"),
        ({"stream": "OPTS", "startingOffsets": '{"OTHER": 3}'}, "must name the stream 'OPTS'"),
        ({"stream": "OPTS", "startingOffsets": "latest"}, "not allowed for a batch read"),
        ({"stream": "OPTS", "readMode": "fast"}, "'readMode' must be one of"),
        ({"stream": "OPTS", "failOnDataLoss": "maybe"}, "must be true or false"),
        ({"stream": "OPTS", "startingTimestamp": "noon"}, "'startingTimestamp' must be a whole"),
        ({"stream": "OPTS", "startingTimestamp": "-1"}, "'startingTimestamp' must be at least 0"),
        ({"stream": "OPTS", "maxOffsetsPerTrigger": "10"}, "is for streaming reads"),
        ({"stream": "OPTS", "colour": "red"}, "unknown option(s) 'colour'"),
        ({"stream": "NOPE"}, "stream 'NOPE' does not exist"),
    ]
    for options, message in cases:
        reader = spark.read.format("jetstream").option("servers", js_server.url)
        for key, value in options.items():
            reader = reader.option(key, value)
        with pytest.raises(Exception, match=_escaped(message)):
            reader.load().collect()


def test_batch_start_before_the_head_is_data_loss(
    spark: Any, js_server: NatsServer, js: JetStream
) -> None:
    js.create_stream(name="LOST", subjects=["lost.>"])
    _fill(js, "LOST", 100)
    js.stream("LOST").purge(keep=10)
    with pytest.raises(Exception, match=r"messages 1\.\.90 of stream 'LOST' were removed"):
        _read(spark, js_server.url, "LOST", startingOffsets='{"LOST": 1}')
    rows = _read(
        spark, js_server.url, "LOST", startingOffsets='{"LOST": 1}', failOnDataLoss="false"
    )
    assert [row.seq for row in rows] == list(range(91, 101))


def test_a_head_moved_by_a_per_subject_limit_is_not_data_loss(
    spark: Any, js_server: NatsServer, js: JetStream
) -> None:
    js.create_stream(name="LATEST", subjects=["latest.>"], max_msgs_per_subject=1)
    _fill(js, "LATEST", 40, subjects=4)  # only the last message of each subject stays
    rows = _read(spark, js_server.url, "LATEST", startingOffsets='{"LATEST": 1}')
    assert [row.seq for row in rows] == [37, 38, 39, 40]


def _escaped(text: str) -> str:
    import re

    return re.escape(text)


def test_offsets_are_json_the_checkpoint_can_hold(js_server: NatsServer, js: JetStream) -> None:
    from nats_sync.spark._jetstream.source import JetStreamStreamReader, parse_read_options

    js.create_stream(name="OFFS", subjects=["offs.>"])
    _fill(js, "OFFS", 25)
    settings = parse_read_options(
        {"servers": js_server.url, "stream": "OFFS", "startingOffsets": "earliest"}, streaming=True
    )
    reader = JetStreamStreamReader(settings)
    start = reader.initialOffset()
    assert json.loads(json.dumps(start)) == start
    assert start["OFFS"]["seq"] == 1 and start["OFFS"]["created"]
    end = reader.latestOffset(start, None)
    assert end["OFFS"]["seq"] == 26
    ranges = reader.partitions(start, end)
    assert [(part.lo, part.hi) for part in ranges] == [(1, 26)]
    assert reader.partitions(end, end) == []


def test_a_read_that_ends_short_of_a_stored_message_reads_again(
    js_server: NatsServer, js: JetStream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As from a replica behind its leader: the first read stops at 60 of 100; the
    leader says 61 is stored, so the task reads again from there (in-process, no Spark)."""
    from nats_sync.jetstream._streams.stream import Stream
    from nats_sync.spark._jetstream.plan import Planner
    from nats_sync.spark._jetstream.read import read_range_batches
    from nats_sync.spark._jetstream.source import parse_read_options

    js.create_stream(name="LAG", subjects=["lag.>"])
    _fill(js, "LAG", 100)
    real = Stream.get_msg_columns
    starts: list[int] = []

    def behind_once(self: Stream, start_seq: int = 1, **kwargs: Any) -> Any:
        starts.append(start_seq)
        if len(starts) == 1:
            kwargs["end_seq"] = 60
        return real(self, start_seq, **kwargs)

    monkeypatch.setattr(Stream, "get_msg_columns", behind_once)
    settings = parse_read_options({"servers": js_server.url, "stream": "LAG"}, streaming=False)
    planner = Planner(settings)
    (part,) = planner.ranges(1, 101, planner.info())
    seqs = [seq for batch in read_range_batches(part) for seq in batch.column("seq").to_pylist()]
    assert seqs == list(range(1, 101))
    assert starts == [1, 61]
    # A range whose tail is deleted ends without reading again.
    for seq in range(90, 101):
        js.stream("LAG").delete_msg(seq)
    starts.clear()
    monkeypatch.setattr(Stream, "get_msg_columns", real)
    seqs = [seq for batch in read_range_batches(part) for seq in batch.column("seq").to_pylist()]
    assert seqs == list(range(1, 90))

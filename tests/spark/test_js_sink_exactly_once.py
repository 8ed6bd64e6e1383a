"""Streaming writes into JetStream exactly once across replays: the sink's commit log
(a key-value bucket keyed by the persistent query id and the micro-batch id) makes a
replayed micro-batch write nothing, even after the stream's duplicate window."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import pytest

from nats_sync.jetstream import JetStream
from nats_sync.jetstream.errors import NoStreamResponseError
from nats_sync.spark._jetstream.commits import commit_key, is_recorded, open_log, record
from nats_sync.spark._jetstream.retry import RetryPolicy
from nats_sync.testing import NatsServer

pytestmark = pytest.mark.timeout(300)

QUERY_TIMEOUT = 120
FIRST, MORE = 3_000, 500


def _publish(js: JetStream, subject_prefix: str, first: int, count: int) -> None:
    for index in range(first, first + count):
        js.publish_async(f"{subject_prefix}.{index % 3}", f"order-{index}".encode())
    js.publish_async_completed(60)


def _run(
    spark: Any, url: str, source: str, subject: str, checkpoint: Path, bucket: str, mode: str
) -> Any:
    """One availableNow run of the JetStream -> JetStream query; returns the query."""
    query = (
        spark.readStream.format("jetstream")
        .option("servers", url)
        .option("stream", source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "1000")
        .load()
        .select("stream", "seq", "data")
        .writeStream.format("jetstream")
        .option("servers", url)
        .option("subject", subject)
        .option("msgIdColumns", "stream,seq")
        .option("publishMode", mode)
        .option("commitBucket", bucket)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(QUERY_TIMEOUT), "the query did not finish in time"
        assert query.exception() is None
    finally:
        query.stop()
    return query


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["fast", "async"])
def test_a_replayed_micro_batch_writes_nothing_even_after_the_duplicate_window(
    spark: Any, js_server: NatsServer, js: JetStream, tmp_path: Path, mode: str
) -> None:
    source, out, bucket = f"EO_IN_{mode.upper()}", f"eo.out.{mode}", f"eo_commits_{mode}"
    js.create_stream(name=source, subjects=[f"eo.in.{mode}.>"])
    # A 1 s duplicate window: message ids alone would not stop a replay 3 s later.
    js.create_stream(
        name=f"EO_OUT_{mode.upper()}",
        subjects=[out],
        duplicate_window=1.0,
        allow_batched=mode == "fast",
        allow_direct=True,
    )
    _publish(js, f"eo.in.{mode}", 0, FIRST)
    checkpoint = tmp_path / "checkpoint"

    first = _run(spark, js_server.url, source, out, checkpoint, bucket, mode)
    output = js.stream(f"EO_OUT_{mode.upper()}")
    assert output.info().state.messages == FIRST
    log = js.key_value(bucket)
    # Keyed by the checkpoint's persistent query id, one key per micro-batch.
    assert sorted(log.keys()) == sorted(commit_key(first.id, n) for n in range(3))
    recorded_last = log.get(commit_key(first.id, 2)).revision

    # As if the driver died after the tasks of micro-batch 2 wrote and before Spark
    # recorded its commit in the checkpoint: the restarted query replays it.
    (checkpoint / "commits" / "2").unlink()
    (checkpoint / "commits" / ".2.crc").unlink(missing_ok=True)
    _publish(js, f"eo.in.{mode}", FIRST, MORE)  # a new micro-batch after the replay
    time.sleep(3.0)  # past the output stream's duplicate window

    second = _run(spark, js_server.url, source, out, checkpoint, bucket, mode)
    assert second.id == first.id and second.runId != first.runId
    assert (checkpoint / "commits" / "2").exists(), "micro-batch 2 was not replayed"
    state = output.info().state
    assert (state.messages, state.last_seq) == (FIRST + MORE, FIRST + MORE)
    ids = [msg.headers["Nats-Msg-Id"] for msg in output.get_msgs(1) if msg.headers]
    assert sorted(ids) == sorted(f"{source}:{seq}" for seq in range(1, FIRST + MORE + 1))
    # The replay's driver-side commit recorded nothing again; the new batch is recorded.
    assert log.get(commit_key(first.id, 2)).revision == recorded_last
    assert commit_key(first.id, 3) in set(log.keys())
    # The window really is past: the same message id is stored again when published
    # now, so only the commit log kept the replay from writing micro-batch 2 twice.
    assert not js.publish(out, b"control", msg_id=f"{source}:2001").duplicate


def test_commit_keys_keep_only_valid_key_characters() -> None:
    assert commit_key("0f8c2a4e-1b7d-4c3e-9a5f-2d6b8e1c0a97", 12) == (
        "0f8c2a4e-1b7d-4c3e-9a5f-2d6b8e1c0a97.12"
    )
    assert commit_key("a.b c*>/", 0) == "a_b_c___.0"
    assert commit_key("", 3) == "_.3"


def test_a_record_that_fails_is_logged_and_the_commit_goes_on(
    js: JetStream, caplog: pytest.LogCaptureFixture
) -> None:
    """The driver's record does not raise (failing the commit would make Spark replay
    the very batch the log lacks); a key deleted from the log counts as not recorded."""
    with caplog.at_level(logging.WARNING, logger="nats_sync.spark"):
        assert not record(
            lambda: js.key_value("no_such_bucket"),
            RetryPolicy(budget=30.0),
            "q.1",
            rows=1,
            tasks=1,
            run_ids=[],
        )
    assert "could not record micro-batch q.1" in caplog.text
    log = open_log(js, "record_log")  # made on first use, bound afterwards
    assert open_log(js, "record_log").bucket == "record_log"
    assert record(
        lambda: log, RetryPolicy(budget=30.0), "q.1", rows=5, tasks=2, run_ids=["run-b", "run-a"]
    )
    assert is_recorded(log, "q.1") and not is_recorded(log, "q.2")
    assert json.loads(log.get("q.1").value)["run_ids"] == ["run-a", "run-b"]
    log.delete("q.1")
    assert not is_recorded(log, "q.1")


def test_a_record_answered_no_responders_is_tried_again() -> None:
    """While the bucket's stream elects a leader its subjects have no responders (the put
    says no stream stores them): the record waits for the leader within the budget, as
    a write's rows do, instead of giving up on the first answer."""
    puts: list[str] = []

    class LeaderlessTwice:
        def put(self, key: str, value: bytes) -> int:
            puts.append(key)
            if len(puts) <= 2:
                raise NoStreamResponseError(
                    f"no stream stores '$KV.spark_commits.{key}' (no responders)"
                )
            return len(puts)

    assert record(
        LeaderlessTwice,  # type: ignore[arg-type]
        RetryPolicy(budget=30.0, first_wait=0.01),
        "q.3",
        rows=1,
        tasks=1,
        run_ids=[],
    )
    assert puts == ["q.3", "q.3", "q.3"]

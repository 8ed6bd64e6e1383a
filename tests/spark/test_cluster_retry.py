"""The "jetstream" source and sink ride through a server that stops answering for a while.

A paused nats-server (SIGSTOP: sockets open, nothing answered) is what a cluster looks
like to a client while a stream's leader is being elected: calls time out. These tests
drive the driver's and the tasks' code directly (no Spark job), with short call timeouts
so that a pause of a few seconds costs several failed tries.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql.types import BinaryType, StructField, StructType

from nats_sync import errors
from nats_sync.jetstream import JetStream
from nats_sync.jetstream.errors import (
    APIError,
    JetStreamNotEnabledError,
    ServiceUnavailableError,
    StreamNotFoundError,
)
from nats_sync.spark._jetstream.plan import JsRange, Planner
from nats_sync.spark._jetstream.read import read_range_batches
from nats_sync.spark._jetstream.retry import (
    ClusterRetryTimeoutError,
    KeptInput,
    RetryPolicy,
    is_transient,
)
from nats_sync.spark._jetstream.sink import (
    JetStreamStreamWriter,
    SinkSettings,
    publish_acknowledged,
    resolve_publish_mode,
    stream_writer,
)
from nats_sync.spark._jetstream.source import JetStreamStreamReader, parse_read_options
from nats_sync.spark._worker import close_worker_clients
from nats_sync.testing import NatsServer

pytestmark = pytest.mark.timeout(120)

#: Seconds the server stays paused: several tries of a call with a 0.5 s timeout.
PAUSE = 2.5


@pytest.fixture(autouse=True)
def _fresh_worker_clients() -> Iterator[None]:
    yield
    close_worker_clients()


def _resume_later(server: NatsServer, after: float = PAUSE) -> threading.Timer:
    timer = threading.Timer(after, server.resume)
    timer.start()
    return timer


def _reader(server: NatsServer, stream: str, **options: str) -> JetStreamStreamReader:
    given = {"servers": server.url, "stream": stream, "timeout": "0.5", **options}
    return JetStreamStreamReader(parse_read_options(given, streaming=True))


def test_transient_errors_are_told_from_lasting_ones() -> None:
    def raised_from(cause: BaseException) -> RuntimeError:
        try:
            raise RuntimeError("a task failed") from cause
        except RuntimeError as error:
            return error

    transient = [
        errors.TimeoutError("no reply"),
        errors.NoRespondersError("no responders"),
        errors.ConnectionReconnectingError("reconnecting"),
        errors.ConnectionClosedError("closed"),
        ServiceUnavailableError(code=503, err_code=10008, description="temporarily unavailable"),
        APIError(code=500, err_code=10009, description="cluster can not handle request"),
        APIError(code=500, err_code=10118, description="stream is offline"),
        raised_from(errors.TimeoutError("no ack")),
    ]
    lasting = [
        StreamNotFoundError(code=404, err_code=10059, description="stream not found"),
        JetStreamNotEnabledError(code=503, err_code=10076, description="not enabled"),
        APIError(code=400, err_code=10058, description="stream name already in use"),
        errors.InvalidArgumentError("bad option"),
        RuntimeError("first attempt fails on purpose"),
        ClusterRetryTimeoutError("gave up already"),
        raised_from(ClusterRetryTimeoutError("gave up already")),
    ]
    assert [error for error in transient if not is_transient(error)] == []
    assert [error for error in lasting if is_transient(error)] == []


def test_a_driver_call_rides_through_a_paused_server_and_warns_once(
    js_server: NatsServer, js: JetStream, caplog: pytest.LogCaptureFixture
) -> None:
    js.create_stream(name="PAUSED_INFO", subjects=["paused.info"])
    for n in range(5):
        js.publish("paused.info", str(n).encode())
    reader = _reader(js_server, "PAUSED_INFO", startingOffsets="earliest")
    start = reader.initialOffset()
    js_server.pause()
    timer = _resume_later(js_server)
    with caplog.at_level(logging.INFO, logger="nats_sync.spark"):
        end = reader.latestOffset(start, None)
    timer.join()
    assert end["PAUSED_INFO"]["seq"] == 6
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert "STREAM.INFO of 'PAUSED_INFO'" in warnings[0]
    assert "retryTimeout" in warnings[0] and js_server.url in warnings[0]
    assert any("went through after" in r.getMessage() for r in caplog.records)


def test_past_the_budget_the_error_names_the_call_the_servers_and_the_budget(
    js_server: NatsServer, js: JetStream
) -> None:
    js.create_stream(name="PAUSED_LONG", subjects=["paused.long"])
    planner = Planner(_reader(js_server, "PAUSED_LONG", retryTimeout="1.5").settings)
    planner.info()
    js_server.pause()
    timer = _resume_later(js_server, 4.0)
    try:
        with pytest.raises(ClusterRetryTimeoutError) as failure:
            planner.info()
    finally:
        timer.join()
    text = str(failure.value)
    assert "STREAM.INFO of 'PAUSED_LONG'" in text
    assert js_server.url in text and "retry budget of 1.5s" in text
    assert isinstance(failure.value.__cause__, errors.TimeoutError)
    assert isinstance(failure.value, errors.TimeoutError)  # what callers catch


def test_a_budget_of_zero_tries_once(js_server: NatsServer, js: JetStream) -> None:
    js.create_stream(name="NO_RETRY", subjects=["no.retry"])
    planner = Planner(_reader(js_server, "NO_RETRY", retryTimeout="0").settings)
    planner.info()
    js_server.pause()
    timer = _resume_later(js_server, 1.5)
    try:
        with pytest.raises(errors.TimeoutError) as failure:
            planner.info()
    finally:
        timer.join()
    assert not isinstance(failure.value, ClusterRetryTimeoutError)


def test_a_stream_that_is_not_there_fails_at_once(js_server: NatsServer) -> None:
    planner = Planner(_reader(js_server, "NOT_THERE_AT_ALL").settings)
    with pytest.raises(StreamNotFoundError, match="'NOT_THERE_AT_ALL' does not exist"):
        planner.info()


@pytest.mark.parametrize("bad", ["-1", "soon", "inf", "nan"])
def test_retry_timeout_must_be_seconds_of_zero_or_more(bad: str) -> None:
    with pytest.raises(errors.InvalidArgumentError, match="'retryTimeout' must be a number"):
        parse_read_options(
            {"servers": "nats://x:1", "stream": "S", "retryTimeout": bad}, streaming=True
        )


def test_a_read_cut_by_a_pause_goes_on_from_where_it_was(
    js_server: NatsServer, js: JetStream
) -> None:
    total = 3_000
    js.create_stream(name="PAUSED_READ", subjects=["paused.read"])
    for n in range(total):
        js.publish_async("paused.read", str(n).encode())
    js.publish_async_completed(timeout=30)
    settings = parse_read_options(
        {
            "servers": js_server.url,
            "stream": "PAUSED_READ",
            "timeout": "0.5",
            "fetchBatch": "200",
        },
        streaming=False,
    )
    part = JsRange(settings=settings, lo=1, hi=total + 1, direct=False, check_head=True)
    seqs: list[int] = []
    timer: threading.Timer | None = None
    for batch in read_range_batches(part):
        seqs += batch.column("seq").to_pylist()
        if timer is None and len(seqs) >= 600:
            js_server.pause()
            timer = _resume_later(js_server)
    assert timer is not None
    timer.join()
    assert seqs == list(range(1, total + 1))


def _payload_batches(count: int, per_batch: int, pause: Any = None) -> Iterator[pa.RecordBatch]:
    for start in range(0, count, per_batch):
        ids = range(start, min(start + per_batch, count))
        yield pa.RecordBatch.from_pydict(
            {
                "data": [f"{n}".encode() for n in ids],
                "msg_id": [f"id-{n}" for n in ids],
            }
        )
        if pause is not None and start // per_batch == 1:
            pause()


@pytest.mark.parametrize("mode", ["async", "fast"])
def test_a_write_cut_by_a_pause_sends_its_rows_again_and_stores_each_once(
    js_server: NatsServer, js: JetStream, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    stream, subject = f"PAUSED_WRITE_{mode.upper()}", f"paused.write.{mode}"
    js.create_stream(name=stream, subjects=[subject], allow_batched=mode == "fast")
    settings = SinkSettings(
        servers=(js_server.url,), subject=subject, timeout=0.5, publish_mode=mode
    )
    timers: list[threading.Timer] = []

    def pause() -> None:
        js_server.pause()
        timers.append(_resume_later(js_server))

    with caplog.at_level(logging.WARNING, logger="nats_sync.spark"):
        rows, _ = publish_acknowledged(settings, _payload_batches(2_000, 250, pause))
    for timer in timers:
        timer.join()
    assert rows == 2_000
    assert timers, "the server was never paused"
    assert any("publishing this task's rows" in r.getMessage() for r in caplog.records)
    stored = js.stream(stream).get_msgs(1, batch=2_000)
    assert sorted(int(msg.data) for msg in stored) == list(range(2_000))


def test_acks_lost_with_a_dead_connection_are_sent_again_without_waiting_the_timeout(
    js_server: NatsServer, js: JetStream, caplog: pytest.LogCaptureFixture
) -> None:
    # The server is frozen mid-write, so rows sent to it are never acked, then killed
    # and started again on its port: the task's client reconnects, and the acks it
    # still awaits are lost. With an ack timeout of 60 s, only the reconnect rule can
    # settle them (the test's own timeout is 120 s).
    stream, subject = "KILLED_WRITE", "killed.write"
    js.create_stream(name=stream, subjects=[subject])
    settings = SinkSettings(
        servers=(js_server.url,),
        subject=subject,
        timeout=60.0,
        publish_mode="async",
        connect_options=(("reconnect_time_wait", 0.1),),
    )
    timers: list[threading.Timer] = []

    def kill_and_start() -> None:
        js_server.kill()
        js_server.start()

    def freeze() -> None:
        js_server.pause()
        timers.append(threading.Timer(0.5, kill_and_start))
        timers[-1].start()

    with caplog.at_level(logging.WARNING, logger="nats_sync.spark"):
        rows, _ = publish_acknowledged(settings, _payload_batches(2_000, 250, freeze))
    for timer in timers:
        timer.join()
    assert rows == 2_000
    assert any("lost with the old connection" in r.getMessage() for r in caplog.records), [
        r.getMessage() for r in caplog.records
    ]
    js.client.flush(timeout=10)
    stored = js.stream(stream).get_msgs(1, batch=2_000)
    assert sorted(int(msg.data) for msg in stored) == list(range(2_000))


def test_kept_input_gives_the_input_again_from_its_start_up_to_its_cap() -> None:
    batches = [pa.RecordBatch.from_pydict({"data": [b"x" * 100] * 10}) for _ in range(4)]
    kept = KeptInput(iter(batches), max_bytes=10 * batches[0].nbytes)
    first = kept.batches()
    assert [next(first), next(first)] == batches[:2]  # cut after two
    assert list(kept.batches()) == batches  # from the start, then the rest
    assert kept.complete
    small = KeptInput(iter(batches), max_bytes=batches[0].nbytes * 2)
    assert list(small.batches()) == batches
    assert not small.complete  # past its cap: a retry could not send the rows again


def test_a_policy_retries_only_what_its_predicate_takes() -> None:
    calls: list[int] = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise errors.TimeoutError("not yet")
        return "done"

    policy = RetryPolicy(budget=10.0, first_wait=0.01, max_wait=0.02)
    assert policy.call("a flaky call", flaky) == "done"
    assert len(calls) == 3

    def broken() -> str:
        calls.append(1)
        raise errors.InvalidArgumentError("wrong")

    calls.clear()
    with pytest.raises(errors.InvalidArgumentError):
        policy.call("a broken call", broken)
    assert len(calls) == 1


def test_fast_asks_again_for_a_stream_missing_from_the_listing(js_server: NatsServer) -> None:
    """While a node restarts the listing may miss the stream: "fast" asks again within
    the budget, then says no stream stores the subject."""
    settings = SinkSettings(
        servers=(js_server.url,), subject="nowhere.at.all", publish_mode="fast", retry_timeout=1.0
    )
    with pytest.raises(errors.InvalidArgumentError, match=r"no stream stores .*asked for 1s"):
        resolve_publish_mode(settings)


def test_a_query_name_is_spark_s_own_option(js_server: NatsServer) -> None:
    options = {"servers": js_server.url, "stream": "S", "queryName": "enrich"}
    assert parse_read_options(options, streaming=True).stream == "S"


def test_a_micro_batch_s_writer_goes_on_with_the_last_one_s_settings_while_a_server_is_paused(
    js_server: NatsServer, js: JetStream, caplog: pytest.LogCaptureFixture
) -> None:
    """Spark makes the stream writer again for every micro-batch: the first one rides
    through within ``retryTimeout``; a later one asks once and, while the server cannot
    answer, goes on with what the last one found instead of waiting for the cluster."""
    js.create_stream(name="KNOWN_WRITER", subjects=["known.writer"])
    schema = StructType([StructField("data", BinaryType())])
    options = {
        "servers": js_server.url,
        "subject": "known.writer",
        "commitBucket": "known_writer_commits",
        "timeout": "0.5",
        "retryTimeout": "60",
    }
    first = stream_writer(options, schema, False)
    assert isinstance(first, JetStreamStreamWriter)
    assert first.settings.publish_mode == "async"  # the stream does not allow batches
    js_server.pause()
    timer = _resume_later(js_server, 10.0)
    try:
        with caplog.at_level(logging.INFO, logger="nats_sync.spark"):
            began = time.monotonic()
            later = stream_writer(options, schema, False)
            waited = time.monotonic() - began
    finally:
        timer.join()
    assert isinstance(later, JetStreamStreamWriter)
    assert waited < 9.0, f"waited {waited:.1f}s for a paused server"  # not the 60 s budget
    assert later.settings == first.settings  # retryTimeout included: the tasks keep it
    assert later.settings.retry_timeout == 60.0
    assert any("going on with the last micro-batch's" in r.getMessage() for r in caplog.records)
    again = stream_writer(options, schema, False)  # the server answers again
    assert isinstance(again, JetStreamStreamWriter)
    assert again.settings == first.settings


def test_the_first_writer_of_a_query_still_fails_on_a_lasting_error(js_server: NatsServer) -> None:
    schema = StructType([StructField("data", BinaryType())])
    options = {"servers": js_server.url, "subject": "nowhere.known", "publishMode": "fast"}
    options["retryTimeout"] = "0.5"
    with pytest.raises(errors.InvalidArgumentError, match="no stream stores"):
        stream_writer(options, schema, False)

"""Continuous pull reading against a real ``nats-server -js``: ``messages()`` and
``consume(cb)``, with publishers running, a server restart, a deleted consumer, the
client's close, and nats-py on the other side."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable

import pytest

import nats_sync
from nats_sync.jetstream import (
    ConsumerDeletedError,
    JetStream,
    JsMsg,
    MessageStream,
    NoHeartbeatError,
    PullConsumer,
)
from nats_sync.testing import NatsServer

pytestmark = pytest.mark.timeout(90)

ClientFactory = Callable[..., nats_sync.Client]


@pytest.fixture
def js(jetstream_server: NatsServer, connect: ClientFactory) -> JetStream:
    js = connect(servers=jetstream_server.url).jetstream()
    js.create_stream(name="S", subjects=["s.>"])
    return js


def store(js: JetStream, count: int, start: int = 0) -> None:
    """Stores ``count`` messages by core requests (the stream answers with its ack)."""
    for i in range(start, start + count):
        json.loads(js.client.request("s.a", b"m%d" % i, timeout=5).data)


def durable(js: JetStream, name: str = "C", **fields: object) -> PullConsumer:
    return js.create_consumer("S", durable_name=name, ack_policy="explicit", **fields)


def read_in_thread(stream: MessageStream) -> tuple[threading.Thread, list[object]]:
    """Reads until the stream ends; the list gets the sequences, then what ended it."""
    seen: list[object] = []

    def run() -> None:
        try:
            for msg in stream:
                seen.append(msg.metadata.sequence.stream)
                msg.ack()
            seen.append("end")
        except Exception as err:
            seen.append(err)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, seen


def test_2000_messages_while_another_thread_publishes(
    jetstream_server: NatsServer, js: JetStream, connect: ClientFactory
) -> None:
    consumer = durable(js)
    publisher = connect(servers=jetstream_server.url)

    def publish() -> None:
        for i in range(2000):
            publisher.publish("s.a", b"%d" % i)
            if i % 100 == 99:
                publisher.flush()
        publisher.flush()

    thread = threading.Thread(target=publish)
    thread.start()
    acked: dict[int, int] = {}
    with consumer.messages(max_messages=100) as stream:
        while len(acked) < 2000:
            msg = stream.next(timeout=10)
            seq = msg.metadata.sequence.stream
            acked[seq] = acked.get(seq, 0) + 1
            msg.ack()
    thread.join()
    assert sorted(acked) == list(range(1, 2001)) and set(acked.values()) == {1}
    js.client.flush()
    info = consumer.info()
    assert info.num_ack_pending == 0 and info.ack_floor.stream_seq == 2000


def test_messages_pull_ahead_in_halves(js: JetStream) -> None:
    store(js, 30)
    consumer = durable(js)
    with consumer.messages(max_messages=10, max_wait=5) as stream:
        got = [stream.next(timeout=5) for _ in range(30)]
        assert [m.metadata.sequence.stream for m in got] == list(range(1, 31))
        for msg in got:
            msg.ack()
        # Never more than the buffer asked for: 10 outstanding at most.
        info = consumer.info()
        assert info.num_waiting <= 2


def test_messages_with_a_byte_limit(js: JetStream) -> None:
    for _ in range(20):
        js.client.request("s.a", b"x" * 1000, timeout=5)
    consumer = durable(js)
    with consumer.messages(max_messages=1000, max_bytes=4000, max_wait=5) as stream:
        seqs = [stream.next(timeout=5).metadata.sequence.stream for _ in range(20)]
    assert seqs == list(range(1, 21))
    assert consumer.info().num_ack_pending <= 20


def test_next_times_out_and_the_stream_goes_on(js: JetStream) -> None:
    consumer = durable(js)
    with consumer.messages(max_wait=2) as stream:
        start = time.monotonic()
        with pytest.raises(nats_sync.TimeoutError):
            stream.next(timeout=0.3)
        assert time.monotonic() - start < 3
        store(js, 1)
        assert stream.next(timeout=5).data == b"m0"


def test_requests_expire_and_are_renewed(js: JetStream) -> None:
    consumer = durable(js)
    warnings: list[BaseException] = []
    got: list[JsMsg] = []
    context = consumer.consume(got.append, max_wait=1.0, error_cb=warnings.append)
    time.sleep(2.5)  # two 408s at least: each pull is asked again
    store(js, 1)
    deadline = time.monotonic() + 10
    while not got and time.monotonic() < deadline:
        time.sleep(0.05)
    context.stop()
    assert context.join(5)
    assert [msg.data for msg in got] == [b"m0"] and warnings == []


@pytest.mark.slow
def test_a_server_restart_loses_and_repeats_nothing_acked(
    jetstream_server: NatsServer, connect: ClientFactory
) -> None:
    nc = connect(servers=jetstream_server.url, reconnect_time_wait=0.1, max_reconnect_attempts=-1)
    js = nc.jetstream()
    js.create_stream(name="S", subjects=["s.>"])
    consumer = durable(js, ack_wait=30.0)
    store(js, 100)
    acked: set[int] = set()
    repeated: list[int] = []
    restarted = threading.Event()

    def ack(msg: JsMsg) -> None:
        for _ in range(20):  # an ack in flight when the server stopped is asked again
            try:
                msg.double_ack(timeout=2)
                return
            except (nats_sync.TimeoutError, nats_sync.NoRespondersError):
                time.sleep(0.2)
        raise AssertionError(f"could not ack {msg.metadata.sequence.stream}")

    with consumer.messages(max_messages=20, max_wait=2) as stream:
        while len(acked) < 200:
            msg = stream.next(timeout=20)
            seq = msg.metadata.sequence.stream
            if seq in acked:
                repeated.append(seq)
                continue
            ack(msg)
            acked.add(seq)
            if len(acked) == 50:
                jetstream_server.restart()
                restarted.set()
                threading.Thread(target=store_when_connected, args=(js, 100, 100)).start()
    assert restarted.is_set()
    assert repeated == [] and acked == set(range(1, 201))


def store_when_connected(js: JetStream, count: int, start: int) -> None:
    """Stores messages once the client is back, retrying what the restart interrupted."""
    for i in range(start, start + count):
        for _ in range(100):
            try:
                js.client.request("s.a", b"m%d" % i, timeout=2)
                break
            except (nats_sync.TimeoutError, nats_sync.NoRespondersError):
                time.sleep(0.1)


def test_a_consumer_deleted_under_messages_ends_it(js: JetStream) -> None:
    consumer = durable(js)
    stream = consumer.messages(max_wait=10)
    thread, seen = read_in_thread(stream)
    store(js, 2)
    time.sleep(0.3)
    start = time.monotonic()
    js.delete_consumer("S", "C")
    thread.join(10)
    assert not thread.is_alive() and time.monotonic() - start < 5
    assert seen[:2] == [1, 2] and isinstance(seen[-1], ConsumerDeletedError)
    assert isinstance(stream.error, ConsumerDeletedError)


def test_a_consumer_deleted_with_no_pull_waiting_ends_after_the_buffer(js: JetStream) -> None:
    store(js, 10)
    consumer = durable(js)
    stream = consumer.messages(max_messages=4, max_wait=10)
    time.sleep(0.5)  # four delivered: no pull request waits on the server
    js.delete_consumer("S", "C")
    got = []
    with pytest.raises(ConsumerDeletedError):
        while True:
            got.append(stream.next(timeout=10).metadata.sequence.stream)
    assert got == [1, 2, 3, 4]


def test_consume_calls_back_in_order_and_stops(js: JetStream) -> None:
    store(js, 300)
    consumer = durable(js)
    got: list[int] = []
    done = threading.Event()
    threads: set[str] = set()

    def cb(msg: JsMsg) -> None:
        threads.add(threading.current_thread().name)
        got.append(msg.metadata.sequence.stream)
        msg.ack()
        if len(got) == 300:
            done.set()

    context = consumer.consume(cb, max_messages=50)
    assert done.wait(20)
    assert got == list(range(1, 301))
    assert threads == {"nats_sync-js-consume-C"}
    assert not context.closed
    context.stop()
    assert context.join(5) and context.closed and context.error is None
    store(js, 1)
    time.sleep(0.3)
    assert len(got) == 300  # no callback after stop


def test_consume_drain_hands_over_what_was_received(js: JetStream) -> None:
    store(js, 20)
    consumer = durable(js)
    got: list[int] = []
    gate = threading.Event()

    def held(msg: JsMsg) -> None:
        gate.wait(10)  # the first call holds the thread: the other nine wait received
        got.append(msg.metadata.sequence.stream)
        msg.ack()

    context = consumer.consume(held, max_messages=10)
    deadline = time.monotonic() + 10
    while consumer.info().num_ack_pending < 10 and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)  # the ten the server sent have reached the client
    # 1 s: the drain must have begun (no more pulls) before the callback is let go, even
    # on a loaded machine; released earlier, it would pull the next ones itself.
    threading.Timer(1.0, gate.set).start()
    context.drain(timeout=10)
    assert context.closed and context.error is None
    assert got == list(range(1, 11))  # all ten received, none pulled after the drain
    js.client.flush()
    # The server takes acks in on the consumer's own time: look until it has.
    deadline = time.monotonic() + 5
    while consumer.info().num_ack_pending and time.monotonic() < deadline:
        time.sleep(0.05)
    assert consumer.info().num_ack_pending == 0


def test_consume_survives_a_raising_callback(js: JetStream) -> None:
    store(js, 3)
    consumer = durable(js)
    errors: list[BaseException] = []
    got: list[int] = []

    def cb(msg: JsMsg) -> None:
        got.append(msg.metadata.sequence.stream)
        if len(got) == 2:
            raise ValueError("bad message")

    with consumer.consume(cb, error_cb=errors.append) as context:
        deadline = time.monotonic() + 10
        while len(got) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
    assert context.join(5)
    assert got == [1, 2, 3] and [type(e) for e in errors] == [ValueError]


def test_consume_ends_with_the_deleted_consumer(js: JetStream) -> None:
    consumer = durable(js)
    errors: list[BaseException] = []
    context = consumer.consume(lambda msg: None, max_wait=10, error_cb=errors.append)
    time.sleep(0.3)
    js.delete_consumer("S", "C")
    assert context.join(5)
    assert isinstance(context.error, ConsumerDeletedError)
    assert [type(e) for e in errors] == [ConsumerDeletedError]


def test_the_clients_close_ends_messages_and_consume(
    jetstream_server: NatsServer, connect: ClientFactory
) -> None:
    nc = connect(servers=jetstream_server.url)
    js = nc.jetstream()
    js.create_stream(name="S", subjects=["s.>"])
    consumer = durable(js)
    stream = consumer.messages(max_wait=30)
    thread, seen = read_in_thread(stream)
    context = consumer.consume(lambda msg: None, max_wait=30)
    time.sleep(0.3)
    start = time.monotonic()
    nc.close()
    thread.join(5)
    assert context.join(5)
    assert not thread.is_alive() and seen == ["end"]
    assert time.monotonic() - start < 5
    with pytest.raises(nats_sync.ConnectionClosedError):
        stream.next(timeout=1)


def test_stop_wakes_a_reader_blocked_in_next(js: JetStream) -> None:
    consumer = durable(js)
    stream = consumer.messages(max_wait=30)
    thread, seen = read_in_thread(stream)
    time.sleep(0.3)
    stream.stop()
    thread.join(5)
    assert not thread.is_alive() and seen == ["end"]


# --- nats-py on the other side ---------------------------------------------------------------


def test_nats_py_publishes_and_we_read(jetstream_server: NatsServer, js: JetStream) -> None:
    import nats

    async def publish() -> list[int]:
        nc = await nats.connect(jetstream_server.url)
        try:
            pyjs = nc.jetstream()
            return [
                (await pyjs.publish("s.py", b"py%d" % i, headers={"N": str(i)})).seq
                for i in range(5)
            ]
        finally:
            await nc.close()

    assert asyncio.run(publish()) == [1, 2, 3, 4, 5]
    consumer = durable(js)
    with consumer.messages(max_wait=5) as stream:
        got = [stream.next(timeout=5) for _ in range(5)]
    assert [(m.subject, m.data, m.headers) for m in got] == [
        ("s.py", b"py%d" % i, {"N": str(i)}) for i in range(5)
    ]
    for msg in got:
        msg.ack()


def test_nats_py_reads_what_we_nak_or_leave(jetstream_server: NatsServer, js: JetStream) -> None:
    import nats

    store(js, 4)
    consumer = durable(js, ack_wait=1.0)
    first, second, third, _left = consumer.fetch(4, max_wait=5)
    first.ack()
    second.nak()
    third.term()
    # the fourth is left alone: redelivered after ack_wait
    js.client.flush()

    async def read() -> list[tuple[int, int]]:
        nc = await nats.connect(jetstream_server.url)
        try:
            psub = await nc.jetstream().pull_subscribe("s.a", durable="C", stream="S")
            got: list[tuple[int, int]] = []
            deadline = time.monotonic() + 10
            while len(got) < 2 and time.monotonic() < deadline:
                try:
                    msgs = await psub.fetch(2, timeout=1)
                except nats.errors.TimeoutError:
                    continue
                for msg in msgs:
                    got.append((msg.metadata.sequence.stream, msg.metadata.num_delivered))
                    await msg.ack()
            return got
        finally:
            await nc.close()

    assert sorted(asyncio.run(read())) == [(2, 2), (4, 2)]


@pytest.mark.slow
def test_consume_goes_on_after_a_server_restart(
    jetstream_server: NatsServer, connect: ClientFactory
) -> None:
    nc = connect(servers=jetstream_server.url, reconnect_time_wait=0.1, max_reconnect_attempts=-1)
    js = nc.jetstream()
    js.create_stream(name="S", subjects=["s.>"])
    consumer = durable(js, ack_wait=30.0)
    acked: list[int] = []
    everything = threading.Event()

    def cb(msg: JsMsg) -> None:
        for _ in range(20):
            try:
                msg.double_ack(timeout=2)
                break
            except (nats_sync.TimeoutError, nats_sync.NoRespondersError):
                time.sleep(0.2)
        acked.append(msg.metadata.sequence.stream)
        if len(acked) >= 20:
            everything.set()

    warnings: list[BaseException] = []
    with consumer.consume(cb, max_wait=2.0, error_cb=warnings.append) as context:
        store(js, 10)
        deadline = time.monotonic() + 10
        while len(acked) < 10 and time.monotonic() < deadline:
            time.sleep(0.05)
        # The consume thread now waits in next(), its pull open on the server.
        jetstream_server.restart()
        store_when_connected(js, 10, 10)
        assert everything.wait(20)
    assert context.join(5)
    assert acked == list(range(1, 21))
    assert context.error is None


@pytest.mark.slow
def test_missed_heartbeats_are_a_warning_not_an_end(
    jetstream_server: NatsServer, js: JetStream
) -> None:
    consumer = durable(js)
    warnings: list[BaseException] = []
    got: list[bytes] = []
    context = consumer.consume(
        lambda msg: got.append(msg.data), max_wait=2.0, heartbeat=0.5, error_cb=warnings.append
    )
    time.sleep(0.3)
    jetstream_server.pause()  # nothing answered: no heartbeats for a while
    try:
        time.sleep(2.0)
    finally:
        jetstream_server.resume()
    store(js, 1)
    deadline = time.monotonic() + 10
    while not got and time.monotonic() < deadline:
        time.sleep(0.05)
    context.stop()
    assert context.join(5)
    assert got == [b"m0"] and context.error is None
    assert any(isinstance(w, NoHeartbeatError) for w in warnings)

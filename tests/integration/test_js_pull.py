"""Pull consumers against a real ``nats-server -js``: fetch, fetch_bytes, fetch_nowait,
next, the acknowledgements and the message metadata."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable

import pytest

import nats_sync
from nats_sync.jetstream import (
    ConsumerNotFoundError,
    JetStream,
    JsMsg,
    MsgAlreadyAckdError,
    NotJSMessageError,
    PullConsumer,
    StatusError,
)
from nats_sync.msg import Msg
from nats_sync.testing import NatsServer

pytestmark = pytest.mark.timeout(60)

ClientFactory = Callable[..., nats_sync.Client]
#: Generous for a loaded 2-core machine: an empty fetch ends at max_wait, give or take.
MARGIN = 2.0


@pytest.fixture
def js(jetstream_server: NatsServer, connect: ClientFactory) -> JetStream:
    js = connect(servers=jetstream_server.url).jetstream()
    js.create_stream(name="S", subjects=["s.>"])
    return js


def store(js: JetStream, count: int, subject: str = "s.a", start: int = 0) -> list[int]:
    """Stores ``count`` messages by core requests (the stream answers with its ack)."""
    return [
        int(json.loads(js.client.request(subject, b"m%d" % i, timeout=5).data)["seq"])
        for i in range(start, start + count)
    ]


def durable(js: JetStream, name: str = "C", **fields: object) -> PullConsumer:
    return js.create_consumer("S", durable_name=name, ack_policy="explicit", **fields)


def test_fetch_takes_n_of_more_than_n(js: JetStream) -> None:
    store(js, 10)
    consumer = durable(js)
    batch = consumer.fetch(4, max_wait=5)
    got = [msg.metadata.sequence.stream for msg in batch]
    assert got == [1, 2, 3, 4] and len(batch) == 4 and batch.error is None
    for msg in batch:
        msg.ack()
    assert [msg.data for msg in consumer.fetch(6, max_wait=5)] == [
        b"m4",
        b"m5",
        b"m6",
        b"m7",
        b"m8",
        b"m9",
    ]


def test_a_fetch_of_more_than_there_is_returns_what_there_is_at_max_wait(js: JetStream) -> None:
    store(js, 2)
    consumer = durable(js)
    start = time.monotonic()
    batch = consumer.fetch(5, max_wait=1.0)
    assert len(batch) == 2 and batch.error is None
    assert time.monotonic() - start < 1.0 + MARGIN


def test_an_empty_fetch_is_an_empty_batch_within_max_wait(js: JetStream) -> None:
    consumer = durable(js)
    start = time.monotonic()
    with consumer.fetch(10, max_wait=0.5) as batch:
        assert list(batch) == []
    assert batch.error is None and len(batch) == 0
    assert time.monotonic() - start < 0.5 + MARGIN


def test_fetch_nowait_on_nothing_is_empty_at_once(js: JetStream) -> None:
    consumer = durable(js)
    start = time.monotonic()
    batch = consumer.fetch_nowait(10)
    assert len(batch) == 0 and batch.error is None
    assert time.monotonic() - start < 1.0
    store(js, 3)
    assert [msg.data for msg in consumer.fetch_nowait(10)] == [b"m0", b"m1", b"m2"]


def test_fetch_bytes_stops_at_the_byte_limit(js: JetStream) -> None:
    for _ in range(10):
        js.client.request("s.a", b"x" * 100, timeout=5)
    consumer = durable(js)
    start = time.monotonic()
    batch = consumer.fetch_bytes(450, max_wait=5)
    # Each message counts 100 bytes plus its subject and ack subject: four do not fit.
    assert 1 <= len(batch) <= 3 and batch.error is None
    assert time.monotonic() - start < 5  # ended by the server's 409, not the wait
    rest = consumer.fetch(20, max_wait=0.5)
    assert len(batch) + len(rest) == 10


def test_next_with_nothing_raises_timeout(js: JetStream) -> None:
    consumer = durable(js)
    start = time.monotonic()
    with pytest.raises(nats_sync.TimeoutError):
        consumer.next(max_wait=0.5)
    assert time.monotonic() - start < 0.5 + MARGIN
    store(js, 1)
    assert consumer.next(max_wait=5).data == b"m0"


def test_a_stale_request_timeout_never_ends_the_next_fetch(js: JetStream) -> None:
    consumer = durable(js)
    # Two fetches abandoned at once: their 408s come 0.3 s later, to inboxes now gone.
    for _ in range(2):
        consumer.fetch(5, max_wait=0.3).close()
    threading.Timer(1.0, store, (js, 3)).start()
    start = time.monotonic()
    batch = consumer.fetch(3, max_wait=5)
    assert [msg.data for msg in batch] == [b"m0", b"m1", b"m2"]
    assert batch.error is None and time.monotonic() - start < 5


def test_two_fetches_in_a_row_then_messages(js: JetStream) -> None:
    consumer = durable(js)
    assert len(consumer.fetch(1, max_wait=0.2)) == 0
    assert len(consumer.fetch(1, max_wait=0.2)) == 0
    store(js, 2)
    assert [msg.data for msg in consumer.fetch(2, max_wait=5)] == [b"m0", b"m1"]


def test_a_batch_yields_messages_as_they_arrive(js: JetStream) -> None:
    consumer = durable(js)
    batch = consumer.fetch(2, max_wait=10)
    threading.Timer(0.3, store, (js, 1)).start()
    first = next(iter(batch))
    assert first.data == b"m0" and not batch.done
    batch.close()
    assert batch.done


def test_fetch_from_a_missing_consumer_has_the_error(js: JetStream) -> None:
    consumer = durable(js)
    js.delete_consumer("S", "C")
    batch = consumer.fetch(1, max_wait=2)
    assert list(batch) == [] and isinstance(batch.error, ConsumerNotFoundError)
    with pytest.raises(ConsumerNotFoundError):
        consumer.next(max_wait=2)


def test_a_fetch_the_consumer_refuses_has_a_status_error(js: JetStream) -> None:
    consumer = durable(js, max_batch=2)
    batch = consumer.fetch(5, max_wait=1)
    assert list(batch) == []
    assert isinstance(batch.error, StatusError) and batch.error.status == 409


def test_bad_arguments_name_what_was_wrong(js: JetStream) -> None:
    consumer = durable(js)
    for call, word in [
        (lambda: consumer.fetch(0), "max_messages"),
        (lambda: consumer.fetch(1, max_wait=0), "max_wait"),
        (lambda: consumer.fetch(1, max_wait=2, heartbeat=1.5), "heartbeat"),
        (lambda: consumer.fetch_bytes(0), "max_bytes"),
        (lambda: consumer.fetch_nowait(-1), "max_messages"),
        (lambda: consumer.messages(max_wait=0.5), "max_wait"),
        (lambda: consumer.consume(42), "cb"),  # type: ignore[arg-type]
    ]:
        with pytest.raises(nats_sync.InvalidArgumentError, match=word):
            call()


# --- acknowledgements and metadata ---------------------------------------------------------


def test_ack_and_double_ack_take_messages_out(js: JetStream) -> None:
    store(js, 2)
    consumer = durable(js, ack_wait=1.0)
    first, second = consumer.fetch(2, max_wait=5)
    first.ack()
    second.double_ack(timeout=5)
    for msg in (first, second):
        with pytest.raises(MsgAlreadyAckdError):
            msg.ack()
    js.client.flush()
    info = consumer.info()
    assert info.num_ack_pending == 0 and info.ack_floor.stream_seq == 2
    assert len(consumer.fetch(2, max_wait=1.5)) == 0  # nothing redelivered after ack_wait


def test_metadata_fields_and_num_delivered_on_redelivery(js: JetStream) -> None:
    store(js, 1)
    consumer = durable(js)
    msg = consumer.next(max_wait=5)
    meta = msg.metadata
    assert (meta.stream, meta.consumer, meta.domain) == ("S", "C", None)
    assert (meta.num_delivered, meta.num_pending) == (1, 0)
    assert (meta.sequence.stream, meta.sequence.consumer) == (1, 1)
    stored = js.stream("S").get_msg(1).time
    assert stored is not None and abs((meta.timestamp - stored).total_seconds()) < 0.001
    msg.nak()
    again = consumer.next(max_wait=5)
    assert again.metadata.num_delivered == 2
    assert again.metadata.sequence == type(meta.sequence)(stream=1, consumer=2)
    again.ack()


def test_nak_with_delay_redelivers_after_the_delay_and_not_before(js: JetStream) -> None:
    store(js, 1)
    consumer = durable(js)
    consumer.next(max_wait=5).nak(delay=1.5)
    start = time.monotonic()
    assert len(consumer.fetch(1, max_wait=0.8)) == 0  # not before
    again = consumer.next(max_wait=5)
    assert again.metadata.num_delivered == 2
    assert 1.2 < time.monotonic() - start < 1.5 + MARGIN
    again.ack()


def test_term_stops_redelivery(js: JetStream) -> None:
    store(js, 1)
    consumer = durable(js, ack_wait=0.5)
    consumer.next(max_wait=5).term("cannot parse")
    assert len(consumer.fetch(1, max_wait=1.5)) == 0
    assert consumer.info().num_ack_pending == 0


def test_in_progress_extends_ack_wait(js: JetStream) -> None:
    store(js, 1)
    consumer = durable(js, ack_wait=1.0)
    msg = consumer.next(max_wait=5)
    for _ in range(4):  # 2 s of work, twice the ack wait
        time.sleep(0.5)
        msg.in_progress()
    assert len(consumer.fetch(1, max_wait=0.5)) == 0  # not redelivered meanwhile
    msg.double_ack()
    assert len(consumer.fetch(1, max_wait=1.5)) == 0


def test_without_in_progress_it_is_redelivered_after_ack_wait(js: JetStream) -> None:
    store(js, 1)
    consumer = durable(js, ack_wait=1.0)
    consumer.next(max_wait=5)
    again = consumer.next(max_wait=5)
    assert again.metadata.num_delivered == 2


def test_max_ack_pending_is_honoured(js: JetStream) -> None:
    store(js, 10)
    consumer = durable(js, max_ack_pending=5)
    first = list(consumer.fetch(10, max_wait=1))
    assert len(first) == 5
    # The server does not answer a no_wait pull held back by max_ack_pending: the
    # batch ends on its own 1 s deadline, empty.
    start = time.monotonic()
    assert len(consumer.fetch_nowait(10)) == 0
    assert time.monotonic() - start < 1.0 + MARGIN
    assert len(consumer.fetch(10, max_wait=0.5)) == 0
    for msg in first[:2]:
        msg.double_ack()
    assert [msg.metadata.sequence.stream for msg in consumer.fetch(10, max_wait=1)] == [6, 7]


def test_a_message_not_from_a_consumer_is_not_acked(js: JetStream) -> None:
    msg = JsMsg(Msg("s.a", "_INBOX.x", b""), js.client, 1.0)
    with pytest.raises(NotJSMessageError):
        msg.ack()

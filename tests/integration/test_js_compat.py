"""nats-py's legacy JetStream reading names: pull_subscribe and subscribe, on pull
consumers."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable

import pytest

import nats_sync
from nats_sync.jetstream import JetStream, StreamNotFoundError
from nats_sync.jetstream._consumers.msg import JsMsg
from nats_sync.testing import NatsServer

pytestmark = pytest.mark.timeout(60)

ClientFactory = Callable[..., nats_sync.Client]


@pytest.fixture
def js(jetstream_server: NatsServer, connect: ClientFactory) -> JetStream:
    js = connect(servers=jetstream_server.url).jetstream()
    js.create_stream(name="Q", subjects=["q.>"])
    return js


def store(js: JetStream, count: int, subject: str = "q.a") -> None:
    for n in range(count):
        assert "error" not in json.loads(js.client.request(subject, b"%d" % n, timeout=5).data)


def test_pull_subscribe_fetches_lists_and_times_out_only_when_empty(js: JetStream) -> None:
    store(js, 5)
    psub = js.pull_subscribe("q.a", durable="d1")
    first = psub.fetch(3, timeout=2)
    assert [m.data for m in first] == [b"0", b"1", b"2"]
    for msg in first:
        msg.ack()
    partial = psub.fetch(10, timeout=1)
    assert [m.data for m in partial] == [b"3", b"4"]
    for msg in partial:
        msg.ack()
    started = time.monotonic()
    with pytest.raises(nats_sync.TimeoutError):
        psub.fetch(1, timeout=0.5)
    assert time.monotonic() - started < 0.5 + 2.0
    # Binding again by the durable name continues where it stood.
    store(js, 1)
    assert [m.data for m in js.pull_subscribe("q.a", durable="d1").fetch(5, timeout=2)] == [b"0"]
    assert psub.consumer_info().name == "d1"


def test_an_ephemeral_pull_subscription_is_deleted_on_unsubscribe(js: JetStream) -> None:
    psub = js.pull_subscribe("q.b")
    assert list(js.consumer_names("Q")) == [psub.consumer.name]
    psub.unsubscribe()
    assert list(js.consumer_names("Q")) == []


def test_a_subject_no_stream_stores_is_refused(js: JetStream) -> None:
    with pytest.raises(StreamNotFoundError):
        js.pull_subscribe("nowhere.x", durable="x")


def test_subscribe_with_a_callback_acknowledges_after_it(js: JetStream) -> None:
    store(js, 20)
    seen: list[bytes] = []
    done = threading.Event()

    def on_msg(msg: JsMsg) -> None:
        seen.append(msg.data)
        if len(seen) == 20:
            done.set()

    sub = js.subscribe("q.a", cb=on_msg, durable="auto")
    assert done.wait(20)
    sub.unsubscribe()
    assert seen == [b"%d" % n for n in range(20)]
    deadline = time.monotonic() + 10
    while js.consumer_info("Q", "auto").num_ack_pending and time.monotonic() < deadline:
        time.sleep(0.05)
    info = js.consumer_info("Q", "auto")
    assert (info.num_ack_pending, info.num_pending, info.ack_floor.stream_seq) == (0, 0, 20)


def test_subscribe_without_a_callback_reads_with_next_msg(js: JetStream) -> None:
    store(js, 3)
    sub = js.subscribe("q.a", manual_ack=True)
    got = [sub.next_msg(timeout=5) for _ in range(3)]
    assert [m.data for m in got] == [b"0", b"1", b"2"]
    for msg in got:
        msg.ack()
    with pytest.raises(nats_sync.TimeoutError):
        sub.next_msg(timeout=0.3)
    sub.unsubscribe()
    assert list(js.consumer_names("Q")) == []  # its ephemeral consumer went with it


def test_a_queue_group_shares_one_durable_consumer(js: JetStream) -> None:
    store(js, 30)
    seen: list[bytes] = []
    lock = threading.Lock()
    done = threading.Event()

    def on_msg(msg: JsMsg) -> None:
        with lock:
            seen.append(msg.data)
            if len(seen) == 30:
                done.set()

    members = [js.subscribe("q.a", queue="workers", cb=on_msg) for _ in range(2)]
    assert done.wait(20)
    time.sleep(0.3)
    for member in members:
        member.unsubscribe()
    assert sorted(seen) == sorted(b"%d" % n for n in range(30))  # each once across both
    assert list(js.consumer_names("Q")) == ["workers"]


def test_subscribe_with_an_ordered_consumer(js: JetStream) -> None:
    store(js, 10)
    sub = js.subscribe("q.a", ordered_consumer=True)
    assert [sub.next_msg(timeout=5).data for _ in range(10)] == [b"%d" % n for n in range(10)]
    sub.unsubscribe()
    assert list(js.consumer_names("Q")) == []  # the ordered consumer is removed too
    with pytest.raises(ValueError, match="ordered"):
        js.subscribe("q.a", ordered_consumer=True, durable="x")

"""The ordered consumer: each stream message once, in order, through a deleted consumer
and a server restart."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable

import pytest

import nats_sync
from nats_sync.jetstream import JetStream, OrderedConsumerConcurrentRequestsError
from nats_sync.testing import NatsServer

pytestmark = pytest.mark.timeout(60)

ClientFactory = Callable[..., nats_sync.Client]


@pytest.fixture
def js(jetstream_server: NatsServer, connect: ClientFactory) -> JetStream:
    js = connect(servers=jetstream_server.url).jetstream()
    js.create_stream(name="EV", subjects=["ev.>"])
    return js


def store(js: JetStream, count: int, start: int = 0, subject: str = "ev.a") -> None:
    for n in range(start, start + count):
        reply = js.client.request(subject, b"%d" % n, timeout=5)
        assert "error" not in json.loads(reply.data)


def test_fetch_and_next_read_everything_in_order(js: JetStream) -> None:
    store(js, 100)
    ordered = js.ordered_consumer("EV")
    got: list[bytes] = []
    while len(got) < 100:
        batch = ordered.fetch(30, max_wait=2)
        assert batch, "an ordered fetch came back empty with messages left"
        got += [msg.data for msg in batch]
    assert got == [b"%d" % n for n in range(100)]
    assert ordered.last_stream_sequence == 100
    with pytest.raises(nats_sync.TimeoutError):
        ordered.next(max_wait=0.3)
    store(js, 1, 100)
    assert ordered.next(max_wait=5).data == b"100"
    ordered.stop()


def test_messages_follow_a_publisher_in_order(js: JetStream) -> None:
    ordered = js.ordered_consumer("EV")

    def publish() -> None:
        store(js, 300)

    publisher = threading.Thread(target=publish)
    publisher.start()
    seen: list[int] = []
    with ordered.messages() as reader:
        for msg in reader:
            seen.append(int(msg.data))
            if len(seen) == 300:
                break
    publisher.join(30)
    assert seen == list(range(300))
    ordered.stop()


def test_a_deleted_consumer_is_remade_without_loss_or_repeat(js: JetStream) -> None:
    store(js, 50)
    ordered = js.ordered_consumer("EV")
    first = ordered.fetch(20, max_wait=2)
    assert [int(m.data) for m in first] == list(range(20))
    for name in list(js.consumer_names("EV")):
        js.delete_consumer("EV", name)
    rest: list[int] = []
    deadline = time.monotonic() + 30
    while len(rest) < 30 and time.monotonic() < deadline:
        rest += [int(m.data) for m in ordered.fetch(30, max_wait=2)]
    assert rest == list(range(20, 50))
    ordered.stop()


@pytest.mark.slow
def test_a_server_restart_under_messages_loses_and_repeats_nothing(
    jetstream_server: NatsServer, js: JetStream
) -> None:
    store(js, 200)
    ordered = js.ordered_consumer("EV")
    seen: list[int] = []
    with ordered.messages() as reader:
        for msg in reader:
            seen.append(int(msg.data))
            if len(seen) == 100:
                break
        jetstream_server.restart()
        # The client reconnects by itself; publishing resumes once the stream is back.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                store(js, 100, 200)
                break
            except (nats_sync.Error, AssertionError):
                time.sleep(0.2)
        for msg in reader:
            seen.append(int(msg.data))
            if len(seen) == 300:
                break
    assert seen == list(range(300))
    ordered.stop()


def test_filters_and_start_policies(js: JetStream) -> None:
    store(js, 5, subject="ev.a")
    store(js, 5, 5, subject="ev.b")
    only_b = js.ordered_consumer("EV", filter_subjects=["ev.b"])
    assert [int(m.data) for m in only_b.fetch(10, max_wait=2)] == list(range(5, 10))
    both = js.ordered_consumer("EV", filter_subjects=["ev.a", "ev.b"], deliver_policy="last")
    assert [int(m.data) for m in both.fetch(10, max_wait=1)] == [9]
    from_seq = js.ordered_consumer("EV", deliver_policy="by_start_sequence", opt_start_seq=8)
    assert [int(m.data) for m in from_seq.fetch(10, max_wait=2)] == [7, 8, 9]
    fresh = js.ordered_consumer("EV", deliver_policy="new")
    assert fresh.fetch(10, max_wait=0.5) == []
    for ordered in (only_b, both, from_seq, fresh):
        ordered.stop()


def test_one_read_at_a_time(js: JetStream) -> None:
    ordered = js.ordered_consumer("EV")
    started = threading.Event()

    def long_fetch() -> None:
        started.set()
        ordered.fetch(1, max_wait=2)

    reader = threading.Thread(target=long_fetch)
    reader.start()
    assert started.wait(5)
    time.sleep(0.3)  # let the first fetch take the reading slot
    with pytest.raises(OrderedConsumerConcurrentRequestsError):
        ordered.fetch(1, max_wait=0.1)
    reader.join(10)
    ordered.stop()


def test_consume_runs_the_callback_in_order_and_stops(js: JetStream) -> None:
    store(js, 40)
    ordered = js.ordered_consumer("EV")
    seen: list[int] = []
    done = threading.Event()

    def on_msg(msg: object) -> None:
        seen.append(int(msg.data))  # type: ignore[attr-defined]
        if len(seen) == 40:
            done.set()

    context = ordered.consume(on_msg)
    assert done.wait(20)
    context.drain(timeout=10)
    assert context.closed and seen == list(range(40))
    ordered.stop()


def test_bad_arguments(js: JetStream) -> None:
    with pytest.raises(ValueError, match="deliver_policy"):
        js.ordered_consumer("EV", deliver_policy="sometimes")
    with pytest.raises(ValueError, match="opt_start_seq"):
        js.ordered_consumer("EV", deliver_policy="by_start_sequence")
    with pytest.raises(ValueError, match="filter_subjects"):
        js.ordered_consumer("EV", filter_subjects=[""])

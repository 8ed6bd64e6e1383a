"""The client in a gevent-patched process: its threads are greenlets, it never blocks
the hub for long, and it reconnects as it does with threads.

Run by ``tests/under_gevent/test_patched_runs.py`` in a child that gevent patched.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import gevent
import pytest
from gevent import monkey

import nats_sync
from nats_sync.testing import NatsServer

pytestmark = pytest.mark.timeout(60)

#: How often the ticker wakes, and the longest the hub may be held without it.
TICK = 0.05
MAX_HUB_BLOCK = 0.5


class Ticker:
    """A greenlet sleeping ``TICK`` at a time and recording the longest gap between two
    ticks beyond ``TICK``: how long the hub could not run it."""

    def __init__(self) -> None:
        self.ticks = 0
        self.longest = 0.0
        self._last = time.monotonic()
        self._greenlet = gevent.spawn(self._run)

    def _run(self) -> None:
        while True:
            gevent.sleep(TICK)
            now = time.monotonic()
            self.longest = max(self.longest, now - self._last - TICK)
            self._last = now
            self.ticks += 1

    def stop(self) -> float:
        """Stops it; the longest gap, counting the one still open."""
        self.longest = max(self.longest, time.monotonic() - self._last - TICK)
        self._greenlet.kill()
        return self.longest


@pytest.fixture
def ticker() -> Iterator[Ticker]:
    running = Ticker()
    try:
        yield running
    finally:
        running.stop()


def _wait_for(check: Callable[[], bool], within: float, what: str) -> None:
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, f"not {what} within {within}s"
        gevent.sleep(0.02)


def test_the_process_is_patched_and_the_client_s_threads_are_greenlets(
    nats_server: NatsServer,
) -> None:
    assert monkey.is_module_patched("threading") and monkey.is_module_patched("socket")
    real_ident = monkey.get_original("_thread", "get_ident")
    ran_on: list[tuple[object, int]] = []
    done = threading.Event()

    def on_msg(msg: nats_sync.Msg) -> None:
        ran_on.append((gevent.getcurrent(), real_ident()))
        done.set()

    with nats_sync.connect(nats_server.url) as nc:
        nc.subscribe("where", cb=on_msg)
        nc.publish("where", b"?")
        assert done.wait(5)
    (greenlet, os_thread) = ran_on[0]
    assert isinstance(greenlet, gevent.Greenlet)  # the delivery "thread" is a greenlet
    assert os_thread == real_ident()  # on this process's one OS thread


def test_requests_publishes_and_jetstream_never_block_the_hub(
    jetstream_server: NatsServer, ticker: Ticker
) -> None:
    """A ticker greenlet keeps ticking through requests, publishes and JetStream calls:
    no call of the client holds the hub (the OS thread) for over ``MAX_HUB_BLOCK``."""
    with (
        nats_sync.connect(jetstream_server.url) as responder,
        nats_sync.connect(jetstream_server.url) as nc,
    ):
        responder.subscribe("echo", cb=lambda msg: msg.respond(msg.data))
        responder.flush(5)
        for i in range(300):
            assert nc.request("echo", str(i).encode(), timeout=5).data == str(i).encode()
        futures = [nc.request_future("echo", b"f", timeout=5) for _ in range(100)]
        assert all(f.result(5).data == b"f" for f in futures)
        replies = nc.request_batch("echo", [b"b"] * 200, timeout=5)
        assert all(getattr(r, "data", None) == b"b" for r in replies)
        sink = nc.subscribe("sink")
        for _ in range(20_000):
            nc.publish("sink", b"x" * 64)
        nc.flush(10)
        assert sink.next_msg(5).data == b"x" * 64

        js = nc.jetstream()
        js.add_stream(name="HUB", subjects=["hub.>"], storage="memory")
        for i in range(100):
            assert js.publish("hub.one", str(i).encode()).seq == i + 1
        acks = [js.publish_async("hub.many", b"a") for _ in range(2_000)]
        js.publish_async_completed(timeout=10)
        assert acks[-1].result(5).seq == 2_100
        consumer = js.create_consumer("HUB", durable_name="C", ack_policy="explicit")
        fetched = consumer.fetch(500, max_wait=5)
        assert len(fetched) == 500
        for msg in fetched:
            msg.ack()
        kv = js.create_key_value(bucket="hub", storage="memory")
        for i in range(50):
            kv.put("k", str(i).encode())
        assert kv.get("k").value == b"49"
    longest = ticker.stop()
    assert ticker.ticks > 0, "the ticker never ran"
    assert longest < MAX_HUB_BLOCK, f"the hub was blocked for {longest:.3f}s"


def test_a_server_killed_and_restarted_on_its_port_is_reconnected_to(
    nats_server: NatsServer, ticker: Ticker
) -> None:
    """As without gevent (``test_reconnect``): the subscription is replayed, what was
    published while down is delivered, the callbacks run, and the hub stays free."""
    events: list[str] = []
    with nats_sync.connect(
        nats_server.url,
        reconnect_time_wait=0.1,
        disconnected_cb=lambda: events.append("disconnected"),
        reconnected_cb=lambda: events.append("reconnected"),
    ) as nc:
        sub = nc.subscribe("back")
        nc.subscribe("echo", cb=lambda msg: msg.respond(msg.data))
        nc.flush(5)
        port = nats_server.port

        nats_server.kill()
        _wait_for(lambda: not nc.is_connected, 5, "disconnected")
        for i in range(5):
            nc.publish("back", str(i).encode())  # buffered while down
        nats_server.restart()
        assert nats_server.port == port

        _wait_for(lambda: nc.is_connected, 10, "reconnected")
        assert [sub.next_msg(5).data for _ in range(5)] == [b"0", b"1", b"2", b"3", b"4"]
        assert nc.request("echo", b"again", timeout=5).data == b"again"
        _wait_for(lambda: "reconnected" in events, 5, "told of the reconnect")
        assert events[:2] == ["disconnected", "reconnected"]
    assert ticker.stop() < MAX_HUB_BLOCK


def _parked(nc: nats_sync.Client) -> bool:
    conn = nc._handler.connection()
    return conn is not None and conn._parked


def test_a_sequential_requester_reads_its_own_reply(nats_server: NatsServer) -> None:
    """As ``tests/integration/test_request_leading.py`` checks without gevent."""
    with (
        nats_sync.connect(nats_server.url) as responder,
        nats_sync.connect(nats_server.url) as nc,
    ):
        responder.subscribe("lead", cb=lambda msg: msg.respond(msg.data))
        responder.flush(5)
        deadline = time.monotonic() + 3.0
        while not _parked(nc) and time.monotonic() < deadline:
            assert nc.request("lead", b"x", timeout=2).data == b"x"
        assert _parked(nc), "the reader never stepped aside for the requesters"

"""Ctrl-C at each point a JetStream call runs: the client and the context still work
(issue 24.1, the families on top of the core client).

As ``test_interrupts_traced.py``: a profile hook raises ``KeyboardInterrupt`` at the Nth
point of nats_sync code where CPython runs pending signal handlers, for N = 1, 2, ...
(every ``stride``-th for the long calls) until the call runs to its end. After each the
client must answer a request and a flush with nothing left behind, and the JetStream
part must work again: a publish is acknowledged, no ``publish_async`` ack stays awaited,
the consumer still hands out what is stored, the bucket and the store read back what
was written. Micro handlers are not here: they run on a subscription's thread, which no
signal reaches.
"""

from __future__ import annotations

import itertools
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from test_interrupts_traced import assert_usable, run_interrupted

import nats_sync
from nats_sync.jetstream import JetStream, MessageStream
from nats_sync.testing import NatsServer

#: A few seconds to a minute each (an interrupted pull's message comes back only after
#: ack_wait): make test runs them, make test-fast leaves them out.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

#: The walk gives up (and fails) past this many points.
MAX_POINTS = 6000


@pytest.fixture(scope="module")
def server() -> Iterator[NatsServer]:
    with NatsServer(jetstream=True) as srv:
        yield srv


@pytest.fixture
def nc(server: NatsServer) -> Iterator[nats_sync.Client]:
    responder = nats_sync.connect(server.url, name="echo")
    responder.subscribe("echo", cb=lambda msg: msg.respond(msg.data))
    responder.flush(5)
    client = nats_sync.connect(server.url, name="interrupted")
    try:
        yield client
    finally:
        client.close()
        responder.close()


def walk(
    nc: nats_sync.Client, call: Callable[[], object], check: Callable[[], None], stride: int = 1
) -> int:
    """Interrupts ``call`` at point 1, 1 + stride, ... until it runs to its end, with
    ``check()`` and then the core checks after each; returns the points interrupted.

    ``check()`` first: it settles what the interrupted call left going on purpose (the
    acks of the ``publish_async`` calls made before the interrupt come from JetStream
    on their own time, and on a loaded machine after the core checks' flush), and only
    then may no request be left in flight.
    """
    for interrupted, at in enumerate(range(1, MAX_POINTS, stride)):
        tracer = run_interrupted(call, at)
        try:
            check()
            assert_usable(nc)
        except BaseException as err:
            raise AssertionError(
                f"unusable after KeyboardInterrupt at point {at}, {tracer.where or '?'}: {err!r}"
            ) from err
        if not tracer.fired:
            assert interrupted > 3, "the call reached almost no point: the hook missed it"
            return interrupted
    pytest.fail(f"the call still ran past {MAX_POINTS} points")


def settled(js: JetStream, subject: str) -> None:
    """No publish_async ack is left awaited, and a publish to ``subject`` is
    acknowledged."""
    js.publish_async_completed(timeout=5)
    assert js.publish_async_pending() == 0
    assert js.publish(subject, b"ok", timeout=5).seq > 0


def test_js_publish_interrupted_at_every_point(nc: nats_sync.Client) -> None:
    js = nc.jetstream()
    js.create_stream(name="TRACED_PUB", subjects=["tpub.>"], storage="memory")
    js.publish("tpub.warm", b"w", timeout=5)
    assert (
        walk(nc, lambda: js.publish("tpub.a", b"x", timeout=5), lambda: settled(js, "tpub.check"))
        > 20
    )


def test_publish_async_interrupted_at_every_point(nc: nats_sync.Client) -> None:
    js = nc.jetstream()
    js.create_stream(name="TRACED_ASYNC", subjects=["tasync.>"], storage="memory")

    def call() -> None:
        futures = [js.publish_async("tasync.a", b"x") for _ in range(3)]
        js.publish_async_completed(timeout=5)
        assert all(future.result(timeout=5).seq > 0 for future in futures)

    call()  # the session (inbox, timer) made before the walk, then again after closes
    assert walk(nc, call, lambda: settled(js, "tasync.check")) > 20


def test_fetch_and_messages_interrupted_at_every_point(nc: nats_sync.Client) -> None:
    js = nc.jetstream()
    js.create_stream(name="TRACED_PULL", subjects=["pull.>"], storage="memory")
    consumer = js.create_consumer(
        "TRACED_PULL", durable_name="C", ack_policy="explicit", ack_wait=1.0
    )
    serial = itertools.count()

    def fetch() -> None:
        js.publish("pull.a", b"%d" % next(serial), timeout=5)
        for msg in consumer.fetch(1, max_wait=5):
            msg.ack()

    def still_delivers() -> None:
        # What an interrupt left unacknowledged comes back after ack_wait: whatever
        # is stored, a fetch gets a message.
        js.publish("pull.a", b"check", timeout=5)
        batch = consumer.fetch(1, max_wait=5)
        assert len(batch) == 1
        for msg in batch:
            msg.ack()

    fetch()
    points = walk(nc, fetch, still_delivers, stride=11)
    assert points > 10

    with consumer.messages(max_messages=10) as stream:

        def next_one() -> None:
            js.publish("pull.a", b"%d" % next(serial), timeout=5)
            stream.next(timeout=5).ack()

        def stream_delivers() -> None:
            js.publish("pull.a", b"check", timeout=5)
            stream.next(timeout=5).ack()

        next_one()
        assert walk(nc, next_one, stream_delivers, stride=11) > 10


def test_kv_interrupted_at_every_point(nc: nats_sync.Client) -> None:
    js = nc.jetstream()
    kv = js.create_key_value(bucket="traced", storage="memory")
    serial = itertools.count()

    def put_get() -> None:
        value = b"%d" % next(serial)
        kv.put("k", value)
        assert kv.get("k").value == value

    def readable() -> None:
        kv.put("check", b"ok")
        assert kv.get("check").value == b"ok"

    put_get()
    assert walk(nc, put_get, readable, stride=2) > 20


def test_object_store_interrupted_at_every_point(nc: nats_sync.Client) -> None:
    js = nc.jetstream()
    obs = js.create_object_store("traced", storage="memory")
    data = b"object" * 100

    def put_get() -> None:
        obs.put("o", data)
        assert obs.get("o").data == data

    def readable() -> None:
        js.publish_async_completed(timeout=5)
        assert js.publish_async_pending() == 0
        obs.put("check", b"ok")
        assert obs.get("check").data == b"ok"

    put_get()
    assert walk(nc, put_get, readable, stride=7) > 20


def test_drain_and_close_interrupted_at_every_point(
    server: NatsServer, nc: nats_sync.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A close or drain cut at any point still ends every thread of its client."""
    made: list[nats_sync.Client] = []
    handed_out: list[Any] = []  # the handler of every Client made, even one lost below
    client_init = nats_sync.Client.__init__

    def recording_init(self: nats_sync.Client, handler: Any, *args: Any) -> None:
        handed_out.append(handler)
        client_init(self, handler, *args)

    def call() -> None:
        other = nats_sync.connect(server.url, name="short-lived")
        made.append(other)
        other.subscribe("feed")
        other.drain(timeout=5)

    lost: list[Any] = []
    before = {thread for thread in threading.enumerate() if thread.is_alive()}

    def all_closed() -> None:
        for other in made:
            other.close()  # a second close finishes what an interrupted one began
            assert other.is_closed
        # Interrupted as connect() returned: the caller never got the client, which no
        # library can help (the hook's "return" point); anything else connect() closed.
        for handler in handed_out:
            if handler.state.name != "CLOSED" and handler not in lost:
                lost.append(handler)
                handler.close()
        left = [
            thread.name
            for thread in threading.enumerate()
            if thread.is_alive() and thread not in before and thread.name.startswith("nats_sync-")
        ]
        assert not left, f"threads outlived close(): {left}"

    monkeypatch.setattr(nats_sync.Client, "__init__", recording_init)
    assert walk(nc, call, all_closed, stride=3) > 20
    assert len(lost) <= 1, lost


class _InterruptAfterTake:
    """A ``sys.setprofile`` hook raising KeyboardInterrupt as the subscription's
    ``next_msg`` returns to ``MessageStream.next``: the message is taken and lost, the
    worst moment for the stream's count of what it asked for."""

    def __init__(self) -> None:
        self.fired = False

    def __call__(self, frame: Any, event: str, arg: Any) -> None:
        if (
            not self.fired
            and event == "return"
            and frame.f_code.co_name == "next_msg"
            and frame.f_back is not None
            and frame.f_back.f_code is MessageStream.next.__code__
        ):
            self.fired = True
            raise KeyboardInterrupt("as next_msg returned")


def test_messages_go_on_after_many_interrupts_that_lose_a_taken_message(
    nc: nats_sync.Client,
) -> None:
    """Ctrl-C as a pulled message is taken, again and again (as the fuzz storm can):
    each loses a message the stream counted as asked for and not yet handed out. The
    stream must not wait for them (before the fix it stopped pulling until a missed
    heartbeat, 30 s, once more than half its max_messages were lost so); what was lost
    comes back after ack_wait."""
    js = nc.jetstream()
    js.create_stream(name="LOST_TAKE", subjects=["lost.>"], storage="memory")
    js.create_consumer("LOST_TAKE", durable_name="C", ack_policy="explicit", ack_wait=60)
    consumer = js.consumer("LOST_TAKE", "C")
    with consumer.messages(max_messages=10) as stream:
        lost = 0
        for _ in range(8):
            js.publish("lost.a", b"x", timeout=5)
            hook = _InterruptAfterTake()
            sys.setprofile(hook)
            try:
                stream.next(timeout=5)
            except KeyboardInterrupt:
                pass
            finally:
                sys.setprofile(None)
            assert hook.fired
            lost += 1
        for serial in range(6):
            js.publish("lost.a", b"%d" % serial, timeout=5)
            msg = stream.next(timeout=5)
            assert msg.data == b"%d" % serial
            msg.ack()
    assert lost == 8

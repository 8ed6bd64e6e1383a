"""Stress: 32 threads mixing every call on one client while it is forced to reconnect;
and no state left behind by 10,000 timed-out requests or subscribe/unsubscribe cycles."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Callable

import pytest

import nats_sync

pytestmark = pytest.mark.slow  # make test-fast leaves it out

ClientFactory = Callable[..., nats_sync.Client]

#: What a call may raise while the client is being forced to reconnect.
EXPECTED = (
    nats_sync.TimeoutError,  # a request or flush that spanned a reconnect
    nats_sync.OutboundBufferLimitError,  # the buffer filled while disconnected
    nats_sync.NoRespondersError,  # the responder was between its reconnect and its SUB
)


@pytest.mark.timeout(60)
def test_32_threads_mixing_calls_while_reconnecting(connect: ClientFactory) -> None:
    responder = connect()
    responder.subscribe("stress.echo", cb=lambda msg: msg.respond(msg.data))
    responder.flush()
    nc = connect(reconnect_delay_cb=lambda attempt: 0.01)
    outcomes: Counter[str] = Counter()
    unexpected: list[BaseException] = []
    lock = threading.Lock()
    stop = threading.Event()

    def note(what: str) -> None:
        with lock:
            outcomes[what] += 1

    def worker(index: int) -> None:
        rng = random.Random(index)
        while not stop.is_set():
            action = rng.choice(("publish", "subscribe", "request", "flush"))
            try:
                if action == "publish":
                    nc.publish(f"stress.pub.{index}", b"x" * rng.randrange(1, 2048))
                elif action == "subscribe":
                    sub = nc.subscribe(f"stress.sub.{index}.{rng.randrange(4)}")
                    sub.unsubscribe()
                elif action == "request":
                    payload = b"%d-%d" % (index, rng.randrange(1 << 30))
                    reply = nc.request("stress.echo", payload, timeout=1.0)
                    if reply.data != payload:
                        raise AssertionError(f"got {reply.data!r} for {payload!r}")
                    note("answered")
                else:
                    nc.flush(timeout=1.0)
                note(action)
            except EXPECTED as err:
                note(type(err).__name__)
            except BaseException as err:
                with lock:
                    unexpected.append(err)
                return

    def reconnector() -> None:
        while not stop.wait(0.5):
            try:
                nc.force_reconnect()
                note("force_reconnect")
            except BaseException as err:
                with lock:
                    unexpected.append(err)
                return

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(32)]
    threads.append(threading.Thread(target=reconnector))
    for thread in threads:
        thread.start()
    time.sleep(5)
    stop.set()
    for thread in threads:
        thread.join(15)
    assert not any(thread.is_alive() for thread in threads), "a thread did not finish: deadlock"
    assert unexpected == []
    assert outcomes["answered"] > 0 and outcomes["force_reconnect"] >= 5
    assert outcomes["publish"] > 0 and outcomes["subscribe"] > 0 and outcomes["flush"] > 0
    nc.flush(timeout=5)  # still usable afterwards
    assert nc.request("stress.echo", b"after", timeout=5).data == b"after"


@pytest.mark.timeout(60)
def test_10000_timed_out_requests_leave_nothing_in_the_request_map(
    connect: ClientFactory,
) -> None:
    nc = connect()
    nc.subscribe("stress.silent")  # listens, never answers: every request times out
    nc.flush()
    futures = [nc.request_future("stress.silent", b"?", timeout=0.2) for _ in range(10_000)]
    timed_out = 0
    for future in futures:
        with pytest.raises(nats_sync.TimeoutError):
            future.result(timeout=30)
        timed_out += 1
    assert timed_out == 10_000
    assert nc._handler.debug_snapshot()["requests_in_flight"] == 0
    assert nc._handler.debug_snapshot()["timer_entries"] == 1  # the keepalive alone


@pytest.mark.timeout(60)
def test_10000_subscribe_unsubscribe_cycles_leave_no_state(connect: ClientFactory) -> None:
    nc = connect()
    for n in range(10_000):
        nc.subscribe(f"stress.cycle.{n % 50}").unsubscribe()
    for n in range(200):  # callback subscriptions start and end a thread each
        nc.subscribe(f"stress.cb.{n}", cb=lambda msg: None).unsubscribe()
    nc.flush(timeout=10)
    assert nc._handler.debug_snapshot()["subscriptions"] == 0
    threads = nc._handler.debug_snapshot()["delivery_threads"]
    for thread in threads:  # each ends on its own once it sees the end marker
        thread.join(5)
    alive = [t for t in threads if t.is_alive()]
    assert alive == []
    assert nc._handler.debug_snapshot()["delivery_threads"] == []  # each forgets itself as it ends

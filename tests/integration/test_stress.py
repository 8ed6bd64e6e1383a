"""Stress against a real nats-server: many threads on one client under forced
reconnects, and leak checks (nothing left behind by 10,000 requests or subscriptions).

Complements ``test_stress_mix.py``: here every request's outcome is counted and
checked (blocking, future and batch requests), callback subscriptions churn too, and the
client's view of its subscriptions is compared with the server's afterwards; the leak
checks also cover late replies, cancelled futures, no-responder replies, auto-unsubscribe
and the server's own subscription count.
"""

from __future__ import annotations

import gc
import random
import threading
import time
import weakref
from collections import Counter
from collections.abc import Callable
from concurrent.futures import CancelledError, Future
from typing import Any

import pytest

import nats_sync
from nats_sync.msg import Msg
from nats_sync.testing import NatsServer

pytestmark = pytest.mark.slow  # make test-fast leaves it out

ClientFactory = Callable[..., nats_sync.Client]
ServerFactory = Callable[..., NatsServer]

WORKERS = 32
RUN_FOR = 5.0
#: Every worker must finish within this long after being told to stop.
FINISH_WITHIN = 15.0
REQUEST_TIMEOUT = 1.0

#: What a call may raise while the client is forced to reconnect every 0.5 s.
#: - TimeoutError (FlushTimeoutError is one): a reply or PONG lost with a dropped
#:   connection, or delayed past the timeout by a reconnect.
#: - OutboundBufferLimitError: the pending buffer filled while disconnected.
#: - ConnectionReconnectingError: what drain() raises while reconnecting (publish,
#:   request and flush buffer instead; none of the workers drains, so it is only here
#:   as within the contract).
#: NoRespondersError is NOT accepted: the responder is another client that is never
#: forced to reconnect, and its SUB is flushed before the workers start, so the server
#: always has a responder; a 503 would mean a reply reached the wrong request.
EXPECTED: tuple[type[BaseException], ...] = (
    nats_sync.TimeoutError,
    nats_sync.OutboundBufferLimitError,
    nats_sync.ConnectionReconnectingError,
)


def _server_subscriptions(server: NatsServer, client_id: int | None) -> int:
    conn = server.monitor(f"connz?cid={client_id}")["connections"]
    assert len(conn) == 1, conn
    return int(conn[0]["subscriptions"])


def _wait_until(condition: Callable[[], bool], within: float) -> bool:
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)
    return True


@pytest.mark.timeout(60)
def test_32_threads_mix_every_call_while_force_reconnect_runs(
    nats_server_factory: ServerFactory,
) -> None:
    server = nats_server_factory(monitoring=True)
    made: list[nats_sync.Client] = []
    try:
        _run_the_mix(server, made)
    finally:
        for nc in made:
            nc.close()


def _run_the_mix(server: NatsServer, made: list[nats_sync.Client]) -> None:
    responder = nats_sync.connect(server.url)
    made.append(responder)

    def echo(msg: Msg) -> None:
        msg.respond(msg.data)

    responder.subscribe("mix.echo", queue="echoers", cb=echo)
    responder.subscribe("mix.echo", queue="echoers", cb=echo)
    responder.flush(timeout=5)

    reported: list[BaseException] = []
    nc = nats_sync.connect(
        server.url,
        reconnect_delay_cb=lambda attempt: 0.01,
        max_reconnect_attempts=-1,
        error_cb=reported.append,
    )
    made.append(nc)
    counts: Counter[str] = Counter()
    unexpected: list[tuple[str, BaseException]] = []
    wrong_replies: list[tuple[bytes, bytes]] = []
    lock = threading.Lock()
    stop = threading.Event()

    def note(what: str, amount: int = 1) -> None:
        with lock:
            counts[what] += amount

    def check_reply(sent: bytes, reply: Msg) -> None:
        if reply.data != sent:
            with lock:
                wrong_replies.append((sent, reply.data))
        note("answered")

    def worker(index: int) -> None:
        rng = random.Random(index)
        seq = 0
        while not stop.is_set():
            seq += 1
            payload = b"%d:%d" % (index, seq)
            action = rng.choice(
                (
                    "publish",
                    "publish",
                    "pull-sub",
                    "cb-sub",
                    "request",
                    "request",
                    "future",
                    "batch",
                    "flush",
                )
            )
            try:
                if action == "publish":
                    headers = {"Seq": str(seq)} if seq % 3 == 0 else None
                    nc.publish(f"mix.pub.{index}", payload * rng.randrange(1, 64), headers=headers)
                elif action == "pull-sub":
                    nc.subscribe(f"mix.sub.{index}.{seq % 5}").unsubscribe()
                elif action == "cb-sub":
                    sub = nc.subscribe(f"mix.cb.{index}", cb=lambda msg: None)
                    if seq % 2:
                        sub.unsubscribe()
                    else:
                        sub.unsubscribe(limit=1)  # auto-unsubscribe; ended explicitly below
                        nc.publish(f"mix.cb.{index}", b"once")
                        if not sub.is_closed:
                            try:
                                sub.unsubscribe()
                            except nats_sync.BadSubscriptionError:
                                pass  # the one message arrived first and ended it
                elif action == "request":
                    try:
                        check_reply(
                            payload, nc.request("mix.echo", payload, timeout=REQUEST_TIMEOUT)
                        )
                    except nats_sync.TimeoutError:
                        note("timed out")
                elif action == "future":
                    future = nc.request_future("mix.echo", payload, timeout=REQUEST_TIMEOUT)
                    try:
                        # Our TimeoutError, from the future. A bare TimeoutError from
                        # result() itself (never settled) is not caught here.
                        check_reply(payload, future.result(timeout=REQUEST_TIMEOUT + 5))
                    except nats_sync.TimeoutError:
                        note("timed out")
                elif action == "batch":
                    payloads = [payload + b"/%d" % i for i in range(8)]
                    results = nc.request_batch(
                        "mix.echo", payloads, timeout=REQUEST_TIMEOUT, max_in_flight=4
                    )
                    assert len(results) == len(payloads)
                    for sent, result in zip(payloads, results, strict=True):
                        if isinstance(result, Msg):
                            check_reply(sent, result)
                        elif isinstance(result, nats_sync.TimeoutError):
                            note("timed out")
                        else:
                            raise result
                else:
                    nc.flush(timeout=REQUEST_TIMEOUT)
                note(action)
            except EXPECTED as err:
                note(type(err).__name__)
            except BaseException as err:
                with lock:
                    unexpected.append((action, err))

    def reconnector() -> None:
        while not stop.wait(0.5):
            try:
                nc.force_reconnect()
                note("force_reconnect")
            except BaseException as err:
                with lock:
                    unexpected.append(("force_reconnect", err))

    threads = [
        threading.Thread(target=worker, args=(i,), name=f"test-worker-{i}", daemon=True)
        for i in range(WORKERS)
    ]
    threads.append(threading.Thread(target=reconnector, name="test-reconnector", daemon=True))
    for thread in threads:
        thread.start()
    time.sleep(RUN_FOR)
    stop.set()
    deadline = time.monotonic() + FINISH_WITHIN
    for thread in threads:
        thread.join(max(deadline - time.monotonic(), 0.0))
    stuck = [thread.name for thread in threads if thread.is_alive()]
    assert stuck == [], f"threads did not finish within {FINISH_WITHIN}s: deadlock? {stuck}"

    assert unexpected == [], unexpected[:5]
    assert wrong_replies == [], wrong_replies[:5]
    assert counts["answered"] > 0, counts
    assert counts["force_reconnect"] >= 5, counts
    for action in ("publish", "pull-sub", "cb-sub", "request", "future", "batch", "flush"):
        assert counts[action] > 0, (action, counts)
    assert reported == [], reported[:5]  # forced reconnects are not errors

    # Afterwards: usable, and nothing left over, on the client or on the server.
    nc.flush(timeout=5)
    assert nc.request("mix.echo", b"after", timeout=5).data == b"after"
    handler = nc._handler
    snapshot = handler.debug_snapshot()
    assert snapshot["request_inbox"] is not None
    assert snapshot["requests_in_flight"] == 0  # every request settled
    assert snapshot["subscriptions"] == 0
    assert _wait_until(
        lambda: not any(t.is_alive() for t in handler.debug_snapshot()["delivery_threads"]), 5
    ), "delivery threads of unsubscribed subscriptions are still running"
    assert 3 <= nc.stats["reconnects"] <= counts["force_reconnect"]  # a no-op while reconnecting
    assert _server_subscriptions(server, nc.client_id) == 1  # only the request inbox
    print(dict(counts))  # shown with -s: how the outcomes split


# --- leak checks ------------------------------------------------------------------------


@pytest.mark.timeout(30)
def test_10000_timed_out_batch_requests_then_their_late_replies_leave_nothing(
    connect: ClientFactory,
) -> None:
    """10,000 requests in request_batch windows to a responder that answers only after
    they all timed out: every item is a TimeoutError, the request map is empty, and the
    10,000 late replies are counted and dropped without creating any state."""
    silent = connect()
    inbox = silent.subscribe("leak.slow", pending_msgs_limit=20_000)
    silent.flush(timeout=5)
    nc = connect()
    payloads = [b"%d" % i for i in range(10_000)]

    results = nc.request_batch("leak.slow", payloads, timeout=0.05, max_in_flight=2_000)

    assert len(results) == 10_000
    assert all(isinstance(result, nats_sync.TimeoutError) for result in results), {
        type(result).__name__ for result in results
    }
    assert nc._handler.debug_snapshot()["requests_in_flight"] == 0

    for _ in range(10_000):  # now answer every one of them: all too late
        request = inbox.next_msg(timeout=5)
        request.respond(request.data)
    silent.flush(timeout=5)
    nc.flush(timeout=5)  # its PONG comes after every reply the server routed to nc
    snapshot = nc._handler.debug_snapshot()
    assert snapshot["late_replies"] == 10_000
    assert snapshot["requests_in_flight"] == 0
    with pytest.raises(nats_sync.TimeoutError):
        nc.request("leak.slow", b"still works", timeout=0.05)
    assert nc._handler.debug_snapshot()["requests_in_flight"] == 0


@pytest.mark.timeout(30)
def test_10000_futures_no_responders_and_cancelled_leave_nothing(
    connect: ClientFactory,
) -> None:
    """10,000 request_futures nobody listens to (the server answers 503), half of them
    cancelled by the caller at once: the map and the timer's deadline heap end empty."""
    nc = connect()
    futures: list[Future[Msg]] = [
        # The timeout only bounds a lost 503: under a loaded machine (load average 30 seen)
        # 0.3 s let some requests time out before their no-responders status was read.
        nc.request_future("leak.nobody", b"?", timeout=3.0)
        for _ in range(10_000)
    ]
    cancelled = sum(future.cancel() for future in futures[::2])
    outcomes: Counter[str] = Counter()
    for future in futures:
        try:
            future.result(timeout=10)
            outcomes["answered"] += 1
        except CancelledError:
            outcomes["cancelled"] += 1
        except nats_sync.NoRespondersError:
            outcomes["no responders"] += 1
    assert outcomes["answered"] == 0
    assert outcomes["cancelled"] == cancelled
    assert outcomes["no responders"] == 10_000 - cancelled
    handler = nc._handler
    assert _wait_until(lambda: handler.debug_snapshot()["requests_in_flight"] == 0, 5), (
        f"{handler.debug_snapshot()['requests_in_flight']} requests still in the map"
    )
    assert _wait_until(lambda: handler.debug_snapshot()["timer_entries"] == 1, 5), (
        f"{handler.debug_snapshot()['timer_entries'] - 1} deadlines left on the timer"
    )


@pytest.mark.timeout(30)
def test_10000_subscribe_unsubscribe_cycles_leave_nothing_here_or_on_the_server(
    nats_server_factory: ServerFactory,
) -> None:
    """Four threads, 10,000 cycles in all, half with a callback (a delivery thread
    each): no subscription left in the client or on the server, the delivery-thread
    table stays pruned, and no Subscription object is kept alive by the client."""
    server = nats_server_factory(monitoring=True)
    nc = nats_sync.connect(server.url)
    try:
        handler = nc._handler
        largest_table = [0]
        survivors: list[weakref.ref[nats_sync.Subscription]] = []
        errors: list[BaseException] = []

        def churn(index: int) -> None:
            try:
                for n in range(2_500):
                    cb: Any = (lambda msg: None) if n % 2 else None
                    sub = nc.subscribe(f"leak.cycle.{index}.{n % 17}", cb=cb)
                    sub.unsubscribe()
                    if n >= 2_250:
                        survivors.append(weakref.ref(sub))
                    running = len(handler.debug_snapshot()["delivery_threads"])
                    largest_table[0] = max(largest_table[0], running)
            except BaseException as err:
                errors.append(err)

        threads = [threading.Thread(target=churn, args=(i,), daemon=True) for i in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(25)
        assert not any(thread.is_alive() for thread in threads), "subscribe/unsubscribe hung"
        assert errors == []

        # Auto-unsubscribe: 1,000 subscriptions that end on their one message.
        for n in range(1_000):
            sub = nc.subscribe(f"leak.once.{n % 7}", max_msgs=1)
            nc.publish(f"leak.once.{n % 7}", b"1")
            assert sub.next_msg(timeout=5).data == b"1"
            assert sub.is_closed
        nc.flush(timeout=5)

        assert handler.debug_snapshot()["subscriptions"] == 0
        assert largest_table[0] <= 64 + 4, largest_table[0]  # pruned as it grows
        assert len(handler.debug_snapshot()["delivery_threads"]) <= 64
        assert _wait_until(
            lambda: not any(t.is_alive() for t in handler.debug_snapshot()["delivery_threads"]), 5
        )
        del sub
        gc.collect()
        alive = sum(ref() is not None for ref in survivors)
        assert alive == 0, f"{alive} of {len(survivors)} ended subscriptions are still referenced"
        assert _server_subscriptions(server, nc.client_id) == 0
    finally:
        nc.close()

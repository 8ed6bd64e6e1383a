"""The threaded core hammered from many threads at once: the stress run for free-threaded
Python (3.13t with ``PYTHON_GIL=0``, ``make test-ft``), which also passes with the GIL.

Each test runs a few rounds of one mix on one connection and checks that every reply
went to its own requester, nothing was lost, duplicated or reordered, every waiter woke
and close() ended every call in flight. Without the GIL these threads really run at once,
so the places that lean on one built-in operation being atomic (docs/platforms.md,
"Without the GIL") are exercised here. Marked slow: ``make test`` runs them with the GIL,
``make test-ft`` without it.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future

import pytest
from threads_helper import run_threads as run_threads_bounded

import nats_sync
from nats_sync.jetstream import PubAck
from nats_sync.msg import Msg
from nats_sync.testing import NatsServer

pytestmark = pytest.mark.slow

ClientFactory = Callable[..., nats_sync.Client]

#: Rounds of each mix: a race that needs an unlucky interleaving gets a few chances.
ROUNDS = 3
THREADS = 16
#: How long a worker thread may take before the test counts it as hung.
JOIN_TIMEOUT = 60.0


def gil_state() -> str:
    """For failure messages: whether this run has the GIL."""
    is_enabled = getattr(sys, "_is_gil_enabled", None)
    return "GIL on" if is_enabled is None or is_enabled() else "GIL off"


def run_threads(count: int, body: Callable[[int], None]) -> list[BaseException]:
    """``threads_helper.run_threads`` with this module's bound and the GIL's state named."""
    return run_threads_bounded(
        count, body, join_within=JOIN_TIMEOUT, label=f"stress ({gil_state()})"
    )


def echo_responder(connect: ClientFactory, subject: str) -> nats_sync.Client:
    """A client of its own answering every request on ``subject`` with its payload."""
    responder = connect()

    def echo(msg: Msg) -> None:
        msg.respond(msg.data)

    responder.subscribe(subject, cb=echo)
    responder.flush(5)
    return responder


def mix_round(nc: nats_sync.Client, events_publisher: nats_sync.Client, round_number: int) -> None:
    """One round: requesters, future requesters and a publisher feeding ``nc``'s
    callback subscription, all at once."""
    per_requester = 300
    per_future_thread = 300
    events_per_round = 5_000
    future_requesters = 4
    received: list[bytes] = []
    all_events = threading.Event()

    def on_event(msg: Msg) -> None:
        received.append(msg.data)  # one delivery thread: a plain append
        if len(received) == events_per_round:
            all_events.set()

    events = nc.subscribe("ft.events", cb=on_event, pending_msgs_limit=2 * events_per_round)
    nc.flush(5)
    mismatches: list[tuple[bytes, bytes]] = []

    def work(index: int) -> None:
        if index == 0:  # one thread publishes the events the callback counts
            for seq in range(events_per_round):
                events_publisher.publish("ft.events", b"%d" % seq)
            events_publisher.flush(10)
        elif index <= future_requesters:
            futures: list[tuple[bytes, Future[Msg]]] = []
            for seq in range(per_future_thread):
                payload = b"f%d:%d" % (index, seq)
                futures.append((payload, nc.request_future("ft.echo", payload, timeout=20)))
            for payload, future in futures:
                reply = future.result(30).data
                if reply != payload:
                    mismatches.append((payload, reply))
        else:
            for seq in range(per_requester):
                payload = b"r%d:%d" % (index, seq)
                reply = nc.request("ft.echo", payload, timeout=20).data
                if reply != payload:
                    mismatches.append((payload, reply))

    errors = run_threads(THREADS, work)

    assert errors == [], f"round {round_number} ({gil_state()})"
    assert mismatches[:5] == [], f"replies crossed ({gil_state()})"
    assert all_events.wait(20), f"{len(received)} of {events_per_round} events"
    assert received == [b"%d" % seq for seq in range(events_per_round)]
    assert events.dropped == 0
    snapshot = nc._handler.debug_snapshot()
    assert snapshot["requests_in_flight"] == 0
    assert snapshot["late_replies"] == 0


@pytest.mark.timeout(180)
def test_requests_futures_and_a_callback_share_one_connection(connect: ClientFactory) -> None:
    echo_responder(connect, "ft.echo")
    events_publisher = connect()
    for round_number in range(ROUNDS):
        nc = connect()
        mix_round(nc, events_publisher, round_number)
        nc.close()


def publishers_round(
    receiver: nats_sync.Client, publisher: nats_sync.Client, round_number: int
) -> None:
    """One round: every thread publishes its own numbered sequence on ``publisher``."""
    per_publisher = 3_000
    total = THREADS * per_publisher
    subject = f"ft.pub.{round_number}"
    sub = receiver.subscribe(
        subject, pending_msgs_limit=2 * total, pending_bytes_limit=64 * 1024 * 1024
    )
    receiver.flush(5)

    def publish_all(index: int) -> None:
        for seq in range(per_publisher):
            publisher.publish(subject, b"%d:%d" % (index, seq))

    errors = run_threads(THREADS, publish_all)
    assert errors == []
    publisher.flush(20)
    receiver.flush(20)

    assert sub.dropped == 0
    assert sub.pending_msgs == total, f"round {round_number} ({gil_state()})"
    next_seq = [0] * THREADS
    wrong: list[bytes] = []
    for msg in sub.next_msgs(total, timeout=5):
        index, seq = (int(part) for part in msg.data.split(b":"))
        if seq != next_seq[index]:
            wrong.append(msg.data)  # a gap, a repeat or a swap
        next_seq[index] = seq + 1
    assert wrong[:5] == [], f"lost, duplicated or reordered ({gil_state()})"
    assert next_seq == [per_publisher] * THREADS
    assert publisher.stats["out_msgs"] == total
    sub.unsubscribe()


@pytest.mark.timeout(180)
def test_publishers_on_one_connection_lose_duplicate_and_reorder_nothing(
    connect: ClientFactory,
) -> None:
    receiver = connect()
    for round_number in range(ROUNDS):
        publisher = connect()
        publishers_round(receiver, publisher, round_number)
        publisher.close()


def consumers_round(nc: nats_sync.Client, publisher: nats_sync.Client, round_number: int) -> None:
    """One round: publishers feed one subscription that several threads read, then it
    ends under them."""
    consumers = 8
    publishers = 4
    per_publisher = 5_000
    total = publishers * per_publisher
    subject = f"ft.shared.{round_number}"
    sub = nc.subscribe(subject, pending_msgs_limit=2 * total)
    nc.flush(5)
    taken: list[list[bytes]] = [[] for _ in range(consumers)]
    ended = [False] * consumers
    all_taken = threading.Event()
    count_lock = threading.Lock()
    count = [0]

    def work(index: int) -> None:
        if index < publishers:
            for seq in range(per_publisher):
                publisher.publish(subject, b"%d:%d" % (index, seq))
            publisher.flush(20)
            return
        mine = taken[index - publishers]
        for msg in sub:  # ends (normally) when the subscription ends
            mine.append(msg.data)
            with count_lock:
                count[0] += 1
                if count[0] == total:
                    all_taken.set()
        ended[index - publishers] = True

    errors: list[BaseException] = []
    runner = threading.Thread(
        target=lambda: errors.extend(run_threads(publishers + consumers, work)), daemon=True
    )
    runner.start()
    assert all_taken.wait(60), f"{count[0]} of {total} taken ({gil_state()})"
    # Every consumer is now asleep in next_msg (or about to be): the end must wake each
    # of them, and each ends its loop normally.
    sub.unsubscribe()
    runner.join(JOIN_TIMEOUT)
    assert not runner.is_alive(), f"consumers did not all wake at the end ({gil_state()})"
    assert errors == []
    assert all(ended)
    everything = sorted(data for mine in taken for data in mine)
    assert everything == sorted(
        b"%d:%d" % (p, s) for p in range(publishers) for s in range(per_publisher)
    ), "lost or duplicated"
    for mine in taken:  # the queue is FIFO: each consumer sees each publisher in order
        last = [-1] * publishers
        for data in mine:
            index, seq = (int(part) for part in data.split(b":"))
            assert seq > last[index], f"reordered within a consumer ({gil_state()})"
            last[index] = seq
    assert sub.dropped == 0


@pytest.mark.timeout(180)
def test_consumers_of_one_subscription_share_it_and_all_wake_at_its_end(
    connect: ClientFactory,
) -> None:
    for round_number in range(ROUNDS):
        nc = connect()
        publisher = connect()
        consumers_round(nc, publisher, round_number)
        nc.close()
        publisher.close()


def close_round(nc: nats_sync.Client, round_number: int) -> None:
    """One round: every thread requests (some with futures) until ``nc`` closes."""
    outcomes: list[BaseException | None] = [None] * THREADS
    futures: list[Future[Msg]] = []
    answered = [0] * THREADS
    going = threading.Barrier(THREADS + 1)

    def request_forever(index: int) -> None:
        going.wait(10)
        try:
            while True:
                if index % 4 == 0:  # some threads leave futures behind
                    futures.append(nc.request_future("ft.closing", b"f", timeout=10))
                else:
                    nc.request("ft.closing", b"r", timeout=10)
                answered[index] += 1
        except BaseException as err:
            outcomes[index] = err

    threads = [
        threading.Thread(target=request_forever, args=(i,), daemon=True) for i in range(THREADS)
    ]
    for thread in threads:
        thread.start()
    going.wait(10)
    time.sleep(0.3)  # requests in flight from every thread
    nc.close()
    for thread in threads:
        thread.join(15)

    assert not any(thread.is_alive() for thread in threads), (
        f"a requester hung past close() (round {round_number}, {gil_state()})"
    )
    assert all(isinstance(err, nats_sync.ConnectionClosedError) for err in outcomes), outcomes
    assert sum(answered) > 0
    unsettled = [future for future in futures if not future.done()]
    deadline = time.monotonic() + 10
    while unsettled and time.monotonic() < deadline:
        time.sleep(0.05)
        unsettled = [future for future in unsettled if not future.done()]
    assert unsettled == [], f"{len(unsettled)} futures never settled after close()"
    for future in futures:
        error = future.exception(0)
        assert error is None or isinstance(error, nats_sync.ConnectionClosedError), error
    assert nc._handler.debug_snapshot()["requests_in_flight"] == 0


@pytest.mark.timeout(180)
def test_close_while_requests_are_in_flight_ends_every_one(connect: ClientFactory) -> None:
    echo_responder(connect, "ft.closing")
    for round_number in range(ROUNDS):
        close_round(connect(), round_number)


def publish_async_round(nc: nats_sync.Client, round_number: int) -> None:
    """One round: every thread publishes through one small ``publish_async`` window."""
    per_thread = 400
    # A small window, so that threads keep stalling and waking on it.
    js = nc.jetstream(max_pending_acks=32, stall_wait=30.0)
    acks: list[list[Future[PubAck]]] = [[] for _ in range(THREADS)]

    def publish_all(index: int) -> None:
        for seq in range(per_thread):
            acks[index].append(js.publish_async(f"ft.js.{round_number}.{index}", b"%d" % seq))
        js.publish_async_completed(30)

    errors = run_threads(THREADS, publish_all)
    assert errors == [], f"round {round_number} ({gil_state()})"
    assert js.publish_async_pending() == 0
    seqs = [future.result(0).seq for mine in acks for future in mine]
    assert len(set(seqs)) == THREADS * per_thread, "an ack was lost or given twice"
    info = nc.jetstream().stream_info("FT")
    assert info.state.messages == (round_number + 1) * THREADS * per_thread


@pytest.mark.timeout(180)
def test_publish_async_window_from_many_threads(
    jetstream_server: NatsServer, connect: ClientFactory
) -> None:
    nc = connect(servers=jetstream_server.url)
    nc.jetstream().create_stream(name="FT", subjects=["ft.js.>"])
    for round_number in range(ROUNDS):
        publish_async_round(nc, round_number)


def unsubscribe_round(nc: nats_sync.Client, publisher: nats_sync.Client, round_number: int) -> None:
    """One round: a callback subscription is unsubscribed while the reader still
    queues messages for it; every message delivered is then handed, discarded or
    still pending, none lost from the counts."""
    handed = [0]
    subject = f"ft.unsub.{round_number}"

    def slow_callback(msg: Msg) -> None:
        handed[0] += 1  # the delivery thread only
        time.sleep(0.0005)

    sub = nc.subscribe(subject, cb=slow_callback, pending_msgs_limit=1_000_000)
    nc.flush(5)
    flooding = threading.Event()
    stop = threading.Event()

    def flood() -> None:
        while not stop.is_set():
            for _ in range(500):
                publisher.publish(subject, b"x")
            flooding.set()
            publisher.flush(10)

    flooder = threading.Thread(target=flood, daemon=True)
    flooder.start()
    try:
        assert flooding.wait(10)
        time.sleep(0.2)  # the reader is appending to the queue as fast as it can
        sub.unsubscribe()
    finally:
        stop.set()
        flooder.join(20)
    assert not flooder.is_alive()
    # Its delivery thread (nats_sync-sub-<sid>) ends, as the debug snapshot shows.
    name = f"nats_sync-sub-{sub.sid}"

    def delivering() -> bool:
        threads = nc._handler.debug_snapshot()["delivery_threads"]
        return any(thread.name == name for thread in threads)

    deadline = time.monotonic() + 10
    while delivering() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not delivering(), "the delivery thread hung"
    assert sub.dropped == 0
    assert sub.delivered == handed[0] + sub.discarded + sub.pending_msgs, (
        f"round {round_number} ({gil_state()}): delivered {sub.delivered}, handed "
        f"{handed[0]}, discarded {sub.discarded}, pending {sub.pending_msgs}"
    )
    assert sub.discarded > 0  # the unsubscribe did land among queued messages


@pytest.mark.timeout(180)
def test_unsubscribe_while_the_reader_delivers_counts_every_message(
    connect: ClientFactory,
) -> None:
    publisher = connect()
    for round_number in range(ROUNDS):
        nc = connect()
        unsubscribe_round(nc, publisher, round_number)
        nc.close()

"""Requesters reading their own replies while the reader thread steps aside.

After a request, a client with no subscription and nothing else in flight parks its
reader; the next blocking request reads the socket on its own thread (one wake-up per
reply instead of two). These tests check that everything else still gets read: what
needs the reader wakes it, and losing or closing the connection mid-read ends cleanly.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

import nats_sync
from nats_sync.testing import NatsServer

ClientFactory = Callable[..., nats_sync.Client]
#: Bound on waiting for a state the client reaches on its own.
WITHIN = 5.0


def _responder(connect: ClientFactory, subject: str = "lead.echo") -> nats_sync.Client:
    service = connect()
    service.subscribe(subject, cb=lambda msg: msg.respond(b"re:" + msg.data))
    service.flush(5)
    return service


def _wait_until(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WITHIN
    while not check():
        assert time.monotonic() < deadline, f"not {what} within {WITHIN}s"
        time.sleep(0.001)


def _parked(nc: nats_sync.Client) -> bool:
    conn = nc._handler.debug_snapshot()["connection"]
    return conn is not None and bool(conn._parked)


def _count_leads(nc: nats_sync.Client) -> list[int]:
    """Counts the requests that found the reader parked (and so read on their own)."""
    conn = nc._handler.debug_snapshot()["connection"]
    assert conn is not None and conn.can_lead
    counted = [0]
    lead = conn.lead

    def counting(is_done: Callable[[], bool], deadline: float) -> None:
        if conn._parked:
            counted[0] += 1
        lead(is_done, deadline)

    conn.lead = counting  # type: ignore[method-assign]
    return counted


@pytest.mark.timeout(30)
def test_sequential_requests_read_their_own_replies(connect: ClientFactory) -> None:
    _responder(connect)
    nc = connect()
    led = _count_leads(nc)
    replies = [nc.request("lead.echo", b"%d" % n, timeout=2).data for n in range(300)]
    assert replies == [b"re:%d" % n for n in range(300)]
    assert led[0] >= 250  # all but the first few, whatever the scheduling
    snapshot = nc._handler.debug_snapshot()
    assert snapshot["request_inbox"] is not None and snapshot["requests_in_flight"] == 0


@pytest.mark.timeout(30)
def test_the_parked_reader_goes_back_to_reading_when_requests_stop(
    connect: ClientFactory,
) -> None:
    _responder(connect)
    nc = connect()
    for _ in range(20):
        nc.request("lead.echo", b"x", timeout=2)
    _wait_until(lambda: not _parked(nc), "reading again")


@pytest.mark.timeout(30)
@pytest.mark.parametrize("what", ["subscription", "flush", "future", "batch"])
def test_what_needs_the_reader_is_served_while_it_was_parked(
    connect: ClientFactory, what: str
) -> None:
    _responder(connect)
    publisher = connect()
    nc = connect()
    for _ in range(10):
        nc.request("lead.echo", b"x", timeout=2)
    _wait_until(lambda: _parked(nc), "parked")  # requests were just made
    if what == "subscription":
        sub = nc.subscribe("lead.events")
        nc.flush(5)
        publisher.publish("lead.events", b"event")
        publisher.flush(5)
        assert sub.next_msg(timeout=2).data == b"event"
    elif what == "flush":
        nc.flush(timeout=2)
    elif what == "future":
        assert nc.request_future("lead.echo", b"f", timeout=2).result(2).data == b"re:f"
    else:
        replies = nc.request_batch("lead.echo", [b"%d" % n for n in range(500)], timeout=5)
        assert [r.data for r in replies] == [b"re:%d" % n for n in range(500)]  # type: ignore[union-attr]


@pytest.mark.timeout(60)
def test_eight_threads_requesting_while_the_reader_parks_and_resumes(
    connect: ClientFactory,
) -> None:
    _responder(connect)
    nc = connect()
    failures: list[BaseException] = []
    wrong: list[bytes] = []

    def requester(index: int) -> None:
        try:
            for n in range(200):
                payload = b"%d.%d" % (index, n)
                reply = nc.request("lead.echo", payload, timeout=5)
                if reply.data != b"re:" + payload:
                    wrong.append(reply.data)
                if n % 50 == 0:
                    time.sleep(0.06)  # long enough for the reader to resume
        except BaseException as err:
            failures.append(err)

    threads = [threading.Thread(target=requester, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(50)
    assert not any(t.is_alive() for t in threads)
    assert failures == [] and wrong == []


@pytest.mark.timeout(30)
def test_a_request_times_out_on_time_while_reading_itself(connect: ClientFactory) -> None:
    _responder(connect)
    silent = connect()
    silent.subscribe("lead.silent")
    silent.flush(5)
    nc = connect()
    for _ in range(10):
        nc.request("lead.echo", b"x", timeout=2)
    _wait_until(lambda: _parked(nc), "parked")
    with pytest.raises(nats_sync.NoRespondersError):
        nc.request("lead.nobody", b"x", timeout=1)
    started = time.monotonic()
    with pytest.raises(nats_sync.TimeoutError, match=r"within 1\.0s"):
        nc.request("lead.silent", b"x", timeout=1.0)
    waited = time.monotonic() - started
    # not early, and one timeout, not one spent reading and another waiting (a bound on
    # correctness with room for a slow machine, not a speed)
    assert 1.0 <= waited < 1.9
    assert nc.request("lead.echo", b"y", timeout=2).data == b"re:y"


@pytest.mark.timeout(30)
def test_close_while_a_requester_reads_its_reply(connect: ClientFactory) -> None:
    connect().subscribe("lead.silent")  # answers nothing: the requester keeps reading
    nc = connect()
    for _ in range(3):
        with pytest.raises(nats_sync.TimeoutError):
            nc.request("lead.silent", b"x", timeout=0.05)
    outcome: list[BaseException] = []

    def request() -> None:
        try:
            nc.request("lead.silent", b"x", timeout=10)
        except BaseException as err:
            outcome.append(err)

    thread = threading.Thread(target=request)
    thread.start()
    time.sleep(0.2)
    closing = time.monotonic()
    nc.close()
    thread.join(5)
    assert not thread.is_alive()
    assert time.monotonic() - closing < 2.0
    assert len(outcome) == 1 and isinstance(outcome[0], nats_sync.ConnectionClosedError)


@pytest.mark.timeout(60)
def test_the_server_going_away_while_a_requester_reads(
    nats_server: NatsServer, connect: ClientFactory
) -> None:
    _responder(connect)
    reconnected = threading.Event()
    nc = connect(reconnect_time_wait=0.05, reconnected_cb=reconnected.set)
    for _ in range(10):
        nc.request("lead.echo", b"x", timeout=2)
    outcome: list[BaseException] = []

    def request() -> None:
        try:
            nc.request("lead.slow", b"x", timeout=3)
        except BaseException as err:
            outcome.append(err)

    connect().subscribe("lead.slow")  # never answers
    thread = threading.Thread(target=request)
    thread.start()
    time.sleep(0.2)
    nats_server.restart()
    thread.join(10)
    assert not thread.is_alive() and len(outcome) == 1
    assert isinstance(outcome[0], nats_sync.Error)
    assert reconnected.wait(10)
    _responder(connect)
    assert nc.request("lead.echo", b"after", timeout=5).data == b"re:after"

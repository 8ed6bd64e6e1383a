"""A micro endpoint's worker pool (``max_workers`` > 1) under a backlog, against a real
nats-server: each worker takes its share of the waiting requests at once (issue 33);
every request is still answered once, in queue order per worker, and a failing
handler answers only its own request."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

import nats_sync
from nats_sync import micro
from nats_sync.micro import Request, ServiceError
from nats_sync.micro import _defaults as micro_defaults
from nats_sync.micro._defaults import MICRO_WORKER_BATCH

pytestmark = pytest.mark.timeout(30)

ClientFactory = Callable[..., nats_sync.Client]
WORKERS = 4


@pytest.fixture
def batching_whatever_the_handlers(monkeypatch: pytest.MonkeyPatch) -> None:
    """The held first requests make the handlers slow on average, which would turn the
    shares off (MICRO_BATCH_HANDLER_NS): these tests are about the shares."""
    monkeypatch.setattr(micro_defaults, "MICRO_BATCH_HANDLER_NS", 10**15)


def _settled(svc: micro.Service, requests: int) -> micro.EndpointStats:
    """The endpoint's stats once it counted ``requests`` (a handler counts its request
    after it answered, so the last replies may arrive first)."""
    deadline = time.monotonic() + 5
    while (stats := svc.stats().endpoints[0]).num_requests < requests:
        assert time.monotonic() < deadline, f"{stats.num_requests} of {requests} counted"
        time.sleep(0.01)
    return stats


def _blocked_pool(
    connect: ClientFactory, name: str, handle: Callable[[Request], None]
) -> tuple[micro.Service, nats_sync.Client, threading.Event, list[tuple[str, int]]]:
    """A service whose WORKERS workers each block on their first request until the
    event is set, so that the requests sent meanwhile wait in the subscription."""
    nc, caller = connect(), connect()
    release = threading.Event()
    started = threading.Barrier(WORKERS + 1, timeout=10)
    seen: list[tuple[str, int]] = []
    first_of: set[str] = set()
    lock = threading.Lock()

    def handler(req: Request) -> None:
        me = threading.current_thread().name
        with lock:
            seen.append((me, int(req.data)))
            first = me not in first_of
            first_of.add(me)
        if first:
            started.wait()
            assert release.wait(10)
        handle(req)

    svc = micro.add_service(nc, name, "1.0.0")
    svc.add_endpoint("work", handler, max_workers=WORKERS)
    for number in range(WORKERS):
        caller.publish("work", b"%d" % number, reply=f"ignored.{number}")
    started.wait()  # every worker holds one request: the rest queue up
    return svc, caller, release, seen


def _queued(svc: micro.Service, count: int) -> None:
    """Waits until ``count`` requests wait in the endpoint's subscription."""
    sub = svc._endpoints[0].sub  # the test looks inside: the backlog must be there
    assert sub is not None
    deadline = time.monotonic() + 10
    while sub.pending_msgs < count:
        assert time.monotonic() < deadline, f"{sub.pending_msgs} of {count} queued"
        time.sleep(0.01)


def _sent_while_blocked(
    svc: micro.Service, caller: nats_sync.Client, count: int, release: threading.Event
) -> list[nats_sync.Msg | BaseException]:
    """Sends ``count`` requests (numbered from WORKERS), releases the workers once all
    of them wait at the service, and returns the replies (or errors) in order."""
    futures = [
        caller.request_future("work", b"%d" % n, timeout=15)
        for n in range(WORKERS, WORKERS + count)
    ]
    _queued(svc, count)
    release.set()
    results: list[nats_sync.Msg | BaseException] = []
    for future in futures:
        error = future.exception(15)
        results.append(error if error is not None else future.result())
    return results


@pytest.mark.usefixtures("batching_whatever_the_handlers")
def test_a_backlog_is_answered_once_in_queue_order_per_worker(connect: ClientFactory) -> None:
    count = 10 * MICRO_WORKER_BATCH
    svc, caller, release, seen = _blocked_pool(
        connect, "backlog", lambda req: req.respond(b"ok:" + req.data)
    )
    replies = _sent_while_blocked(svc, caller, count, release)
    assert [micro.check(reply).data for reply in replies] == [
        b"ok:%d" % n for n in range(WORKERS, WORKERS + count)
    ]
    numbers = sorted(number for _, number in seen)
    assert numbers == list(range(WORKERS + count))  # each request handled once
    for worker in {name for name, _ in seen}:
        mine = [number for name, number in seen if name == worker]
        assert mine == sorted(mine), f"{worker} handled requests out of queue order"
    assert len({name for name, _ in seen}) == WORKERS
    assert _settled(svc, WORKERS + count).num_requests == WORKERS + count
    svc.stop()


@pytest.mark.usefixtures("batching_whatever_the_handlers")
def test_a_failing_handler_in_a_batch_answers_only_its_own_request(connect: ClientFactory) -> None:
    def sometimes_fails(req: Request) -> None:
        number = int(req.data)
        if number % 3 == 0:
            raise ServiceError(code=409, description=f"no {number}")
        if number % 7 == 0:
            raise RuntimeError("unexpected")
        req.respond(req.data)

    count = 4 * MICRO_WORKER_BATCH
    svc, caller, release, _ = _blocked_pool(connect, "failing", sometimes_fails)
    replies = _sent_while_blocked(svc, caller, count, release)
    errors = 0
    for number, reply in zip(range(WORKERS, WORKERS + count), replies, strict=True):
        if number % 3 == 0 or number % 7 == 0:
            errors += 1
            with pytest.raises(ServiceError) as caught:
                micro.check(reply)
            assert caught.value.code == (409 if number % 3 == 0 else 500)
        else:
            assert micro.check(reply).data == b"%d" % number
    stats = _settled(svc, WORKERS + count)
    first_errors = sum(1 for n in range(WORKERS) if n % 3 == 0 or n % 7 == 0)
    assert stats.num_errors == errors + first_errors
    svc.stop()


@pytest.mark.usefixtures("batching_whatever_the_handlers")
def test_stop_answers_the_backlog_the_workers_took_and_left(connect: ClientFactory) -> None:
    count = 3 * MICRO_WORKER_BATCH
    svc, caller, release, seen = _blocked_pool(
        connect, "stopping", lambda req: req.respond(req.data)
    )
    payloads = [b"%d" % n for n in range(WORKERS, WORKERS + count)]
    futures = [caller.request_future("work", payload, timeout=15) for payload in payloads]
    _queued(svc, count)
    stopper = threading.Thread(target=svc.stop, kwargs={"timeout": 10})
    stopper.start()  # drains: what the service received is still handled
    release.set()
    stopper.join(15)
    assert not stopper.is_alive()
    assert [future.result(15).data for future in futures] == payloads
    assert sorted(number for _, number in seen) == list(range(WORKERS + count))


def test_with_slow_handlers_a_request_never_waits_behind_one_while_a_worker_is_idle(
    connect: ClientFactory,
) -> None:
    long = b"%d" % WORKERS  # payloads are numbers (see _blocked_pool)

    def handler(req: Request) -> None:
        if req.data == long:
            time.sleep(0.8)
        req.respond(req.data)

    # The workers' first requests are held until release: seconds, far above
    # MICRO_BATCH_HANDLER_NS on average, so from then on each worker takes one at a time.
    svc, caller, release, _ = _blocked_pool(connect, "slow", handler)
    payloads = [b"%d" % n for n in range(WORKERS, WORKERS + 8)]  # the long one first
    futures = [caller.request_future("work", payload, timeout=15) for payload in payloads]
    _queued(svc, len(payloads))
    time.sleep(0.1)  # the held handlers' time, counted once they return
    released = time.monotonic()
    release.set()
    for payload, future in zip(payloads[1:], futures[1:], strict=True):
        assert future.result(5).data == payload
        # A share taken with the long one would have waited 0.8 s behind it.
        assert time.monotonic() - released < 0.6, f"{payload!r} waited behind the long one"
    assert futures[0].result(5).data == long
    svc.stop()


def test_an_idle_pool_keeps_one_worker_asleep_on_the_subscription_and_all_serve(
    connect: ClientFactory,
) -> None:
    nc, caller = connect(), connect()
    workers = 8
    all_in = threading.Barrier(workers, timeout=10)

    def handler(req: Request) -> None:
        all_in.wait()  # passes only if every worker runs a handler at the same time
        req.respond(req.data)

    svc = micro.add_service(nc, "idle", "1.0.0")
    svc.add_endpoint("work", handler, max_workers=workers)
    sub = svc._endpoints[0].sub
    assert sub is not None
    asleep = sub._messages._sleepers  # the test looks inside: who waits on the queue
    deadline = time.monotonic() + 5
    while len(asleep) != 1:  # the others wait for the lock, not on the subscription
        assert time.monotonic() < deadline, f"{len(asleep)} workers asleep on it"
        time.sleep(0.01)
    for _ in range(2):  # idle in between: the lock is handed on each time
        payloads = [b"%d" % n for n in range(2 * workers)]
        replies = caller.request_batch("work", payloads, timeout=15)
        assert [micro.check(reply).data for reply in replies] == payloads
    svc.stop()

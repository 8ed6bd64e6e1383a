"""Lifecycle against a real nats-server: flush, rtt, drain, close, callbacks, stale pings."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

import nats_sync
from nats_sync.msg import Msg
from nats_sync.testing import NatsServer

ClientFactory = Callable[..., nats_sync.Client]


class Outcome:
    """What a call made on another thread returned or raised."""

    def __init__(self) -> None:
        self.value: Any = None
        self.error: BaseException | None = None
        self.thread: threading.Thread | None = None

    def join(self, timeout: float) -> None:
        assert self.thread is not None
        self.thread.join(timeout)
        assert not self.thread.is_alive(), f"the call did not return within {timeout}s"


def in_thread(fn: Callable[[], Any]) -> Outcome:
    """Runs ``fn`` on a new thread; the result lands in the returned Outcome."""
    outcome = Outcome()

    def run() -> None:
        try:
            outcome.value = fn()
        except BaseException as err:
            outcome.error = err

    outcome.thread = threading.Thread(target=run, daemon=True)
    outcome.thread.start()
    return outcome


def wait_until(condition: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)
    return True


def open_fd_count() -> int:
    return len(os.listdir("/proc/self/fd"))


# --- flush and rtt ----------------------------------------------------------------


@pytest.mark.timeout(20)
def test_flush_returns_after_messages_reached_another_connection(
    client: nats_sync.Client, connect: ClientFactory
) -> None:
    receiver = connect()
    sub = receiver.subscribe("flush.data")
    receiver.flush(5)

    for i in range(1000):
        client.publish("flush.data", str(i).encode())
    client.flush(5)
    receiver.flush(5)

    # No waiting: the server delivered every message ahead of the receiver's PONG.
    assert sub.pending_msgs == 1000
    assert [sub.next_msg(0.01).data for _ in range(1000)] == [str(i).encode() for i in range(1000)]


@pytest.mark.timeout(20)
def test_rtt_is_a_positive_float(client: nats_sync.Client) -> None:
    rtt = client.rtt()
    assert isinstance(rtt, float)
    assert 0 < rtt < 10


@pytest.mark.timeout(20)
def test_flush_times_out_against_a_paused_server(
    client: nats_sync.Client, nats_server: NatsServer
) -> None:
    with nats_server.paused(), pytest.raises(nats_sync.FlushTimeoutError) as info:
        client.flush(timeout=0.3)
    assert isinstance(info.value, TimeoutError)
    # Once the server runs again, flush works: the late PONG went to the expired flush.
    client.flush(5)
    assert client.is_connected


@pytest.mark.timeout(20)
def test_flush_after_close_raises_connection_closed(client: nats_sync.Client) -> None:
    client.close()
    with pytest.raises(nats_sync.ConnectionClosedError):
        client.flush(1)
    with pytest.raises(nats_sync.ConnectionClosedError):
        client.publish("after.close", b"x")


# --- drain ------------------------------------------------------------------------


@pytest.mark.timeout(20)
def test_drain_processes_arrived_messages_flushes_and_closes(
    connect: ClientFactory,
) -> None:
    closed = threading.Event()
    drainer = connect(closed_cb=closed.set)
    publisher = connect()
    observer = connect()
    watched = observer.subscribe("drain.out")
    observer.flush(5)
    received: list[bytes] = []

    def slow(msg: Msg) -> None:
        time.sleep(0.002)
        received.append(msg.data)

    drainer.subscribe("drain.in", cb=slow)
    drainer.flush(5)
    for i in range(100):
        publisher.publish("drain.in", str(i).encode())
    publisher.flush(5)
    drainer.flush(5)  # all 100 are in the subscription's queue (or done)
    drainer.publish("drain.out", b"published just before drain")

    drainer.drain(timeout=10)

    assert received == [str(i).encode() for i in range(100)]
    assert drainer.is_closed
    assert not drainer.is_draining
    assert closed.wait(5), "closed_cb was not called"
    assert watched.next_msg(5).data == b"published just before drain"


@pytest.mark.timeout(20)
def test_draining_refuses_new_work(connect: ClientFactory, nats_server: NatsServer) -> None:
    drainer = connect()
    publisher = connect()
    observer = connect()
    watched = observer.subscribe("draining.out")
    observer.flush(5)
    gate = threading.Event()
    handled: list[bytes] = []

    def held(msg: Msg) -> None:
        gate.wait(10)
        handled.append(msg.data)

    sub = drainer.subscribe("draining.in", cb=held)
    drainer.flush(5)
    publisher.publish("draining.in", b"one")
    publisher.flush(5)
    drainer.flush(5)

    drain = in_thread(lambda: drainer.drain(timeout=15))
    try:
        assert wait_until(lambda: drainer.is_draining)
        # Draining subscriptions: nothing new may start, but publishing still works so
        # that callbacks can answer what they are still handling (as in nats-py).
        with pytest.raises(nats_sync.ConnectionDrainingError):
            drainer.subscribe("draining.other")
        with pytest.raises(nats_sync.ConnectionDrainingError):
            drainer.request("draining.other", b"?", timeout=1)
        drainer.publish("draining.out", b"while draining subscriptions")
        assert watched.next_msg(5).data == b"while draining subscriptions"
        # The server has confirmed the UNSUBs once the subscription ends; then the
        # server is frozen so the final flush of publishes stays in progress.
        assert wait_until(lambda: sub.is_closed)
        nats_server.pause()
        try:
            gate.set()

            def publish_refused() -> bool:
                try:
                    drainer.publish("draining.out", b"late")
                except nats_sync.ConnectionDrainingError:
                    return True
                return False

            assert wait_until(publish_refused), "publish was never refused while draining"
            assert drainer.is_draining
            assert not drainer.is_closed
        finally:
            nats_server.resume()
        drain.join(10)
    finally:
        gate.set()

    assert drain.error is None
    assert handled == [b"one"]
    assert drainer.is_closed


@pytest.mark.timeout(20)
def test_drain_timeout_when_a_callback_blocks_still_closes(connect: ClientFactory) -> None:
    closed = threading.Event()
    drainer = connect(closed_cb=closed.set)
    publisher = connect()
    started = threading.Event()
    gate = threading.Event()

    def blocking(msg: Msg) -> None:
        started.set()
        gate.wait(10)

    drainer.subscribe("blocked.in", cb=blocking)
    drainer.flush(5)
    publisher.publish("blocked.in", b"x")
    publisher.flush(5)
    assert started.wait(5)
    # Release the callback a moment after the drain timeout, so that close() (which
    # joins the delivery thread) does not wait its full join timeout.
    releaser = threading.Timer(1.0, gate.set)
    releaser.start()
    try:
        with pytest.raises(nats_sync.DrainTimeoutError) as info:
            drainer.drain(timeout=0.3)
    finally:
        gate.set()
        releaser.cancel()

    assert isinstance(info.value, TimeoutError)
    assert drainer.is_closed
    assert closed.wait(5)
    with pytest.raises(nats_sync.ConnectionClosedError):
        drainer.publish("blocked.in", b"y")


@pytest.mark.timeout(20)
def test_drain_against_a_paused_server_times_out_and_closes(
    connect: ClientFactory, nats_server: NatsServer
) -> None:
    closed = threading.Event()
    nc = connect(closed_cb=closed.set)
    nc.subscribe("paused.in")
    nc.flush(5)

    with nats_server.paused(), pytest.raises(nats_sync.DrainTimeoutError):
        nc.drain(timeout=0.3)

    assert nc.is_closed
    assert closed.wait(5)


@pytest.mark.timeout(20)
def test_messages_buffered_in_a_pull_subscription_survive_drain(
    connect: ClientFactory,
) -> None:
    drainer = connect()
    publisher = connect()
    sub = drainer.subscribe("pull.in")
    drainer.flush(5)
    for i in range(10):
        publisher.publish("pull.in", str(i).encode())
    publisher.flush(5)
    drainer.flush(5)

    drainer.drain(timeout=10)

    assert drainer.is_closed
    assert sub.next_msg(1).data == b"0"
    assert [msg.data for msg in sub] == [str(i).encode() for i in range(1, 10)]
    assert sub.is_closed


# --- close ------------------------------------------------------------------------


@pytest.mark.timeout(20)
def test_close_unblocks_next_msg_waiting_forever(client: nats_sync.Client) -> None:
    sub = client.subscribe("close.wait")
    client.flush(5)
    waiting = in_thread(lambda: sub.next_msg(timeout=None))
    time.sleep(0.1)
    assert waiting.thread is not None and waiting.thread.is_alive()

    client.close()

    waiting.join(5)
    assert isinstance(waiting.error, nats_sync.ConnectionClosedError)


@pytest.mark.timeout(20)
def test_close_unblocks_a_waiting_request(client: nats_sync.Client, connect: ClientFactory) -> None:
    responder = connect()
    silent = responder.subscribe("close.request")
    responder.flush(5)
    waiting = in_thread(lambda: client.request("close.request", b"?", timeout=30))
    silent.next_msg(5)  # the request is out and its thread is waiting for the reply

    client.close()

    waiting.join(5)
    assert isinstance(waiting.error, nats_sync.ConnectionClosedError)


@pytest.mark.timeout(20)
def test_close_unblocks_a_flush_against_a_paused_server(
    client: nats_sync.Client, nats_server: NatsServer
) -> None:
    with nats_server.paused():
        waiting = in_thread(lambda: client.flush(timeout=30))
        time.sleep(0.2)
        assert waiting.thread is not None and waiting.thread.is_alive()

        client.close()

        waiting.join(5)
    assert isinstance(waiting.error, nats_sync.ConnectionClosedError)
    assert client.is_closed


@pytest.mark.timeout(30)
def test_close_unblocks_a_publish_waiting_for_buffer_room(
    connect: ClientFactory, nats_server: NatsServer
) -> None:
    # A small outgoing buffer and a frozen server: once the socket buffers are full
    # a publisher waits for room (up to flush_timeout). close() must end that wait.
    nc = connect(pending_size=64 * 1024, flush_timeout=20)
    sent = [0]

    def publish_until_refused() -> None:
        while True:
            nc.publish("room.wait", b"x" * 1024)
            sent[0] += 1

    with nats_server.paused():
        waiting = in_thread(publish_until_refused)
        last = -1
        while sent[0] != last:  # blocked once the count stops moving
            last = sent[0]
            time.sleep(0.3)
        assert waiting.thread is not None and waiting.thread.is_alive()

        nc.close()

        waiting.join(5)
    assert isinstance(waiting.error, nats_sync.ConnectionClosedError), repr(waiting.error)


@pytest.mark.timeout(20)
def test_drain_after_close_raises_connection_closed(client: nats_sync.Client) -> None:
    client.close()
    with pytest.raises(nats_sync.ConnectionClosedError):
        client.drain(timeout=1)


@pytest.mark.timeout(20)
def test_close_is_idempotent_and_closed_cb_runs_once(connect: ClientFactory) -> None:
    calls: list[str] = []
    nc = connect(closed_cb=lambda: calls.append("closed"))

    nc.close()
    nc.close()
    nc.close()

    assert nc.is_closed
    assert not nc.is_connected
    assert wait_until(lambda: len(calls) >= 1)
    time.sleep(0.1)
    assert calls == ["closed"]


@pytest.mark.timeout(20)
def test_context_manager_closes(nats_server: NatsServer) -> None:
    closed = threading.Event()
    with nats_sync.connect(nats_server.url, closed_cb=closed.set) as nc:
        assert nc.is_connected
        nc.flush(5)
    assert nc.is_closed
    assert closed.wait(5)


@pytest.mark.timeout(30)
def test_close_leaves_no_threads_and_no_file_descriptors(nats_server: NatsServer) -> None:
    threads_before = set(threading.enumerate())
    fds_before = open_fd_count()

    nc = nats_sync.connect(nats_server.url)
    nc.subscribe("res.cb", cb=lambda msg: msg.respond(msg.data))
    pull = nc.subscribe("res.pull")
    nc.publish("res.pull", b"x")
    assert nc.request("res.cb", b"echo", timeout=5).data == b"echo"
    assert nc.request_future("res.cb", b"f", timeout=5).result(5).data == b"f"
    assert pull.next_msg(5).data == b"x"
    assert len(set(threading.enumerate()) - threads_before) >= 5  # reader, writer, ...
    assert open_fd_count() > fds_before

    nc.close()

    assert wait_until(lambda: not (set(threading.enumerate()) - threads_before)), (
        f"threads left: {set(threading.enumerate()) - threads_before}"
    )
    assert wait_until(lambda: open_fd_count() == fds_before), (
        f"{open_fd_count()} fds open, {fds_before} before connect"
    )


# --- callbacks --------------------------------------------------------------------


def _cause_slow_consumer(nc: nats_sync.Client, subject: str) -> None:
    """Makes ``nc`` drop a message (pending limit 1): a SlowConsumerError for error_cb."""
    nc.subscribe(subject, pending_msgs_limit=1)
    nc.publish(subject, b"1")
    nc.publish(subject, b"2")
    nc.flush(5)


@pytest.mark.timeout(20)
def test_error_and_closed_callbacks_run_in_order_on_the_callback_thread(
    connect: ClientFactory,
) -> None:
    events: list[tuple[str, threading.Thread]] = []
    nc = connect(
        error_cb=lambda err: events.append((type(err).__name__, threading.current_thread())),
        closed_cb=lambda: events.append(("closed", threading.current_thread())),
    )
    reader, writer = nc._handler.debug_snapshot()["connection_threads"]

    _cause_slow_consumer(nc, "cb.slow")
    nc.close()
    assert wait_until(lambda: len(events) >= 2)

    assert [name for name, _ in events] == ["SlowConsumerError", "closed"]
    (thread,) = {thread for _, thread in events}
    assert thread not in (reader, writer, threading.main_thread())


@pytest.mark.timeout(20)
def test_exceptions_in_error_and_closed_callbacks_are_logged(
    connect: ClientFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="nats_sync")
    calls: list[str] = []

    def bad_error_cb(err: BaseException) -> None:
        calls.append(type(err).__name__)
        raise RuntimeError("error_cb exploded")

    def bad_closed_cb() -> None:
        calls.append("closed")
        raise RuntimeError("closed_cb exploded")

    nc = connect(error_cb=bad_error_cb, closed_cb=bad_closed_cb)
    _cause_slow_consumer(nc, "cb.first")
    _cause_slow_consumer(nc, "cb.second")
    assert nc.is_connected
    nc.close()

    assert wait_until(lambda: "closed" in calls)
    assert calls == ["SlowConsumerError", "SlowConsumerError", "closed"]
    logged = [str(record.exc_info[1]) for record in caplog.records if record.exc_info]
    assert logged.count("error_cb exploded") == 2
    assert logged.count("closed_cb exploded") == 1


# --- stale connection ---------------------------------------------------------------


@pytest.mark.timeout(20)
def test_unanswered_pings_report_stale_connection_and_close_without_reconnect(
    connect: ClientFactory, nats_server: NatsServer
) -> None:
    errors: list[BaseException] = []
    closed = threading.Event()
    nc = connect(
        allow_reconnect=False,
        ping_interval=0.2,
        max_outstanding_pings=2,
        error_cb=errors.append,
        closed_cb=closed.set,
    )
    nc.flush(5)
    time.sleep(0.5)
    assert nc.is_connected, "keepalive PINGs answered in time must not close the client"

    with nats_server.paused():
        assert closed.wait(10), "the client never noticed the server stopped answering"

    assert any(isinstance(err, nats_sync.StaleConnectionError) for err in errors), errors
    assert nc.is_closed
    assert isinstance(nc.last_error, nats_sync.StaleConnectionError)

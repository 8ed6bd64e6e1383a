"""The handler's life cycle, driven over a socketpair: no server, no handshake.

A ``Handler`` is given an already "handshaken" TCP stream whose other end the test
holds (``Peer``), so each transition (connected, lost, reconnecting, given up,
draining, closed, stale) is reached on purpose and checked with what went over the
wire and which callbacks ran.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from nats_sync._core import proto
from nats_sync._core.components.subscription import Subscription
from nats_sync._core.handler import Handler
from nats_sync._core.state import State
from nats_sync._core.transport.options import build_options
from nats_sync._core.transport.pool import parse_server_url
from nats_sync._core.transport.streams import TcpStream
from nats_sync.errors import (
    AuthorizationError,
    ConnectionClosedError,
    ConnectionDrainingError,
    NoServersError,
    StaleConnectionError,
)

pytestmark = pytest.mark.timeout(20)

INFO = {"server_id": "fake", "version": "2.10.0", "max_payload": 1024, "proto": 1}


def wait_until(condition: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.002)
    return True


def unused_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Peer:
    """The server's end of the socketpair: records what arrives, answers PINGs."""

    def __init__(self, sock: socket.socket, answer_pings: bool = True) -> None:
        self.sock = sock
        self.answer_pings = answer_pings
        self.received = bytearray()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        pending = b""
        while True:
            try:
                chunk = self.sock.recv(65536)
            except OSError:
                return
            if not chunk:
                return
            with self._lock:
                self.received += chunk
            pending += chunk
            while b"PING\r\n" in pending:
                pending = pending.replace(b"PING\r\n", b"", 1)
                if self.answer_pings:
                    self.send(b"PONG\r\n")

    def send(self, data: bytes) -> None:
        try:
            self.sock.sendall(data)
        except OSError:
            pass

    def seen(self, data: bytes) -> bool:
        with self._lock:
            return data in self.received

    def hang_up(self) -> None:
        self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()


class Events:
    """The callbacks a handler ran, in order."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.errors: list[BaseException] = []

    def options(self, **overrides: Any) -> dict[str, Any]:
        return {
            "error_cb": self.errors.append,
            "disconnected_cb": lambda: self.names.append("disconnected"),
            "reconnected_cb": lambda: self.names.append("reconnected"),
            "closed_cb": lambda: self.names.append("closed"),
            **overrides,
        }


Connect = Callable[..., tuple[Handler, Peer, Events]]


@pytest.fixture
def connect() -> Iterator[Connect]:
    made: list[Handler] = []

    def factory(answer_pings: bool = True, **overrides: Any) -> tuple[Handler, Peer, Events]:
        events = Events()
        options = build_options(f"nats://127.0.0.1:{unused_port()}", **events.options(**overrides))
        handler = Handler(options)
        ours, theirs = socket.socketpair()
        peer = Peer(theirs, answer_pings)
        handler._start_background_threads()
        server = parse_server_url(options.servers[0])
        assert handler.link.activate((server, TcpStream(ours), proto.Parser(), dict(INFO)))
        made.append(handler)
        return handler, peer, events

    yield factory
    for handler in made:
        handler.close()


def test_activation_connects_and_takes_max_payload_from_info(connect: Connect) -> None:
    handler, peer, _ = connect()
    assert handler.state is State.CONNECTED
    assert handler.publisher.max_payload == 1024
    handler.publisher.publish("a.b", b"hi")
    assert wait_until(lambda: peer.seen(b"PUB a.b 2\r\nhi\r\n"))


def test_a_server_ping_is_answered_and_flush_waits_for_the_pong(connect: Connect) -> None:
    handler, peer, _ = connect()
    peer.send(b"PING\r\n")
    assert wait_until(lambda: peer.seen(b"PONG\r\n"))
    handler.flush(5)  # the peer answers our PING
    assert peer.seen(b"PING\r\n")


def test_a_lost_connection_without_reconnect_closes(connect: Connect) -> None:
    handler, peer, events = connect(allow_reconnect=False)
    peer.hang_up()
    assert wait_until(lambda: handler.state is State.CLOSED)
    assert wait_until(lambda: events.names == ["disconnected", "closed"])
    with pytest.raises(ConnectionClosedError):
        handler.publisher.publish("a", b"x")


def test_a_lost_connection_reconnects_buffers_then_gives_up(connect: Connect) -> None:
    # The second pass over the (unreachable) pool waits reconnect_time_wait first.
    handler, peer, events = connect(max_reconnect_attempts=2, reconnect_time_wait=1.0)
    peer.hang_up()
    assert wait_until(lambda: handler.state is State.RECONNECTING)
    handler.publisher.publish("buffered", b"kept")  # into the disconnect buffer
    assert handler.outbox.size == len(b"PUB buffered 4\r\nkept\r\n")
    assert wait_until(lambda: handler.state is State.CLOSED)
    assert isinstance(handler.last_error, NoServersError)
    assert wait_until(lambda: events.names == ["disconnected", "closed"])


def test_the_next_connection_gets_the_subscriptions_ahead_of_the_buffered_publishes(
    connect: Connect,
) -> None:
    # The pool is unreachable and the next pass far away: the test hands the handler
    # its next connection itself, as the reconnect thread would.
    handler, peer, _ = connect(max_reconnect_attempts=-1, reconnect_time_wait=30.0)
    kept = Subscription(handler, handler.next_sid(), "kept", "", None, 0, 0, 1 << 20)
    dropped = Subscription(handler, handler.next_sid(), "dropped", "", None, 0, 0, 1 << 20)
    handler.add_subscription(kept)
    handler.add_subscription(dropped)
    assert wait_until(lambda: peer.seen(b"SUB dropped 2\r\n"))
    peer.hang_up()
    assert wait_until(lambda: handler.state is State.RECONNECTING)
    handler.publisher.publish("buffered", b"kept")
    late = Subscription(handler, handler.next_sid(), "late", "q", None, 5, 0, 1 << 20)
    handler.add_subscription(late)
    dropped.unsubscribe()
    ours, theirs = socket.socketpair()
    second = Peer(theirs)
    server = parse_server_url(handler.options.servers[0])
    assert handler.link.reconnected((server, TcpStream(ours), proto.Parser(), dict(INFO)))
    expected = b"SUB kept 1\r\nSUB late q 3\r\nUNSUB 3 5\r\nPUB buffered 4\r\nkept\r\n"
    assert wait_until(lambda: second.seen(expected))
    assert not second.seen(b"dropped")
    assert handler.state is State.CONNECTED


def test_a_fatal_server_error_is_the_reason_of_the_loss(connect: Connect) -> None:
    handler, peer, events = connect(allow_reconnect=False)
    peer.send(b"-ERR 'Authorization Violation'\r\n")
    assert wait_until(lambda: len(events.errors) == 1)
    assert isinstance(events.errors[0], AuthorizationError)
    peer.hang_up()
    assert wait_until(lambda: handler.state is State.CLOSED)
    assert isinstance(handler.last_error, AuthorizationError)


def test_drain_refuses_publishes_once_subscriptions_are_done_then_closes(
    connect: Connect,
) -> None:
    handler, peer, events = connect()
    states: list[State] = []
    refused: list[BaseException] = []
    entered = threading.Event()
    release = threading.Event()

    def on_msg(msg: Any) -> None:
        entered.set()
        release.wait(5)
        states.append(handler.state)

    sub = Subscription(handler, handler.next_sid(), "d.s", "", on_msg, 0, 0, 1 << 20)
    handler.add_subscription(sub)
    peer.send(b"MSG d.s %d 1\r\nx\r\n" % sub.sid)
    assert entered.wait(5)
    drainer = threading.Thread(target=handler.drain, args=(5,))
    drainer.start()
    assert wait_until(lambda: handler.state is State.DRAINING_SUBS)
    handler.publisher.publish("still.ok", b"y")  # callbacks may still respond
    release.set()
    assert wait_until(lambda: handler.state in (State.DRAINING_PUBS, State.CLOSED))
    try:
        handler.publisher.publish("too.late", b"z")
    except (ConnectionDrainingError, ConnectionClosedError) as err:
        refused.append(err)
    drainer.join(5)
    assert handler.state is State.CLOSED
    assert states == [State.DRAINING_SUBS]
    assert len(refused) == 1
    assert peer.seen(b"UNSUB %d\r\n" % sub.sid) and peer.seen(b"PUB still.ok 1\r\ny\r\n")
    assert events.names == ["closed"]


def test_unanswered_pings_make_the_connection_stale(connect: Connect) -> None:
    handler, _, events = connect(
        answer_pings=False, ping_interval=0.05, max_outstanding_pings=2, allow_reconnect=False
    )
    assert wait_until(lambda: handler.state is State.CLOSED)
    assert isinstance(handler.last_error, StaleConnectionError)
    # error_cb runs on the callback thread, which may still be at it when CLOSED is set.
    assert wait_until(lambda: any(isinstance(err, StaleConnectionError) for err in events.errors))


def test_close_fails_waiting_flushes_and_stops_every_thread(connect: Connect) -> None:
    handler, _, _ = connect(answer_pings=False)
    outcome: list[BaseException] = []

    def flush() -> None:
        try:
            handler.flush(5)
        except BaseException as err:
            outcome.append(err)

    waiter = threading.Thread(target=flush)
    waiter.start()
    assert wait_until(lambda: len(handler.outbox.pong_waiters) == 1)
    handler.close()
    waiter.join(5)
    assert [type(err) for err in outcome] == [ConnectionClosedError]
    snapshot = handler.debug_snapshot()
    assert snapshot["state"] is State.CLOSED and snapshot["timer_entries"] == 0
    assert not any(thread.is_alive() for thread in snapshot["connection_threads"])

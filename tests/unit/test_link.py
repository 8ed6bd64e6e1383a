"""The link alone, with no handler: a stand-in host, a session, and a socketpair as the
server. It makes a handshaken transport live (the reader and writer threads started
under their names) and, when the peer hangs up with reconnecting off, tells the status
listeners and asks its host to close, once."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest
from test_handler_states import INFO, Peer, unused_port, wait_until

from nats_sync._core import proto
from nats_sync._core.components.dispatch import Dispatcher
from nats_sync._core.components.link import Link
from nats_sync._core.components.publishing import Publisher
from nats_sync._core.components.subscription import Subscription
from nats_sync._core.session import Session
from nats_sync._core.state import State
from nats_sync._core.threads.callbacks import CallbackRunner, StatusListeners
from nats_sync._core.threads.connection import Connection
from nats_sync._core.threads.lifecycle import ClientThreads
from nats_sync._core.threads.outbox import Outbox
from nats_sync._core.threads.timer import Timer
from nats_sync._core.transport.options import build_options
from nats_sync._core.transport.pool import parse_server_url
from nats_sync._core.transport.streams import TcpStream
from nats_sync.errors import NatsConnectionError


class Host:
    """The handler's side of the link (``LinkHost``), and the publisher's."""

    def __init__(self) -> None:
        self.errors: list[BaseException] = []
        self.closes = 0
        self.link: Link | None = None
        self.session: Session[Subscription] = Session(True)
        self.dispatcher: Dispatcher

    def report_error(self, error: BaseException) -> None:
        self.errors.append(error)

    def close(self) -> None:
        self.closes += 1
        self.session.close()

    def check_can_publish(self) -> None:
        pass

    def connection(self) -> Connection | None:
        return self.link.connection() if self.link is not None else None


class Made:
    def __init__(self) -> None:
        options = build_options(f"nats://127.0.0.1:{unused_port()}", allow_reconnect=False)
        self.host = Host()
        self.session = self.host.session
        self.outbox = Outbox(options.pending_size, options.full_wait)
        self.threads = ClientThreads()
        self.callbacks = CallbackRunner()  # never run: submitted calls wait in its queue
        self.events: list[str] = []
        self.listeners = StatusListeners()
        self.listeners.add(self.events.append)
        self.options = options
        self.lock = threading.Lock()
        self.publisher = Publisher(self.outbox, self.host)
        self.timer = Timer()
        self.link = Link(
            options,
            self.lock,
            self.session,
            self.outbox,
            self.publisher,
            self.timer,
            self.threads.start,
            self.callbacks,
            self.listeners,
            self.host,
        )
        self.host.link = self.link
        self.host.dispatcher = Dispatcher(
            self.session.subscriptions,
            self.outbox,
            self.link.pings.on_pong,
            lambda info: None,
            lambda text: None,
            lambda sub: None,
        )
        ours, theirs = socket.socketpair()
        self.peer = Peer(theirs)
        server = parse_server_url(options.servers[0])
        self.activated = self.link.activate((server, TcpStream(ours), proto.Parser(), dict(INFO)))

    def stop(self) -> None:
        conn = self.link.connection()
        if conn is not None:
            conn.shutdown()
        self.outbox.stop_writer(discard=True)
        for thread in self.threads.alive():
            thread.join(5)


@pytest.fixture
def made() -> Iterator[Made]:
    made = Made()
    yield made
    made.stop()


def test_activate_makes_the_transport_live(made: Made) -> None:
    assert made.activated
    assert made.session.state is State.CONNECTED
    assert made.link.current_server is not None
    live = made.link.live()
    assert live is not None and live[0] is made.link.connection()
    names = sorted(thread.name for thread in made.link.conn_threads)
    assert names == ["nats_sync-reader", "nats_sync-writer"]
    made.outbox.put_control(b"SUB a 1\r\n")
    assert wait_until(lambda: made.peer.seen(b"SUB a 1\r\n"))


def test_a_hang_up_without_reconnecting_tells_the_listeners_and_closes_once(
    made: Made,
) -> None:
    made.peer.hang_up()
    assert wait_until(lambda: made.host.closes == 1)
    assert made.events == ["disconnected"]
    assert made.link.last_error is not None
    assert made.host.errors == []  # a socket that failed is expected: not reported
    conn = made.link.connection()
    assert conn is not None
    made.link.lose(conn, NatsConnectionError("again"))
    assert made.host.closes == 1  # once closed, a late report of the loss is ignored

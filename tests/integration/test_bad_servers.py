"""Servers that misbehave after a good handshake: the client reports clearly, drops the
connection, closes within 2 s, and leaves no thread behind (the autouse check)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable

import pytest
from fake_servers import FakeServerFactory, handshake, info_line, read_until

import nats_sync

pytestmark = [pytest.mark.timeout(20), pytest.mark.slow]


class Watch:
    """error_cb/closed_cb recorder."""

    def __init__(self) -> None:
        self.errors: list[BaseException] = []
        self.closed = threading.Event()

    def options(self) -> dict[str, object]:
        return {
            "error_cb": self.errors.append,
            "closed_cb": self.closed.set,
            "allow_reconnect": False,
        }


def _then(script: bytes, hold: float = 1.0) -> Callable[[socket.socket], None]:
    """A server that completes the handshake, sends ``script``, then stays silent."""

    def handle(conn: socket.socket) -> None:
        handshake(conn)
        conn.sendall(script)
        time.sleep(hold)

    return handle


def _closes_quickly(nc: nats_sync.Client) -> None:
    started = time.monotonic()
    nc.close()
    assert time.monotonic() - started < 2.0
    assert nc.is_closed


@pytest.mark.parametrize(
    ("script", "words"),
    [
        (b"HELLO WORLD\r\n", "unknown op"),
        (b"MSG a 1 999999999999\r\n", "exceeds the limit"),
        (b"MSG \xff\xfe 1 2\r\nhi\r\n", "not valid UTF-8"),
        (b"MSG a 1 3\r\nabcdefgh", "not followed by CRLF"),
        (b"INFO {not json\r\n", "INFO is not valid JSON"),
    ],
)
def test_bad_bytes_after_the_handshake_are_a_protocol_error(
    fake_server_factory: FakeServerFactory, script: bytes, words: str
) -> None:
    server = fake_server_factory(_then(script))
    watch = Watch()
    nc = nats_sync.connect(server.url, **watch.options())  # type: ignore[arg-type]
    assert watch.closed.wait(5), "the connection was not dropped"
    assert isinstance(nc.last_error, nats_sync.ProtocolError)
    assert words in str(nc.last_error)
    assert any(isinstance(e, nats_sync.ProtocolError) for e in watch.errors)
    _closes_quickly(nc)


def test_a_payload_shorter_than_announced_then_silence_does_not_hang(
    fake_server_factory: FakeServerFactory,
) -> None:
    server = fake_server_factory(_then(b"MSG a 1 100\r\nonly a few bytes", hold=1.5))
    nc = nats_sync.connect(server.url, allow_reconnect=False)
    with pytest.raises(nats_sync.FlushTimeoutError):
        nc.flush(timeout=0.5)
    _closes_quickly(nc)


def test_a_server_closing_mid_payload_is_a_disconnect(
    fake_server_factory: FakeServerFactory,
) -> None:
    def handle(conn: socket.socket) -> None:
        handshake(conn)
        conn.sendall(b"MSG a 1 100\r\nhalf of it")
        conn.close()

    server = fake_server_factory(handle)
    disconnected = threading.Event()
    watch = Watch()
    nc = nats_sync.connect(server.url, disconnected_cb=disconnected.set, **watch.options())  # type: ignore[arg-type]
    assert disconnected.wait(5) and watch.closed.wait(5)
    assert isinstance(nc.last_error, nats_sync.NatsConnectionError)


def test_a_server_that_never_answers_ping_is_stale(fake_server_factory: FakeServerFactory) -> None:
    server = fake_server_factory(_then(b"", hold=1.5))
    watch = Watch()
    nc = nats_sync.connect(
        server.url, ping_interval=0.2, max_outstanding_pings=2, **watch.options()
    )  # type: ignore[arg-type]
    assert watch.closed.wait(5)
    assert any(isinstance(e, nats_sync.StaleConnectionError) for e in watch.errors)
    _closes_quickly(nc)


def test_a_slowloris_server_trickling_bytes_is_still_understood(
    fake_server_factory: FakeServerFactory,
) -> None:
    def handle(conn: socket.socket) -> None:
        for byte in info_line():
            conn.sendall(bytes([byte]))
        read_until(conn, b"PING\r\n")
        conn.sendall(b"PONG\r\n")
        read_until(conn, b"SUB trickle")
        for byte in b"MSG trickle 1 5\r\nslow!\r\n":
            conn.sendall(bytes([byte]))
            time.sleep(0.005)
        time.sleep(1)

    server = fake_server_factory(handle)
    nc = nats_sync.connect(server.url, allow_reconnect=False, connect_timeout=5)
    sub = nc.subscribe("trickle")
    assert sub.next_msg(timeout=5).data == b"slow!"
    _closes_quickly(nc)


def test_a_server_that_never_reads_makes_publish_raise_not_block(
    fake_server_factory: FakeServerFactory,
) -> None:
    server = fake_server_factory(_then(b"", hold=3.0))
    nc = nats_sync.connect(
        server.url, allow_reconnect=False, pending_size=64 * 1024, flush_timeout=0.5
    )
    payload = b"x" * 60_000
    started = time.monotonic()
    with pytest.raises(nats_sync.OutboundBufferLimitError):
        for _ in range(10_000):  # far more than the kernel buffers and the outbox hold
            nc.publish("sink", payload)
    assert time.monotonic() - started < 10
    _closes_quickly(nc)

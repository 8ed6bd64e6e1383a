"""The stacked streams (TCP, TLS over a stream, WebSocket over a stream) against in-test
peers on ``socket.socketpair()``: no nats-server, each test bounded in time."""

from __future__ import annotations

import builtins
import socket
import ssl
import struct
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import trustme
from wsproto import ConnectionType, WSConnection
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Event,
    Ping,
    Pong,
    RejectConnection,
    Request,
)

from nats_sync._core.transport.streams import TcpStream, TlsStream, Transport, os_error
from nats_sync._core.transport.websocket import WebSocketStream
from nats_sync._defaults import MAX_IOVECS_PER_SEND
from nats_sync.errors import (
    NatsConnectionError,
    SecureConnFailedError,
    TimeoutError,
)

pytestmark = pytest.mark.timeout(10)

JOIN = 5.0  # seconds a peer thread may take to finish


class Peer:
    """Runs ``body`` on a thread; :meth:`join` re-raises what it raised."""

    def __init__(self, body: Callable[[], Any]) -> None:
        self.error: BaseException | None = None
        self.result: Any = None

        def run() -> None:
            try:
                self.result = body()
            except BaseException as err:
                self.error = err

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def join(self) -> Any:
        self.thread.join(JOIN)
        assert not self.thread.is_alive(), "the peer thread did not finish"
        if self.error is not None:
            raise self.error
        return self.result


@pytest.fixture
def pair() -> Iterator[tuple[TcpStream, socket.socket]]:
    ours, theirs = socket.socketpair()
    stream = TcpStream(ours)
    yield stream, theirs
    stream.close()
    theirs.close()


def recv_exactly(stream: Transport, size: int) -> bytes:
    out = bytearray()
    buffer = bytearray(65536)
    while len(out) < size:
        count = stream.recv_into(buffer)
        assert count, f"end of stream after {len(out)} of {size} bytes"
        out += buffer[:count]
    return bytes(out)


def read_peer(sock: socket.socket, size: int) -> bytes:
    out = b""
    while len(out) < size:
        chunk = sock.recv(size - len(out))
        assert chunk, f"end of stream after {len(out)} of {size} bytes"
        out += chunk
    return out


# --- the TCP stream ----------------------------------------------------------------------


def test_tcp_send_and_recv_into(pair: tuple[TcpStream, socket.socket]) -> None:
    stream, peer = pair
    assert stream.send([b"PUB a 2\r\nhi\r\n"]) == 13
    assert read_peer(peer, 13) == b"PUB a 2\r\nhi\r\n"
    peer.sendall(b"MSG a 1 2\r\nhi\r\n")
    assert recv_exactly(stream, 15) == b"MSG a 1 2\r\nhi\r\n"


def test_tcp_send_of_many_buffers_is_one_sendmsg_of_at_most_the_limit(
    pair: tuple[TcpStream, socket.socket],
) -> None:
    stream, peer = pair
    assert stream.send([b"ab", memoryview(b"cd"), b"ef"]) == 6
    assert read_peer(peer, 6) == b"abcdef"
    assert stream.send([b"x"] * (MAX_IOVECS_PER_SEND + 10)) == MAX_IOVECS_PER_SEND
    assert read_peer(peer, MAX_IOVECS_PER_SEND) == b"x" * MAX_IOVECS_PER_SEND


def test_tcp_send_all(pair: tuple[TcpStream, socket.socket]) -> None:
    stream, peer = pair
    data = bytes(range(256)) * 1000  # more than the socket buffer: sendall loops
    reader = Peer(lambda: read_peer(peer, len(data)))
    stream.send_all(memoryview(data))
    assert reader.join() == data


def test_tcp_recv_into_nowait(pair: tuple[TcpStream, socket.socket]) -> None:
    stream, peer = pair
    buffer = bytearray(16)
    assert stream.recv_into_nowait(buffer) is None
    peer.sendall(b"PING\r\n")
    deadline = time.monotonic() + JOIN
    while (count := stream.recv_into_nowait(buffer)) is None:
        assert time.monotonic() < deadline
    assert buffer[:count] == b"PING\r\n"
    peer.shutdown(socket.SHUT_WR)
    assert stream.recv_into_nowait(buffer) == 0  # the end of the stream, not "nothing"


def test_tcp_send_nowait_takes_what_fits_and_then_nothing(
    pair: tuple[TcpStream, socket.socket],
) -> None:
    stream, peer = pair
    chunk = b"x" * 65536
    total = 0
    for _ in range(1000):  # a socketpair buffer holds far less than 64 MiB
        sent = stream.send_nowait(chunk)
        total += sent
        if sent == 0:
            break
    else:
        pytest.fail("the socket never filled up")
    assert total > 0
    assert read_peer(peer, total) == b"x" * total


def test_tcp_shutdown_wakes_a_blocked_reader(pair: tuple[TcpStream, socket.socket]) -> None:
    stream, _ = pair
    reader = Peer(lambda: stream.recv_into(bytearray(16)))
    time.sleep(0.05)  # most likely blocked by now; if not, it reads the end anyway
    stream.shutdown()
    assert reader.join() == 0
    stream.shutdown()  # again, on a socket already shut down: no error


def test_tcp_close_is_idempotent_and_ends_the_peer_stream(
    pair: tuple[TcpStream, socket.socket],
) -> None:
    stream, peer = pair
    assert stream.fileno() >= 0
    stream.close()
    stream.close()
    assert stream.fileno() == -1
    assert peer.recv(16) == b""


def test_tcp_open_connects_with_nodelay() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    with listener:
        stream = TcpStream.open("127.0.0.1", listener.getsockname()[1], 2.0)
        assert stream._sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
        accepted, _ = listener.accept()
        with accepted:
            stream.send_all(b"hello")
            assert read_peer(accepted, 5) == b"hello"
        stream.close()


# --- OS errors become the library's errors -----------------------------------------------


def test_os_error_translation() -> None:
    timeout = os_error(builtins.TimeoutError("timed out"), "read")  # what sockets raise
    assert isinstance(timeout, TimeoutError) and isinstance(timeout, builtins.TimeoutError)
    assert not isinstance(timeout, NatsConnectionError)
    reset = os_error(ConnectionResetError(104, "Connection reset by peer"), "read")
    assert type(reset) is NatsConnectionError
    assert "read failed" in str(reset) and "reset" in str(reset)
    tls = os_error(ssl.SSLError(1, "[SSL: BAD_RECORD_MAC] bad record mac"), "TLS read")
    assert type(tls) is NatsConnectionError and "TLS read failed" in str(tls)


def test_a_read_timeout_is_the_library_timeout(pair: tuple[TcpStream, socket.socket]) -> None:
    stream, _ = pair
    stream.set_timeout(0.05)
    with pytest.raises(TimeoutError, match="read timed out") as caught:
        stream.recv_into(bytearray(16))
    assert isinstance(caught.value.__cause__, builtins.TimeoutError)


def test_a_write_to_a_closed_peer_is_a_connection_error(
    pair: tuple[TcpStream, socket.socket],
) -> None:
    stream, peer = pair
    peer.close()
    with pytest.raises(NatsConnectionError, match="write failed"):
        stream.send([b"PUB a 0\r\n\r\n"])
    with pytest.raises(NatsConnectionError, match="write failed"):
        stream.send_nowait(b"PUB a 0\r\n\r\n")
    with pytest.raises(NatsConnectionError, match="write failed"):
        stream.send_all(b"PUB a 0\r\n\r\n")


def test_a_reset_is_a_connection_error() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    with listener:
        stream = TcpStream.open("127.0.0.1", listener.getsockname()[1], 2.0)
        accepted, _ = listener.accept()
        # Linger 0: close sends a RST instead of a FIN.
        accepted.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        accepted.close()
    stream.set_timeout(JOIN)
    with pytest.raises(NatsConnectionError, match="read failed") as caught:
        stream.recv_into(bytearray(16))
    assert isinstance(caught.value.__cause__, ConnectionResetError)
    stream.close()


def test_a_refused_connection_is_a_connection_error() -> None:
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # bound, never listening, now free: nothing accepts there
    with pytest.raises(NatsConnectionError, match=f"connecting to 127.0.0.1:{port} failed"):
        TcpStream.open("127.0.0.1", port, 2.0)


# --- TLS over a stream -------------------------------------------------------------------


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


def client_context(ca: trustme.CA) -> ssl.SSLContext:
    context = ssl.create_default_context()
    ca.configure_trust(context)
    return context


def server_context(ca: trustme.CA) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ca.issue_cert("localhost").configure_cert(context)
    return context


def tls_server(ca: trustme.CA, sock: socket.socket, body: Callable[[ssl.SSLSocket], Any]) -> Peer:
    """A peer that runs the server's TLS handshake on ``sock``, then ``body``."""
    context = server_context(ca)

    def serve() -> Any:
        with context.wrap_socket(sock, server_side=True) as tls:
            return body(tls)

    return Peer(serve)


def test_tls_round_trip(ca: trustme.CA, pair: tuple[TcpStream, socket.socket]) -> None:
    tcp, peer = pair

    def echo_once(tls: ssl.SSLSocket) -> bytes:
        data = tls.recv(1024)
        tls.sendall(b"got " + data)
        return data

    server = tls_server(ca, peer, echo_once)
    stream = TlsStream.start(tcp, client_context(ca), "localhost", time.monotonic() + JOIN)
    assert stream.send([b"PING", b"\r\n"]) == 6
    assert recv_exactly(stream, 10) == b"got PING\r\n"
    assert server.join() == b"PING\r\n"
    assert stream.recv_into(bytearray(16)) == 0  # the server closed
    stream.close()


@pytest.mark.parametrize(
    ("trusted", "hostname", "words"),
    [
        (False, "localhost", "certificate"),
        (True, "not-the-server", "not-the-server"),
    ],
)
def test_tls_rejects_an_untrusted_or_wrong_certificate(
    ca: trustme.CA,
    pair: tuple[TcpStream, socket.socket],
    trusted: bool,
    hostname: str,
    words: str,
) -> None:
    tcp, peer = pair
    server = tls_server(ca, peer, lambda tls: None)
    context = client_context(ca if trusted else trustme.CA())
    with pytest.raises(SecureConnFailedError, match=words):
        TlsStream.start(tcp, context, hostname, time.monotonic() + JOIN)
    tcp.close()
    with pytest.raises(OSError):  # the client's alert, or the end of the stream
        server.join()


def test_tls_handshake_with_garbage_fails_cleanly(
    ca: trustme.CA,
    pair: tuple[TcpStream, socket.socket],
) -> None:
    tcp, peer = pair
    peer.sendall(b"this is not TLS\r\n" * 10)
    with pytest.raises(SecureConnFailedError):
        TlsStream.start(tcp, client_context(ca), "localhost", time.monotonic() + JOIN)


def test_tls_handshake_times_out_on_a_silent_server(
    ca: trustme.CA,
    pair: tuple[TcpStream, socket.socket],
) -> None:
    tcp, _ = pair
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        TlsStream.start(tcp, client_context(ca), "localhost", started + 0.2)
    assert time.monotonic() - started < 2


def test_tls_reader_and_writer_threads_at_once(
    ca: trustme.CA,
    pair: tuple[TcpStream, socket.socket],
) -> None:
    tcp, peer = pair
    chunks = [bytes([index % 251]) * (1 + index * 37 % 9000) for index in range(400)]
    total = sum(map(len, chunks))

    def echo(tls: ssl.SSLSocket) -> None:
        while data := tls.recv(65536):
            tls.sendall(data)

    server = tls_server(ca, peer, echo)
    stream = TlsStream.start(tcp, client_context(ca), "localhost", time.monotonic() + JOIN)
    stream.set_timeout(None)

    def write() -> None:
        for chunk in chunks:
            view = memoryview(chunk)
            while view:
                view = view[stream.send([view]) :]

    writer = Peer(write)
    assert recv_exactly(stream, total) == b"".join(chunks)  # reader: this thread
    writer.join()
    stream.shutdown()
    server.join()
    stream.close()


def test_tls_shutdown_wakes_a_blocked_reader(
    ca: trustme.CA,
    pair: tuple[TcpStream, socket.socket],
) -> None:
    tcp, peer = pair
    release = threading.Event()
    server = tls_server(ca, peer, lambda tls: release.wait(JOIN))
    stream = TlsStream.start(tcp, client_context(ca), "localhost", time.monotonic() + JOIN)
    stream.set_timeout(None)
    reader = Peer(lambda: stream.recv_into(bytearray(16)))
    time.sleep(0.05)
    stream.shutdown()
    assert reader.join() == 0
    release.set()
    server.join()
    stream.close()


# --- WebSocket over a stream -------------------------------------------------------------


class WsServer:
    """The server end of a WebSocket, wsproto framing over a (TLS) socket."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.conn = WSConnection(ConnectionType.SERVER)
        self.lock = threading.Lock()  # the wsproto connection: one thread at a time

    def next_events(self) -> list[Event]:
        while True:
            with self.lock:
                events = list(self.conn.events())
            if events:
                return events
            data = self.sock.recv(65536)
            with self.lock:
                self.conn.receive_data(data or None)
            if not data:
                with self.lock:
                    return list(self.conn.events())

    def send(self, *events: Event) -> None:
        with self.lock:
            data = b"".join(self.conn.send(event) for event in events)
        self.sock.sendall(data)

    def accept(self, *then: Event) -> Request:
        [request] = self.next_events()
        assert isinstance(request, Request)
        self.send(AcceptConnection(), *then)  # what follows arrives with the 101
        return request


def open_ws(inner: Transport, server: WsServer, *then: Event) -> tuple[WebSocketStream, Request]:
    accepting = Peer(lambda: server.accept(*then))
    stream = WebSocketStream.open(inner, "example.com:8080", time.monotonic() + JOIN)
    return stream, accepting.join()


def test_websocket_over_tcp(pair: tuple[TcpStream, socket.socket]) -> None:
    tcp, peer = pair
    server = WsServer(peer)
    stream, request = open_ws(tcp, server, BytesMessage(data=b"INFO {}\r\n"))
    assert (request.host, request.target) == ("example.com:8080", "/")
    assert recv_exactly(stream, 9) == b"INFO {}\r\n"  # arrived with the 101

    assert stream.send([b"CONNECT {}\r\n", memoryview(b"PING\r\n")]) == 18
    [message] = server.next_events()
    assert isinstance(message, BytesMessage) and message.data == b"CONNECT {}\r\nPING\r\n"
    stream.send_all(b"PONG\r\n")
    [message] = server.next_events()
    assert isinstance(message, BytesMessage) and message.data == b"PONG\r\n"

    server.send(Ping(payload=b"p1"), BytesMessage(data=b"PING\r\n"))
    assert recv_exactly(stream, 6) == b"PING\r\n"
    [pong] = server.next_events()  # answered by the reader as it read
    assert isinstance(pong, Pong) and pong.payload == b"p1"

    server.send(BytesMessage(data=b"last"), CloseConnection(code=1001))
    assert recv_exactly(stream, 4) == b"last"
    assert stream.recv_into(bytearray(16)) == 0
    [close] = server.next_events()
    assert isinstance(close, CloseConnection)
    with pytest.raises(NatsConnectionError, match="closed the WebSocket"):
        stream.send([b"PUB a 0\r\n\r\n"])
    stream.close()


def test_websocket_upgrade_refused(pair: tuple[TcpStream, socket.socket]) -> None:
    tcp, peer = pair
    server = WsServer(peer)

    def refuse() -> None:
        server.next_events()
        server.send(RejectConnection(status_code=400))

    refusing = Peer(refuse)
    with pytest.raises(NatsConnectionError, match="HTTP 400"):
        WebSocketStream.open(tcp, "h", time.monotonic() + JOIN)
    refusing.join()


def test_websocket_upgrade_answered_with_nats_or_nothing(
    pair: tuple[TcpStream, socket.socket],
) -> None:
    tcp, peer = pair
    peer.sendall(b'INFO {"server_id":"x"}\r\n')
    peer.shutdown(socket.SHUT_WR)
    with pytest.raises(NatsConnectionError, match="upgrade after sending b'INFO"):
        WebSocketStream.open(tcp, "h", time.monotonic() + JOIN)


def test_websocket_upgrade_times_out(pair: tuple[TcpStream, socket.socket]) -> None:
    tcp, _ = pair
    started = time.monotonic()
    with pytest.raises(TimeoutError, match="WebSocket upgrade with h took too long"):
        WebSocketStream.open(tcp, "h", started + 0.2)
    assert time.monotonic() - started < 2


def test_websocket_reader_and_writer_frames_never_interleave(
    pair: tuple[TcpStream, socket.socket],
) -> None:
    tcp, peer = pair
    server = WsServer(peer)
    stream, _ = open_ws(tcp, server)
    messages = [b"PUB a %d\r\n" % index + b"x" * (index * 53 % 5000) for index in range(300)]
    pings = 100

    def collect() -> tuple[list[bytes], int]:
        received: list[bytes] = []
        pongs = 0
        while len(received) < len(messages) or pongs < pings:
            for event in server.next_events():  # wsproto fails on interleaved frames
                if isinstance(event, BytesMessage):
                    received.append(bytes(event.data))
                elif isinstance(event, Pong):
                    pongs += 1
        return received, pongs

    def ping() -> None:
        for index in range(pings):
            server.send(Ping(payload=b"%d" % index), BytesMessage(data=b"."))

    collector = Peer(collect)
    pinger = Peer(ping)
    writer = Peer(lambda: [stream.send([message]) for message in messages])
    assert recv_exactly(stream, pings) == b"." * pings  # reader: answers every ping
    writer.join()
    pinger.join()
    received, pongs = collector.join()
    assert received == messages and pongs == pings
    stream.close()


def test_websocket_over_tls_over_tcp(ca: trustme.CA, pair: tuple[TcpStream, socket.socket]) -> None:
    tcp, peer = pair

    def serve(tls: ssl.SSLSocket) -> bytes:
        server = WsServer(tls)
        server.accept(BytesMessage(data=b"INFO {}\r\n"))
        [message] = server.next_events()
        assert isinstance(message, BytesMessage)
        server.send(BytesMessage(data=b"PONG\r\n"))
        return bytes(message.data)

    server = tls_server(ca, peer, serve)
    tls = TlsStream.start(tcp, client_context(ca), "localhost", time.monotonic() + JOIN)
    stream = WebSocketStream.open(tls, "localhost", time.monotonic() + JOIN)
    assert recv_exactly(stream, 9) == b"INFO {}\r\n"
    stream.send_all(b"CONNECT {}\r\nPING\r\n")
    assert recv_exactly(stream, 6) == b"PONG\r\n"
    assert server.join() == b"CONNECT {}\r\nPING\r\n"
    stream.close()
    assert tcp.fileno() == -1  # closing the top closed the socket at the bottom

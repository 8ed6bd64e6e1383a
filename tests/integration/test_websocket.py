"""NATS over WebSocket (``ws://``, ``wss://``): real nats-servers with a websocket block,
and fake servers (raw sockets in the test) for refused, malformed and silent upgrades."""

from __future__ import annotations

import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme
from wsproto import ConnectionType, WSConnection
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Ping,
    Pong,
    Request,
    TextMessage,
)

import nats_sync
from nats_sync.testing import NatsServer

ClientFactory = Callable[..., nats_sync.Client]
ServerFactory = Callable[..., NatsServer]

pytestmark = pytest.mark.timeout(60)

FAKE_INFO = (
    b'INFO {"server_id":"FAKE","version":"2.10.0","proto":1,"headers":true,'
    b'"max_payload":1048576}\r\n'
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def websocket_config(port: int | str = -1, tls: str = "") -> str:
    security = tls or "no_tls: true\n"
    return f"websocket {{\n  host: 127.0.0.1\n  port: {port}\n  {security}}}\n"


@pytest.fixture
def ws_server(nats_server_factory: ServerFactory) -> NatsServer:
    """A server with a plain WebSocket listener besides its client port."""
    return nats_server_factory(config=websocket_config())


def fast_delay(attempt: int) -> float:
    return 0.02


# --- against nats-server ---------------------------------------------------------------


def test_publish_subscribe_and_request_over_ws(
    ws_server: NatsServer, connect: ClientFactory
) -> None:
    nc = connect(servers=ws_server.websocket_url())
    assert nc.connected_url is not None and nc.connected_url.startswith("ws://")
    sub = nc.subscribe("ws.data")
    nc.subscribe("ws.echo", cb=lambda msg: msg.respond(msg.data.upper()))
    nc.flush()
    for n in range(1_000):
        nc.publish("ws.data", b"%d" % n)
    nc.flush()
    assert [int(sub.next_msg(5).data) for _ in range(1_000)] == list(range(1_000))
    assert nc.request("ws.echo", b"hello", timeout=5).data == b"HELLO"
    assert nc.server_info.get("port") == ws_server.websocket_port


def test_headers_over_ws(ws_server: NatsServer, connect: ClientFactory) -> None:
    nc = connect(servers=ws_server.websocket_url())
    sub = nc.subscribe("ws.hdr")
    nc.publish("ws.hdr", b"body", headers={"X-One": "1", "X-Many": ["a", "b"]})
    msg = sub.next_msg(5)
    assert msg.data == b"body"
    assert msg.headers is not None
    assert msg.headers["X-One"] == "1" and msg.headers["X-Many"] == ["a", "b"]


def test_a_one_mib_payload_spans_many_reads(ws_server: NatsServer, connect: ClientFactory) -> None:
    nc = connect(servers=ws_server.websocket_url())
    payload = bytes(range(256)) * 4096  # 1 MiB, the server's max_payload
    assert len(payload) == nc.max_payload
    nc.subscribe("ws.big.echo", cb=lambda msg: msg.respond(msg.data[::-1]))
    sub = nc.subscribe("ws.big")
    nc.flush()
    assert nc.request("ws.big.echo", payload, timeout=10).data == payload[::-1]
    for _ in range(3):
        nc.publish("ws.big", payload)
    nc.publish("ws.big", b"small")
    assert [sub.next_msg(10).data for _ in range(4)] == [payload] * 3 + [b"small"]


def test_a_tcp_and_a_websocket_client_talk_to_each_other(
    ws_server: NatsServer, connect: ClientFactory
) -> None:
    tcp = connect(servers=ws_server.url)
    ws = connect(servers=ws_server.websocket_url())
    tcp.subscribe("to.tcp", cb=lambda msg: msg.respond(b"tcp:" + msg.data))
    ws.subscribe("to.ws", cb=lambda msg: msg.respond(b"ws:" + msg.data))
    from_ws = tcp.subscribe("from.ws")
    tcp.flush()
    ws.flush()
    assert ws.request("to.tcp", b"1", timeout=5).data == b"tcp:1"
    assert tcp.request("to.ws", b"2", timeout=5).data == b"ws:2"
    ws.publish("from.ws", b"3", headers={"K": "v"})
    msg = from_ws.next_msg(5)
    assert msg.data == b"3" and msg.headers is not None and msg.headers["K"] == "v"


def test_reconnects_over_ws_after_a_server_restart(
    nats_server_factory: ServerFactory, connect: ClientFactory
) -> None:
    server = nats_server_factory(config=websocket_config(free_port()))
    url = server.websocket_url()
    disconnected, reconnected = threading.Event(), threading.Event()
    nc = connect(
        servers=url,
        reconnect_delay_cb=fast_delay,
        disconnected_cb=disconnected.set,
        reconnected_cb=reconnected.set,
    )
    sub = nc.subscribe("ws.after")
    nc.flush()

    server.kill()
    assert disconnected.wait(10)
    nc.publish("ws.after", b"buffered")  # held in the outbox while disconnected
    server.start()
    assert server.websocket_url() == url
    assert reconnected.wait(15), "the client never reconnected"
    nc.publish("ws.after", b"fresh")
    assert [sub.next_msg(5).data for _ in range(2)] == [b"buffered", b"fresh"]
    assert nc.stats["reconnects"] == 1
    assert nc.connected_url is not None and nc.connected_url.startswith("ws://")


@pytest.fixture
def pki(tmp_path: Path) -> tuple[trustme.CA, str]:
    ca = trustme.CA()
    leaf = ca.issue_cert("localhost", "127.0.0.1")
    cert, key = tmp_path / "server.pem", tmp_path / "server.key"
    leaf.cert_chain_pems[0].write_to_path(str(cert))
    leaf.private_key_pem.write_to_path(str(key))
    tls = f'tls {{\n    cert_file: "{cert}"\n    key_file: "{key}"\n  }}\n'
    return ca, tls


def test_wss_verifies_the_server_and_works(
    pki: tuple[trustme.CA, str], nats_server_factory: ServerFactory, connect: ClientFactory
) -> None:
    ca, tls = pki
    server = nats_server_factory(config=websocket_config(tls=tls))
    context = trusting(ca)
    nc = connect(servers=server.websocket_url("wss"), tls=context, tls_hostname="localhost")
    nc.subscribe("wss.echo", cb=lambda msg: msg.respond(msg.data[::-1]))
    nc.flush()
    payload = b"abc" * 100_000
    assert nc.request("wss.echo", payload, timeout=10).data == payload[::-1]
    # Two clients over wss at once, one of them on the host name from the certificate.
    other = connect(servers=f"wss://127.0.0.1:{server.websocket_port}", tls=context)
    sub = other.subscribe("wss.data")
    other.flush()
    for n in range(500):
        nc.publish("wss.data", b"%d" % n)
    assert [int(sub.next_msg(5).data) for _ in range(500)] == list(range(500))


def test_wss_refuses_an_untrusted_certificate(
    pki: tuple[trustme.CA, str], nats_server_factory: ServerFactory
) -> None:
    _, tls = pki
    server = nats_server_factory(config=websocket_config(tls=tls))
    with pytest.raises(nats_sync.NoServersError) as caught:
        nats_sync.connect(server.websocket_url("wss"), connect_timeout=2.0)
    assert isinstance(caught.value.__cause__, nats_sync.SecureConnFailedError)
    assert "certificate" in str(caught.value.__cause__).lower()


def trusting(ca: trustme.CA) -> ssl.SSLContext:
    context = ssl.create_default_context()
    ca.configure_trust(context)
    return context


def test_ws_to_a_plain_nats_port_fails_clearly(ws_server: NatsServer) -> None:
    # The server speaks first (INFO), which is no HTTP answer to the upgrade.
    with pytest.raises(nats_sync.NoServersError) as caught:
        nats_sync.connect(f"ws://127.0.0.1:{ws_server.port}", connect_timeout=2.0)
    assert isinstance(caught.value.__cause__, nats_sync.NatsConnectionError)
    assert "WebSocket upgrade after sending b'INFO" in str(caught.value.__cause__)


# --- fake servers ----------------------------------------------------------------------


class FakeServer:
    """A listening socket; each connection is handled by ``handle(sock)`` on a thread."""

    def __init__(self, handle: Callable[[socket.socket], None]) -> None:
        self._handle = handle
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.stop = threading.Event()
        self.errors: list[BaseException] = []
        self._threads: list[threading.Thread] = []
        self._sockets: list[socket.socket] = []
        self._acceptor = threading.Thread(target=self._accept, name="fake-ws-accept")
        self._acceptor.start()

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        self._listener.settimeout(0.05)
        while not self.stop.is_set():
            try:
                sock, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            sock.settimeout(10)
            self._sockets.append(sock)
            thread = threading.Thread(target=self._run, args=(sock,), name="fake-ws-conn")
            self._threads.append(thread)
            thread.start()

    def _run(self, sock: socket.socket) -> None:
        try:
            self._handle(sock)
        except OSError:
            pass  # the client went away
        except BaseException as err:
            self.errors.append(err)

    def close(self) -> None:
        self.stop.set()
        self._acceptor.join(5)
        self._listener.close()
        for sock in self._sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()
        for thread in self._threads:
            thread.join(5)
        assert not self.errors, self.errors


@pytest.fixture
def fake_server() -> Iterator[Callable[[Callable[[socket.socket], None]], FakeServer]]:
    made: list[FakeServer] = []

    def factory(handle: Callable[[socket.socket], None]) -> FakeServer:
        made.append(FakeServer(handle))
        return made[-1]

    try:
        yield factory
    finally:
        for server in made:
            server.close()


def read_request(sock: socket.socket) -> bytes:
    """Reads up to the end of an HTTP request's head (or the client's hang-up)."""
    data = b""
    while b"\r\n\r\n" not in data:
        try:
            chunk = sock.recv(4096)
        except OSError as err:  # say what came before, which the raise would lose
            raise type(err)(f"{err} before the request's end; read: {data[-200:]!r}") from err
        if not chunk:
            break
        data += chunk
    return data


def test_a_refused_upgrade_fails_promptly_naming_the_status(fake_server: Any) -> None:
    requests: list[bytes] = []

    def refuse(sock: socket.socket) -> None:
        requests.append(read_request(sock))
        sock.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 11\r\n\r\nbad request")
        sock.recv(1)  # until the client hangs up

    server = fake_server(refuse)
    started = time.monotonic()
    with pytest.raises(nats_sync.NoServersError) as caught:
        nats_sync.connect(server.url, connect_timeout=5.0)
    assert time.monotonic() - started < 2.0
    cause = caught.value.__cause__
    assert isinstance(cause, nats_sync.NatsConnectionError)
    assert "400" in str(cause) and "WebSocket upgrade" in str(cause)
    request = requests[0].lower()
    assert request.startswith(b"get / http/1.1\r\n")
    assert b"upgrade: websocket" in request and b"sec-websocket-key:" in request
    assert f"host: 127.0.0.1:{server.port}".encode() in request


def test_a_bad_accept_token_is_refused(fake_server: Any) -> None:
    def bad_accept(sock: socket.socket) -> None:
        read_request(sock)
        sock.sendall(
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
            b"Connection: Upgrade\r\nSec-WebSocket-Accept: bm90IHRoZSB0b2tlbg==\r\n"
            b"\r\n"
        )
        sock.recv(1)

    server = fake_server(bad_accept)
    with pytest.raises(nats_sync.NoServersError) as caught:
        nats_sync.connect(server.url, connect_timeout=5.0)
    assert isinstance(caught.value.__cause__, nats_sync.NatsConnectionError)
    assert "accept" in str(caught.value.__cause__).lower()


def test_a_silent_server_is_bounded_by_connect_timeout(fake_server: Any) -> None:
    def silent(sock: socket.socket) -> None:
        read_request(sock)
        sock.recv(1)  # never answers; returns when the client gives up

    server = fake_server(silent)
    started = time.monotonic()
    with pytest.raises(nats_sync.NoServersError) as caught:
        nats_sync.connect(server.url, connect_timeout=0.5)
    elapsed = time.monotonic() - started
    assert 0.4 < elapsed < 3.0
    assert isinstance(caught.value.__cause__, nats_sync.TimeoutError)


class WsPeer:
    """The server end of a WebSocket, made with wsproto, over a raw socket."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.ws = WSConnection(ConnectionType.SERVER)

    def events(self) -> list[Any]:
        data = self.sock.recv(65536)
        self.ws.receive_data(data or None)
        return list(self.ws.events())

    def send(self, event: Any) -> None:
        self.sock.sendall(self.ws.send(event))


def test_pings_are_answered_and_a_close_frame_ends_the_connection(fake_server: Any) -> None:
    pong_payloads: list[bytes] = []
    client_closed = threading.Event()
    close_now = threading.Event()

    def speak(sock: socket.socket) -> None:
        peer = WsPeer(sock)
        while not any(isinstance(event, Request) for event in peer.events()):
            pass
        peer.send(AcceptConnection())
        # INFO split over a binary and a text message, with a ping in between.
        peer.send(BytesMessage(data=FAKE_INFO[:20]))
        peer.send(Ping(payload=b"are you there"))
        peer.send(TextMessage(data=FAKE_INFO[20:].decode()))
        received = b""
        while b"PING\r\n" not in received or not pong_payloads:
            for event in peer.events():
                if isinstance(event, BytesMessage):
                    received += event.data
                elif isinstance(event, Pong):
                    pong_payloads.append(bytes(event.payload))
        assert received.startswith(b"CONNECT {")
        peer.send(BytesMessage(data=b"PONG\r\n"))
        assert close_now.wait(10)
        peer.send(CloseConnection(code=1001, reason="going away"))
        while True:
            events = peer.events()
            if any(isinstance(event, CloseConnection) for event in events):
                client_closed.set()
                return

    server = fake_server(speak)
    disconnected = threading.Event()
    nc = nats_sync.connect(
        server.url, allow_reconnect=False, connect_timeout=5.0, disconnected_cb=disconnected.set
    )
    try:
        assert nc.server_info["server_id"] == "FAKE"
        assert pong_payloads == [b"are you there"]
        close_now.set()
        assert disconnected.wait(10)
        assert client_closed.wait(10), "the client did not answer the close frame"
        deadline = time.monotonic() + 10
        while not nc.is_closed and time.monotonic() < deadline:
            time.sleep(0.01)
        assert nc.is_closed
    finally:
        nc.close()


def test_pongs_and_messages_never_interleave_under_load(fake_server: Any) -> None:
    """The server pings without pause while the client publishes flat out: every frame
    it gets must parse, every ping must get its pong, every message must arrive."""
    count = 20_000
    pub_line = b"PUB load 50\r\n" + b"x" * 50 + b"\r\n"
    result: dict[str, Any] = {}
    done = threading.Event()

    def speak(sock: socket.socket) -> None:
        peer = WsPeer(sock)
        lock = threading.Lock()  # wsproto and the socket, shared with the pinger
        stop_pinging = threading.Event()
        while not any(isinstance(event, Request) for event in peer.events()):
            pass
        peer.send(AcceptConnection())
        peer.send(BytesMessage(data=FAKE_INFO))
        stream = b""
        pings = pongs = nats_pongs = 0

        def pinger() -> None:
            nonlocal pings
            while not stop_pinging.is_set():
                with lock:
                    peer.send(Ping(payload=b"%d" % pings))
                    pings += 1
                time.sleep(0.0002)

        thread = threading.Thread(target=pinger, name="fake-ws-pinger")
        try:
            while not stop_pinging.is_set() or pongs < pings:
                data = sock.recv(65536)
                if not data:
                    break
                with lock:
                    peer.ws.receive_data(data)
                    events = list(peer.ws.events())
                for event in events:
                    if isinstance(event, BytesMessage):
                        stream += event.data
                        while stream.count(b"PING\r\n") > nats_pongs:
                            with lock:
                                peer.send(BytesMessage(data=b"PONG\r\n"))
                            nats_pongs += 1
                        if not thread.is_alive() and not stop_pinging.is_set():
                            thread.start()
                    elif isinstance(event, Pong):
                        pongs += 1
                    elif isinstance(event, CloseConnection):
                        result["close"] = event
                        return
                if stream.count(pub_line) >= count and pings >= 50 and not stop_pinging.is_set():
                    stop_pinging.set()
                    thread.join(5)
        finally:
            stop_pinging.set()
            if thread.is_alive():
                thread.join(5)
            result.update(pings=pings, pongs=pongs, pubs=stream.count(pub_line))
            done.set()

    server = fake_server(speak)
    nc = nats_sync.connect(server.url, allow_reconnect=False, connect_timeout=5.0)
    try:
        for _ in range(count):
            nc.publish("load", b"x" * 50)
        nc.flush(timeout=10)
        assert done.wait(20), result
    finally:
        nc.close()
    assert "close" not in result, result["close"]
    assert result["pubs"] == count
    assert result["pings"] >= 50 and result["pongs"] == result["pings"]

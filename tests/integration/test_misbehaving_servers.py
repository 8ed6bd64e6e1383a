"""Fake servers on raw sockets that misbehave before, during and after the handshake.

For each case: the caller (or ``error_cb``) gets a clear error, the client reconnects or
closes as its options say, ``close()`` returns within 2 s, and no ``nats_sync-*`` thread
is left behind (the autouse check in conftest.py).

``test_bad_servers.py`` plays most of these misbehaviours once, with reconnecting off;
here the same servers misbehave on every connection or only on the first one, with
reconnecting on, and calls are left waiting on the connection when it goes bad.

Every fake server runs one bounded thread per accepted connection (socket timeouts,
a stop event, joined at teardown), so a server may keep one client stalled while
answering (or refusing) the next.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import nats_sync

pytestmark = [pytest.mark.timeout(30), pytest.mark.slow]

INFO = (
    b'INFO {"server_id":"fake","version":"2.10.0","max_payload":1048576,'
    b'"headers":true,"proto":1}\r\n'
)
#: How long a fake server's socket call may block, and how long it waits for anything.
PEER_TIMEOUT = 5.0
#: The bound on ``close()`` in every test ("stop at once").
CLOSE_WITHIN = 2.0
#: The bound on waiting for a callback (disconnected, closed, ...).
EVENT_WITHIN = 5.0
#: A reconnect delay that keeps the tests fast.
FAST = {"reconnect_delay_cb": lambda attempt: 0.01}


class Peer:
    """One accepted connection, with a read buffer so nothing read is lost."""

    def __init__(self, conn: socket.socket, index: int, stopping: threading.Event) -> None:
        self.conn = conn
        self.index = index
        self.stopping = stopping
        self.buffer = b""
        conn.settimeout(PEER_TIMEOUT)

    def send(self, data: bytes) -> None:
        self.conn.sendall(data)

    def trickle(self, data: bytes, pause: float = 0.001) -> None:
        """Sends ``data`` one byte at a time."""
        for byte in data:
            if self.stopping.is_set():
                return
            self.conn.sendall(bytes([byte]))
            time.sleep(pause)

    def read_until(self, marker: bytes | re.Pattern[bytes]) -> bytes:
        """Reads until ``marker`` (bytes or a regex) arrives; returns everything up to
        and including it and keeps the rest. Raises OSError on EOF or timeout."""
        deadline = time.monotonic() + PEER_TIMEOUT
        while True:
            if isinstance(marker, bytes):
                at = self.buffer.find(marker)
                end = at + len(marker) if at >= 0 else -1
            else:
                found = marker.search(self.buffer)
                end = found.end() if found else -1
            if end >= 0:
                data, self.buffer = self.buffer[:end], self.buffer[end:]
                return data
            if time.monotonic() > deadline or self.stopping.is_set():
                raise OSError(f"{marker!r} did not arrive; got {self.buffer[-200:]!r}")
            chunk = self.conn.recv(65536)
            if not chunk:
                raise OSError(f"the client closed before {marker!r}; got {self.buffer!r}")
            self.buffer += chunk

    def handshake(self, info: bytes = INFO) -> bytes:
        """INFO, then read CONNECT ... PING and answer PONG; returns what the client sent."""
        self.send(info)
        received = self.read_until(b"PING\r\n")
        self.send(b"PONG\r\n")
        return received

    def read_sub(self, subject: str) -> int:
        """Waits for ``SUB <subject> <sid>``; returns the sid."""
        line = self.read_until(re.compile(rb"SUB " + re.escape(subject.encode()) + rb" (\d+)\r\n"))
        found = re.search(rb" (\d+)\r\n$", line)
        assert found is not None
        return int(found.group(1))

    def drain_until_closed(self, limit: float = PEER_TIMEOUT) -> None:
        """Reads and discards until the client hangs up (or ``limit``, or stop)."""
        deadline = time.monotonic() + limit
        self.conn.settimeout(0.05)
        while time.monotonic() < deadline and not self.stopping.is_set():
            try:
                if not self.conn.recv(65536):
                    return
            except TimeoutError:
                continue

    def answer_pings_until_closed(self, limit: float = PEER_TIMEOUT) -> None:
        """Plays a live server: answers every PING with PONG until the client hangs up."""
        deadline = time.monotonic() + limit
        self.conn.settimeout(0.05)
        while time.monotonic() < deadline and not self.stopping.is_set():
            lines, _, self.buffer = self.buffer.rpartition(b"\r\n")
            pings = (lines + b"\r\n").count(b"PING\r\n")
            if pings:
                self.send(b"PONG\r\n" * pings)
            try:
                chunk = self.conn.recv(65536)
            except TimeoutError:
                continue
            if not chunk:
                return
            self.buffer += chunk

    def idle(self, limit: float = PEER_TIMEOUT) -> None:
        """Reads nothing, sends nothing: waits for the test to end (or ``limit``)."""
        self.stopping.wait(limit)


Script = Callable[[Peer], None]


class MisbehavingServer:
    """A loopback listener; ``script(peer)`` runs on a thread of its own per connection.

    Args:
        script: what to do with each connection (``peer.index`` counts from 0).
        rcvbuf: SO_RCVBUF of accepted sockets (set on the listener before listen), to
            make a server that never reads fill up quickly.
    """

    def __init__(self, script: Script, rcvbuf: int | None = None) -> None:
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf is not None:
            self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(16)
        self._listener.settimeout(0.05)
        self.port: int = self._listener.getsockname()[1]
        self._script = script
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._conns: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        #: Exceptions the scripts raised other than the expected OSError.
        self.failures: list[BaseException] = []
        self._accept_thread = threading.Thread(target=self._accept, name="fake-accept", daemon=True)
        self._accept_thread.start()

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    @property
    def connections(self) -> int:
        with self._lock:
            return len(self._conns)

    def _accept(self) -> None:
        while not self.stopping.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                index = len(self._conns)
                self._conns.append(conn)
                thread = threading.Thread(
                    target=self._run,
                    args=(Peer(conn, index, self.stopping),),
                    name=f"fake-conn-{index}",
                    daemon=True,
                )
                self._threads.append(thread)
            thread.start()

    def _run(self, peer: Peer) -> None:
        try:
            self._script(peer)
        except OSError:
            pass  # the client went away, or the test ended: both are normal here
        except BaseException as err:
            self.failures.append(err)
        finally:  # returning from the script hangs up
            try:
                peer.conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def stop(self) -> None:
        self.stopping.set()
        self._accept_thread.join(PEER_TIMEOUT)
        self._listener.close()
        with self._lock:
            conns, threads = list(self._conns), list(self._threads)
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for thread in threads:
            thread.join(PEER_TIMEOUT)
        for conn in conns:
            conn.close()


class Recorder:
    """Records the client's callbacks; ``options()`` wires them into ``connect``."""

    def __init__(self) -> None:
        self.errors: list[BaseException] = []
        self.closed = threading.Event()
        self.disconnected = threading.Event()
        self.disconnects = 0
        self.reconnects = 0
        self._lock = threading.RLock()  # errors_of() may run inside wait_for()
        self._changed = threading.Condition(self._lock)

    def _error(self, error: BaseException) -> None:
        with self._lock:
            self.errors.append(error)
            self._changed.notify_all()

    def _disconnected(self) -> None:
        with self._lock:
            self.disconnects += 1
            self.disconnected.set()
            self._changed.notify_all()

    def _reconnected(self) -> None:
        with self._lock:
            self.reconnects += 1
            self._changed.notify_all()

    def options(self) -> dict[str, Any]:
        return {
            "error_cb": self._error,
            "closed_cb": self.closed.set,
            "disconnected_cb": self._disconnected,
            "reconnected_cb": self._reconnected,
        }

    def wait_for(
        self, condition: Callable[[Recorder], bool], timeout: float = EVENT_WITHIN
    ) -> bool:
        with self._lock:
            return self._changed.wait_for(lambda: condition(self), timeout)

    def errors_of(self, kind: type[BaseException]) -> list[BaseException]:
        with self._lock:
            return [error for error in self.errors if isinstance(error, kind)]


class Harness:
    """Starts fake servers and clients; closes every client, then every server."""

    def __init__(self) -> None:
        self.servers: list[MisbehavingServer] = []
        self.clients: list[nats_sync.Client] = []

    def serve(self, script: Script, rcvbuf: int | None = None) -> MisbehavingServer:
        server = MisbehavingServer(script, rcvbuf)
        self.servers.append(server)
        return server

    def connect(self, servers: str | list[str], **options: Any) -> nats_sync.Client:
        options.setdefault("connect_timeout", 2.0)
        nc = nats_sync.connect(servers, **options)
        self.clients.append(nc)
        return nc

    def close(self) -> None:
        for nc in self.clients:
            nc.close()
        for server in self.servers:
            server.stop()


@pytest.fixture
def harness() -> Iterator[Harness]:
    made = Harness()
    try:
        yield made
    finally:
        made.close()
    failures = [failure for server in made.servers for failure in server.failures]
    assert failures == [], f"a fake server script failed: {failures}"


def closes_quickly(nc: nats_sync.Client) -> None:
    """close() returns within CLOSE_WITHIN seconds, even when it hangs (bounded join)."""
    done = threading.Event()

    def close() -> None:
        nc.close()
        done.set()

    thread = threading.Thread(target=close, name="test-close", daemon=True)
    thread.start()
    returned = done.wait(CLOSE_WITHIN)
    thread.join(10)  # let a slow close finish, so the leak check is about the library
    assert returned, f"close() did not return within {CLOSE_WITHIN}s"
    assert nc.is_closed


def run_bounded(
    body: Callable[[], None], within: float, name: str = "test-call"
) -> tuple[bool, list[BaseException]]:
    """Runs ``body`` on a thread; returns (finished within ``within``, what it raised)."""
    raised: list[BaseException] = []

    def run() -> None:
        try:
            body()
        except BaseException as err:
            raised.append(err)

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    thread.join(within)
    return not thread.is_alive(), raised


def handshake_then_idle(peer: Peer) -> None:
    peer.handshake()
    peer.idle()


def msg(subject: bytes, sid: int, payload: bytes, reply: bytes = b"") -> bytes:
    middle = b" " + reply if reply else b""
    return b"MSG %s %d%s %d\r\n%s\r\n" % (subject, sid, middle, len(payload), payload)


# --- garbage and unknown ops after the handshake ------------------------------------


def test_garbage_after_an_info_update_makes_the_client_reconnect_every_time(
    harness: Harness,
) -> None:
    """Each connection: a good INFO update, then garbage. The client reports a
    ProtocolError naming the garbage, reconnects (each handshake works), and close()
    ends the loop at once."""

    def script(peer: Peer) -> None:
        peer.handshake()
        update = INFO.replace(b'"proto":1', b'"proto":1,"update":%d' % peer.index)
        peer.send(update + b"HELLO WORLD\r\n")
        peer.drain_until_closed()

    server = harness.serve(script)
    seen = Recorder()
    nc = harness.connect(server.url, max_reconnect_attempts=3, **FAST, **seen.options())
    assert seen.wait_for(lambda r: r.reconnects >= 2), "the client did not reconnect"
    assert server.connections >= 3
    errors = seen.errors_of(nats_sync.ProtocolError)
    assert len(errors) >= 2
    assert all("unknown op" in str(error) and "HELLO" in str(error) for error in errors)
    assert isinstance(nc.last_error, nats_sync.ProtocolError)
    closes_quickly(nc)
    assert seen.closed.wait(EVENT_WITHIN)


def test_ops_before_an_unknown_op_are_delivered_then_the_client_closes(
    harness: Harness,
) -> None:
    def script(peer: Peer) -> None:
        peer.handshake()
        sid = peer.read_sub("orders")
        peer.send(
            msg(b"orders", sid, b"first")
            + msg(b"orders", sid, b"second")
            + b"PING\r\nXYZZY 1 2 3\r\n"
            + msg(b"orders", sid, b"never")
        )
        peer.read_until(b"PONG\r\n")  # the PING before the bad op was answered
        peer.drain_until_closed()

    server = harness.serve(script)
    seen = Recorder()
    nc = harness.connect(server.url, allow_reconnect=False, **seen.options())
    sub = nc.subscribe("orders")
    assert seen.closed.wait(EVENT_WITHIN), "the connection was not dropped"
    assert [m.data for m in sub] == [b"first", b"second"]  # iteration ends at the close
    assert isinstance(nc.last_error, nats_sync.ProtocolError)
    assert "unknown op" in str(nc.last_error) and "XYZZY" in str(nc.last_error)
    assert [type(e) for e in seen.errors] == [nats_sync.ProtocolError]
    assert seen.disconnects == 1
    closes_quickly(nc)


# --- absurd sizes: dropped, then a clean reconnect ------------------------------------


@pytest.mark.parametrize(
    ("bad", "words"),
    [
        (b"MSG a %d 999999999999\r\n", "exceeds the limit"),
        (b"HMSG a %d 12 999999999999\r\n", "exceeds the limit"),
        (b"MSG a %d " + b"9" * 3000 + b"\r\n", "exceeds the limit"),
        (b"MSG a %d -1\r\n", "non-negative integer"),
        (b"HMSG a %d 20 10\r\nNATS/1.0\r\n\r\n", "header size 20 is larger"),
        (b"MSG a %d " + b"9" * 5000, "control line"),
    ],
    ids=["msg-size", "hmsg-size", "3000-digits", "negative", "header-bigger", "no-crlf"],
)
def test_an_absurd_size_drops_the_connection_and_the_next_one_works(
    harness: Harness, bad: bytes, words: str
) -> None:
    """The first connection announces an absurd message: ProtocolError to error_cb and
    last_error, connection dropped. The client reconnects; its subscription is replayed
    on a fresh parser and receives a good message there."""

    def script(peer: Peer) -> None:
        peer.handshake()
        sid = peer.read_sub("sized")
        if peer.index == 0:
            peer.send(bad % sid if b"%d" in bad else bad)
            peer.drain_until_closed()
            return
        peer.send(msg(b"sized", sid, b"fine"))
        peer.answer_pings_until_closed()

    server = harness.serve(script)
    seen = Recorder()
    nc = harness.connect(server.url, max_reconnect_attempts=2, **FAST, **seen.options())
    sub = nc.subscribe("sized")
    assert sub.next_msg(timeout=EVENT_WITHIN).data == b"fine"
    assert seen.wait_for(lambda r: r.reconnects == 1)
    assert seen.disconnects == 1
    errors = seen.errors_of(nats_sync.ProtocolError)
    assert len(errors) == 1 and words in str(errors[0])
    assert isinstance(nc.last_error, nats_sync.ProtocolError)
    assert nc.is_connected and nc.stats["reconnects"] == 1
    assert server.connections == 2
    nc.flush(timeout=EVENT_WITHIN)
    closes_quickly(nc)


# --- a payload shorter than announced, then silence ----------------------------------


def test_a_short_payload_then_silence_leaves_no_call_hanging(harness: Harness) -> None:
    """The server answers the client's flush PING with the start of a message and goes
    silent. The flush and a request time out; calls still waiting when close() comes
    end with ConnectionClosedError."""

    def script(peer: Peer) -> None:
        peer.handshake()
        sid = peer.read_sub("partial")
        peer.read_until(b"PING\r\n")  # the test's flush()
        peer.send(b"MSG partial %d 100\r\nonly a few bytes" % sid)
        peer.idle()

    server = harness.serve(script)
    nc = harness.connect(server.url, allow_reconnect=False)
    sub = nc.subscribe("partial")
    with pytest.raises(nats_sync.FlushTimeoutError):
        nc.flush(timeout=1)
    with pytest.raises(nats_sync.TimeoutError):
        nc.request("partial.svc", b"?", timeout=0.3)
    assert nc.is_connected  # nothing invalid arrived: the client keeps waiting for bytes

    waiting: dict[str, list[BaseException]] = {"flush": [], "next_msg": [], "request": []}
    threads = [
        threading.Thread(target=_collect, args=(waiting["flush"], lambda: nc.flush(30))),
        threading.Thread(
            target=_collect, args=(waiting["next_msg"], lambda: sub.next_msg(timeout=None))
        ),
        threading.Thread(
            target=_collect, args=(waiting["request"], lambda: nc.request("x", b"", timeout=30))
        ),
    ]
    for thread in threads:
        thread.start()
    time.sleep(0.2)  # let them block
    closes_quickly(nc)
    for thread in threads:
        thread.join(CLOSE_WITHIN)
    assert not any(thread.is_alive() for thread in threads), "a call outlived close()"
    for call, raised in waiting.items():
        assert len(raised) == 1 and isinstance(raised[0], nats_sync.ConnectionClosedError), (
            call,
            raised,
        )
    assert sub.pending_msgs == 0  # the partial message was never delivered


def _collect(into: list[BaseException], call: Callable[[], object]) -> None:
    try:
        call()
    except BaseException as err:
        into.append(err)


def test_a_connection_stuck_mid_payload_is_still_found_stale(harness: Harness) -> None:
    def script(peer: Peer) -> None:
        peer.handshake()
        peer.send(b"MSG a 1 100\r\nonly a few bytes")
        peer.idle()

    server = harness.serve(script)
    seen = Recorder()
    nc = harness.connect(
        server.url,
        allow_reconnect=False,
        ping_interval=0.2,
        max_outstanding_pings=2,
        **seen.options(),
    )
    assert seen.closed.wait(EVENT_WITHIN), "the stuck connection was never given up"
    assert seen.errors_of(nats_sync.StaleConnectionError)
    assert isinstance(nc.last_error, nats_sync.StaleConnectionError)
    closes_quickly(nc)


# --- non-UTF-8 in a message's control line ------------------------------------------


@pytest.mark.parametrize(
    ("bad", "words"),
    [
        (b"MSG \xff\xfe %d 2\r\nhi\r\n", "MSG subject is not valid UTF-8"),
        (b"MSG ok %d \xc3\x28 2\r\nhi\r\n", "MSG reply subject is not valid UTF-8"),
        (b"HMSG \xe2\x82 %d 12 14\r\nNATS/1.0\r\n\r\nhi\r\n", "HMSG subject is not valid UTF-8"),
        (b"HMSG ok %d \x80 12 14\r\nNATS/1.0\r\n\r\nhi\r\n", "HMSG reply subject is not valid"),
    ],
    ids=["msg-subject", "msg-reply", "hmsg-subject", "hmsg-reply"],
)
def test_non_utf8_in_a_message_line_is_a_protocol_error(
    harness: Harness, bad: bytes, words: str
) -> None:
    def script(peer: Peer) -> None:
        peer.handshake()
        sid = peer.read_sub(">")
        peer.send(msg(b"ok", sid, b"before") + bad % sid)
        peer.drain_until_closed()

    server = harness.serve(script)
    seen = Recorder()
    nc = harness.connect(server.url, allow_reconnect=False, **seen.options())
    sub = nc.subscribe(">")
    assert seen.closed.wait(EVENT_WITHIN), "the connection was not dropped"
    assert [m.data for m in sub] == [b"before"]
    assert isinstance(nc.last_error, nats_sync.ProtocolError)
    assert words in str(nc.last_error)
    assert any(words in str(e) for e in seen.errors_of(nats_sync.ProtocolError))
    closes_quickly(nc)


# --- bad INFO at connect ---------------------------------------------------------------


@pytest.mark.parametrize(
    "info",
    [
        b"INFO {not json}\r\n",
        b'INFO {"server_id":"fake",\r\n',
        b"INFO [1, 2]\r\n",
        b'INFO "text"\r\n',
        b"INFO\r\n",
        b"INFO " + b"[" * 2000 + b"\r\n",
    ],
    ids=["not-json", "truncated", "array", "string", "empty", "nested"],
)
def test_invalid_info_json_at_connect_raises_a_protocol_error_naming_info(
    harness: Harness, info: bytes
) -> None:
    def script(peer: Peer) -> None:
        peer.send(info)
        peer.drain_until_closed()

    server = harness.serve(script)
    started = time.monotonic()
    with pytest.raises(nats_sync.ProtocolError) as caught:
        harness.connect(server.url, connect_timeout=2.0)
    assert time.monotonic() - started < 2.0  # raised on the bad INFO, not on a timeout
    assert "INFO" in str(caught.value)
    assert str(caught.value).startswith("nats: ")


@pytest.mark.parametrize(
    "max_payload",
    [b'"abc"', b"null", b"1e400", b"[1]", b'{"a":1}'],
    ids=["string", "null", "infinite", "list", "object"],
)
def test_an_info_with_an_unusable_max_payload_is_a_protocol_error(
    harness: Harness, max_payload: bytes
) -> None:
    """INFO is valid JSON but ``max_payload`` is not a number: connect() must raise the
    library's ProtocolError naming the field, not a bare ValueError/TypeError."""

    def script(peer: Peer) -> None:
        peer.handshake(INFO.replace(b"1048576", max_payload))
        peer.drain_until_closed()

    server = harness.serve(script)
    with pytest.raises(nats_sync.Error) as caught:
        harness.connect(server.url)
    assert isinstance(caught.value, nats_sync.ProtocolError), repr(caught.value)
    assert "max_payload" in str(caught.value)


def test_an_unusable_max_payload_while_reconnecting_ends_in_a_clean_close(
    harness: Harness,
) -> None:
    """Only later connections send the bad INFO: the reconnect loop must count them as
    failed attempts and close the client, not die with the client stuck reconnecting."""

    def script(peer: Peer) -> None:
        if peer.index == 0:
            peer.handshake()
            time.sleep(0.1)
            return  # hang up: the client reconnects
        peer.handshake(INFO.replace(b"1048576", b'"abc"'))
        peer.drain_until_closed()

    server = harness.serve(script)
    seen = Recorder()
    nc = harness.connect(server.url, max_reconnect_attempts=2, **FAST, **seen.options())
    assert seen.disconnected.wait(EVENT_WITHIN)
    assert seen.closed.wait(EVENT_WITHIN), (
        f"still {'reconnecting' if nc.is_reconnecting else 'open'} after bad INFOs; "
        f"{server.connections} connections"
    )
    assert server.connections == 3  # the first, then max_reconnect_attempts more
    assert isinstance(nc.last_error, nats_sync.NoServersError)
    closes_quickly(nc)


def test_a_bad_info_server_is_skipped_for_the_next_one(harness: Harness) -> None:
    def bad(peer: Peer) -> None:
        peer.send(b"INFO {oops\r\n")
        peer.drain_until_closed()

    def good(peer: Peer) -> None:
        peer.handshake()
        peer.answer_pings_until_closed()

    first, second = harness.serve(bad), harness.serve(good)
    nc = harness.connect([first.url, second.url], dont_randomize=True)
    assert nc.connected_url == second.url
    nc.flush(timeout=EVENT_WITHIN)
    assert first.connections == 1
    closes_quickly(nc)


# --- INFO that never comes ---------------------------------------------------------------


@pytest.mark.parametrize("how", ["silent", "trickling", "no-pong"])
def test_a_handshake_that_never_finishes_raises_after_connect_timeout(
    harness: Harness, how: str
) -> None:
    """Silence, an INFO trickled too slowly to ever finish (each read gets a byte, so
    only a deadline for the whole handshake ends it), or no PONG to the CONNECT PING:
    connect() raises once connect_timeout is spent."""

    def script(peer: Peer) -> None:
        if how == "trickling":
            peer.trickle(b'INFO {"server_id":"' + b"f" * 400, pause=0.02)
        elif how == "no-pong":
            peer.send(INFO)
            peer.read_until(b"PING\r\n")
        peer.idle()

    server = harness.serve(script)
    started = time.monotonic()
    with pytest.raises(nats_sync.NoServersError) as caught:
        harness.connect(server.url, connect_timeout=0.5)
    assert time.monotonic() - started < 0.5 + 1.5, "connect() overran connect_timeout"
    assert isinstance(caught.value.__cause__, nats_sync.TimeoutError)
    assert server.connections == 1


def test_close_interrupts_a_background_connect_to_a_silent_server(harness: Harness) -> None:
    """retry_on_failed_connect: connect() returns while the reconnect thread waits for
    an INFO that never comes. close() must not wait out connect_timeout."""

    def script(peer: Peer) -> None:
        if peer.index > 0:
            peer.idle()
        # returning hangs up: the first pass fails at once

    server = harness.serve(script)
    seen = Recorder()
    nc = harness.connect(
        server.url, retry_on_failed_connect=True, connect_timeout=3.0, **FAST, **seen.options()
    )
    assert nc.is_reconnecting
    deadline = time.monotonic() + EVENT_WITHIN
    while server.connections < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert server.connections == 2
    time.sleep(0.2)  # the reconnect thread is blocked reading the missing INFO
    closes_quickly(nc)
    assert seen.closed.wait(EVENT_WITHIN)


def test_close_interrupts_a_reconnect_handshake_with_a_silent_server(
    harness: Harness,
) -> None:
    def script(peer: Peer) -> None:
        if peer.index == 0:
            peer.handshake()
            time.sleep(0.1)
            return  # hang up; every later connection hears nothing
        peer.idle()

    server = harness.serve(script)
    seen = Recorder()
    nc = harness.connect(server.url, connect_timeout=3.0, **FAST, **seen.options())
    assert seen.disconnected.wait(EVENT_WITHIN)
    deadline = time.monotonic() + EVENT_WITHIN
    while server.connections < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert server.connections == 2 and nc.is_reconnecting
    time.sleep(0.2)  # the reconnect thread is blocked reading the missing INFO
    closes_quickly(nc)


# --- a server that never reads after the handshake -----------------------------------


def test_publishers_get_outbound_buffer_limit_errors_not_a_hang(harness: Harness) -> None:
    """Four threads publish 60 KB messages to a server that reads nothing: the kernel
    buffers fill, then the outbox (64 KiB); each publisher gets OutboundBufferLimitError
    after flush_timeout instead of blocking forever."""
    server = harness.serve(handshake_then_idle, rcvbuf=16384)
    nc = harness.connect(server.url, pending_size=64 * 1024, flush_timeout=0.5)
    payload = b"x" * 60_000
    outcomes: list[BaseException] = []
    lock = threading.Lock()

    def publish_until_refused() -> None:
        try:
            for _ in range(2_000):  # 120 MB: far more than the buffers hold
                nc.publish("sink", payload)
        except BaseException as err:
            with lock:
                outcomes.append(err)

    threads = [threading.Thread(target=publish_until_refused) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(15)
    hung = [thread for thread in threads if thread.is_alive()]
    if hung:
        nc.close()  # unblock them before failing, so nothing is left behind
    assert not hung, "publish() blocked on a server that never reads"
    assert len(outcomes) == 4
    assert all(isinstance(err, nats_sync.OutboundBufferLimitError) for err in outcomes), outcomes
    assert "pending_size" in str(outcomes[0])
    assert nc.is_connected  # full buffers are back-pressure, not a lost connection
    with pytest.raises(nats_sync.FlushTimeoutError):
        nc.flush(timeout=0.3)
    closes_quickly(nc)


def test_requests_to_a_server_that_never_reads_do_not_block(harness: Harness) -> None:
    """A request is written from the caller's thread when the writer is idle (the
    "direct" path), which it is between blocking requests. Once the server's and the
    kernel's buffers are full, that write must not block the caller forever: like a
    queued publish it must end in OutboundBufferLimitError (or the request's timeout),
    not wait for a server that will never read."""
    server = harness.serve(handshake_then_idle, rcvbuf=16384)
    nc = harness.connect(server.url, pending_size=64 * 1024, flush_timeout=0.5)
    payload = b"r" * 4000  # under the "large payload" threshold (8 KiB): may go direct
    sent = [0]

    def request_until_refused() -> None:
        for _ in range(20_000):  # 80 MB of requests: more than any buffer holds
            try:
                nc.request("svc", payload, timeout=0.001)
            except nats_sync.TimeoutError:
                pass  # nobody answers; the point is whether the write returns
            sent[0] += 1

    finished, raised = run_bounded(request_until_refused, within=8, name="test-requests")
    if not finished:
        nc.close()  # shuts the socket down, which unblocks the stuck caller
    assert finished, (
        f"request() blocked writing to a full socket after {sent[0]} requests; "
        "neither its timeout (1 ms) nor flush_timeout (0.5 s) applied"
    )
    assert len(raised) == 1 and isinstance(raised[0], nats_sync.OutboundBufferLimitError), raised
    closes_quickly(nc)


# --- a server that never answers PING ---------------------------------------------------


def test_a_server_that_never_answers_ping_is_stale_on_every_connection(
    harness: Harness,
) -> None:
    """Each connection answers only the handshake PING. Stale detection reports
    StaleConnectionError, the client reconnects (the handshake works), goes stale again;
    a flush waiting through all this times out; close() ends it at once."""

    def script(peer: Peer) -> None:
        peer.handshake()
        peer.drain_until_closed()

    server = harness.serve(script)
    seen = Recorder()
    nc = harness.connect(
        server.url,
        ping_interval=0.2,
        max_outstanding_pings=2,
        max_reconnect_attempts=2,
        **FAST,
        **seen.options(),
    )
    with pytest.raises(nats_sync.FlushTimeoutError):
        nc.flush(timeout=1)
    assert seen.wait_for(
        lambda r: len(r.errors_of(nats_sync.StaleConnectionError)) >= 2 and r.reconnects >= 1
    )
    assert "PINGs" in str(seen.errors_of(nats_sync.StaleConnectionError)[0])
    assert seen.disconnects >= 2
    assert server.connections >= 2
    closes_quickly(nc)
    assert seen.closed.wait(EVENT_WITHIN)


# --- slowloris --------------------------------------------------------------------------


def test_a_slowloris_server_is_understood_byte_by_byte(harness: Harness) -> None:
    """INFO, PONG, a server PING, MSGs and an HMSG with headers, all one byte at a time:
    the client parses every op, answers the PING, delivers every message intact."""
    answered_ping = threading.Event()

    def script(peer: Peer) -> None:
        peer.trickle(INFO)
        peer.read_until(b"PING\r\n")
        peer.trickle(b"PONG\r\n")
        sid = peer.read_sub("slow")
        headers = b"NATS/1.0\r\nKey: one\r\nKey: two\r\n\r\n"
        peer.trickle(
            b"PING\r\n"
            + msg(b"slow", sid, b"first")
            + msg(b"slow", sid, b"", reply=b"back.here")
            + b"HMSG slow %d %d %d\r\n%s%s\r\n"
            % (sid, len(headers), len(headers) + 4, headers, b"body")
            + msg(b"slow", sid, b"x" * 300)
        )
        peer.read_until(b"PONG\r\n")
        answered_ping.set()
        peer.drain_until_closed()

    server = harness.serve(script)
    seen = Recorder()
    nc = harness.connect(server.url, allow_reconnect=False, connect_timeout=5.0, **seen.options())
    sub = nc.subscribe("slow")
    got = [sub.next_msg(timeout=10) for _ in range(4)]
    assert [m.data for m in got] == [b"first", b"", b"body", b"x" * 300]
    assert got[1].reply == "back.here"
    assert got[2].headers == {"Key": ["one", "two"]}
    assert answered_ping.wait(EVENT_WITHIN), "the trickled PING was not answered"
    assert nc.is_connected and seen.errors == []
    closes_quickly(nc)


# --- a server closing mid-payload ------------------------------------------------------


def test_a_server_closing_mid_payload_then_refusing_ends_in_a_close(harness: Harness) -> None:
    """First connection: close in the middle of a message. Later ones: hang up before
    INFO. disconnected_cb once, max_reconnect_attempts attempts, then the client
    closes; the half message is never delivered."""

    def script(peer: Peer) -> None:
        if peer.index == 0:
            peer.handshake()
            sid = peer.read_sub("half")
            peer.send(b"MSG half %d 100\r\nhalf of it" % sid)
        # returning hangs up: later connections end before INFO

    server = harness.serve(script)
    seen = Recorder()
    nc = harness.connect(server.url, max_reconnect_attempts=2, **FAST, **seen.options())
    sub = nc.subscribe("half")
    assert seen.disconnected.wait(EVENT_WITHIN)
    assert seen.closed.wait(EVENT_WITHIN), "the client did not give up reconnecting"
    assert seen.disconnects == 1 and seen.reconnects == 0
    assert server.connections == 3  # the first, then max_reconnect_attempts attempts
    assert isinstance(nc.last_error, nats_sync.NoServersError)
    assert nc.is_closed
    with pytest.raises(nats_sync.ConnectionClosedError):
        sub.next_msg(timeout=1)
    with pytest.raises(nats_sync.ConnectionClosedError):
        nc.publish("half", b"late")
    closes_quickly(nc)


def test_the_connect_line_is_valid_json(harness: Harness) -> None:
    """Sanity check of the fake handshake itself: what the client sent is a CONNECT with
    a JSON object followed by PING (so the scripts above talk to a real client)."""
    sent: list[bytes] = []

    def script(peer: Peer) -> None:
        sent.append(peer.handshake())
        peer.drain_until_closed()

    server = harness.serve(script)
    nc = harness.connect(server.url, allow_reconnect=False, name="probe")
    closes_quickly(nc)
    assert len(sent) == 1
    line, _, rest = sent[0].partition(b"\r\n")
    assert line.startswith(b"CONNECT ") and rest == b"PING\r\n"
    fields = json.loads(line[len(b"CONNECT ") :])
    assert fields["name"] == "probe" and fields["headers"] is True

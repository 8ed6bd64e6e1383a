"""Fake NATS servers on raw sockets, written to misbehave in bad-input tests."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable
from typing import Any

FakeServerFactory = Callable[[Callable[[socket.socket], None]], "FakeServer"]


class FakeServer:
    """A raw listening socket on loopback; ``handle(conn)`` runs for each client.

    Every accepted socket is closed, and the accept thread joined, at :meth:`stop`.
    """

    def __init__(self, handle: Callable[[socket.socket], None]) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.05)
        self.port: int = self._listener.getsockname()[1]
        self._handle = handle
        self._stop = threading.Event()
        self._accepted: list[socket.socket] = []
        self.connections = 0
        self._thread = threading.Thread(target=self._serve, name="fake-nats-server", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.settimeout(5.0)
            self._accepted.append(conn)
            self.connections += 1
            try:
                self._handle(conn)
            except OSError:
                pass

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5.0)
        self._listener.close()
        for conn in self._accepted:
            conn.close()


def info_line(**extra: Any) -> bytes:
    info = {
        "server_id": "FAKE",
        "version": "2.10.0",
        "proto": 1,
        "host": "127.0.0.1",
        "port": 4222,
        "headers": True,
        "max_payload": 1048576,
        "client_id": 1,
        **extra,
    }
    return b"INFO " + json.dumps(info).encode() + b"\r\n"


def read_until(conn: socket.socket, marker: bytes) -> bytes:
    """Reads until ``marker`` has arrived or the client hung up; returns everything read.

    Raises:
        OSError: a read failed or timed out (the same type), its message ending with
            what was read before it, which would otherwise be lost with the raise.
    """
    data = b""
    while marker not in data:
        try:
            chunk = conn.recv(4096)
        except OSError as err:
            raise type(err)(f"{err} before {marker!r} arrived; read: {data[-200:]!r}") from err
        if not chunk:
            break
        data += chunk
    return data


# The names test_connect.py has always used.
_info_line = info_line
_read_until = read_until


def handshake(conn: socket.socket, **info: Any) -> bytes:
    """Plays a well-behaved server up to the client's first PONG; returns what it sent."""
    conn.sendall(info_line(**info))
    received = read_until(conn, b"PING\r\n")
    conn.sendall(b"PONG\r\n")
    return received


class RecordingProxy:
    """A TCP proxy in front of a real server's port that records the head of each
    connection's first request (an HTTP upgrade: request line and headers) and then
    forwards everything both ways.

    With ``require`` (a header line such as ``b"authorization: bearer x"``, compared in
    lower case), a request without it is answered ``401 Unauthorized`` and closed, as an
    authenticating proxy does. Every socket is closed, and every thread joined, at
    :meth:`stop`.
    """

    def __init__(self, target_port: int, require: bytes | None = None) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.05)
        self.port: int = self._listener.getsockname()[1]
        self._target_port = target_port
        self._require = require.lower() if require is not None else None
        self._stop = threading.Event()
        self._sockets: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        #: The head of each request, in order (bytes up to the blank line).
        self.requests: list[bytes] = []
        self._start(self._serve, "recording-proxy")

    def _start(self, target: Callable[[], None], name: str) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        with self._lock:
            self._threads.append(thread)
        thread.start()

    def _keep(self, sock: socket.socket) -> socket.socket:
        with self._lock:
            self._sockets.append(sock)
        return sock

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self._keep(conn).settimeout(5.0)
            self._start(self._proxy_of(conn), "recording-proxy-conn")

    def _proxy_of(self, conn: socket.socket) -> Callable[[], None]:
        return lambda: self._proxy(conn)

    def _proxy(self, conn: socket.socket) -> None:
        try:
            data = read_until(conn, b"\r\n\r\n")
            head, _, rest = data.partition(b"\r\n\r\n")
            with self._lock:
                self.requests.append(head)
            lines = [line.lower() for line in head.split(b"\r\n")]
            if self._require is not None and self._require not in lines:
                conn.sendall(b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n")
                conn.close()
                return
            upstream = self._keep(socket.create_connection(("127.0.0.1", self._target_port)))
            upstream.sendall(head + b"\r\n\r\n" + rest)
            conn.settimeout(None)
            self._start(lambda: self._pipe(upstream, conn), "recording-proxy-down")
            self._pipe(conn, upstream)
        except OSError:
            conn.close()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while chunk := source.recv(65536):
                sink.sendall(chunk)
        except OSError:
            pass
        for sock in (source, sink):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def stop(self) -> None:
        self._stop.set()
        self._listener.close()
        with self._lock:
            sockets, threads = list(self._sockets), list(self._threads)
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()
        for thread in threads:
            thread.join(5.0)

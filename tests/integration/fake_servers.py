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
    data = b""
    while marker not in data:
        chunk = conn.recv(4096)
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

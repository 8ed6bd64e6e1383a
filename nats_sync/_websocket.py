"""WebSocket framing under the NATS byte stream, for ``ws://`` and ``wss://`` servers.

How it works: :class:`WebSocket` wraps a client-side ``wsproto`` connection and does no
I/O: the transport sends the bytes it returns and feeds it the bytes it reads (through
TLS, if any). Outgoing NATS bytes go out as one binary message per write; incoming
binary (or text) messages are the NATS stream, copied out in pieces of any size, so a
message larger than the reader's buffer is kept for the next read. Pings are answered
with pongs and a close frame with a close frame, queued as "control" bytes for the
transport to send; a close frame (or the end of the stream) is the end of the data.

Threads: the reader thread feeds bytes, takes data and queues control frames; the
writer thread (or a direct-send caller) frames messages; either may take the queued
control frames. ``_lock`` guards the wsproto connection and both queues; it is held only
for memory work, never across a syscall.
"""

from __future__ import annotations

import threading
from collections import deque

from wsproto import ConnectionType, WSConnection
from wsproto.connection import ConnectionState
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Ping,
    RejectConnection,
    Request,
    TextMessage,
)
from wsproto.utilities import ProtocolError as WsProtocolError

from nats_sync.errors import NatsConnectionError

Buffer = bytes | memoryview


class WebSocket:
    """The client end of one WebSocket connection, sans I/O.

    Args:
        host: the ``Host`` header of the upgrade request (``host[:port]``).
        target: the request path.
    """

    __slots__ = (
        "_closed", "_conn", "_control", "_data", "_host", "_lock", "_open", "_request",
    )

    def __init__(self, host: str, target: str = "/") -> None:
        self._host = host
        self._conn = WSConnection(ConnectionType.CLIENT)
        self._lock = threading.Lock()
        self._data: deque[memoryview] = deque()  # received stream bytes not yet taken
        self._control = bytearray()  # pong and close frames waiting to be sent
        self._open = False
        self._closed = False
        self._request = self._conn.send(Request(host=host, target=target))

    # -- the upgrade (before the connection threads exist) ------------------------------

    def upgrade_request(self) -> bytes:
        """The HTTP/1.1 ``Upgrade: websocket`` request to send first."""
        return self._request

    def receive_upgrade(self, data: bytes) -> bool:
        """Feeds the server's answer to the upgrade; returns True once it is accepted.

        Bytes that follow the ``101`` answer (the server's INFO) are kept as data.

        Raises:
            NatsConnectionError: the server answered with another status (the status is
                in the message) or with a malformed or non-WebSocket answer.
        """
        with self._lock:
            try:
                self._conn.receive_data(data)
            except WsProtocolError as err:
                raise NatsConnectionError(
                    f"bad answer to the WebSocket upgrade from {self._host}: {err}"
                ) from None
            return self._process_events()

    # -- the open connection --------------------------------------------------------------

    def receive(self, data: bytes | None) -> None:
        """Feeds bytes read from the server (``None``: the stream ended). Reader thread."""
        with self._lock:
            if self._closed:
                return
            try:
                self._conn.receive_data(data)
            except WsProtocolError:
                self._closed = True  # data after the close: nothing more to read
                return
            self._process_events()

    def _process_events(self) -> bool:
        """Sorts the pending events into data and control frames; under ``_lock``."""
        for event in self._conn.events():
            if isinstance(event, BytesMessage):
                self._data.append(memoryview(event.data))
            elif isinstance(event, TextMessage):
                self._data.append(memoryview(event.data.encode()))
            elif isinstance(event, Ping):
                self._control += self._conn.send(event.response())
            elif isinstance(event, CloseConnection):
                self._closed = True
                if self._conn.state in (ConnectionState.OPEN, ConnectionState.REMOTE_CLOSING):
                    self._control += self._conn.send(event.response())
            elif isinstance(event, AcceptConnection):
                self._open = True
            elif isinstance(event, RejectConnection):
                raise NatsConnectionError(
                    f"{self._host} answered the WebSocket upgrade with HTTP "
                    f"{event.status_code} instead of 101 Switching Protocols"
                )
        return self._open

    def read_into(self, buffer: bytearray | memoryview) -> int:
        """Copies received stream bytes into ``buffer``; returns the count (0: none yet)."""
        count = 0
        size = len(buffer)
        with self._lock:
            data = self._data
            while data and count < size:
                chunk = data[0]
                taken = min(len(chunk), size - count)
                buffer[count:count + taken] = chunk[:taken]
                count += taken
                if taken == len(chunk):
                    data.popleft()
                else:
                    data[0] = chunk[taken:]
        return count

    @property
    def closed(self) -> bool:
        """Whether the server closed the WebSocket (or the stream ended)."""
        return self._closed

    def message(self, data: Buffer) -> bytes:
        """The bytes of one binary message carrying ``data``.

        Raises:
            NatsConnectionError: the WebSocket is closing or closed.
        """
        with self._lock:
            try:
                return self._conn.send(BytesMessage(data=bytes(data)))
            except WsProtocolError:
                raise NatsConnectionError("the server closed the WebSocket") from None

    @property
    def has_control(self) -> bool:
        """Whether control frames wait to be sent."""
        return bool(self._control)

    def take_control(self) -> bytes:
        """The queued control frames, removed from the queue."""
        with self._lock:
            control = bytes(self._control)
            self._control.clear()
        return control

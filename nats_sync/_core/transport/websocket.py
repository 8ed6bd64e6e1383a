"""WebSocket under the NATS byte stream, for ``ws://`` and ``wss://`` servers.

How it works: :class:`WebSocket` wraps a client-side ``wsproto`` connection and does no
I/O: :class:`WebSocketStream` sends the bytes it returns and feeds it the bytes it reads
from the stream below (TCP, or TLS over TCP for ``wss://``). Outgoing NATS bytes go out
as one binary message per write; incoming binary (or text) messages are the NATS stream,
copied out in pieces of any size, so a message larger than the reader's buffer is kept
for the next read. Pings are answered with pongs and a close frame with a close frame,
queued as "control" bytes to send; a close frame (or the end of the stream) is the end
of the data.

Threads: the connecting thread runs the upgrade (:meth:`WebSocketStream.open`) alone.
Then the reader thread feeds bytes, takes data and queues control frames; the writer
thread frames messages (direct sends from callers' threads are TCP-only); either may
send the queued control frames. :class:`WebSocket`'s ``_lock`` guards the wsproto
connection and both queues; it is held only for memory work, never across a syscall.
The stream's ``_frame_lock`` keeps whole frames of the writer and of the reader
(pongs, the close answer) from interleaving on the stream below; the reader only takes
it if it is free, and whoever releases it sends what was queued meanwhile, so the
reader never waits on a blocked writer.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Sequence

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

from nats_sync import _defaults as d
from nats_sync._core.transport.streams import Buffer, Transport
from nats_sync._defaults import MAX_IOVECS_PER_SEND
from nats_sync.errors import Error, NatsConnectionError, TimeoutError


class WebSocket:
    """The client end of one WebSocket connection, sans I/O.

    Args:
        host: the ``Host`` header of the upgrade request (``host[:port]``).
        target: the request path.
        headers: extra (name, value) headers of the upgrade request, in order
            (``ws_connection_headers``, checked by the options).
    """

    __slots__ = (
        "_closed",
        "_conn",
        "_control",
        "_data",
        "_host",
        "_lock",
        "_open",
        "_request",
    )

    def __init__(
        self, host: str, target: str = "/", headers: Sequence[tuple[str, str]] = ()
    ) -> None:
        self._host = host
        self._conn = WSConnection(ConnectionType.CLIENT)
        self._lock = threading.Lock()
        self._data: deque[memoryview] = deque()  # received stream bytes not yet taken
        self._control = bytearray()  # pong and close frames waiting to be sent
        self._open = False
        self._closed = False
        extra = [(name.encode(), value.encode()) for name, value in headers]
        self._request = self._conn.send(Request(host=host, target=target, extra_headers=extra))

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
                buffer[count : count + taken] = chunk[:taken]
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


class WebSocketStream:
    """NATS bytes in WebSocket messages over another stream.

    Made by :meth:`open`, which runs the HTTP upgrade.

    Args:
        inner: the stream the frames travel on.
        ws: the upgraded WebSocket (it may already hold data that followed the ``101``).
    """

    __slots__ = ("_frame_lock", "_inner", "_ws")

    def __init__(self, inner: Transport, ws: WebSocket) -> None:
        self._inner = inner
        self._ws = ws
        self._frame_lock = threading.Lock()

    @classmethod
    def open(
        cls,
        inner: Transport,
        host: str,
        deadline: float,
        target: str = "/",
        headers: Sequence[tuple[str, str]] = (),
    ) -> WebSocketStream:
        """Runs the WebSocket upgrade over ``inner``, before the connection threads.

        Args:
            inner: the stream to carry the frames (its owner is now the returned stream).
            host: the ``Host`` header (``host[:port]``).
            deadline: ``time.monotonic()`` by which the server must have accepted.
            target: the request path.
            headers: extra (name, value) headers of the upgrade request
                (``ws_connection_headers``: e.g. what an authenticating proxy checks).

        Raises:
            NatsConnectionError: the server refused the upgrade (its HTTP status is in
                the message), answered something that is not WebSocket, or closed.
            TimeoutError: the server did not accept by ``deadline``.
        """
        ws = WebSocket(host, target, headers)
        inner.send_all(ws.upgrade_request())
        buffer = bytearray(d.WEBSOCKET_UPGRADE_READ_SIZE)
        head = b""  # the start of the answer, to show when it is not HTTP
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"WebSocket upgrade with {host} took too long")
            inner.set_timeout(remaining)
            try:
                count = inner.recv_into(buffer)
            except TimeoutError:
                raise TimeoutError(f"WebSocket upgrade with {host} took too long") from None
            if count == 0:
                sent = f" after sending {head!r}" if head else ""
                raise NatsConnectionError(
                    f"{host} closed the connection during the WebSocket upgrade{sent}"
                )
            data = bytes(buffer[:count])
            head = head or data[:40]
            if ws.receive_upgrade(data):
                return cls(inner, ws)

    def recv_into(self, buffer: bytearray | memoryview) -> int:
        """Message data into ``buffer``; 0 once the server closed the WebSocket.

        See :meth:`~nats_sync._core.transport.streams.Transport.recv_into`.
        """
        ws = self._ws
        while True:
            count = ws.read_into(buffer)
            if count or ws.closed:
                return count
            # Nothing is pending, so the buffer is free to take the raw bytes first.
            received = self._inner.recv_into(buffer)
            ws.receive(bytes(buffer[:received]) if received else None)
            if ws.has_control:
                self._send_control()

    def send(self, buffers: Sequence[Buffer]) -> int:
        """Sends the front of ``buffers`` as one binary message; returns its size.

        See :meth:`~nats_sync._core.transport.streams.Transport.send`.
        """
        data = buffers[0] if len(buffers) == 1 else b"".join(buffers[:MAX_IOVECS_PER_SEND])
        self.send_all(data)
        return len(data)

    def send_all(self, data: Buffer) -> None:
        """Sends ``data`` as one binary message, then any control frames queued meanwhile.

        See :meth:`~nats_sync._core.transport.streams.Transport.send_all`.
        """
        message = self._ws.message(data)
        with self._frame_lock:
            self._inner.send_all(message)
        if self._ws.has_control:
            try:
                self._send_control()
            except Error:
                pass  # the message went out; the next read or write reports the failure

    def _send_control(self) -> None:
        """Sends queued pongs or the close answer unless another thread is sending.

        The thread that holds ``_frame_lock`` checks the queue again after releasing
        it, so nothing queued is left behind.
        """
        ws = self._ws
        while ws.has_control and self._frame_lock.acquire(blocking=False):
            try:
                control = ws.take_control()
                if control:
                    self._inner.send_all(control)
            finally:
                self._frame_lock.release()

    def set_timeout(self, timeout: float | None) -> None:
        """See :meth:`~nats_sync._core.transport.streams.Transport.set_timeout`."""
        self._inner.set_timeout(timeout)

    def shutdown(self) -> None:
        """See :meth:`~nats_sync._core.transport.streams.Transport.shutdown`."""
        self._inner.shutdown()

    def close(self) -> None:
        """See :meth:`~nats_sync._core.transport.streams.Transport.close`."""
        self._inner.close()

"""The byte stream under a connection: TCP, optionally TLS, optionally WebSocket on top.

How it works: a :class:`Transport` wraps one connected socket. The reader thread is the
only caller of :meth:`Transport.recv_into`, the writer thread (or a caller holding the
outbox's ``sending`` flag) the only caller of :meth:`Transport.send`;
:meth:`Transport.close` may come from any thread and wakes both (``shutdown`` first, so
a thread blocked in a syscall returns). ``OSError``, ``ssl`` errors and timeouts are
turned into package errors here and nowhere else.

TLS runs on an ``ssl.SSLObject`` over memory BIOs, with our own socket I/O, rather than
an ``SSLSocket``: an OpenSSL connection object must not be used by two threads at
once, and here one thread reads while another writes. ``_tls_lock`` guards the
SSLObject and its BIOs (held only for memory work, never across a syscall);
``_send_lock`` keeps the encrypted records of the writer and of the reader (TLS may
need to answer while reading) from interleaving on the socket.

WebSocket (``ws://``, ``wss://``) is a layer over that stream (so over TLS for
``wss://``): :meth:`Transport.start_websocket` runs the HTTP upgrade before the threads
start; then each :meth:`Transport.send` is one binary message, and
:meth:`Transport.recv_into` reads the stream, feeds the sans-IO
:class:`~nats_sync._websocket.WebSocket` (which has a lock of its own, held only for
memory work) and copies out the message data. ``_frame_lock`` keeps whole frames of the
writer and of the reader (pongs, the close answer) from interleaving on the stream; the
reader only takes it if it is free, and whoever releases it sends what was queued
meanwhile, so the reader never waits on a blocked writer.
"""

from __future__ import annotations

import builtins
import socket
import ssl
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from nats_sync._defaults import MAX_IOVECS_PER_SEND
from nats_sync.errors import Error, NatsConnectionError, SecureConnFailedError, TimeoutError

if TYPE_CHECKING:
    from nats_sync._websocket import WebSocket

_TLS_READ_SIZE = 256 * 1024
_UPGRADE_READ_SIZE = 4096

Buffer = bytes | memoryview


class Transport:
    """A connected TCP socket with the calls the connection threads need.

    Args:
        sock: a connected, blocking socket.
    """

    __slots__ = (
        "_closed", "_frame_lock", "_incoming", "_outgoing", "_send_lock", "_sock", "_tls",
        "_tls_lock", "_ws",
    )

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._closed = False
        self._tls: ssl.SSLObject | None = None
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._tls_lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._ws: WebSocket | None = None
        self._frame_lock = threading.Lock()

    @property
    def is_tls(self) -> bool:
        """Whether the stream is encrypted."""
        return self._tls is not None

    @property
    def is_websocket(self) -> bool:
        """Whether NATS runs over WebSocket messages on this stream."""
        return self._ws is not None

    def start_tls(self, context: ssl.SSLContext, server_hostname: str, deadline: float) -> None:
        """Runs the TLS handshake on this socket before the connection threads start.

        Raises:
            SecureConnFailedError: the handshake failed (the ssl reason is in the
                message), e.g. an untrusted or expired certificate or a wrong host name.
            TimeoutError: the handshake did not finish by ``deadline``.
            NatsConnectionError: the socket failed.
        """
        try:
            tls = context.wrap_bio(
                self._incoming, self._outgoing, server_side=False,
                server_hostname=server_hostname,
            )
        except (ValueError, ssl.SSLError) as err:
            raise SecureConnFailedError(f"cannot start TLS with {server_hostname}: {err}") from err
        while True:
            try:
                tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                self._flush_tls_output()
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"TLS handshake with {server_hostname} took too long"
                                       ) from None
                self._sock.settimeout(remaining)
                data = self._raw_recv(_TLS_READ_SIZE)
                if not data:
                    raise SecureConnFailedError(
                        f"{server_hostname} closed the connection during the TLS handshake"
                    ) from None
                self._incoming.write(data)
            except ssl.SSLCertVerificationError as err:
                raise SecureConnFailedError(
                    f"TLS certificate of {server_hostname} rejected: {err.verify_message}"
                ) from None
            except ssl.SSLError as err:
                raise SecureConnFailedError(
                    f"TLS handshake with {server_hostname} failed: {err.reason or err}"
                ) from None
        self._flush_tls_output()
        self._tls = tls

    def start_websocket(self, host: str, deadline: float, target: str = "/") -> None:
        """Runs the WebSocket upgrade (after TLS, if any) before the connection threads.

        Args:
            host: the ``Host`` header (``host[:port]``).
            deadline: ``time.monotonic()`` by which the server must have accepted.
            target: the request path.

        Raises:
            NatsConnectionError: the server refused the upgrade (its HTTP status is in
                the message), answered something that is not WebSocket, or closed.
            TimeoutError: the server did not accept by ``deadline``.
        """
        # wsproto is an optional extra: imported only when a ws:// server is used.
        from nats_sync._websocket import WebSocket  # noqa: PLC0415

        ws = WebSocket(host, target)
        self._stream_send_all(ws.upgrade_request())
        buffer = bytearray(_UPGRADE_READ_SIZE)
        head = b""  # the start of the answer, to show when it is not HTTP
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"WebSocket upgrade with {host} took too long")
            self._sock.settimeout(remaining)
            try:
                count = self._stream_recv_into(buffer)
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
                break
        self._ws = ws

    def _raw_recv(self, size: int) -> bytes:
        try:
            return self._sock.recv(size)
        except builtins.TimeoutError:
            raise TimeoutError("no data from the server in time") from None
        except OSError as err:
            raise NatsConnectionError(f"read failed: {err}") from err

    def _flush_tls_output(self) -> None:
        """Sends whatever TLS has written to the outgoing BIO."""
        with self._send_lock:
            with self._tls_lock:
                data = self._outgoing.read()
            if data:
                self._raw_send_all(data)

    def _raw_send_all(self, data: bytes) -> None:
        try:
            self._sock.sendall(data)
        except builtins.TimeoutError:
            raise TimeoutError("the server did not take our data in time") from None
        except OSError as err:
            raise NatsConnectionError(f"write failed: {err}") from err

    @classmethod
    def open_tcp(cls, host: str, port: int, timeout: float) -> Transport:
        """Connects to ``host:port`` within ``timeout`` seconds.

        Raises:
            TimeoutError: the connection was not made in time.
            NatsConnectionError: the connection was refused or could not be made.
        """
        try:
            sock = socket.create_connection((host, port), timeout=timeout)
        except builtins.TimeoutError:
            raise TimeoutError(f"connecting to {host}:{port} took over {timeout}s") from None
        except OSError as err:
            raise NatsConnectionError(f"cannot connect to {host}:{port}: {err}") from err
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return cls(sock)

    def set_timeout(self, timeout: float | None) -> None:
        """Sets the timeout of blocking calls (None: block; used after the handshake)."""
        self._sock.settimeout(timeout)

    def recv_into(self, buffer: bytearray | memoryview) -> int:
        """Reads what is available into ``buffer``; returns 0 at end of stream.

        Raises:
            TimeoutError: nothing arrived within the socket timeout.
            NatsConnectionError: the socket failed.
        """
        if self._ws is not None:
            return self._ws_recv_into(self._ws, buffer)
        return self._stream_recv_into(buffer)

    def fileno(self) -> int:
        """The socket's file descriptor (to wait for it with ``poll``)."""
        return self._sock.fileno()

    def recv_into_nowait(self, buffer: bytearray | memoryview) -> int | None:
        """Plain TCP only: what is available now into ``buffer``; None when nothing is.

        Returns 0 at end of stream.

        Raises:
            NatsConnectionError: the socket failed.
        """
        try:
            return self._sock.recv_into(buffer, 0, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return None
        except OSError as err:
            raise NatsConnectionError(f"read failed: {err}") from err

    def _ws_recv_into(self, ws: WebSocket, buffer: bytearray | memoryview) -> int:
        """Message data into ``buffer``; 0 once the server closed the WebSocket."""
        while True:
            count = ws.read_into(buffer)
            if count or ws.closed:
                return count
            # Nothing is pending, so the buffer is free to take the raw bytes first.
            received = self._stream_recv_into(buffer)
            ws.receive(bytes(buffer[:received]) if received else None)
            if ws.has_control:
                self._send_ws_control(ws)

    def _stream_recv_into(self, buffer: bytearray | memoryview) -> int:
        """Reads the stream under any WebSocket layer: TCP, or TLS over it."""
        if self._tls is not None:
            return self._tls_recv_into(self._tls, buffer)
        try:
            return self._sock.recv_into(buffer)
        except builtins.TimeoutError:
            raise TimeoutError("no data from the server in time") from None
        except OSError as err:
            raise NatsConnectionError(f"read failed: {err}") from err

    def _tls_recv_into(self, tls: ssl.SSLObject, buffer: bytearray | memoryview) -> int:
        while True:
            try:
                with self._tls_lock:
                    # With a buffer, SSLObject.read fills it and returns the count.
                    count: int = tls.read(len(buffer), buffer)  # type: ignore[assignment]
            except ssl.SSLWantReadError:
                pass
            except ssl.SSLZeroReturnError:
                return 0  # the server closed TLS cleanly
            except ssl.SSLError as err:
                raise NatsConnectionError(f"TLS read failed: {err.reason or err}") from None
            else:
                if self._outgoing.pending:
                    self._flush_tls_output()
                return count
            if self._outgoing.pending:
                self._flush_tls_output()
            data = self._raw_recv(_TLS_READ_SIZE)
            if not data:
                return 0
            with self._tls_lock:
                self._incoming.write(data)

    def send(self, buffers: Sequence[Buffer]) -> int:
        """Sends from the front of ``buffers`` with one syscall; returns bytes sent.

        Raises:
            NatsConnectionError: the socket failed or was closed.
        """
        if self._ws is not None:
            data = buffers[0] if len(buffers) == 1 else b"".join(buffers[:MAX_IOVECS_PER_SEND])
            self._ws_send(self._ws, data)
            return len(data)
        if self._tls is not None:
            return self._tls_send(self._tls, buffers)
        try:
            if len(buffers) == 1:
                return self._sock.send(buffers[0])
            return self._sock.sendmsg(buffers[:MAX_IOVECS_PER_SEND])
        except OSError as err:
            raise NatsConnectionError(f"write failed: {err}") from err

    def _tls_send(self, tls: ssl.SSLObject, buffers: Sequence[Buffer]) -> int:
        """Encrypts the buffers and sends every resulting record; returns bytes taken."""
        data = buffers[0] if len(buffers) == 1 else b"".join(buffers[:MAX_IOVECS_PER_SEND])
        with self._send_lock:
            try:
                with self._tls_lock:
                    count = tls.write(data)
                    records = self._outgoing.read()
            except ssl.SSLError as err:
                raise NatsConnectionError(f"TLS write failed: {err.reason or err}") from None
            self._raw_send_all(records)
        return count

    def send_nowait(self, data: bytes) -> int:
        """Plain TCP only: sends what the socket takes without blocking; returns it.

        Raises:
            NatsConnectionError: the socket failed or was closed.
        """
        try:
            return self._sock.send(data, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return 0  # the kernel buffer is full: the writer thread will wait instead
        except OSError as err:
            raise NatsConnectionError(f"write failed: {err}") from err

    def send_all(self, data: bytes) -> None:
        """Sends all of ``data`` (the handshake, and direct sends of one message)."""
        if self._ws is not None:
            self._ws_send(self._ws, data)
            return
        self._stream_send_all(data)

    def _ws_send(self, ws: WebSocket, data: Buffer) -> None:
        """Sends ``data`` as one binary message, then any control frames queued meanwhile."""
        message = ws.message(data)
        with self._frame_lock:
            self._stream_send_all(message)
        if ws.has_control:
            try:
                self._send_ws_control(ws)
            except Error:
                pass  # the message went out; the next read or write reports the failure

    def _send_ws_control(self, ws: WebSocket) -> None:
        """Sends queued pongs or the close answer unless another thread is sending.

        The thread that holds ``_frame_lock`` checks the queue again after releasing
        it, so nothing queued is left behind.
        """
        while ws.has_control and self._frame_lock.acquire(blocking=False):
            try:
                control = ws.take_control()
                if control:
                    self._stream_send_all(control)
            finally:
                self._frame_lock.release()

    def _stream_send_all(self, data: Buffer) -> None:
        """Sends all of ``data`` on the stream under any WebSocket layer."""
        if self._tls is not None:
            view = memoryview(data)
            while view:
                view = view[self._tls_send(self._tls, [view]):]
            return
        try:
            self._sock.sendall(data)
        except builtins.TimeoutError:
            raise TimeoutError("the server did not take our data in time") from None
        except OSError as err:
            raise NatsConnectionError(f"write failed: {err}") from err

    def shutdown(self) -> None:
        """Ends the stream both ways, waking any thread blocked on it. Any thread."""
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass  # already disconnected: nothing left to wake

    def close(self) -> None:
        """Shuts down and releases the socket. Idempotent.

        Call it once the reader and writer threads are done with the socket: a file
        descriptor closed under a thread still using it could be reused by another.
        """
        if self._closed:
            return
        self._closed = True
        self.shutdown()
        self._sock.close()

    @property
    def is_closed(self) -> bool:
        """Whether :meth:`close` has been called."""
        return self._closed

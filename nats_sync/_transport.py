"""The byte stream under a connection: TCP today; TLS and WebSocket plug in here.

How it works: a :class:`Transport` wraps one connected socket. The reader thread is the
only caller of :meth:`Transport.recv_into`, the writer thread the only caller of
:meth:`Transport.send`; :meth:`Transport.close` may come from any thread and wakes both
(``shutdown`` first, so a thread blocked in a syscall returns). ``OSError`` and timeouts
are turned into package errors here and nowhere else.
"""

from __future__ import annotations

import builtins
import socket
from collections.abc import Sequence

from nats_sync._defaults import MAX_IOVECS_PER_SEND
from nats_sync.errors import NatsConnectionError, TimeoutError

Buffer = bytes | memoryview


class Transport:
    """A connected TCP socket with the calls the connection threads need.

    Args:
        sock: a connected, blocking socket.
    """

    __slots__ = ("_closed", "_sock")

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._closed = False

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
        try:
            return self._sock.recv_into(buffer)
        except builtins.TimeoutError:
            raise TimeoutError("no data from the server in time") from None
        except OSError as err:
            raise NatsConnectionError(f"read failed: {err}") from err

    def send(self, buffers: Sequence[Buffer]) -> int:
        """Sends from the front of ``buffers`` with one syscall; returns bytes sent.

        Raises:
            NatsConnectionError: the socket failed or was closed.
        """
        try:
            if len(buffers) == 1:
                return self._sock.send(buffers[0])
            return self._sock.sendmsg(buffers[:MAX_IOVECS_PER_SEND])
        except OSError as err:
            raise NatsConnectionError(f"write failed: {err}") from err

    def send_all(self, data: bytes) -> None:
        """Sends all of ``data`` (used by the handshake, before the threads run)."""
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

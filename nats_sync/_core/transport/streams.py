"""The byte streams under a connection, stacked: TCP, TLS over a stream, WebSocket over one.

How it works: the handshake (``handshake.py``) builds one stack per connection,
from the bottom up: a :class:`TcpStream`; a :class:`TlsStream` over it for ``tls://``, TLS-first,
a server that requires TLS or ``wss://``; a
:class:`~nats_sync._core.transport.websocket.WebSocketStream` over either for ``ws://`` and ``wss://``.
The connection holds the top of the stack and calls it through the small
:class:`Transport` interface, never asking what it is; only the non-blocking calls
(:meth:`TcpStream.send_nowait`, :meth:`TcpStream.recv_into_nowait`,
:meth:`TcpStream.fileno`) are the TCP stream's own, so the connection uses them only
when it holds one. Each upper stream owns the stream below it: ``shutdown`` and
``close`` go down to the socket, ``set_timeout`` sets the socket's timeout.

Threads: the connecting thread (the caller of ``connect()``, later the reconnect thread)
builds and handshakes the stack alone, before any connection thread exists. Then the
reader thread is the only caller of ``recv_into``, and the writer thread (or a caller
holding the outbox's ``sending`` flag) the only caller of ``send``; the two run at the
same time. On a plain TCP stream a blocking requester may call ``recv_into_nowait``
while it holds the connection's read token instead of the reader. ``shutdown`` may come
from any thread, at any time, and wakes threads blocked in a syscall; ``close`` may come
from any thread once the reader and writer are done with the socket.

TLS runs on an ``ssl.SSLObject`` over memory BIOs, with our own I/O on the stream below,
rather than an ``SSLSocket``: an OpenSSL connection object must not be used by two
threads at once, and here one thread reads while another writes. ``_tls_lock`` guards
the SSLObject and its BIOs (held only for memory work, never across a syscall);
``_send_lock`` keeps the encrypted records of the writer and of the reader (TLS may need
to answer while reading) from interleaving on the stream below.

Errors: :func:`os_error` turns an ``OSError`` (a socket timeout, a reset, an ``ssl``
error) into the package's error and is the only place that does; each stream catches
``OSError`` only around its own syscalls or ``ssl`` calls, and what the stream below
raises is already a package error.
"""

from __future__ import annotations

import _socket
import builtins
import random
import socket
import ssl
import threading
import time
from collections.abc import Sequence
from typing import Protocol

from nats_sync import _defaults as d
from nats_sync._core.transport.greenlets import threads_are_greenlets
from nats_sync._defaults import MAX_IOVECS_PER_SEND
from nats_sync.errors import Error, NatsConnectionError, SecureConnFailedError, TimeoutError

#: What a stream sends: bytes, or a view of them (a large payload is never copied).
Buffer = bytes | memoryview


def os_error(err: OSError, action: str) -> Error:
    """The package error for an ``OSError`` raised while doing ``action``.

    A socket timeout becomes :class:`~nats_sync.errors.TimeoutError`; anything else (a
    reset, a refused connection, a failed ``ssl`` call) becomes
    :class:`~nats_sync.errors.NatsConnectionError`.

    Args:
        err: the error the socket or ``ssl`` raised.
        action: what was being done, e.g. ``"read"`` or ``"connecting to h:4222"``.
    """
    if isinstance(err, builtins.TimeoutError):  # socket.timeout since 3.10
        return TimeoutError(f"{action} timed out")
    if isinstance(err, ssl.SSLError):
        # The reason is the short form ("BAD_RECORD_MAC"); an SSLError made by hand has none.
        return NatsConnectionError(f"{action} failed: {getattr(err, 'reason', None) or err}")
    return NatsConnectionError(f"{action} failed: {err}")


class Transport(Protocol):
    """What every stream offers; the connection and the handshake use nothing else."""

    def recv_into(self, buffer: bytearray | memoryview) -> int:
        """Reads what is available into ``buffer``; returns the count, 0 at end of stream.

        Reader thread, or the handshake.

        Raises:
            TimeoutError: nothing arrived within the timeout set by :meth:`set_timeout`.
            NatsConnectionError: the stream failed.
        """
        ...

    def send(self, buffers: Sequence[Buffer]) -> int:
        """Sends from the front of ``buffers`` (at least one byte); returns bytes taken.

        Writer thread, or a caller holding the outbox's ``sending`` flag.

        Raises:
            NatsConnectionError: the stream failed or was shut down.
        """
        ...

    def send_all(self, data: Buffer) -> None:
        """Sends all of ``data`` (the handshake, and layers sending records or frames).

        Raises:
            TimeoutError: the server did not take it within the timeout.
            NatsConnectionError: the stream failed or was shut down.
        """
        ...

    def set_timeout(self, timeout: float | None) -> None:
        """Sets the socket's timeout for the calls that block (None: wait forever)."""
        ...

    def shutdown(self) -> None:
        """Ends the stream both ways, waking any thread blocked on it. Any thread."""
        ...

    def close(self) -> None:
        """Shuts down and releases the socket. Idempotent; once no thread uses it."""
        ...


def _os_socket(sock: socket.socket) -> _socket.socket:
    """The operating system's socket under a gevent socket (``_sock``), else ``sock``."""
    inner = getattr(sock, "_sock", None)
    return inner if isinstance(inner, _socket.socket) else sock


def _connect_to_one_of(host: str, port: int, timeout: float, shuffle: bool) -> socket.socket:
    """A socket connected to one of ``host``'s addresses (the last error if none)."""
    addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    if shuffle and len(addresses) > 1:
        random.shuffle(addresses)
    deadline = time.monotonic() + timeout
    error: OSError | None = None
    for family, kind, proto, _, address in addresses:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise error or builtins.TimeoutError(f"connecting to {host}:{port} timed out")
        sock = socket.socket(family, kind, proto)
        try:
            sock.settimeout(remaining)
            sock.connect(address)
        except OSError as failed:
            sock.close()
            error = failed
            continue
        sock.settimeout(timeout)
        return sock
    raise error or OSError(f"{host!r} has no address")


class TcpStream:
    """A connected TCP socket: the bottom of every stack.

    Its methods are what the connection's threads call on a plain connection, bound
    once, so each stays a single Python frame around the socket call.

    Args:
        sock: a connected, blocking socket.
    """

    __slots__ = ("_closed", "_nowait", "_sock")

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._closed = False
        # The socket the non-blocking calls use: under gevent the OS socket beneath
        # gevent's, whose own recv/send wait for the hub even with MSG_DONTWAIT (then a
        # requester could never read its own reply, nor the caller write its own).
        self._nowait: _socket.socket = _os_socket(sock) if threads_are_greenlets() else sock

    @classmethod
    def open(cls, host: str, port: int, timeout: float, *, shuffle: bool = True) -> TcpStream:
        """Connects to ``host:port`` within ``timeout`` seconds.

        A host name's addresses are tried one after the other, in random order with
        ``shuffle`` (ADR-11: clients spread over the servers a name stands for), else
        in the resolver's; ``timeout`` is for all of them together.

        Raises:
            TimeoutError: the connection was not made in time.
            NatsConnectionError: the connection was refused or could not be made.
        """
        try:
            sock = _connect_to_one_of(host, port, timeout, shuffle)
        except OSError as err:
            raise os_error(err, f"connecting to {host}:{port}") from err
        # Without it a small message would wait for the ACK of the previous one.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return cls(sock)

    def recv_into(self, buffer: bytearray | memoryview) -> int:
        """See :meth:`Transport.recv_into`."""
        try:
            return self._sock.recv_into(buffer)
        except OSError as err:
            raise os_error(err, "read") from err

    def send(self, buffers: Sequence[Buffer]) -> int:
        """See :meth:`Transport.send`; many buffers go out in one ``sendmsg``."""
        try:
            if len(buffers) == 1:
                return self._sock.send(buffers[0])
            return self._sock.sendmsg(buffers[:MAX_IOVECS_PER_SEND])
        except OSError as err:
            raise os_error(err, "write") from err

    def send_all(self, data: Buffer) -> None:
        """See :meth:`Transport.send_all`."""
        try:
            self._sock.sendall(data)
        except OSError as err:
            raise os_error(err, "write") from err

    def recv_into_nowait(self, buffer: bytearray | memoryview) -> int | None:
        """What is available now into ``buffer``; None when nothing is, 0 at the end.

        The reader thread, or a requester holding the connection's read token.

        Raises:
            NatsConnectionError: the socket failed.
        """
        try:
            return self._nowait.recv_into(buffer, 0, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return None
        except OSError as err:
            raise os_error(err, "read") from err

    def send_nowait(self, data: bytes) -> int:
        """Sends what the socket takes without blocking; returns it (0: the buffer is full).

        A caller holding the outbox's ``sending`` flag.

        Raises:
            NatsConnectionError: the socket failed or was shut down.
        """
        try:
            return self._nowait.send(data, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return 0  # the kernel buffer is full: the writer thread will wait instead
        except OSError as err:
            raise os_error(err, "write") from err

    def fileno(self) -> int:
        """The socket's file descriptor (to wait for it with ``poll``)."""
        return self._sock.fileno()

    def set_timeout(self, timeout: float | None) -> None:
        """See :meth:`Transport.set_timeout`."""
        self._sock.settimeout(timeout)

    def shutdown(self) -> None:
        """See :meth:`Transport.shutdown`."""
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass  # already disconnected: nothing left to wake

    def close(self) -> None:
        """Shuts down and closes the socket. Idempotent.

        Call it once the reader and writer threads are done with the socket: a file
        descriptor closed under a thread still using it could be reused by another.
        """
        if self._closed:
            return
        self._closed = True
        self.shutdown()
        self._sock.close()


class TlsStream:
    """TLS over another stream, on an ``ssl.SSLObject`` and memory BIOs.

    Made by :meth:`start`, which runs the handshake.

    Args:
        inner: the stream the records travel on.
        tls: the SSLObject, handshaken, over ``incoming`` and ``outgoing``.
        incoming: records read from ``inner``, for ``tls`` to decrypt.
        outgoing: records ``tls`` wrote, to send on ``inner``.
    """

    __slots__ = ("_incoming", "_inner", "_outgoing", "_raw", "_send_lock", "_tls", "_tls_lock")

    def __init__(
        self,
        inner: Transport,
        tls: ssl.SSLObject,
        incoming: ssl.MemoryBIO,
        outgoing: ssl.MemoryBIO,
    ) -> None:
        self._inner = inner
        self._tls = tls
        self._incoming = incoming
        self._outgoing = outgoing
        self._tls_lock = threading.Lock()
        self._send_lock = threading.Lock()
        # Records as read from the stream below; reader thread (or the handshake) only.
        self._raw = memoryview(bytearray(d.TLS_READ_SIZE))

    @classmethod
    def start(
        cls, inner: Transport, context: ssl.SSLContext, server_hostname: str, deadline: float
    ) -> TlsStream:
        """Runs the TLS handshake over ``inner``, before the connection threads start.

        Args:
            inner: the stream to encrypt (its owner is now the returned stream).
            context: the client context (trust, certificates, versions).
            server_hostname: the name sent as SNI and checked in the certificate.
            deadline: ``time.monotonic()`` by which the handshake must be done.

        Raises:
            SecureConnFailedError: the handshake failed (the ssl reason is in the
                message), e.g. an untrusted or expired certificate or a wrong host name.
            TimeoutError: the handshake did not finish by ``deadline``.
            NatsConnectionError: the stream below failed.
        """
        incoming = ssl.MemoryBIO()
        outgoing = ssl.MemoryBIO()
        try:
            tls = context.wrap_bio(
                incoming, outgoing, server_side=False, server_hostname=server_hostname
            )
        except (ValueError, ssl.SSLError) as err:
            raise SecureConnFailedError(f"cannot start TLS with {server_hostname}: {err}") from err
        stream = cls(inner, tls, incoming, outgoing)
        while True:
            try:
                tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                stream._flush_output()
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(
                        f"TLS handshake with {server_hostname} took too long"
                    ) from None
                inner.set_timeout(remaining)
                if not stream._read_records():
                    raise SecureConnFailedError(
                        f"{server_hostname} closed the connection during the TLS handshake"
                    ) from None
            except ssl.SSLCertVerificationError as err:
                raise SecureConnFailedError(
                    f"TLS certificate of {server_hostname} rejected: {err.verify_message}"
                ) from None
            except ssl.SSLError as err:
                raise SecureConnFailedError(
                    f"TLS handshake with {server_hostname} failed: {err.reason or err}"
                ) from None
        stream._flush_output()
        return stream

    def _read_records(self) -> bool:
        """Reads records from the stream below into the incoming BIO; False at its end."""
        count = self._inner.recv_into(self._raw)
        if not count:
            return False
        with self._tls_lock:
            self._incoming.write(self._raw[:count])
        return True

    def _flush_output(self) -> None:
        """Sends whatever TLS has written to the outgoing BIO."""
        with self._send_lock:
            with self._tls_lock:
                data = self._outgoing.read()
            if data:
                self._inner.send_all(data)

    def recv_into(self, buffer: bytearray | memoryview) -> int:
        """See :meth:`Transport.recv_into`; 0 also when the server closed TLS cleanly."""
        tls = self._tls
        while True:
            try:
                with self._tls_lock:
                    # With a buffer, SSLObject.read fills it and returns the count.
                    count: int = tls.read(len(buffer), buffer)  # type: ignore[assignment]
            except ssl.SSLWantReadError:
                pass
            except ssl.SSLZeroReturnError:
                return 0
            except ssl.SSLError as err:
                raise os_error(err, "TLS read") from None
            else:
                if self._outgoing.pending:
                    self._flush_output()
                return count
            # Reading may have produced records to send (a TLS 1.3 key update answer).
            if self._outgoing.pending:
                self._flush_output()
            if not self._read_records():
                return 0

    def send(self, buffers: Sequence[Buffer]) -> int:
        """See :meth:`Transport.send`; encrypts and sends every resulting record."""
        data = buffers[0] if len(buffers) == 1 else b"".join(buffers[:MAX_IOVECS_PER_SEND])
        with self._send_lock:
            try:
                with self._tls_lock:
                    count = self._tls.write(data)
                    records = self._outgoing.read()
            except ssl.SSLError as err:
                raise os_error(err, "TLS write") from None
            self._inner.send_all(records)
        return count

    def send_all(self, data: Buffer) -> None:
        """See :meth:`Transport.send_all`."""
        view = memoryview(data)
        while view:
            view = view[self.send([view]) :]

    def set_timeout(self, timeout: float | None) -> None:
        """See :meth:`Transport.set_timeout`."""
        self._inner.set_timeout(timeout)

    def shutdown(self) -> None:
        """See :meth:`Transport.shutdown` (no close_notify: the socket just ends)."""
        self._inner.shutdown()

    def close(self) -> None:
        """See :meth:`Transport.close`."""
        self._inner.close()

"""Opening one connection: [TLS] INFO [TLS] -> CONNECT -> PING -> PONG on a fresh stream.

For ``ws://`` and ``wss://`` servers: [TLS] WebSocket upgrade (with the
``ws_connection_headers``, sent again on every reconnect), then INFO -> CONNECT -> PING
-> PONG inside WebSocket messages; TLS, if any, always comes first there.

How it works: this is where the stack of streams (``_core/transport/streams.py``) is built, from the
bottom up as the handshake goes: a TCP stream; a TLS stream over it for TLS-first, for
``wss://`` (or ``ws://`` with a TLS context) and, after INFO, for ``tls://``, a TLS
context or a server that requires TLS; a WebSocket stream over either for ``ws://`` and
``wss://``. It runs on the thread that connects (the caller of ``connect()``; later the
reconnect thread), before any reader or writer thread exists for these streams, so it
reads and writes them directly with a deadline of ``connect_timeout``. It touches no
handler state: it returns the top of the stack, the parser (which may already hold
bytes that followed the PONG) and the latest INFO, or raises.
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Callable
from typing import Any

from nats_sync import _defaults as d
from nats_sync._core import proto
from nats_sync._core.transport.auth import connect_auth, credential
from nats_sync._core.transport.options import Options
from nats_sync._core.transport.pool import ServerAddress
from nats_sync._core.transport.streams import TcpStream, TlsStream, Transport
from nats_sync._version import __version__
from nats_sync.errors import (
    NatsConnectionError,
    ProtocolError,
    SecureConnRequiredError,
    TimeoutError,
    server_error_from_description,
)


def handshake(
    server: ServerAddress,
    options: Options,
    on_open: Callable[[Transport], None] | None = None,
) -> tuple[Transport, proto.Parser, dict[str, Any]]:
    """Connects to ``server`` and completes the handshake within ``connect_timeout``.

    ``on_open`` gets the TCP stream as soon as the socket is connected, so another
    thread (``close()``) can shut it down to cut a handshake short (that wakes every
    stream above it); if it raises, the stream is closed and the error propagates.

    Returns:
        The top of the stack of streams, the parser and the latest INFO.

    Raises:
        NatsConnectionError: the socket could not be opened or was closed.
        TimeoutError: the server did not finish the handshake in time.
        ServerError: the server answered CONNECT with ``-ERR`` (e.g. authorization).
        ProtocolError: the server sent something that is not NATS.
    """
    deadline = time.monotonic() + options.connect_timeout
    tcp = TcpStream.open(
        server.host, server.port, options.connect_timeout, shuffle=options.randomize
    )
    transport: Transport = tcp
    parser = proto.Parser()
    try:
        if on_open is not None:
            on_open(tcp)
        if server.is_websocket:
            # TLS (wss://, or a ws:// URL given a TLS context, as nats.go does) comes
            # before the HTTP upgrade; never again after INFO, whose tls_required only
            # describes the WebSocket listener.
            if server.tls_required or options.tls is not None:
                transport = _start_tls(transport, server, options, deadline)
            transport = _start_websocket(transport, server, deadline, options.ws_header_pairs)
        elif options.tls_handshake_first:
            transport = _start_tls(transport, server, options, deadline)
        op = _read_op(transport, parser, deadline, server)
        if not isinstance(op, proto.InfoOp):
            raise ProtocolError(f"expected INFO from {server}, got {op!r}")
        info = op.info
        # Still bare TCP (neither TLS-first nor WebSocket): INFO decides.
        if transport is tcp and _wants_tls(server, options, info):
            transport = _start_tls(transport, server, options, deadline)
        parser.set_max_payload(int(info.get("max_payload", d.DEFAULT_MAX_PAYLOAD)))
        transport.send_all(proto.encode_connect(connect_fields(server, options, info)) + proto.PING)
        while True:
            op = _read_op(transport, parser, deadline, server)
            if op is proto.PONG_OP:
                break
            if isinstance(op, proto.ErrOp):
                raise server_error_from_description(op.message)
            if op is proto.PING_OP:
                transport.send_all(proto.PONG)
            elif isinstance(op, proto.InfoOp):
                info = op.info
    except BaseException:
        transport.close()
        raise
    transport.set_timeout(None)
    return transport, parser, info


def _start_websocket(
    inner: Transport, server: ServerAddress, deadline: float, headers: list[tuple[str, str]]
) -> Transport:
    """The WebSocket stream over ``inner``, upgraded with the extra ``headers``."""
    # wsproto is an optional extra: imported only when a ws:// server is used.
    from nats_sync._core.transport.websocket import WebSocketStream  # noqa: PLC0415

    return WebSocketStream.open(inner, _websocket_host(server), deadline, headers=headers)


def _websocket_host(server: ServerAddress) -> str:
    """The ``Host`` header of the upgrade: the host, with the port unless it is the
    scheme's default (80 for ``ws://``, 443 for ``wss://``)."""
    default_port = 443 if server.tls_required else 80
    if server.port == default_port:
        return f"[{server.host}]" if ":" in server.host else server.host
    return server.netloc


def _read_op(
    transport: Transport, parser: proto.Parser, deadline: float, server: ServerAddress
) -> proto.ServerOp:
    buffer = bytearray(d.HANDSHAKE_READ_SIZE)
    while (op := parser.next_op()) is None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"handshake with {server} did not finish in time")
        transport.set_timeout(remaining)
        count = transport.recv_into(buffer)
        if count == 0:
            raise NatsConnectionError(f"{server} closed the connection during the handshake")
        parser.feed(memoryview(buffer)[:count])
    return op


def _wants_tls(server: ServerAddress, options: Options, info: dict[str, Any]) -> bool:
    """Whether to upgrade after INFO: the server requires it, or the client asked for it.

    Raises:
        SecureConnRequiredError: the client asked for TLS and the server offers none.
    """
    client_wants = options.tls is not None or server.tls_required
    if info.get("tls_required"):
        return True
    if client_wants and not info.get("tls_available"):
        raise SecureConnRequiredError(
            f"this client requires TLS ({'tls://' if server.tls_required else 'tls='}), "
            f"but {server} does not offer it"
        )
    return client_wants


def _start_tls(
    inner: Transport, server: ServerAddress, options: Options, deadline: float
) -> TlsStream:
    """The TLS stream over ``inner``, handshaken with the user's context or a verifying
    default one; SNI and checks use ``tls_hostname``, else the host the server was
    learned through, else its own."""
    context = options.tls if options.tls is not None else ssl.create_default_context()
    hostname = options.tls_hostname or server.tls_name or server.host
    return TlsStream.start(inner, context, hostname, deadline)


def connect_fields(
    server: ServerAddress, options: Options, info: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The CONNECT fields for ``server``: credentials in its URL win over the options;
    nkey and JWT credentials sign the nonce of ``info``."""
    auth: dict[str, Any] = connect_auth(
        info or {},
        nkeys_seed=options.nkeys_seed,
        nkeys_seed_str=options.nkeys_seed_str,
        user_credentials=options.user_credentials,
        user_jwt_cb=options.user_jwt_cb,
        signature_cb=options.signature_cb,
    )
    user = server.user if server.user is not None else credential(options.user, "user")
    password = (
        server.password if server.password is not None else credential(options.password, "password")
    )
    token = server.token if server.token is not None else credential(options.token, "token")
    if user is not None:
        auth["user"] = user
        auth["pass"] = password or ""
    elif token is not None:
        auth["auth_token"] = token
    return proto.connect_fields(
        version=__version__,
        verbose=options.verbose,
        pedantic=options.pedantic,
        echo=not options.no_echo,
        name=options.name,
        auth=auth,
    )

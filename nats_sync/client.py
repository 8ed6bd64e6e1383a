"""The public facade: :func:`connect` and :class:`Client` (layers: docs/ARCHITECTURE.md).

How it works: ``connect()`` validates its keywords into a frozen ``Options`` and has the
handler make the first connection. ``Client`` keeps no state of its own: every call is
forwarded to the handler, which does the work under its locks, so every call is safe
from any thread.
"""

from __future__ import annotations

import importlib.util
import ssl
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from types import TracebackType
from typing import TYPE_CHECKING, Any, NoReturn

from nats_sync import _defaults as d
from nats_sync._core.components.instrumentation import Instrumentation, bind_traced_methods
from nats_sync._core.components.port import ClientPort
from nats_sync._core.components.publishing import HeadersArg
from nats_sync._core.components.subscription import MessageCallback, Subscription
from nats_sync._core.handler import Handler
from nats_sync._core.state import State
from nats_sync._core.threads.lifecycle import close_despite_interrupts
from nats_sync._core.transport.auth import Credential
from nats_sync._core.transport.contexts import NatsContext
from nats_sync._core.transport.options import (
    DelayCallback,
    EventCallback,
    ReconnectToServerHandler,
    WsHeaders,
    build_options_and_context,
    check_websocket_support,
    server_urls,
)
from nats_sync._core.transport.pool import Server
from nats_sync._core.validate import check_int
from nats_sync._trace import MessageTrace, trace
from nats_sync.errors import (
    ConnectionClosedError,
    ErrorCallback,
    InvalidArgumentError,
    NotSupportedError,
)
from nats_sync.jetstream import JetStream
from nats_sync.msg import Msg

if TYPE_CHECKING:
    from nats_sync.otel import InstrumentedClient


def otel_instrument() -> Callable[[InstrumentedClient], object]:
    """``nats_sync.otel.instrument``, imported only now (``tracing=True``).

    Raises:
        NotSupportedError: OpenTelemetry's API is not installed.
    """
    if importlib.util.find_spec("opentelemetry") is None:
        raise NotSupportedError("tracing=True needs OpenTelemetry: pip install 'nats-sync[otel]'")
    from nats_sync import otel  # noqa: PLC0415 - the optional extra, only when asked for

    return otel.instrument


def connect(
    servers: str | Sequence[str] | None = None,
    *,
    context: str | None = None,
    name: str | None = None,
    allow_reconnect: bool = d.DEFAULT_ALLOW_RECONNECT,
    max_reconnect_attempts: int = d.DEFAULT_MAX_RECONNECT_ATTEMPTS,
    reconnect_time_wait: float = d.DEFAULT_RECONNECT_TIME_WAIT,
    reconnect_delay_cb: DelayCallback | None = None,
    reconnect_to_server_handler: ReconnectToServerHandler | None = None,
    connect_timeout: float = d.DEFAULT_CONNECT_TIMEOUT,
    retry_on_failed_connect: bool = False,
    dont_randomize: bool = False,
    no_randomize: bool = False,
    ignore_discovered_servers: bool = False,
    ping_interval: float = d.DEFAULT_PING_INTERVAL,
    max_outstanding_pings: int = d.DEFAULT_MAX_OUTSTANDING_PINGS,
    pending_size: int = d.DEFAULT_PENDING_SIZE,
    flusher_queue_size: int = d.NATS_PY_FLUSHER_QUEUE_SIZE,
    no_echo: bool = False,
    verbose: bool = False,
    pedantic: bool = False,
    inbox_prefix: str = d.DEFAULT_INBOX_PREFIX,
    skip_subject_validation: bool = False,
    drain_timeout: float = d.DEFAULT_DRAIN_TIMEOUT,
    flush_timeout: float | None = None,
    user: Credential | None = None,
    password: Credential | None = None,
    token: Credential | None = None,
    user_credentials: str | None = None,
    nkeys_seed: str | None = None,
    nkeys_seed_str: str | None = None,
    tls: ssl.SSLContext | None = None,
    tls_hostname: str | None = None,
    tls_handshake_first: bool = False,
    ws_connection_headers: WsHeaders | None = None,
    error_cb: ErrorCallback | None = None,
    disconnected_cb: EventCallback | None = None,
    reconnected_cb: EventCallback | None = None,
    closed_cb: EventCallback | None = None,
    discovered_server_cb: EventCallback | None = None,
    lame_duck_mode_cb: EventCallback | None = None,
    ignore_auth_error_abort: bool = False,
    user_jwt_cb: Callable[[], str] | None = None,
    signature_cb: Callable[[bytes], bytes] | None = None,
    tracing: bool = False,
) -> Client:
    """Connects to a NATS server and returns a connected :class:`Client`.

    Args:
        servers: one URL, a comma-separated list, or a list of URLs (``nats://``,
            ``tls://``, ``ws://``, ``wss://`` or bare ``host:port``). None (not given):
            ``$NATS_URL`` if set, else the ``nats`` CLI context named by
            ``$NATS_CONTEXT`` or selected (``~/.config/nats/context.txt``), else
            ``nats://127.0.0.1:4222``.
        context: the name of a ``nats`` CLI context (ADR-21,
            ``$XDG_CONFIG_HOME/nats/context/<name>.json``, ``~/.config`` by default)
            to take the servers (unless given), credentials, TLS files, inbox prefix,
            ``tls_first`` and JetStream domain or API prefix from. Options given here
            win over the context's; any credential given here leaves all of the
            context's aside, and ``tls`` its ``ca``/``cert``/``key``.
        name: the client name the server shows in its monitoring.
        allow_reconnect: reconnect when the connection is lost.
        max_reconnect_attempts: attempts per server before giving up (-1: forever).
        reconnect_time_wait: base delay between attempts, with backoff and jitter.
        reconnect_delay_cb: ``callable(attempt) -> seconds`` replacing the backoff.
        reconnect_to_server_handler: ``handler(servers, server_info) -> (server, delay)``
            picks each server to try, as in nats-py: given the pool as :class:`Server`
            views (the server just lost last) and a copy of the last INFO, it returns
            one of them (or its URL) and the seconds to wait, instead of the backoff.
            If it raises or returns anything else, the error goes to ``error_cb`` and
            the pool's next server is tried. Not called by connect()'s first pass.
        connect_timeout: seconds for each connection attempt, handshake included.
        retry_on_failed_connect: return at once and keep trying in the background.
        dont_randomize: try the servers in the order given, and a host name's
            addresses in the resolver's order (else both are shuffled, ADR-11).
        no_randomize: nats.go's name for ``dont_randomize`` (either one turns the
            shuffling off).
        ignore_discovered_servers: do not use servers learned from INFO.
        ping_interval: seconds between keepalive PINGs.
        max_outstanding_pings: unanswered PINGs after which the connection is stale.
        pending_size: bytes of outgoing data held (0: no buffering while disconnected).
        flusher_queue_size: accepted for nats-py code and ignored: it sizes asyncio's
            flusher queue, and here a writer thread takes everything queued at once.
        no_echo: do not deliver this client's own publishes to its subscriptions.
        verbose: ask the server for ``+OK`` acknowledgements.
        pedantic: ask the server for strict protocol checks.
        inbox_prefix: prefix of reply subjects made by ``new_inbox`` and requests.
        skip_subject_validation: do not check the shape of subjects (empty tokens,
            misplaced wildcards); the server decides. A subject must still be a
            non-empty str without spaces or control characters (the protocol line).
        drain_timeout: default seconds ``drain()`` may take.
        flush_timeout: seconds a publish waits for room when the outgoing buffer is
            full while connected (None: 10 s).
        user: user name (also from ``nats://user:pass@host``); or a callable
            returning it, called at every connect and reconnect (as nats.go's
            ``UserInfoHandler``: rotated credentials are picked up).
        password: password; or a callable returning it, called as ``user``'s.
        token: authentication token (also from ``nats://token@host``); or a callable
            returning it, called at every connect and reconnect (nats.go's
            ``TokenHandler``).
        user_credentials: path to a ``.creds`` file (JWT and nkey seed).
        nkeys_seed: path to an nkey seed file (not with ``user_credentials``).
        nkeys_seed_str: the nkey seed itself, as a str (e.g. from an environment variable
            or a vault); read as the text of a seed file, never shown. Not with
            ``nkeys_seed`` or ``user_credentials``.
        tls: an ``ssl.SSLContext``; implied by ``tls://`` and ``wss://``.
        tls_hostname: the host name to verify in the server certificate.
        tls_handshake_first: do the TLS handshake before the server's INFO.
        ws_connection_headers: extra headers (name -> value or list of values) of the
            WebSocket upgrade on every (re)connect, e.g. for a proxy; values are never
            shown; ``Host``, ``Upgrade``, ``Connection``, ``Sec-WebSocket-*`` are refused.
        error_cb: ``callable(exc)`` for asynchronous errors.
        disconnected_cb: called when the connection is lost.
        reconnected_cb: called when a new connection is made.
        closed_cb: called once the client is closed.
        discovered_server_cb: called when INFO names new servers.
        lame_duck_mode_cb: called when the server announces lame duck mode.
        ignore_auth_error_abort: keep reconnecting even after every server refused the
            credentials twice in a row (by default the client then closes).
        user_jwt_cb: returns the user JWT (replaces a ``.creds`` file, e.g. from a vault);
            needs ``signature_cb``. Called on each (re)connect.
        signature_cb: signs the server's nonce (bytes) with the user's nkey; returns the
            raw 64-byte ed25519 signature (not base64). Exceptions from either callback
            fail that attempt with ``BadCredentialsError``.
        tracing: instrument the client with OpenTelemetry's global tracer and meter
            providers, as ``nats_sync.otel.instrument(client)`` does (needs the ``otel``
            extra; the check is made before connecting).

    Callbacks run on one callback thread, in order; never on the reader thread.

    Returns:
        The connected client.

    Raises:
        NoServersError: no server could be reached (the last error as ``__cause__``).
        AuthorizationError: the server refused the credentials.
        BadCredentialsError: a seed or .creds file cannot be used, the credential
            options do not fit together, or ``user_jwt_cb``/``signature_cb`` failed.
        InvalidArgumentError: an option was invalid (the message names it), or the
            context is unknown or malformed (the message names its file).
        NotSupportedError: the context needs ``nsc``.
    """
    # The first statement, so locals() holds exactly the parameters: the option list is
    # written once, in the signature (tests/unit/test_options.py holds it equal to Options).
    options, found = build_options_and_context(**locals())
    check_websocket_support(options.servers)
    instrument = otel_instrument() if options.tracing else None
    handler = Handler(options)
    try:
        handler.connect()
        client = Client(handler, found)
        if instrument is not None:
            instrument(client)
    except BaseException:
        # A failure, or Ctrl-C half-way: no thread or socket may outlive a client that
        # the caller never got.
        close_despite_interrupts(handler)
        raise
    return client


class Client:
    """A connection to NATS; made by :func:`connect`. Every method is thread-safe.

    The class constants are nats-py's state names, the values :attr:`status` takes.
    """

    CONNECTING = State.CONNECTING
    CONNECTED = State.CONNECTED
    RECONNECTING = State.RECONNECTING
    DRAINING_SUBS = State.DRAINING_SUBS
    DRAINING_PUBS = State.DRAINING_PUBS
    CLOSED = State.CLOSED

    def __init__(self, handler: Handler, context: NatsContext | None = None) -> None:
        self._handler = handler
        #: The ``nats`` context connect() read: its JetStream domain / API prefix are
        #: ``jetstream()``'s defaults.
        self._context = context
        # The hot path without this method's own frame: same signature, same behaviour.
        self.publish = handler.publisher.publish  # type: ignore[method-assign]
        #: None until ``_instrument``: the uninstrumented paths are exactly as before.
        self._otel: Instrumentation | None = None
        #: What the extensions use besides the public API (``_core.components.port.port_of``).
        self._port = ClientPort(
            add_status_listener=handler.add_status_listener,
            add_error_listener=handler.add_error_listener,
            inbox_route=handler.requester.inbox_route,
            publish_inbox=handler.publisher.publish_inbox,
            schedule=handler.timer.schedule,
            instrument=self._instrument,
        )

    # --- publishing and subscribing -------------------------------------------------

    def publish(
        self, subject: str, payload: bytes = b"", reply: str = "", headers: HeadersArg = None
    ) -> None:
        """Queues one message and returns at once.

        Args:
            subject: where to publish (no wildcards).
            payload: the message body.
            reply: a reply subject for the receiver, or "".
            headers: name -> value, or name -> list of values for a repeated name.

        Raises:
            BadSubjectError: the subject or reply is not a valid subject.
            BadHeaderError: a header cannot be written.
            MaxPayloadError: the message exceeds the server's ``max_payload``.
            ConnectionClosedError: the client is closed.
            ConnectionDrainingError: the client is draining its publishes.
            OutboundBufferLimitError: the outgoing buffer is full.
        """
        self._handler.publisher.publish(subject, payload, reply, headers)

    def subscribe(
        self,
        subject: str,
        queue: str = "",
        cb: MessageCallback | None = None,
        max_msgs: int = 0,
        pending_msgs_limit: int = d.DEFAULT_SUB_PENDING_MSGS_LIMIT,
        pending_bytes_limit: int = d.DEFAULT_SUB_PENDING_BYTES_LIMIT,
    ) -> Subscription:
        """Subscribes to ``subject`` (wildcards allowed).

        Args:
            subject: the subject, with ``*`` and ``>`` wildcards if wanted.
            queue: a queue group: each message goes to one member of the group.
            cb: ``callable(msg)``, run on this subscription's own thread; without
                it, read with ``next_msg`` or iteration.
            max_msgs: end the subscription after this many messages (0: never).
            pending_msgs_limit: messages held before new ones are dropped.
            pending_bytes_limit: payload bytes held before new ones are dropped.

        Raises:
            BadSubjectError: the subject or queue group is invalid.
            InvalidArgumentError: a limit is not an int >= 0.
            ConnectionClosedError: the client is closed.
            ConnectionDrainingError: the client is draining.
        """
        if cb is not None and not callable(cb):
            raise TypeError(f"cb must be callable, got {cb!r}")
        check_int(max_msgs, "max_msgs", 0)
        check_int(pending_msgs_limit, "pending_msgs_limit", 0)
        check_int(pending_bytes_limit, "pending_bytes_limit", 0)
        handler = self._handler
        otel = self._otel
        if otel is not None and cb is not None:
            cb = otel.wrap_callback(subject, cb)
        sub = Subscription(
            handler,
            handler.next_sid(),
            subject,
            queue,
            cb,
            max_msgs,
            pending_msgs_limit,
            pending_bytes_limit or d.DEFAULT_SUB_PENDING_BYTES_LIMIT,
        )
        if otel is not None:
            sub._otel = otel
            otel.subscribed(sub)
        handler.add_subscription(sub)
        return sub

    # --- request-reply ---------------------------------------------------------------

    def request(
        self,
        subject: str,
        payload: bytes = b"",
        timeout: float = d.DEFAULT_REQUEST_TIMEOUT,
        headers: HeadersArg = None,
    ) -> Msg:
        """Sends a request and returns the first reply.

        Raises:
            NoRespondersError: nobody is subscribed to ``subject`` (at once).
            TimeoutError: no reply within ``timeout`` seconds.
            ConnectionClosedError: the client closed while waiting.
        """
        return self._handler.requester.request(subject, payload, timeout, headers)

    def request_future(
        self,
        subject: str,
        payload: bytes = b"",
        timeout: float = d.DEFAULT_REQUEST_TIMEOUT,
        headers: HeadersArg = None,
    ) -> Future[Msg]:
        """Sends a request and returns a future of its reply at once.

        The future fails with ``NoRespondersError``, ``TimeoutError`` or
        ``ConnectionClosedError`` as ``request`` would raise them. Its done-callbacks
        run on the client's callback thread.
        """
        return self._handler.requester.request_future(subject, payload, timeout, headers)

    def request_batch(
        self,
        subject: str,
        payloads: Sequence[bytes],
        timeout: float = d.DEFAULT_REQUEST_TIMEOUT,
        headers: HeadersArg = None,
        max_in_flight: int = d.DEFAULT_REQUEST_MAX_IN_FLIGHT,
    ) -> list[Msg | BaseException]:
        """Pipelines one request per payload; returns replies in input order.

        Each item is the reply ``Msg`` or the exception for that request; a single
        request's failure never raises. ``timeout`` applies to each request from the
        moment it is sent.
        """
        return self._handler.requester.request_batch(
            subject, payloads, timeout, headers, max_in_flight
        )

    def request_many(
        self,
        subject: str,
        payload: bytes = b"",
        *,
        headers: HeadersArg = None,
        timeout: float = d.DEFAULT_REQUEST_MANY_TIMEOUT,
        max_messages: int | None = None,
        stall: float | None = None,
        sentinel: Callable[[Msg], bool] | None = None,
    ) -> Iterator[Msg]:
        """Sends one request and yields its replies as they come (ADR-47 scatter-gather).

        Ends at the first of: ``timeout`` seconds in all (from the call); ``max_messages``
        replies; ``stall`` seconds without a reply once one came (from each ``next()``);
        a reply for which ``sentinel(msg)`` is true (not yielded). No stall, no sentinel
        by default (orbit.go's choice): an empty reply is yielded like any other (pass
        ``sentinel=lambda m: not m.data`` for the empty end marker). On the shared request
        inbox; leaving early (``break``, an exception, ``close()``) frees the request.

        Raises:
            NoRespondersError: from the first ``next()``, when nobody listens.
            ConnectionClosedError: from ``next()``, if the client closes meanwhile.
            InvalidArgumentError: ``timeout``/``stall`` not > 0, ``max_messages`` < 1.
            TypeError: ``sentinel`` is not callable.
        """
        return self._handler.requester.request_many(
            subject, payload, headers, timeout, max_messages, stall, sentinel
        )

    def new_inbox(self) -> str:
        """A unique subject under ``inbox_prefix``, for replies."""
        return self._handler.requester.new_inbox()

    def trace(
        self,
        subject: str,
        payload: bytes = b"",
        *,
        headers: HeadersArg = None,
        deliver: bool = False,
        timeout: float = d.DEFAULT_TRACE_TIMEOUT,
    ) -> MessageTrace:
        """Publishes ``payload`` to ``subject`` traced (ADR-41, nats-server 2.11+) and returns
        what each server on its path reported, gathered for ``timeout`` seconds at most
        (less once all did). Unless ``deliver``, nothing is delivered or stored
        (``Nats-Trace-Only``). ``headers`` go with the message, but no ``Nats-Trace-*``.

        Raises:
            InvalidArgumentError: an empty or wildcard subject, such a header, timeout <= 0.
            NotSupportedError: the connected server predates 2.11 (nothing is published).
        """
        return trace(self, subject, payload, headers=headers, deliver=deliver, timeout=timeout)

    # --- flush, drain, close -----------------------------------------------------------

    def flush(self, timeout: float = d.DEFAULT_FLUSH_TIMEOUT) -> None:
        """Returns once the server has processed everything sent before the call.

        Raises:
            FlushTimeoutError: no answer within ``timeout`` seconds.
            ConnectionClosedError: the client is closed.
        """
        self._handler.flush(timeout)

    def rtt(self) -> float:
        """The round-trip time to the server, in seconds."""
        start = time.perf_counter()
        self._handler.flush()
        return time.perf_counter() - start

    def drain(self, timeout: float | None = None) -> None:
        """Unsubscribes everything, processes what arrived, flushes, then closes
        (messages already buffered in pull subscriptions stay readable).

        Args:
            timeout: seconds; None uses ``drain_timeout``.

        Raises:
            DrainTimeoutError: it took longer; the client is closed anyway.
            ConnectionReconnectingError: reconnecting (nothing changed; drain later).
            ConnectionDrainingError: the client is already draining.
        """
        self._handler.drain(timeout)

    def close(self) -> None:
        """Closes at once (sending what is queued if connected). Idempotent.

        Every waiting ``next_msg``, ``request`` and ``flush`` gets
        ``ConnectionClosedError``; the client's own threads are joined. Callbacks are
        not called again and what is queued for them is discarded (``discarded``); a
        callback still running after a short grace (0.25 s) is left to return on its
        own daemon thread, where publishing raises ``ConnectionClosedError``.
        """
        self._handler.close()

    def jetstream(
        self,
        domain: str | None = None,
        api_prefix: str = d.DEFAULT_JS_API_PREFIX,
        timeout: float = d.DEFAULT_JS_TIMEOUT,
        max_pending_acks: int = d.DEFAULT_JS_MAX_PENDING_ACKS,
        stall_wait: float = d.DEFAULT_JS_STALL_WAIT,
    ) -> JetStream:
        """A JetStream context over this connection (streams, publish acks, consumers).

        Args:
            domain: the JetStream domain (its API is ``$JS.<domain>.API``).
            api_prefix: the API subject prefix, when no domain is given.
            timeout: seconds for API calls and publish acks, unless a call says otherwise.
            max_pending_acks: ``publish_async`` acks in flight at most.
            stall_wait: how long ``publish_async`` waits for room before it raises.

        With neither ``domain`` nor ``api_prefix`` given, a ``nats`` context read by
        ``connect()`` supplies them (its ``jetstream_domain``, else its
        ``jetstream_api_prefix``).
        """
        context = self._context
        if context is not None and domain is None and api_prefix == d.DEFAULT_JS_API_PREFIX:
            domain = context.jetstream_domain
            api_prefix = context.jetstream_api_prefix or api_prefix
        return JetStream(
            self,
            domain=domain,
            api_prefix=api_prefix,
            timeout=timeout,
            max_pending_acks=max_pending_acks,
            stall_wait=stall_wait,
        )

    def jsm(
        self,
        prefix: str = d.DEFAULT_JS_API_PREFIX,
        timeout: float = d.DEFAULT_JS_TIMEOUT,
        domain: str | None = None,
    ) -> JetStream:
        """nats-py's JetStream manager: here the JetStream context, which carries the
        manager's names (``account_info``, ``add_stream``, ``streams_info``,
        ``consumers_info``, ``pause_consumer``, ...).

        Args:
            prefix: the API subject prefix (nats-py's name for ``api_prefix``).
            timeout: seconds for API calls.
            domain: the JetStream domain, instead of a prefix.
        """
        return self.jetstream(domain=domain, api_prefix=prefix, timeout=timeout)

    def _instrument(self, otel: Instrumentation) -> None:
        """The port's ``instrument`` (``nats_sync.otel.instrument``): binds the traced
        publish and request methods ``otel`` makes and keeps it for subscriptions made
        from now on (their callbacks and ``next_msg``) and for micro services. Once per
        client: else InvalidArgumentError."""
        if self._otel is not None:
            raise InvalidArgumentError("this client is instrumented already")
        bind_traced_methods(self, self._port, otel)
        self._otel = otel
        self._port.instrumentation = otel

    def set_server_pool(self, servers: str | Sequence[str]) -> None:
        """Replaces the server pool (nats-py's ``set_server_pool``).

        The new pool is used from the next reconnect on; the current connection stays.
        It is shuffled unless ``dont_randomize``; servers that stay keep their count of
        failed attempts; servers announced in INFO are added again as they come.

        Args:
            servers: one URL, a comma-separated list, or a list of URLs.

        Raises:
            InvalidArgumentError: no URL, or one that cannot be parsed (nothing changed).
            NotSupportedError: a ``ws://`` URL without the ``websocket`` extra.
            ConnectionClosedError: the client is closed.
        """
        if self.is_closed:
            raise ConnectionClosedError("the client is closed; its server pool is gone")
        urls = server_urls(servers)
        check_websocket_support(urls)
        self._handler.reconnector.set_servers(urls)

    def force_reconnect(self) -> None:
        """Drops the current server and runs the reconnect process.

        Subscriptions are replayed and buffered publishes sent on the new connection; the
        server just left is tried last. Does nothing while already reconnecting.

        Raises:
            ConnectionClosedError: the client is closed.
            ConnectionDrainingError: the client is draining.
        """
        self._handler.force_reconnect()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def __reduce__(self) -> NoReturn:
        raise TypeError(
            "a nats_sync Client cannot be pickled: it owns a socket and threads. "
            "Create the client inside the process that uses it (e.g. lazily in "
            "a Spark worker or after a WSGI server forks)"
        )

    def __repr__(self) -> str:
        return f"<nats_sync.Client {self._handler.state.value} {self.connected_url or ''}>"

    # --- properties -------------------------------------------------------------------

    @property
    def is_connected(self) -> bool:
        """Whether a connection is up (draining counts as connected)."""
        return self._handler.state in (State.CONNECTED, State.DRAINING_SUBS, State.DRAINING_PUBS)

    @property
    def status(self) -> State:
        """The life-cycle state: one of the class constants (``Client.CONNECTED``, ...)."""
        return self._handler.state

    @property
    def is_connecting(self) -> bool:
        """Whether the first connection is not made yet: ``connect()`` runs, or
        ``retry_on_failed_connect`` keeps trying (then ``is_reconnecting`` is True too)."""
        handler = self._handler
        return handler.state is State.CONNECTING or (
            handler.state is State.RECONNECTING and handler.current_server is None
        )

    @property
    def is_draining_pubs(self) -> bool:
        """Whether ``drain()`` is flushing the last publishes (nothing new is taken)."""
        return self._handler.state is State.DRAINING_PUBS

    @property
    def is_closed(self) -> bool:
        """Whether the client is closed."""
        return self._handler.state is State.CLOSED

    @property
    def is_reconnecting(self) -> bool:
        """Whether the client is between connections."""
        return self._handler.state is State.RECONNECTING

    @property
    def is_draining(self) -> bool:
        """Whether ``drain()`` is in progress."""
        return self._handler.state in (State.DRAINING_SUBS, State.DRAINING_PUBS)

    @property
    def connected_url(self) -> str | None:
        """The current server's URL, secrets shown as ``***``; None when not connected."""
        server = self._handler.current_server
        return server.redacted_url if server is not None and self.is_connected else None

    @property
    def servers(self) -> list[str]:
        """Every server of the pool, secrets shown as ``***``."""
        return [server.redacted_url for server in self._handler.reconnector.servers()]

    @property
    def discovered_servers(self) -> list[str]:
        """Servers learned from the servers' INFO (``connect_urls``)."""
        servers = self._handler.reconnector.servers()
        return [server.redacted_url for server in servers if server.discovered]

    @property
    def server_info(self) -> dict[str, Any]:
        """The server's INFO, as a dict."""
        return dict(self._handler.server_info)

    @property
    def max_payload(self) -> int:
        """The largest payload the server accepts."""
        return self._handler.publisher.max_payload

    @property
    def client_id(self) -> int | None:
        """The id the server gave this connection."""
        value = self._handler.server_info.get("client_id")
        return int(value) if value is not None else None

    @property
    def client_ip(self) -> str | None:
        """This client's IP address as the server sees it (INFO ``client_ip``)."""
        value = self._handler.server_info.get("client_ip")
        return str(value) if value is not None else None

    @property
    def server_pool(self) -> list[Server]:
        """The server pool as nats-py shows it: each server's ``uri`` (parsed, secrets as
        ``***``) and ``reconnects`` (failed attempts since it last connected)."""
        return self._handler.reconnector.server_pool()

    @property
    def ssl_context(self) -> ssl.SSLContext:
        """The TLS context: the ``tls`` option's, else a new verifying default context
        (what a TLS connection without ``tls`` uses), as in nats-py."""
        tls = self._handler.options.tls
        return tls if tls is not None else ssl.create_default_context()

    @property
    def options(self) -> dict[str, Any]:
        """The connect options by name, as nats-py's ``options``; passwords, tokens,
        seeds and WebSocket header values shown as ``***``, server URLs redacted."""
        return self._handler.options.shown()

    @property
    def connected_server_version(self) -> str:
        """The server's version string ("" before the first INFO)."""
        return str(self._handler.server_info.get("version", ""))

    @property
    def last_error(self) -> BaseException | None:
        """The last error the client met (why it closed, for example)."""
        return self._handler.last_error

    @property
    def pending_data_size(self) -> int:
        """Bytes queued for the server and not yet sent."""
        return self._handler.outbox.size

    @property
    def stats(self) -> dict[str, int]:
        """Counts: ``in_msgs``, ``out_msgs``, ``in_bytes``, ``out_bytes`` (payloads),
        ``reconnects``, ``errors_received``."""
        handler = self._handler
        return {
            "in_msgs": handler.dispatcher.in_msgs,
            "out_msgs": handler.outbox.out_msgs,
            "in_bytes": handler.dispatcher.in_bytes,
            "out_bytes": handler.outbox.out_bytes,
            "reconnects": handler.reconnects,
            "errors_received": handler.dispatcher.errors_received,
        }


__all__ = ["Client", "Server", "connect"]

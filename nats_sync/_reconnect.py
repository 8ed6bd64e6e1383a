"""The reconnect loop: passes over the server pool, with backoff, until a handshake works.

How it works: runs on the reconnect thread, which the handler starts when a connection
is lost (or when ``retry_on_failed_connect`` lets ``connect()`` return early). Each
pass tries every server of the pool once, in the pool's order, the server just lost
last; the first pass starts at once, later ones after the tenacity wait from
``_pool.reconnect_wait`` (exponential with jitter, or the user's
``reconnect_delay_cb``). Servers that failed ``max_reconnect_attempts`` times in a row
leave the pool; when it is empty, or every server refused the credentials twice in a
row, the loop gives up. It touches only the pool, under the handler's lock, and
returns a handshaken transport or raises.

:class:`Reconnector` owns the server pool, the reconnect thread and the handshake in
progress. The handler asks it for the first connection (:meth:`Reconnector.first_pass`,
on the user's thread) and, after a loss, to start the reconnect thread
(:meth:`Reconnector.start`); it calls back ``on_connected`` with a handshaken transport,
or ``on_given_up`` with the reason. ``close()`` ends its waits and cuts a handshake short
(:meth:`Reconnector.close`).

State: ``_pool`` and ``_handshaking`` under ``_lock`` (its own; never held while
calling out); ``_thread`` is written by the handler's threads under the handler's lock
(``start``) and read by ``close``; ``_closing`` is an Event.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable
from typing import Any

import tenacity

from nats_sync import _defaults as d
from nats_sync import _proto as proto
from nats_sync._handshake import handshake
from nats_sync._options import Options
from nats_sync._pool import ServerAddress, ServerPool, reconnect_wait
from nats_sync._transport import Transport
from nats_sync.errors import (
    AuthorizationError,
    BadCredentialsError,
    ConnectionClosedError,
    Error,
    NoServersError,
    ProtocolError,
)

log = logging.getLogger("nats_sync")

Handshaken = tuple[ServerAddress, Transport, proto.Parser, dict[str, Any]]
#: Consecutive authorization failures on every server after which reconnecting stops.
AUTH_FAILURES_TO_GIVE_UP = 2


def is_tls_pool(pool: ServerPool, options: Options) -> bool:
    """Whether the pool connects with TLS (which gets the larger jitter)."""
    return options.tls is not None or any(server.tls_required for server in pool.servers)


def reconnect(
    pool: ServerPool,
    options: Options,
    lock: threading.Lock,
    rng: random.Random,
    *,
    lost: ServerAddress | None,
    is_closed: Callable[[], bool],
    sleep: Callable[[float], Any],
    report_error: Callable[[BaseException], None],
    on_open: Callable[[Transport], None] | None = None,
) -> Handshaken:
    """Tries the pool until one server completes the handshake.

    Args:
        pool: the server pool (changed under ``lock``).
        options: the client's options.
        lock: the lock that guards ``pool``.
        rng: the random source for the jitter.
        lost: the server just lost, tried last in each pass.
        is_closed: whether the client was closed meanwhile (stops the loop).
        sleep: waits between passes; must return early once the client closes.
        report_error: hands an error to ``error_cb`` (authorization failures).
        on_open: gets each transport as soon as its socket is connected (see
            ``handshake``), so ``close()`` can cut a handshake short.

    Returns:
        The server and its handshaken transport, parser and INFO.

    Raises:
        ConnectionClosedError: the client was closed while reconnecting.
        NoServersError: every server left the pool (the last failure as ``__cause__``).
        AuthorizationError: every server refused the credentials twice in a row.
    """
    auth_failures: dict[str, int] = {}
    # A credential problem of ours (a bad file, a failing vault callback) goes to
    # error_cb once per distinct message, not once per attempt.
    credential_problems: set[str] = set()

    def one_pass() -> Handshaken:
        last_error: Error | None = None
        with lock:
            order = pool.attempt_order(lost)
        for server in order:
            if is_closed():
                raise ConnectionClosedError("the client was closed while reconnecting")
            try:
                transport, parser, info = handshake(server, options, on_open)
            except Error as err:
                if is_closed():
                    raise ConnectionClosedError("the client was closed while reconnecting"
                                                ) from err
                last_error = err
                with lock:
                    pool.record_failure(server)
                if isinstance(err, AuthorizationError):
                    auth_failures[server.netloc] = auth_failures.get(server.netloc, 0) + 1
                    report_error(err)
                else:
                    auth_failures.pop(server.netloc, None)
                    if isinstance(err, BadCredentialsError) and str(err) not in credential_problems:
                        credential_problems.add(str(err))
                        report_error(err)
                log.debug("nats_sync: reconnect to %s failed: %s", server, err)
                continue
            return server, transport, parser, info
        with lock:
            for gone in pool.remove_exhausted(options.max_reconnect_attempts):
                log.info("nats_sync: %s left the pool after %d failed attempts",
                         gone, options.max_reconnect_attempts)
            remaining = list(pool.servers)
        if (
            isinstance(last_error, AuthorizationError)
            and not options.ignore_auth_error_abort
            and all(auth_failures.get(s.netloc, 0) >= AUTH_FAILURES_TO_GIVE_UP for s in remaining)
        ):
            raise last_error
        raise NoServersError(f"no server of the pool answered: {last_error}") from last_error

    jitter = d.RECONNECT_JITTER_TLS if is_tls_pool(pool, options) else d.RECONNECT_JITTER
    retrying = tenacity.Retrying(
        wait=reconnect_wait(options.reconnect_time_wait, jitter, rng, options.reconnect_delay_cb),
        sleep=sleep,
        # Decided here rather than by a stop condition: tenacity computes the wait (and
        # so would call reconnect_delay_cb) before it looks at stop.
        retry=tenacity.retry_if_exception(
            lambda error: isinstance(error, NoServersError) and len(pool) > 0 and not is_closed()
        ),
        reraise=True,
    )
    result: Handshaken = retrying(one_pass)
    return result


StartThread = Callable[[Callable[[], None], str], threading.Thread]


class Reconnector:
    """The server pool, the first connection and the reconnect thread of one client.

    Args:
        options: the client's options.
        start_thread: ``start_thread(body, role)`` starts one of the client's threads.
        report_error: hands an error to ``error_cb``.
        on_connected: reconnect thread: takes a handshaken connection; returns False
            when the client closed meanwhile.
        on_given_up: reconnect thread: no server could be reached (or an unexpected
            error stopped the loop); the handler closes the client.
    """

    def __init__(
        self,
        options: Options,
        start_thread: StartThread,
        report_error: Callable[[BaseException], None],
        on_connected: Callable[[Handshaken], bool],
        on_given_up: Callable[[BaseException], None],
    ) -> None:
        self._options = options
        self._start_thread = start_thread
        self._report_error = report_error
        self._on_connected = on_connected
        self._on_given_up = on_given_up
        self._lock = threading.Lock()
        self._rng = random.Random()
        self._pool = ServerPool(
            options.servers,
            randomize=not options.dont_randomize,
            rng=self._rng,
            ignore_discovered=options.ignore_discovered_servers,
        )
        self._thread: threading.Thread | None = None
        # The transport being handshaken, which close() shuts down.
        self._handshaking: Transport | None = None
        #: Set by close(): ends the reconnect thread's waits at once.
        self._closing = threading.Event()

    # --- the pool ----------------------------------------------------------------------

    def servers(self) -> list[ServerAddress]:
        """Every server of the pool (given and discovered)."""
        with self._lock:
            return list(self._pool.servers)

    def add_discovered(self, urls: list[Any], via: ServerAddress) -> list[ServerAddress]:
        """Adds the servers an INFO announced; returns the new ones."""
        with self._lock:
            return self._pool.add_discovered(urls, via=via)

    def record_success(self, server: ServerAddress) -> None:
        """``server`` is now the live connection."""
        with self._lock:
            self._pool.record_success(server)

    def has_alternatives(self) -> bool:
        """Whether the pool has a server besides the current one."""
        with self._lock:
            return len(self._pool) > 1

    # --- connecting --------------------------------------------------------------------

    def first_pass(self) -> Handshaken:
        """User's thread: one pass over the pool for the first connection.

        Raises:
            NoServersError: no server could be reached (the last error as ``__cause__``).
            AuthorizationError, ProtocolError, BadCredentialsError: the last server's
                refusal, a broken server, or our own credentials, each of which says
                more than "no server answered".
        """
        last: Error | None = None
        with self._lock:
            order = self._pool.attempt_order()
        for server in order:
            try:
                transport, parser, info = handshake(server, self._options)
            except Error as err:
                last = err
                with self._lock:
                    self._pool.record_failure(server)
                if isinstance(err, AuthorizationError | ProtocolError | BadCredentialsError) and (
                    server is order[-1]
                ):
                    raise
                continue
            return server, transport, parser, info
        raise NoServersError(f"could not connect to any server: {last}") from last

    def start(self, lost: ServerAddress | None, old_threads: list[threading.Thread]) -> None:
        """Starts the reconnect thread (the handler holds its lock while calling this)."""
        self._thread = self._start_thread(lambda: self._run(lost, old_threads), "reconnect")

    @property
    def thread(self) -> threading.Thread | None:
        """The reconnect thread last started, if any."""
        return self._thread

    def _run(self, lost: ServerAddress | None, old_threads: list[threading.Thread]) -> None:
        """Reconnect thread: replaces the lost connection, or gives up."""
        for thread in old_threads:
            thread.join(d.THREAD_JOIN_TIMEOUT)
        try:
            handshaken = reconnect(
                self._pool,
                self._options,
                self._lock,
                self._rng,
                lost=lost,
                is_closed=self._closing.is_set,
                sleep=self._closing.wait,
                report_error=self._report_error,
                on_open=self._track_handshake,
            )
        except ConnectionClosedError:
            return
        except Error as err:
            if self._closing.is_set():
                return  # closed meanwhile: nothing to give up on
            log.warning("nats_sync: giving up reconnecting: %s", err)
            self._on_given_up(err)
            return
        except Exception as err:  # a bug, or a user callback's: never strand the client
            log.error("nats_sync: the reconnect thread failed", exc_info=True)
            self._report_error(err)
            self._on_given_up(err)
            return
        with self._lock:
            self._handshaking = None
        self._on_connected(handshaken)

    def _track_handshake(self, transport: Transport) -> None:
        """Reconnect thread: remembers the transport being handshaken for ``close()``."""
        with self._lock:
            if self._closing.is_set():
                raise ConnectionClosedError("the client was closed while reconnecting")
            self._handshaking = transport

    def close(self) -> None:
        """Ends the reconnect thread's waits and cuts a handshake in progress short."""
        self._closing.set()
        with self._lock:
            handshaking, self._handshaking = self._handshaking, None
        if handshaking is not None:
            handshaking.shutdown()  # wakes a reconnect thread waiting on a silent server

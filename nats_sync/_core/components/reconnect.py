"""The reconnect loop: passes over the server pool, with backoff, until a handshake works.

How it works: runs on the reconnect thread, which the handler starts when a connection
is lost (or when ``retry_on_failed_connect`` lets ``connect()`` return early). Each
pass tries every server of the pool once, in the pool's order, the server just lost
last; the first pass starts at once, later ones after the tenacity wait from
``_core.transport.pool.reconnect_wait`` (exponential with jitter, or the user's
``reconnect_delay_cb``). With ``reconnect_to_server_handler``, the user's handler picks
each server and the wait before it instead (nats-py's contract; a failing handler is
reported and falls back to the pool's order). Servers that failed
``max_reconnect_attempts`` times in a row leave the pool; when it is empty, or every
server refused the credentials twice in a row, the loop gives up. It touches only the
pool, under the reconnector's lock, and returns a handshaken transport or raises. The
handler runs on the reconnect thread, as ``reconnect_delay_cb`` does.

:class:`Reconnector` owns the server pool, the reconnect thread and the handshake in
progress. The handler asks it for the first connection (:meth:`Reconnector.first_pass`,
on the user's thread) and the link (``components.link``, which owns it), after a loss,
to start the reconnect thread (:meth:`Reconnector.start`); it calls back
``on_connected`` with a handshaken transport, or ``on_given_up`` with the reason.
``close()`` ends its waits and cuts a handshake short (:meth:`Reconnector.close`).

State: ``_pool``, ``_last_info`` and ``_handshaking`` under ``_lock`` (its own; never
held while calling out); ``_thread`` is written under the handler's lock (the link holds it
when it calls ``start``) and read by ``close``; ``_closing`` is an Event.
"""

from __future__ import annotations

import logging
import math
import random
import threading
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import ParseResult

import tenacity

from nats_sync import _defaults as d
from nats_sync._core import proto
from nats_sync._core.threads.lifecycle import StartThread
from nats_sync._core.transport.handshake import handshake
from nats_sync._core.transport.options import Options
from nats_sync._core.transport.pool import (
    Server,
    ServerAddress,
    ServerPool,
    parse_server_url,
    reconnect_wait,
)
from nats_sync._core.transport.streams import Transport
from nats_sync.errors import (
    AuthorizationError,
    BadCredentialsError,
    ConnectionClosedError,
    Error,
    InvalidArgumentError,
    NoServersError,
    ProtocolError,
)

log = logging.getLogger("nats_sync")

Handshaken = tuple[ServerAddress, Transport, proto.Parser, dict[str, Any]]


def is_tls_pool(pool: ServerPool, options: Options) -> bool:
    """Whether the pool connects with TLS (which gets the larger jitter)."""
    return options.tls is not None or any(server.tls_required for server in pool.servers)


class _Attempts:
    """One reconnect's attempts: runs handshakes, records failures in the pool, and
    tells when to give up (both loops below share it).

    Reconnect thread only; the pool is touched under ``lock``.
    """

    def __init__(
        self,
        pool: ServerPool,
        options: Options,
        lock: threading.Lock,
        *,
        is_closed: Callable[[], bool],
        report_error: Callable[[BaseException], None],
        on_open: Callable[[Transport], None] | None,
    ) -> None:
        self._pool = pool
        self._options = options
        self._lock = lock
        self._is_closed = is_closed
        self._report_error = report_error
        self._on_open = on_open
        self._auth_failures: dict[str, int] = {}
        # A credential problem of ours (a bad file, a failing vault callback) goes to
        # error_cb once per distinct message, not once per attempt.
        self._credential_problems: set[str] = set()
        self.last_error: Error | None = None

    def check_open(self) -> None:
        """Raises ConnectionClosedError once the client was closed."""
        if self._is_closed():
            raise ConnectionClosedError("the client was closed while reconnecting")

    def attempt(self, server: ServerAddress) -> Handshaken | None:
        """One handshake with ``server``; None when it failed (recorded)."""
        self.check_open()
        try:
            transport, parser, info = handshake(server, self._options, self._on_open)
        except Error as err:
            if self._is_closed():
                raise ConnectionClosedError("the client was closed while reconnecting") from err
            self.last_error = err
            with self._lock:
                self._pool.record_failure(server)
            if isinstance(err, AuthorizationError):
                self._auth_failures[server.netloc] = self._auth_failures.get(server.netloc, 0) + 1
                self._report_error(err)
            else:
                self._auth_failures.pop(server.netloc, None)
                if isinstance(err, BadCredentialsError) and (
                    str(err) not in self._credential_problems
                ):
                    self._credential_problems.add(str(err))
                    self._report_error(err)
            log.debug("nats_sync: reconnect to %s failed: %s", server, err)
            return None
        return server, transport, parser, info

    def remaining(self) -> list[ServerAddress]:
        """Drops the servers that failed ``max_reconnect_attempts`` times in a row;
        returns the others."""
        with self._lock:
            for gone in self._pool.remove_exhausted(self._options.max_reconnect_attempts):
                log.info(
                    "nats_sync: %s left the pool after %d failed attempts",
                    gone,
                    self._options.max_reconnect_attempts,
                )
            return list(self._pool.servers)

    def refused_everywhere(self, remaining: list[ServerAddress]) -> bool:
        """Whether every remaining server refused the credentials twice in a row (and
        the client is not told to ignore that)."""
        return (
            isinstance(self.last_error, AuthorizationError)
            and not self._options.ignore_auth_error_abort
            and all(
                self._auth_failures.get(server.netloc, 0) >= d.AUTH_FAILURES_TO_GIVE_UP
                for server in remaining
            )
        )


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
    server_info: dict[str, Any] | None = None,
) -> Handshaken:
    """Tries the pool until one server completes the handshake.

    With ``reconnect_to_server_handler`` the handler picks each server to try and the
    wait before it (:func:`_reconnect_chosen`); otherwise each pass tries every server.

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
        server_info: the last server's INFO, for ``reconnect_to_server_handler``.

    Returns:
        The server and its handshaken transport, parser and INFO.

    Raises:
        ConnectionClosedError: the client was closed while reconnecting.
        NoServersError: every server left the pool (the last failure as ``__cause__``).
        AuthorizationError: every server refused the credentials twice in a row.
    """
    attempts = _Attempts(
        pool, options, lock, is_closed=is_closed, report_error=report_error, on_open=on_open
    )
    if options.reconnect_to_server_handler is not None:
        return _reconnect_chosen(
            pool,
            options,
            lock,
            attempts,
            lost=lost,
            sleep=sleep,
            report_error=report_error,
            server_info=server_info or {},
        )

    def one_pass() -> Handshaken:
        with lock:
            order = pool.attempt_order(lost)
        for server in order:
            handshaken = attempts.attempt(server)
            if handshaken is not None:
                return handshaken
        remaining = attempts.remaining()
        last_error = attempts.last_error
        if last_error is not None and attempts.refused_everywhere(remaining):
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


def _reconnect_chosen(
    pool: ServerPool,
    options: Options,
    lock: threading.Lock,
    attempts: _Attempts,
    *,
    lost: ServerAddress | None,
    sleep: Callable[[float], Any],
    report_error: Callable[[BaseException], None],
    server_info: dict[str, Any],
) -> Handshaken:
    """The loop of ``reconnect_to_server_handler`` (nats-py's contract): before each
    attempt the handler gets the servers left in the pool (in the pool's order, the
    server just lost last) and the last INFO, and returns the server to try and the
    seconds to wait first; the default backoff does not apply.

    A handler that raises or returns something unusable is reported to ``error_cb``
    (and logged) and that attempt goes to the pool's next server after
    ``reconnect_time_wait``, so a broken handler slows the loop down but never stops or
    spins it. Returning None picks the pool's next server, with the handler's wait.

    Raises:
        As :func:`reconnect`.
    """
    while True:
        attempts.check_open()
        remaining = attempts.remaining()
        last_error = attempts.last_error
        if not remaining:
            raise NoServersError(f"no server left in the pool: {last_error}") from last_error
        if last_error is not None and attempts.refused_everywhere(remaining):
            raise last_error
        with lock:
            order = pool.attempt_order(lost)
            views = pool.views(order)
        server, wait = choose_server(options, order, views, dict(server_info), report_error)
        if wait > 0:
            sleep(wait)
        handshaken = attempts.attempt(server)
        if handshaken is not None:
            return handshaken


def choose_server(
    options: Options,
    order: list[ServerAddress],
    views: list[Server],
    server_info: dict[str, Any],
    report_error: Callable[[BaseException], None],
) -> tuple[ServerAddress, float]:
    """Asks ``reconnect_to_server_handler`` for the next server and the wait before it.

    Args:
        options: the client's options (the handler, and the fallback wait).
        order: the pool's servers in its order, the server just lost last.
        views: ``order`` as the handler sees it (nats-py's ``Server``: uri, reconnects).
        server_info: a copy of the last INFO.
        report_error: hands the handler's failure to ``error_cb``.

    Returns:
        The server to try and the seconds to wait first: the handler's choice, or the
        first of ``order`` (after the handler's wait when it returned None; after
        ``reconnect_time_wait`` when it failed, which is reported).
    """
    handler = options.reconnect_to_server_handler
    assert handler is not None
    try:
        result: object = handler(views, server_info)
    except Exception as err:
        log.warning(
            "nats_sync: reconnect_to_server_handler raised %r; trying %s next", err, order[0]
        )
        report_error(err)
        return order[0], options.reconnect_time_wait
    problem: str
    if not isinstance(result, tuple | list) or len(result) != 2:
        problem = f"must return (server or None, delay in seconds), got {result!r}"
    else:
        choice, wait = result
        if (
            isinstance(wait, bool)
            or not isinstance(wait, int | float)
            or not (math.isfinite(wait) and wait >= 0)
        ):
            problem = f"returned a delay of {wait!r}; it must be a number of seconds >= 0"
        elif choice is None:
            return order[0], float(wait)
        else:
            server = _find_choice(order, choice)
            if server is not None:
                return server, float(wait)
            problem = (
                f"chose {choice!r}, which is not in the server pool "
                f"({', '.join(str(s) for s in order)})"
            )
    error = InvalidArgumentError(f"reconnect_to_server_handler {problem}; trying {order[0]} next")
    log.warning("nats_sync: %s", error)
    report_error(error)
    return order[0], options.reconnect_time_wait


def _find_choice(order: list[ServerAddress], choice: object) -> ServerAddress | None:
    """The server of ``order`` that the handler's ``choice`` names (a ``Server`` view,
    or anything with a parsed ``uri``, or a URL), matched by host and port."""
    uri = getattr(choice, "uri", choice)
    url = uri.geturl() if isinstance(uri, ParseResult) else uri
    if not isinstance(url, str):
        return None
    try:
        netloc = parse_server_url(url).netloc
    except InvalidArgumentError:
        return None
    return next((server for server in order if server.netloc == netloc), None)


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
            randomize=options.randomize,
            rng=self._rng,
            ignore_discovered=options.ignore_discovered_servers,
        )
        self._thread: threading.Thread | None = None
        # The INFO of the last handshake, for reconnect_to_server_handler (under _lock).
        self._last_info: dict[str, Any] = {}
        # The transport being handshaken, which close() shuts down.
        self._handshaking: Transport | None = None
        #: Set by close(): ends the reconnect thread's waits at once.
        self._closing = threading.Event()

    # --- the pool ----------------------------------------------------------------------

    def servers(self) -> list[ServerAddress]:
        """Every server of the pool (given and discovered)."""
        with self._lock:
            return list(self._pool.servers)

    def server_pool(self) -> list[Server]:
        """The pool as nats-py shows it: each server's URL (parsed, secrets as ``***``)
        and its failed attempts since it last connected."""
        with self._lock:
            return self._pool.views()

    def set_servers(self, urls: Sequence[str]) -> None:
        """Replaces the pool with ``urls`` for the next reconnect (``set_server_pool``).

        Raises:
            InvalidArgumentError: no URL, or one that cannot be parsed (nothing changed).
        """
        with self._lock:
            self._pool.replace(urls)

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
            with self._lock:
                self._last_info = info
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
        with self._lock:
            last_info = dict(self._last_info)
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
                server_info=last_info,
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
            self._last_info = handshaken[3]
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

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

``ReconnectMixin`` is the handler's side (its state is the handler's): what happens
when a connection is lost (reader, writer or timer thread), the reconnect thread's body,
``force_reconnect`` and leaving a lame duck server.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import tenacity

from nats_sync import _defaults as d
from nats_sync import _proto as proto
from nats_sync._handshake import handshake
from nats_sync._options import Options
from nats_sync._pool import ServerAddress, ServerPool, reconnect_wait
from nats_sync._state import State
from nats_sync._transport import Transport
from nats_sync.errors import (
    AuthorizationError,
    BadCredentialsError,
    ConnectionClosedError,
    Error,
    NatsConnectionError,
    NoServersError,
    StaleConnectionError,
)

if TYPE_CHECKING:
    from nats_sync._callbacks import CallbackRunner
    from nats_sync._connection import Connection
    from nats_sync._outbox import Outbox

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
        lock: the handler's lock.
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


class ReconnectMixin:
    """Connection loss and reconnect; mixed into ``Handler``, whose attributes these are."""

    options: Options
    state: State
    outbox: Outbox
    current_server: ServerAddress | None
    last_error: BaseException | None
    reconnects: int
    _lock: threading.Lock
    _conn: Connection | None
    _conn_threads: list[threading.Thread]
    _reconnect_thread: threading.Thread | None
    _handshaking: Transport | None
    _closing: threading.Event
    _pool: ServerPool
    _rng: random.Random
    _callbacks: CallbackRunner
    _fatal_server_error: Error | None

    if TYPE_CHECKING:

        def _start_thread(self, target: Callable[[], None], role: str) -> threading.Thread: ...
        def _check_can_start(self) -> None: ...
        def report_error(self, error: BaseException) -> None: ...
        def close(self) -> None: ...
        def _activate(
            self,
            server: ServerAddress,
            transport: Transport,
            parser: proto.Parser,
            info: dict[str, Any],
        ) -> bool: ...

    def _on_lost(self, conn: Connection, error: Error) -> None:
        """Reader, writer or timer thread: the live connection failed (or was dropped)."""
        with self._lock:
            if conn is not self._conn or self.state is State.CLOSED:
                return
            retry = (
                self.state is State.CONNECTED
                and self.options.allow_reconnect
                and self.options.max_reconnect_attempts != 0
            )
            if retry:
                self.state = State.RECONNECTING
                self._conn = None
                self.outbox.set_connected(False)
                self.outbox.stop_writer(discard=False)  # wakes the old writer so it ends
                old_threads = self._conn_threads
                self._conn_threads = []
        log.info("nats_sync: connection to %s lost: %s", self.current_server, error)
        if not isinstance(error, NatsConnectionError) or isinstance(error, StaleConnectionError):
            self.report_error(error)
        # Without its traceback: the reader's frame (and its 256 KiB buffer) would
        # otherwise stay alive as long as last_error does.
        self.last_error = (self._fatal_server_error or error).with_traceback(None)
        self._fatal_server_error = None
        self._callbacks.submit(self.options.disconnected_cb)
        if not retry:
            self.close()
            return
        with self._lock:
            if self.state is State.RECONNECTING:
                self._reconnect_thread = self._start_thread(
                    lambda: self._run_reconnect(old_threads), "reconnect"
                )

    def _run_reconnect(self, old_threads: list[threading.Thread]) -> None:
        """Reconnect thread: replaces the lost connection, or closes the client."""
        for thread in old_threads:
            thread.join(d.THREAD_JOIN_TIMEOUT)
        # The old writer has put back what it could not send; control frames are
        # replayed from state, and flushes still waiting get fresh PINGs.
        self.outbox.keep_messages_only()
        try:
            server, transport, parser, info = reconnect(
                self._pool,
                self.options,
                self._lock,
                self._rng,
                lost=self.current_server,
                is_closed=lambda: self.state is State.CLOSED,
                sleep=self._closing.wait,
                report_error=self.report_error,
                on_open=self._track_handshake,
            )
        except ConnectionClosedError:
            return
        except Error as err:
            if self.state is State.CLOSED:
                return  # closed meanwhile: nothing to give up on
            log.warning("nats_sync: giving up reconnecting: %s", err)
            self.last_error = err
            self.close()
            return
        except Exception as err:  # a bug, or a user callback's: never strand the client
            log.error("nats_sync: the reconnect thread failed", exc_info=True)
            self.last_error = err
            self.report_error(err)
            self.close()
            return
        if self._activate(server, transport, parser, info):
            self.reconnects += 1
            self._callbacks.submit(self.options.reconnected_cb)

    def _track_handshake(self, transport: Transport) -> None:
        """Reconnect thread: remembers the transport being handshaken for ``close()``."""
        with self._lock:
            if self.state is State.CLOSED:
                raise ConnectionClosedError("the client was closed while reconnecting")
            self._handshaking = transport

    def force_reconnect(self) -> None:
        """Drops the live connection and runs the reconnect process."""
        if not self.options.allow_reconnect or self.options.max_reconnect_attempts == 0:
            raise Error(
                "force_reconnect() needs reconnecting to be allowed "
                "(allow_reconnect=True and max_reconnect_attempts != 0)"
            )
        with self._lock:
            self._check_can_start()
            conn = self._conn
            if self.state is not State.CONNECTED or conn is None:
                return  # already reconnecting
        conn.shutdown()
        self._on_lost(conn, NatsConnectionError("reconnect forced by the user"))

    def _leave_lame_duck_server(self) -> None:
        """Reader thread: the server is going away; move to another one if there is one."""
        with self._lock:
            conn = self._conn
            others = len(self._pool) > 1
        if conn is None or not others or not self.options.allow_reconnect:
            return
        conn.shutdown()
        self._on_lost(conn, NatsConnectionError(f"{self.current_server} entered lame duck mode"))

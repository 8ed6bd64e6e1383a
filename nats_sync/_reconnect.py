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
from nats_sync.errors import AuthorizationError, ConnectionClosedError, Error, NoServersError

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

    Returns:
        The server and its handshaken transport, parser and INFO.

    Raises:
        ConnectionClosedError: the client was closed while reconnecting.
        NoServersError: every server left the pool (the last failure as ``__cause__``).
        AuthorizationError: every server refused the credentials twice in a row.
    """
    auth_failures: dict[str, int] = {}

    def one_pass() -> Handshaken:
        last_error: Error | None = None
        with lock:
            order = pool.attempt_order(lost)
        for server in order:
            if is_closed():
                raise ConnectionClosedError("the client was closed while reconnecting")
            try:
                transport, parser, info = handshake(server, options)
            except Error as err:
                last_error = err
                with lock:
                    pool.record_failure(server)
                if isinstance(err, AuthorizationError):
                    auth_failures[server.netloc] = auth_failures.get(server.netloc, 0) + 1
                    report_error(err)
                else:
                    auth_failures.pop(server.netloc, None)
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

"""One lazily made client per process: for pre-fork WSGI servers and Spark workers.

How it works: gunicorn ``--preload``, uWSGI and Spark's worker daemon fork processes
that live for many requests or tasks; a client must be made in the process that uses
it, after the fork. :func:`process_client` keeps a module-level cache keyed by
(servers, options): the first call in a process connects, later calls (from any
thread) get the same client. The cache remembers the pid that filled it: a forked
child finds a foreign pid, forgets the parent's clients without touching their sockets,
and connects afresh. Nothing runs at import time except creating a lock; the clients
are closed (flushing what they hold) when the process exits.
"""

from __future__ import annotations

import atexit
import os
import threading
from collections.abc import Mapping
from typing import Any

from nats_sync.client import Client, connect


class _Cache:
    """The clients of this process, and the pid that made them."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.clients: dict[tuple[Any, ...], Client] = {}
        self.owner_pid = os.getpid()
        self.atexit_registered = False

    def claim(self) -> None:
        """Forgets clients inherited across fork: their sockets belong to the parent."""
        if self.owner_pid != os.getpid():
            self.clients.clear()
            self.owner_pid = os.getpid()


_cache = _Cache()


def _cache_key(servers: str | list[str], options: Mapping[str, Any]) -> tuple[Any, ...]:
    server_key = (servers,) if isinstance(servers, str) else tuple(servers)
    return (server_key, tuple(sorted((key, repr(value)) for key, value in options.items())))


def process_client(servers: str | list[str], **options: Any) -> Client:
    """The connected client of this process for ``servers`` and ``options``.

    Example:
        A WSGI app (the module is imported before the server forks):

        ```python
        def app(environ, start_response):
            nc = nats_sync.process_client("nats://nats:4222", name="web")
            reply = nc.request("prices.lookup", b"sku-1", timeout=1.0)
        ```

    Args:
        servers: what `nats_sync.connect` takes as ``servers``.
        **options: further `connect` keywords; calls with equal options (compared by
            ``repr``) share a client.

    Returns:
        A live client, made on first use in this process (and again if it was closed)
        and reused afterwards.
    """
    key = _cache_key(servers, options)
    with _cache.lock:
        _cache.claim()
        client = _cache.clients.get(key)
        if client is not None and not client.is_closed:
            return client
        client = connect(servers, **options)
        _cache.clients[key] = client
        if not _cache.atexit_registered:
            atexit.register(close_process_clients)
            _cache.atexit_registered = True
        return client


def process_client_count() -> int:
    """How many clients this process holds (for tests and diagnostics)."""
    with _cache.lock:
        _cache.claim()
        return len(_cache.clients)


def close_process_clients() -> None:
    """Closes every client this process created (they flush pending data first)."""
    with _cache.lock:
        _cache.claim()
        clients = list(_cache.clients.values())
        _cache.clients.clear()
    for client in clients:
        client.close()

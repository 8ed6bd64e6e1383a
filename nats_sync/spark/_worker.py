"""One NATS client per Spark Python worker process, shared by every task it runs.

How it works: Spark forks its Python workers from ``pyspark.daemon`` and, with worker
reuse on (the default), keeps them for many tasks, jobs and stages. A module-level cache
keyed by (servers, options) lets every task in a worker reuse one connection. The cache
remembers the pid that filled it: a forked child finds a foreign pid, forgets the
parent's clients without touching their sockets, and connects afresh. Nothing here runs
at import time except creating a lock; clients are made on first use, from the task's
thread, and closed (flushing what they hold) when the worker exits.
"""

from __future__ import annotations

import atexit
import os
import ssl
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


def worker_client(servers: str | list[str], options: Mapping[str, Any]) -> Client:
    """The connected client of this process for ``servers`` and ``options``.

    Args:
        servers: what `nats_sync.connect` takes as ``servers``.
        options: further `connect` keywords (values with a stable ``repr``); ``tls_ca``,
            a CA file path, becomes the ``tls`` context.

    Returns:
        A live client, created on first use in this process and reused afterwards.
    """
    key = _cache_key(servers, options)
    with _cache.lock:
        _cache.claim()
        client = _cache.clients.get(key)
        if client is not None and not client.is_closed:
            return client
        client = connect(servers, **_connect_kwargs(options))
        _cache.clients[key] = client
        if not _cache.atexit_registered:
            atexit.register(close_worker_clients)
            _cache.atexit_registered = True
        return client


def _connect_kwargs(options: Mapping[str, Any]) -> dict[str, Any]:
    kwargs = dict(options)
    # A CA file travels as its path (stable to pickle and to key the cache by) and
    # becomes an SSL context only here, in the process that connects.
    ca_file = kwargs.pop("tls_ca", None)
    if ca_file is not None:
        kwargs["tls"] = ssl.create_default_context(cafile=str(ca_file))
    return kwargs


def worker_client_count() -> int:
    """How many clients this process holds (for tests and diagnostics)."""
    with _cache.lock:
        _cache.claim()
        return len(_cache.clients)


def close_worker_clients() -> None:
    """Closes every client this process created (they flush pending data first)."""
    with _cache.lock:
        _cache.claim()
        clients = list(_cache.clients.values())
        _cache.clients.clear()
    for client in clients:
        client.close()

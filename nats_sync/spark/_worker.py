"""The Spark side of the per-process client: string options become connect keywords,
and objects kept per client (JetStream contexts, bound buckets).

How it works: runs in Spark's Python workers (task threads) and in the driver's data
source processes. A CA file travels from the driver as its path (stable to pickle and
to key the client cache by) and becomes one SSL context per path and process here; the
client itself comes from :func:`nats_sync.process_client`. A `PerClient` cache holds
what tasks of this process share on that client, under its own lock, and makes it again
once the client it was made on has closed.
"""

from __future__ import annotations

import functools
import ssl
import threading
from collections.abc import Callable, Hashable, Mapping
from typing import Any, Generic, TypeVar

from nats_sync._process import close_process_clients, process_client, process_client_count
from nats_sync.client import Client

__all__ = ["PerClient", "close_worker_clients", "worker_client", "worker_client_count"]

T = TypeVar("T")

worker_client_count = process_client_count
close_worker_clients = close_process_clients


@functools.lru_cache(maxsize=16)
def _context_for(ca_file: str) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=ca_file)


def worker_client(servers: str | list[str], options: Mapping[str, Any]) -> Client:
    """This process's client for ``servers`` and ``options`` (``tls_ca``: a CA file path)."""
    kwargs = dict(options)
    ca_file = kwargs.pop("tls_ca", None)
    if ca_file is not None:
        kwargs["tls"] = _context_for(str(ca_file))
    return process_client(servers, **kwargs)


class PerClient(Generic[T]):
    """Objects made once per (client, key) in this process; made again after a close."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._made: dict[tuple[int, Hashable], tuple[Client, T]] = {}

    def get(self, client: Client, key: Hashable, make: Callable[[], T]) -> T:
        """The object for ``client`` and ``key``, made by ``make()`` on first use."""
        entry = (id(client), key)
        with self._lock:
            found = self._made.get(entry)
            if found is not None and found[0] is client:
                return found[1]
            for stale in [k for k, (made_on, _) in self._made.items() if made_on.is_closed]:
                del self._made[stale]
            value = make()
            self._made[entry] = (client, value)
            return value

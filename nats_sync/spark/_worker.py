"""The Spark side of the per-process client: string options become connect keywords.

How it works: runs in Spark's Python workers (task threads) and in the driver's data
source processes. A CA file travels from the driver as its path (stable to pickle and
to key the client cache by) and becomes one SSL context per path and process here; the
client itself comes from :func:`nats_sync.process_client`.
"""

from __future__ import annotations

import functools
import ssl
from collections.abc import Mapping
from typing import Any

from nats_sync._process import close_process_clients, process_client, process_client_count
from nats_sync.client import Client

__all__ = ["close_worker_clients", "worker_client", "worker_client_count"]

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

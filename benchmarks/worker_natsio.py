"""Scenarios measured with natsio, the zero-dependency asyncio client (Python >= 3.13).

Runs on natsio's own interpreter (``procs.python_for``), which has natsio and the
standard library only: nothing here imports nats_sync, nats-py or matplotlib.
"""

from __future__ import annotations

import asyncio
from typing import Any

import natsio

from benchmarks import common as c

Metrics = dict[str, Any]


async def _request_concurrent(
    url: str,
    size: int,
    workers: int,
    per_worker: int,
    warmup: int,
    count_switches: bool = False,
) -> Metrics:
    """``workers`` tasks sharing one connection, ``per_worker`` requests each."""
    data = c.payload(size)
    nc = await natsio.connect(url)
    for _ in range(warmup):
        await nc.request(c.ECHO_SUBJECT, data, timeout=c.REQUEST_TIMEOUT)
    metrics = await c.gather_requesters(
        lambda: nc.request(c.ECHO_SUBJECT, data, timeout=c.REQUEST_TIMEOUT),
        natsio.NATSError,
        workers,
        per_worker,
        count_switches,
    )
    await nc.close()
    return metrics


def _request_concurrent_sync(**kwargs: Any) -> Metrics:
    return asyncio.run(_request_concurrent(**kwargs))


SCENARIOS = {
    "request_concurrent": _request_concurrent_sync,
}

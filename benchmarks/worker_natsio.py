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
    url: str, size: int, workers: int, per_worker: int, warmup: int,
    count_switches: bool = False,
) -> Metrics:
    """``workers`` tasks sharing one connection, ``per_worker`` requests each."""
    data = c.payload(size)
    nc = await natsio.connect(url)
    for _ in range(warmup):
        await nc.request(c.ECHO_SUBJECT, data, timeout=c.REQUEST_TIMEOUT)
    errors = [0]

    async def requester() -> None:
        for _ in range(per_worker):
            try:
                await nc.request(c.ECHO_SUBJECT, data, timeout=c.REQUEST_TIMEOUT)
            except natsio.NATSError:
                errors[0] += 1

    watch = c.Stopwatch().start()
    await asyncio.gather(*(requester() for _ in range(workers)))
    watch.stop()
    metrics = c.throughput_metrics(workers * per_worker, watch, "reqs")
    if count_switches:  # an untimed second round under perf, as in worker_sync
        counter = c.SwitchCounter().start()
        await asyncio.gather(*(requester() for _ in range(workers)))
        metrics.update(counter.metrics(workers * per_worker))
    await nc.close()
    metrics["errors"] = errors[0]
    return metrics


def _request_concurrent_sync(**kwargs: Any) -> Metrics:
    return asyncio.run(_request_concurrent(**kwargs))


SCENARIOS = {
    "request_concurrent": _request_concurrent_sync,
}

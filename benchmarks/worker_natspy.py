"""Scenarios measured with nats-py, the official asyncio client (the baseline)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import nats
from nats.aio.msg import Msg
from nats.errors import SlowConsumerError

from benchmarks import common as c

Metrics = dict[str, Any]


async def _ignore_error(error: Exception) -> None:
    """nats-py logs errors by default; the scenarios count what they care about."""


async def _connect(url: str, error_cb: Callable[[Exception], Awaitable[None]] | None = None) -> Any:
    return await nats.connect(url, error_cb=error_cb or _ignore_error)


async def _publish(url: str, size: int, count: int) -> Metrics:
    data = c.payload(size)
    nc = await _connect(url)
    await nc.flush()
    pub = nc.publish
    subject = c.PUBLISH_SUBJECT
    watch = c.Stopwatch().start()
    for _ in range(count):
        await pub(subject, data)
    await nc.flush(timeout=60)
    watch.stop()
    await nc.close()
    return c.throughput_metrics(count, watch, "msgs")


async def _pubsub(url: str, size: int, count: int) -> Metrics:
    frames = [c.seq_payload(n, size) for n in range(count)]
    received: list[bytes] = []
    last_at = [0.0]
    slow = [0]
    done = asyncio.Event()

    async def on_error(error: Exception) -> None:
        if isinstance(error, SlowConsumerError):
            slow[0] += 1

    async def on_msg(msg: Msg) -> None:
        received.append(msg.data)
        last_at[0] = time.perf_counter()
        if len(received) >= count:
            done.set()

    sub_nc = await _connect(url, on_error)
    pub_nc = await _connect(url)
    await sub_nc.subscribe(
        c.PUBSUB_SUBJECT, cb=on_msg, pending_msgs_limit=count * 2, pending_bytes_limit=1 << 30
    )
    await sub_nc.flush()
    watch = c.Stopwatch().start()
    pub = pub_nc.publish
    subject = c.PUBSUB_SUBJECT
    for frame in frames:
        await pub(subject, frame)
    await pub_nc.flush(timeout=60)
    seen = -1
    while not done.is_set() and len(received) != seen:  # stop once idle for a while
        seen = len(received)
        try:
            await asyncio.wait_for(done.wait(), c.IDLE_TIMEOUT)
        except asyncio.TimeoutError:
            pass
    watch.stop(wall_end=last_at[0] or None)
    await pub_nc.close()
    await sub_nc.close()
    metrics = c.throughput_metrics(max(len(received), 1), watch, "msgs")
    metrics.update(c.order_metrics(received, count))
    metrics["dropped"] = slow[0]
    return metrics


async def _request_seq(url: str, size: int, count: int, warmup: int) -> Metrics:
    data = c.payload(size)
    nc = await _connect(url)
    for _ in range(warmup):
        await nc.request(c.ECHO_SUBJECT, data, timeout=c.REQUEST_TIMEOUT)
    request = nc.request
    subject = c.ECHO_SUBJECT
    clock = time.perf_counter_ns
    latencies: list[int] = []
    watch = c.Stopwatch().start()
    for _ in range(count):
        started = clock()
        await request(subject, data, timeout=c.REQUEST_TIMEOUT)
        latencies.append(clock() - started)
    watch.stop()
    await nc.close()
    return c.latency_metrics(latencies, watch)


async def _request_concurrent(
    url: str, size: int, workers: int, per_worker: int, warmup: int
) -> Metrics:
    data = c.payload(size)
    nc = await _connect(url)
    for _ in range(warmup):
        await nc.request(c.ECHO_SUBJECT, data, timeout=c.REQUEST_TIMEOUT)
    errors = [0]

    async def requester() -> None:
        for _ in range(per_worker):
            try:
                await nc.request(c.ECHO_SUBJECT, data, timeout=c.REQUEST_TIMEOUT)
            except nats.errors.Error:
                errors[0] += 1

    watch = c.Stopwatch().start()
    await asyncio.gather(*(requester() for _ in range(workers)))
    watch.stop()
    await nc.close()
    metrics = c.throughput_metrics(workers * per_worker, watch, "reqs")
    metrics["errors"] = errors[0]
    return metrics


async def _request_pipelined(url: str, size: int, count: int, warmup: int) -> Metrics:
    data = c.payload(size)
    nc = await _connect(url)
    for _ in range(warmup):
        await nc.request(c.ECHO_SUBJECT, data, timeout=c.REQUEST_TIMEOUT)
    watch = c.Stopwatch().start()
    results = await asyncio.gather(
        *(nc.request(c.ECHO_SUBJECT, data, timeout=c.BATCH_TIMEOUT) for _ in range(count)),
        return_exceptions=True,
    )
    watch.stop()
    await nc.close()
    metrics = c.throughput_metrics(count, watch, "reqs")
    metrics["errors"] = sum(1 for r in results if not isinstance(r, Msg))
    return metrics


def _sync(coroutine_fn: Callable[..., Coroutine[Any, Any, Metrics]]) -> Callable[..., Metrics]:
    def run(**kwargs: Any) -> Metrics:
        return asyncio.run(coroutine_fn(**kwargs))

    return run


SCENARIOS = {
    "publish": _sync(_publish),
    "pubsub": _sync(_pubsub),
    "request_seq": _sync(_request_seq),
    "request_concurrent": _sync(_request_concurrent),
    "request_pipelined": _sync(_request_pipelined),
}

"""Scenarios measured with nats-py, the official asyncio client (the baseline)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import nats
from nats.aio.msg import Msg
from nats.errors import SlowConsumerError
from nats.js.api import KeyValueConfig, ObjectStoreConfig, StorageType

from benchmarks import common as c
from benchmarks import micro_service, wsgi_bench
from benchmarks import request_many as request_many_case

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
    url: str,
    size: int,
    workers: int,
    per_worker: int,
    warmup: int,
    count_switches: bool = False,
) -> Metrics:
    data = c.payload(size)
    nc = await _connect(url)
    for _ in range(warmup):
        await nc.request(c.ECHO_SUBJECT, data, timeout=c.REQUEST_TIMEOUT)
    metrics = await c.gather_requesters(
        lambda: nc.request(c.ECHO_SUBJECT, data, timeout=c.REQUEST_TIMEOUT),
        nats.errors.Error,
        workers,
        per_worker,
        count_switches,
    )
    await nc.close()
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


# --- JetStream ------------------------------------------------------------------------


@asynccontextmanager
async def _js_stream(url: str, scenario: str) -> AsyncIterator[tuple[Any, Any, c.JsNames]]:
    """A connection, its JetStream context and a fresh file stream, deleted after."""
    names = c.js_names(scenario)
    nc = await _connect(url)
    try:
        js = nc.jetstream(timeout=c.JS_TIMEOUT)
        await js.add_stream(name=names.stream, subjects=[names.subject], storage=StorageType.FILE)
        try:
            yield nc, js, names
        finally:
            await js.delete_stream(names.stream)
    finally:
        await nc.close()


async def _stored(js: Any, names: c.JsNames) -> int:
    return int((await js.stream_info(names.stream)).state.messages)


async def _publish_all(js: Any, subject: str, data: bytes, count: int) -> list[Any]:
    """``count`` publish_async calls, then waits for every ack; returns the futures.

    nats-py's ``publish_async_completed`` takes no timeout, hence the wait_for.
    """
    publish_async = js.publish_async
    futures = [await publish_async(subject, data) for _ in range(count)]
    await asyncio.wait_for(js.publish_async_completed(), 60)
    return futures


def _failed(futures: list[Any]) -> int:
    return sum(1 for future in futures if not future.done() or future.exception() is not None)


async def _js_publish_seq(url: str, server_pid: int, size: int, count: int, warmup: int) -> Metrics:
    data = c.payload(size)
    async with _js_stream(url, "js_publish_seq") as (_nc, js, names):
        for _ in range(warmup):
            await js.publish(names.subject, data)
        publish = js.publish
        subject = names.subject
        clock = time.perf_counter_ns
        latencies: list[int] = []
        watch = c.Stopwatch(peer_pid=server_pid).start()
        for _ in range(count):
            started = clock()
            await publish(subject, data)
            latencies.append(clock() - started)
        watch.stop()
        missing = warmup + count - await _stored(js, names)
    metrics = c.latency_metrics(latencies, watch)
    metrics.update(c.server_cpu_metric(watch, count), errors=missing)
    return metrics


async def _js_publish_async(
    url: str, server_pid: int, size: int, count: int, warmup: int
) -> Metrics:
    data = c.payload(size)
    async with _js_stream(url, "js_publish_async") as (_nc, js, names):
        await _publish_all(js, names.subject, data, warmup)  # opens the ack subscription
        watch = c.Stopwatch(peer_pid=server_pid).start()
        futures = await _publish_all(js, names.subject, data, count)
        watch.stop()
        errors = _failed(futures) + (warmup + count - await _stored(js, names))
    metrics = c.throughput_metrics(count, watch, "acks")
    metrics["cpu_us_per_msg"] = metrics.pop("cpu_us_per_ack")
    metrics.update(c.server_cpu_metric(watch, count), errors=errors)
    return metrics


async def _js_fast_publish(
    url: str, server_pid: int, size: int, count: int, warmup: int
) -> Metrics:
    """nats-py has no fast-ingest batch: its way of storing many is publish_async."""
    metrics = await _js_publish_async(url, server_pid, size, count, warmup)
    metrics["msgs_per_s"] = metrics.pop("acks_per_s")
    return metrics


async def _js_fetch(url: str, server_pid: int, size: int, count: int) -> Metrics:
    data = c.payload(size)
    async with _js_stream(url, "js_fetch") as (nc, js, names):
        failed = _failed(await _publish_all(js, names.subject, data, count))
        # pull_subscribe creates the durable; nats-py's ConsumerConfig defaults to
        # explicit ack, as the nats_sync side asks for by name.
        sub = await js.pull_subscribe(names.subject, durable=names.durable, stream=names.stream)
        fetch = sub.fetch
        batch, wait = c.JS_FETCH_BATCH, c.JS_FETCH_WAIT
        received = 0
        watch = c.Stopwatch(peer_pid=server_pid).start()
        while received < count:
            try:
                msgs = await fetch(batch, timeout=wait)
            except nats.errors.TimeoutError:
                break  # nothing within the wait: the count below shows the shortfall
            for msg in msgs:
                await msg.ack()
            received += len(msgs)
        await nc.flush(timeout=c.JS_TIMEOUT)
        watch.stop()
        unacked = await _unacked(js, names)
        await sub.unsubscribe()
    metrics = c.throughput_metrics(max(received, 1), watch, "msgs")
    metrics.update(
        c.server_cpu_metric(watch, max(received, 1)),
        errors=failed + count - received,
        unacked=unacked,
    )
    return metrics


async def _js_push(url: str, server_pid: int, size: int, count: int) -> Metrics:
    data = c.payload(size)
    async with _js_stream(url, "js_push") as (nc, js, names):
        failed = _failed(await _publish_all(js, names.subject, data, count))
        # js.subscribe makes the durable push consumer (explicit acks by default); no
        # callback, so it is read with next_msg and acked by hand, as on our side.
        sub = await js.subscribe(
            names.subject,
            durable=names.durable,
            stream=names.stream,
            manual_ack=True,
            flow_control=True,
            idle_heartbeat=c.JS_PUSH_HEARTBEAT,
        )
        next_msg = sub.next_msg
        received = 0
        watch = c.Stopwatch(peer_pid=server_pid).start()
        try:
            while received < count:
                msg = await next_msg(timeout=c.JS_FETCH_WAIT)
                await msg.ack()
                received += 1
        except nats.errors.TimeoutError:
            pass  # nothing within the wait: the count below shows the shortfall
        await nc.flush(timeout=c.JS_TIMEOUT)
        watch.stop()
        unacked = await _unacked(js, names)
        await sub.unsubscribe()
    metrics = c.throughput_metrics(max(received, 1), watch, "msgs")
    metrics.update(
        c.server_cpu_metric(watch, max(received, 1)),
        errors=failed + count - received,
        unacked=unacked,
    )
    return metrics


async def _unacked(js: Any, names: c.JsNames) -> int:
    """The consumer's ack-pending count once it settles (the server applies acks
    asynchronously, so right after the flush a few may still be queued)."""
    deadline = time.monotonic() + 2.0
    while True:
        info = await js.consumer_info(names.stream, names.durable)
        if not info.num_ack_pending or time.monotonic() >= deadline:
            return int(info.num_ack_pending or 0)
        await asyncio.sleep(0.05)


# --- key-value and object store -------------------------------------------------------


@asynccontextmanager
async def _kv_bucket(url: str, scenario: str) -> AsyncIterator[Any]:
    """A fresh file-storage key-value bucket (history 1), deleted after."""
    bucket = c.bucket_name(scenario)
    nc = await _connect(url)
    try:
        js = nc.jetstream(timeout=c.JS_TIMEOUT)
        kv = await js.create_key_value(
            KeyValueConfig(bucket=bucket, history=1, storage=StorageType.FILE)
        )
        try:
            yield kv
        finally:
            await js.delete_key_value(bucket)
    finally:
        await nc.close()


async def _kv_get(url: str, server_pid: int, size: int, count: int, warmup: int) -> Metrics:
    data = c.payload(size)
    async with _kv_bucket(url, "kv_get") as kv:
        await kv.put(c.KV_KEY, data)
        for _ in range(warmup):
            await kv.get(c.KV_KEY)
        get = kv.get
        key = c.KV_KEY
        clock = time.perf_counter_ns
        latencies: list[int] = []
        watch = c.Stopwatch(peer_pid=server_pid).start()
        for _ in range(count):
            started = clock()
            entry = await get(key)
            latencies.append(clock() - started)
        watch.stop()
    metrics = c.latency_metrics(latencies, watch)
    metrics.update(c.server_cpu_metric(watch, count), errors=int(entry.value != data))
    return metrics


async def _kv_put(url: str, server_pid: int, size: int, count: int, warmup: int) -> Metrics:
    data = c.payload(size)
    keys = c.kv_keys(warmup + count)
    async with _kv_bucket(url, "kv_put") as kv:
        for key in keys[:warmup]:
            await kv.put(key, data)
        put = kv.put
        revision = 0
        watch = c.Stopwatch(peer_pid=server_pid).start()
        for key in keys[warmup:]:
            revision = await put(key, data)
        watch.stop()
    metrics = c.throughput_metrics(count, watch, "puts")
    metrics.update(c.server_cpu_metric(watch, count), errors=warmup + count - revision)
    return metrics


@asynccontextmanager
async def _object_store(url: str, scenario: str) -> AsyncIterator[Any]:
    """A fresh file-storage object store, deleted after."""
    bucket = c.bucket_name(scenario)
    nc = await _connect(url)
    try:
        js = nc.jetstream(timeout=c.JS_TIMEOUT)
        obs = await js.create_object_store(
            bucket, config=ObjectStoreConfig(storage=StorageType.FILE)
        )
        try:
            yield obs
        finally:
            await js.delete_object_store(bucket)
    finally:
        await nc.close()


async def _obj_put(url: str, server_pid: int, mib: int) -> Metrics:
    data = c.payload(mib << 20)
    async with _object_store(url, "obj_put") as obs:
        await obs.put("warmup", c.payload(c.OBJECT_WARMUP_SIZE))
        watch = c.Stopwatch(peer_pid=server_pid).start()
        info = await obs.put(c.OBJECT_NAME, data)
        watch.stop()
        stored = (await obs.get_info(c.OBJECT_NAME)).size
    metrics = c.object_metrics(len(data), watch)
    metrics["errors"] = int(info.size != len(data) or stored != len(data))
    return metrics


async def _obj_get(url: str, server_pid: int, mib: int) -> Metrics:
    data = c.payload(mib << 20)
    async with _object_store(url, "obj_get") as obs:
        await obs.put("warmup", c.payload(c.OBJECT_WARMUP_SIZE))
        await obs.get("warmup")
        await obs.put(c.OBJECT_NAME, data)
        watch = c.Stopwatch(peer_pid=server_pid).start()
        got = (await obs.get(c.OBJECT_NAME)).data
        watch.stop()
    metrics = c.object_metrics(len(data), watch)
    metrics["errors"] = int(got != data)
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
    "request_many": request_many_case.drive_natspy,
    "js_publish_seq": _sync(_js_publish_seq),
    "js_publish_async": _sync(_js_publish_async),
    "js_fast_publish": _sync(_js_fast_publish),
    "js_fetch": _sync(_js_fetch),
    "js_push": _sync(_js_push),
    "kv_get": _sync(_kv_get),
    "kv_put": _sync(_kv_put),
    "obj_put": _sync(_obj_put),
    "obj_get": _sync(_obj_get),
    # The service under test is nats-py's (a child process); the driver is nats_sync's
    # request_batch for both clients, so only the service differs.
    "micro_service": partial(micro_service.drive, "nats-py"),
    # nats-py runs inside gunicorn, on a loop thread (benchmarks/wsgi_app.py), not here.
    "wsgi": partial(wsgi_bench.drive, "nats-py"),
}

"""Scenarios measured with nats_sync (the client under test)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any

import nats_sync
from benchmarks import common as c
from benchmarks import micro_service, wsgi_bench
from benchmarks import request_many as request_many_case

Metrics = dict[str, Any]


def publish(url: str, size: int, count: int) -> Metrics:
    """``count`` publishes of ``size`` bytes to a subject nobody listens on, then flush."""
    data = c.payload(size)
    with nats_sync.connect(url) as nc:
        nc.flush()
        pub = nc.publish
        subject = c.PUBLISH_SUBJECT
        watch = c.Stopwatch().start()
        for _ in range(count):
            pub(subject, data)
        nc.flush(timeout=60)
        watch.stop()
    return c.throughput_metrics(count, watch, "msgs")


def pubsub(url: str, size: int, count: int) -> Metrics:
    """Publisher and callback subscriber on two connections; sequence-number payloads.

    A callback subscription, as nats-py's side of this scenario uses.
    """
    frames = [c.seq_payload(n, size) for n in range(count)]
    received: list[bytes] = []
    last_at = [0.0]
    done = threading.Event()

    def on_msg(msg: nats_sync.Msg) -> None:
        received.append(msg.data)
        last_at[0] = time.perf_counter()
        if len(received) >= count:
            done.set()

    with nats_sync.connect(url) as sub_nc, nats_sync.connect(url) as pub_nc:
        sub = sub_nc.subscribe(
            c.PUBSUB_SUBJECT,
            cb=on_msg,
            pending_msgs_limit=count * 2,
            pending_bytes_limit=1 << 30,
        )
        sub_nc.flush()
        watch = c.Stopwatch().start()
        pub = pub_nc.publish
        subject = c.PUBSUB_SUBJECT
        for frame in frames:
            pub(subject, frame)
        pub_nc.flush(timeout=60)
        seen = -1
        while not done.is_set() and len(received) != seen:  # stop once idle for a while
            seen = len(received)
            done.wait(c.IDLE_TIMEOUT)
        watch.stop(wall_end=last_at[0] or None)
        dropped = sub.dropped
    metrics = c.throughput_metrics(max(len(received), 1), watch, "msgs")
    metrics.update(c.order_metrics(received, count))
    metrics["dropped"] = dropped
    return metrics


def request_seq(url: str, size: int, count: int, warmup: int) -> Metrics:
    """``count`` requests one after another; latency of each."""
    data = c.payload(size)
    with nats_sync.connect(url) as nc:
        for _ in range(warmup):
            nc.request(c.ECHO_SUBJECT, data, timeout=c.REQUEST_TIMEOUT)
        request = nc.request
        subject = c.ECHO_SUBJECT
        clock = time.perf_counter_ns
        latencies: list[int] = []
        watch = c.Stopwatch().start()
        for _ in range(count):
            started = clock()
            request(subject, data, timeout=c.REQUEST_TIMEOUT)
            latencies.append(clock() - started)
        watch.stop()
    return c.latency_metrics(latencies, watch)


def request_concurrent(
    url: str, size: int, workers: int, per_worker: int, warmup: int, count_switches: bool = False
) -> Metrics:
    """``workers`` threads sharing one connection, ``per_worker`` requests each.

    ``count_switches``: then a second, untimed round under ``perf`` gives context switches
    (and futex calls) per request; tracing futex calls slows the client, so the timed
    round runs without it.
    """
    data = c.payload(size)
    errors = [0] * workers

    def one_round(nc: nats_sync.Client) -> c.Stopwatch:
        barrier = threading.Barrier(workers + 1)

        def requester(index: int) -> None:
            barrier.wait()
            for _ in range(per_worker):
                try:
                    nc.request(c.ECHO_SUBJECT, data, timeout=c.REQUEST_TIMEOUT)
                except nats_sync.Error:
                    errors[index] += 1

        threads = [
            threading.Thread(target=requester, args=(n,), daemon=True) for n in range(workers)
        ]
        for thread in threads:
            thread.start()
        watch = c.Stopwatch().start()
        barrier.wait()
        for thread in threads:
            thread.join(timeout=120)
        return watch.stop()

    total = workers * per_worker
    counts: dict[str, float] = {}
    with nats_sync.connect(url) as nc:
        for _ in range(warmup):
            nc.request(c.ECHO_SUBJECT, data, timeout=c.REQUEST_TIMEOUT)
        watch = one_round(nc)
        if count_switches:
            counter = c.SwitchCounter().start()
            one_round(nc)
            counts = counter.metrics(total)
    metrics = c.throughput_metrics(total, watch, "reqs")
    metrics.update(counts)
    metrics["errors"] = sum(errors)
    return metrics


def request_pipelined(url: str, size: int, count: int, warmup: int) -> Metrics:
    """One ``request_batch`` of ``count`` requests."""
    data = c.payload(size)
    with nats_sync.connect(url) as nc:
        for _ in range(warmup):
            nc.request(c.ECHO_SUBJECT, data, timeout=c.REQUEST_TIMEOUT)
        payloads = [data] * count
        watch = c.Stopwatch().start()
        results = nc.request_batch(c.ECHO_SUBJECT, payloads, timeout=c.BATCH_TIMEOUT)
        watch.stop()
    metrics = c.throughput_metrics(count, watch, "reqs")
    metrics["errors"] = sum(1 for r in results if not isinstance(r, nats_sync.Msg))
    return metrics


# --- JetStream ------------------------------------------------------------------------
# nats_sync.jetstream is reached through nc.jetstream() only, so the core cases above
# never import it.


@contextmanager
def _js_stream(url: str, scenario: str, **config: Any) -> Iterator[tuple[Any, Any, c.JsNames]]:
    """A connection, its JetStream context and a fresh file stream (``config``: more
    stream fields), deleted after."""
    names = c.js_names(scenario)
    with nats_sync.connect(url) as nc:
        js = nc.jetstream(timeout=c.JS_TIMEOUT)
        js.create_stream(name=names.stream, subjects=[names.subject], storage="file", **config)
        try:
            yield nc, js, names
        finally:
            js.delete_stream(names.stream)


def _stored(js: Any, names: c.JsNames) -> int:
    return int(js.stream(names.stream).info().state.messages)


def _publish_all(js: Any, subject: str, data: bytes, count: int) -> list[Any]:
    """``count`` publish_async calls, then waits for every ack; returns the futures."""
    publish_async = js.publish_async
    futures = [publish_async(subject, data) for _ in range(count)]
    js.publish_async_completed(timeout=60)
    return futures


def _failed(futures: list[Any]) -> int:
    return sum(1 for future in futures if not future.done() or future.exception() is not None)


def js_publish_seq(url: str, server_pid: int, size: int, count: int, warmup: int) -> Metrics:
    """``count`` ``js.publish`` calls one after another (each waits for its ack)."""
    data = c.payload(size)
    with _js_stream(url, "js_publish_seq") as (_nc, js, names):
        for _ in range(warmup):
            js.publish(names.subject, data)
        publish = js.publish
        subject = names.subject
        clock = time.perf_counter_ns
        latencies: list[int] = []
        watch = c.Stopwatch(peer_pid=server_pid).start()
        for _ in range(count):
            started = clock()
            publish(subject, data)
            latencies.append(clock() - started)
        watch.stop()
        missing = warmup + count - _stored(js, names)
    metrics = c.latency_metrics(latencies, watch)
    metrics.update(c.server_cpu_metric(watch, count), errors=missing)
    return metrics


def js_publish_async(url: str, server_pid: int, size: int, count: int, warmup: int) -> Metrics:
    """``count`` ``publish_async`` calls, then ``publish_async_completed``."""
    data = c.payload(size)
    with _js_stream(url, "js_publish_async") as (_nc, js, names):
        _publish_all(js, names.subject, data, warmup)  # opens the ack subscription
        watch = c.Stopwatch(peer_pid=server_pid).start()
        futures = _publish_all(js, names.subject, data, count)
        watch.stop()
        errors = _failed(futures) + (warmup + count - _stored(js, names))
    metrics = c.throughput_metrics(count, watch, "acks")
    metrics["cpu_us_per_msg"] = metrics.pop("cpu_us_per_ack")
    metrics.update(c.server_cpu_metric(watch, count), errors=errors)
    return metrics


def js_fast_publish(url: str, server_pid: int, size: int, count: int, warmup: int) -> Metrics:
    """``count`` messages as one fast-ingest batch (``js.fast_publisher``, gap fail, the
    last one the commit), then every stored message read back and checked: in publish
    order, each once. Beside it, in the same process, ``count`` plain core publishes of
    the same size, whose CPU per message the batch's is compared with."""
    frames = [c.seq_payload(n, size) for n in range(count)]
    with _js_stream(url, "js_fast_publish", allow_batched=True) as (nc, js, names):
        subject = names.subject
        with js.fast_publisher() as warm:  # the stream's first batch: closed without a commit
            for frame in frames[:warmup]:
                warm.add(subject, frame)
        first_seq = js.stream(names.stream).info().state.last_seq + 1
        watch = c.Stopwatch(peer_pid=server_pid).start()
        with js.fast_publisher() as publisher:
            add = publisher.add
            for frame in frames[:-1]:
                add(subject, frame)
            final = publisher.commit(subject, frames[-1])
        watch.stop()
        errors = abs(count - final.count) + _out_of_order(js, names.stream, first_seq, frames)
        core = _core_publish_cpu(nc, size, count)
    metrics = c.throughput_metrics(count, watch, "msgs")
    metrics.update(
        c.server_cpu_metric(watch, count),
        errors=errors,
        core_cpu_us_per_msg=core,
        cpu_vs_core_publish=metrics["cpu_us_per_msg"] / core,
    )
    return metrics


def _out_of_order(js: Any, stream: str, first_seq: int, frames: list[bytes]) -> int:
    """How many of ``frames`` are not stored in order from ``first_seq`` on (missing,
    extra or moved ones all count)."""
    stored: list[bytes] = []
    for run in js.stream(stream).get_msg_columns(first_seq, batch=10_000):
        stored.extend(run.datas)
    wrong = sum(1 for sent, kept in zip(frames, stored, strict=False) if sent != kept)
    return wrong + abs(len(stored) - len(frames))


def _core_publish_cpu(nc: Any, size: int, count: int) -> float:
    """Client CPU µs per message of ``count`` plain core publishes of ``size`` bytes."""
    data = c.payload(size)
    publish = nc.publish
    subject = c.PUBLISH_SUBJECT
    watch = c.Stopwatch().start()
    for _ in range(count):
        publish(subject, data)
    nc.flush(timeout=60)
    watch.stop()
    return watch.cpu / count * 1e6


def js_fetch(url: str, server_pid: int, size: int, count: int) -> Metrics:
    """``count`` stored messages through a durable explicit-ack pull consumer:
    ``fetch(500)``, ``ack()`` each, then flush so every ack has reached the server."""
    data = c.payload(size)
    with _js_stream(url, "js_fetch") as (nc, js, names):
        failed = _failed(_publish_all(js, names.subject, data, count))
        consumer = js.create_consumer(
            names.stream, durable_name=names.durable, ack_policy="explicit"
        )
        fetch = consumer.fetch
        batch, wait = c.JS_FETCH_BATCH, c.JS_FETCH_WAIT
        received = 0
        watch = c.Stopwatch(peer_pid=server_pid).start()
        while received < count:
            got = 0
            for msg in fetch(batch, max_wait=wait):
                msg.ack()
                got += 1
            if not got:
                break  # nothing within max_wait: the count below shows the shortfall
            received += got
        nc.flush(timeout=c.JS_TIMEOUT)
        watch.stop()
        unacked = _unacked(lambda: consumer.info().num_ack_pending)
    metrics = c.throughput_metrics(max(received, 1), watch, "msgs")
    metrics.update(
        c.server_cpu_metric(watch, max(received, 1)),
        errors=failed + count - received,
        unacked=unacked,
    )
    return metrics


def js_push(url: str, server_pid: int, size: int, count: int) -> Metrics:
    """``count`` stored messages through a durable explicit-ack push consumer with flow
    control and idle heartbeats: ``messages()``, ``ack()`` each, then flush."""
    data = c.payload(size)
    with _js_stream(url, "js_push") as (nc, js, names):
        failed = _failed(_publish_all(js, names.subject, data, count))
        consumer = js.create_push_consumer(
            names.stream,
            durable_name=names.durable,
            ack_policy="explicit",
            flow_control=True,
            idle_heartbeat=c.JS_PUSH_HEARTBEAT,
        )
        received = 0
        watch = c.Stopwatch(peer_pid=server_pid).start()
        with consumer.messages() as stream:
            take = stream.next
            try:
                while received < count:
                    take(timeout=c.JS_FETCH_WAIT).ack()
                    received += 1
            except nats_sync.TimeoutError:
                pass  # nothing within the wait: the count below shows the shortfall
            nc.flush(timeout=c.JS_TIMEOUT)
        watch.stop()
        unacked = _unacked(lambda: consumer.info().num_ack_pending)
    metrics = c.throughput_metrics(max(received, 1), watch, "msgs")
    metrics.update(
        c.server_cpu_metric(watch, max(received, 1)),
        errors=failed + count - received,
        unacked=unacked,
    )
    return metrics


def _unacked(ack_pending: Callable[[], int]) -> int:
    """The consumer's ack-pending count once it settles (the server applies acks
    asynchronously, so right after the flush a few may still be queued)."""
    deadline = time.monotonic() + 2.0
    pending = int(ack_pending())
    while pending and time.monotonic() < deadline:
        time.sleep(0.05)
        pending = int(ack_pending())
    return pending


# --- key-value and object store -------------------------------------------------------


@contextmanager
def _kv_bucket(url: str, scenario: str) -> Iterator[Any]:
    """A fresh file-storage key-value bucket (history 1), deleted after."""
    bucket = c.bucket_name(scenario)
    with nats_sync.connect(url) as nc:
        js = nc.jetstream(timeout=c.JS_TIMEOUT)
        kv = js.create_key_value(bucket=bucket, history=1, storage="file")
        try:
            yield kv
        finally:
            js.delete_key_value(bucket)


def kv_get(url: str, server_pid: int, size: int, count: int, warmup: int) -> Metrics:
    """``count`` ``kv.get`` calls of one key, one after another; latency of each."""
    data = c.payload(size)
    with _kv_bucket(url, "kv_get") as kv:
        kv.put(c.KV_KEY, data)
        for _ in range(warmup):
            kv.get(c.KV_KEY)
        get = kv.get
        key = c.KV_KEY
        clock = time.perf_counter_ns
        latencies: list[int] = []
        watch = c.Stopwatch(peer_pid=server_pid).start()
        for _ in range(count):
            started = clock()
            entry = get(key)
            latencies.append(clock() - started)
        watch.stop()
    metrics = c.latency_metrics(latencies, watch)
    metrics.update(c.server_cpu_metric(watch, count), errors=int(entry.value != data))
    return metrics


def kv_put(url: str, server_pid: int, size: int, count: int, warmup: int) -> Metrics:
    """``count`` ``kv.put`` calls to distinct keys, one after another (each waits for
    its ack)."""
    data = c.payload(size)
    keys = c.kv_keys(warmup + count)
    with _kv_bucket(url, "kv_put") as kv:
        for key in keys[:warmup]:
            kv.put(key, data)
        put = kv.put
        revision = 0
        watch = c.Stopwatch(peer_pid=server_pid).start()
        for key in keys[warmup:]:
            revision = put(key, data)
        watch.stop()
    metrics = c.throughput_metrics(count, watch, "puts")
    # A fresh bucket numbers its puts 1, 2, ...: a shortfall means puts went missing.
    metrics.update(c.server_cpu_metric(watch, count), errors=warmup + count - revision)
    return metrics


@contextmanager
def _object_store(url: str, scenario: str, **fields: Any) -> Iterator[Any]:
    """A fresh file-storage object store (``fields``: more bucket settings), deleted
    after."""
    bucket = c.bucket_name(scenario)
    with nats_sync.connect(url) as nc:
        js = nc.jetstream(timeout=c.JS_TIMEOUT)
        obs = js.create_object_store(bucket, storage="file", **fields)
        try:
            yield obs
        finally:
            js.delete_object_store(bucket)


def obj_put(url: str, server_pid: int, mib: int) -> Metrics:
    """One ``obs.put`` of a ``mib`` MiB object (128 KiB chunks, the default) into a
    bucket whose stream allows fast-ingest batches (so the put is one); read back and
    compared after the clock stops."""
    data = c.payload(mib << 20)
    with _object_store(url, "obj_put", allow_batched=True) as obs:
        obs.put("warmup", c.payload(c.OBJECT_WARMUP_SIZE))
        watch = c.Stopwatch(peer_pid=server_pid).start()
        info = obs.put(c.OBJECT_NAME, data)
        watch.stop()
        intact = obs.get(c.OBJECT_NAME).data == data
    metrics = c.object_metrics(len(data), watch)
    metrics["errors"] = int(info.size != len(data) or not intact)
    return metrics


def obj_get(url: str, server_pid: int, mib: int) -> Metrics:
    """One ``obs.get`` of a ``mib`` MiB object stored before the clock starts."""
    data = c.payload(mib << 20)
    with _object_store(url, "obj_get") as obs:
        obs.put("warmup", c.payload(c.OBJECT_WARMUP_SIZE))
        obs.get("warmup")
        obs.put(c.OBJECT_NAME, data)
        watch = c.Stopwatch(peer_pid=server_pid).start()
        got = obs.get(c.OBJECT_NAME).data
        watch.stop()
    metrics = c.object_metrics(len(data), watch)
    metrics["errors"] = int(got != data)
    return metrics


SCENARIOS = {
    "publish": publish,
    "pubsub": pubsub,
    "request_seq": request_seq,
    "request_concurrent": request_concurrent,
    "request_pipelined": request_pipelined,
    "request_many": request_many_case.drive_sync,
    "js_publish_seq": js_publish_seq,
    "js_publish_async": js_publish_async,
    "js_fast_publish": js_fast_publish,
    "js_fetch": js_fetch,
    "js_push": js_push,
    "kv_get": kv_get,
    "kv_put": kv_put,
    "obj_put": obj_put,
    "obj_get": obj_get,
    "micro_service": partial(micro_service.drive, "nats_sync"),
    # The client under test runs inside gunicorn (benchmarks/wsgi_app.py), not here.
    "wsgi": partial(wsgi_bench.drive, "nats_sync"),
}

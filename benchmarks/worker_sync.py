"""Scenarios measured with nats_sync (the client under test)."""

from __future__ import annotations

import threading
import time
from typing import Any

import nats_sync
from benchmarks import common as c

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
            c.PUBSUB_SUBJECT, cb=on_msg, pending_msgs_limit=count * 2,
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


def request_concurrent(url: str, size: int, workers: int, per_worker: int, warmup: int) -> Metrics:
    """``workers`` threads sharing one connection, ``per_worker`` requests each."""
    data = c.payload(size)
    errors = [0] * workers
    with nats_sync.connect(url) as nc:
        for _ in range(warmup):
            nc.request(c.ECHO_SUBJECT, data, timeout=c.REQUEST_TIMEOUT)
        barrier = threading.Barrier(workers + 1)

        def requester(index: int) -> None:
            barrier.wait()
            for _ in range(per_worker):
                try:
                    nc.request(c.ECHO_SUBJECT, data, timeout=c.REQUEST_TIMEOUT)
                except nats_sync.Error:
                    errors[index] += 1

        threads = [threading.Thread(target=requester, args=(n,), daemon=True)
                   for n in range(workers)]
        for thread in threads:
            thread.start()
        watch = c.Stopwatch().start()
        barrier.wait()
        for thread in threads:
            thread.join(timeout=120)
        watch.stop()
    total = workers * per_worker
    metrics = c.throughput_metrics(total, watch, "reqs")
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


SCENARIOS = {
    "publish": publish,
    "pubsub": pubsub,
    "request_seq": request_seq,
    "request_concurrent": request_concurrent,
    "request_pipelined": request_pipelined,
}

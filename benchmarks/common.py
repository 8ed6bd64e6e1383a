"""Small helpers shared by the workers: payloads, timing and percentiles."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

PUBLISH_SUBJECT = "bench.nosub"
PUBSUB_SUBJECT = "bench.pubsub"
ECHO_SUBJECT = "bench.echo"
REQUEST_TIMEOUT = 5.0
BATCH_TIMEOUT = 10.0
IDLE_TIMEOUT = 3.0  # pub->sub: stop waiting after this long without a new message


def payload(size: int) -> bytes:
    """A payload of ``size`` bytes (content does not matter to the server)."""
    return (b"0123456789abcdef" * (size // 16 + 1))[:size]


def seq_payload(number: int, size: int) -> bytes:
    """The sequence number as zero-padded ASCII, ``size`` bytes long (size >= 8)."""
    return b"%0*d" % (size, number)


@dataclass
class Stopwatch:
    """Wall and CPU (``time.process_time``, all threads of this process) time of a section."""

    wall_start: float = 0.0
    cpu_start: float = 0.0
    wall: float = 0.0
    cpu: float = 0.0

    def start(self) -> Stopwatch:
        self.wall_start = time.perf_counter()
        self.cpu_start = time.process_time()
        return self

    def stop(self, wall_end: float | None = None) -> Stopwatch:
        """Stops; ``wall_end`` (a ``perf_counter`` value) overrides the wall end point."""
        end = time.perf_counter() if wall_end is None else wall_end
        self.cpu = time.process_time() - self.cpu_start
        self.wall = end - self.wall_start
        return self


def percentile(sorted_values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile of already sorted values."""
    if not sorted_values:
        return float("nan")
    rank = max(0, min(len(sorted_values) - 1, round(fraction * len(sorted_values)) - 1))
    return float(sorted_values[rank])


def latency_metrics(latencies_ns: list[int], watch: Stopwatch) -> dict[str, float]:
    """p50/p90/p99 in microseconds plus throughput and CPU per request."""
    values = sorted(latencies_ns)
    count = len(values)
    return {
        "p50_us": percentile(values, 0.50) / 1000,
        "p90_us": percentile(values, 0.90) / 1000,
        "p99_us": percentile(values, 0.99) / 1000,
        "reqs_per_s": count / watch.wall,
        "cpu_us_per_req": watch.cpu / count * 1e6,
        "elapsed_s": watch.wall,
    }


def throughput_metrics(count: int, watch: Stopwatch, name: str) -> dict[str, float]:
    """``<name>_per_s`` and CPU microseconds per item."""
    unit = name.rstrip("s")
    return {
        f"{name}_per_s": count / watch.wall,
        f"cpu_us_per_{unit}": watch.cpu / count * 1e6,
        "elapsed_s": watch.wall,
    }


def order_metrics(received: list[bytes], expected: int) -> dict[str, float]:
    """Lost, duplicate and out-of-order counts of sequence-number payloads."""
    seen: set[int] = set()
    duplicates = out_of_order = 0
    previous = -1
    for data in received:
        number = int(data)
        if number in seen:
            duplicates += 1
        seen.add(number)
        if number < previous:
            out_of_order += 1
        previous = max(previous, number)
    return {
        "received": len(received),
        "lost": expected - len(seen),
        "duplicates": duplicates,
        "out_of_order": out_of_order,
    }

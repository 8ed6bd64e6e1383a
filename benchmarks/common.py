"""Small helpers shared by the workers: payloads, timing and percentiles."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

PUBLISH_SUBJECT = "bench.nosub"
PUBSUB_SUBJECT = "bench.pubsub"
ECHO_SUBJECT = "bench.echo"
REQUEST_TIMEOUT = 5.0
BATCH_TIMEOUT = 10.0
IDLE_TIMEOUT = 3.0  # pub->sub: stop waiting after this long without a new message
JS_TIMEOUT = 10.0  # JetStream admin calls and acks; generous, a busy VM stalls file writes
JS_FETCH_BATCH = 500
JS_FETCH_WAIT = 5.0
#: The push consumer row's idle heartbeat, seconds (it only has to be watched).
JS_PUSH_HEARTBEAT = 5.0
KV_KEY = "bench.key"
OBJECT_NAME = "bench-object"
#: Stored and read before the timed object put/get: opens the ack subscription (put)
#: and runs one consumer round (get) so neither first-use cost lands in the timing.
OBJECT_WARMUP_SIZE = 1 << 20


def payload(size: int) -> bytes:
    """A payload of ``size`` bytes (content does not matter to the server)."""
    return (b"0123456789abcdef" * (size // 16 + 1))[:size]


def seq_payload(number: int, size: int) -> bytes:
    """The sequence number as zero-padded ASCII, ``size`` bytes long (size >= 8)."""
    return b"%0*d" % (size, number)


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) a process has used so far; 0 if it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Stopwatch:
    """Wall and CPU (``time.process_time``, all threads of this process) time of a section.

    With ``peer_pid`` it also takes that process's CPU over the same section (``peer_cpu``,
    from ``/proc``, clock-tick resolution).
    """

    peer_pid: int | None = None
    wall_start: float = 0.0
    cpu_start: float = 0.0
    peer_start: float = 0.0
    wall: float = 0.0
    cpu: float = 0.0
    peer_cpu: float = 0.0

    def start(self) -> Stopwatch:
        if self.peer_pid is not None:
            self.peer_start = cpu_seconds(self.peer_pid)
        self.wall_start = time.perf_counter()
        self.cpu_start = time.process_time()
        return self

    def stop(self, wall_end: float | None = None) -> Stopwatch:
        """Stops; ``wall_end`` (a ``perf_counter`` value) overrides the wall end point."""
        end = time.perf_counter() if wall_end is None else wall_end
        self.cpu = time.process_time() - self.cpu_start
        self.wall = end - self.wall_start
        if self.peer_pid is not None:
            self.peer_cpu = cpu_seconds(self.peer_pid) - self.peer_start
        return self


#: The events counted per request where ``perf`` can (futex calls need the tracepoint).
SWITCH_EVENTS = ("context-switches", "syscalls:sys_enter_futex")
#: How long ``perf stat -p`` is given to attach before the timed section starts.
PERF_ATTACH_S = 0.3


def perf_events() -> tuple[str, ...]:
    """The ``SWITCH_EVENTS`` this machine's ``perf`` can count, most first; () without perf."""
    if shutil.which("perf") is None:
        return ()
    for events in (SWITCH_EVENTS, SWITCH_EVENTS[:1]):
        try:
            probe = subprocess.run(
                ["perf", "stat", "-x,", "-e", ",".join(events), "--", "true"],
                capture_output=True,
                text=True,
                timeout=10,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            return ()
        if probe.returncode == 0 and "<not" not in probe.stderr:
            return events
    return ()


class SwitchCounter:
    """``perf stat -p`` on this process over a section: context switches and futex calls.

    Attached before the section (``PERF_ATTACH_S`` of idle is counted with it, a few
    switches against thousands of requests) and stopped by SIGINT after it. Where
    ``perf`` cannot count, ``metrics`` is empty and says so under ``perf``.
    """

    def __init__(self, pid: int | None = None) -> None:
        self.events = perf_events()
        self.process: subprocess.Popen[str] | None = None
        #: The process counted: this one unless told (the services case counts its
        #: service process).
        self.pid = os.getpid() if pid is None else pid

    def start(self) -> SwitchCounter:
        if self.events:
            self.process = subprocess.Popen(
                ["perf", "stat", "-x,", "-e", ",".join(self.events), "-p", str(self.pid)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            time.sleep(PERF_ATTACH_S)
        return self

    def metrics(self, count: int) -> dict[str, float]:
        """Stops ``perf``; its counts per item (``count`` items) as metrics."""
        if self.process is None:
            return {}
        self.process.send_signal(signal.SIGINT)
        try:
            _, err = self.process.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return {}
        names = {"context-switches": "cs_per_req", "syscalls:sys_enter_futex": "futex_per_req"}
        found: dict[str, float] = {}
        for line in err.splitlines():
            fields = line.split(",")
            if len(fields) > 2 and fields[2] in names and fields[0].isdigit():
                found[names[fields[2]]] = int(fields[0]) / count
        return found


@dataclass(frozen=True)
class JsNames:
    """Stream, subject and durable of one JetStream run.

    The worker's pid in every name: a worker killed at its timeout leaves its stream
    behind, and the next run must neither collide with it nor overlap its subjects.
    The ``benchjs.`` prefix keeps the streams off the core cases' ``bench.*`` subjects.
    """

    stream: str
    subject: str
    durable: str


def js_names(scenario: str) -> JsNames:
    """Fresh names for one run of ``scenario``."""
    pid = os.getpid()
    return JsNames(f"BENCH_{scenario.upper()}_{pid}", f"benchjs.{pid}.{scenario}", f"bench_{pid}")


def bucket_name(scenario: str) -> str:
    """A fresh key-value or object store bucket name for one run of ``scenario``.

    The pid in it for the reason given on ``JsNames``; bucket names allow letters,
    digits, ``-`` and ``_`` only.
    """
    return f"BENCH_{scenario.upper()}_{os.getpid()}"


def kv_keys(count: int) -> list[str]:
    """``count`` distinct keys, made before the clock starts.

    Distinct keys, so each put stores a new message: one key rewritten with history=1
    would also have the server drop the previous value on every put.
    """
    return [f"k{n}" for n in range(count)]


def object_metrics(size: int, watch: Stopwatch) -> dict[str, float]:
    """MiB/s, the client's and the server's CPU milliseconds per MiB of one object."""
    mib = size / (1 << 20)
    return {
        "mib_per_s": mib / watch.wall,
        "cpu_ms_per_mib": watch.cpu / mib * 1e3,
        "server_cpu_ms_per_mib": watch.peer_cpu / mib * 1e3,
        "elapsed_s": watch.wall,
    }


def server_cpu_metric(watch: Stopwatch, count: int) -> dict[str, float]:
    """The server's CPU per item over the measured section only.

    Measured inside the worker because the JetStream cases store messages and create
    streams outside the timed section; run.add_peer_cpu (the worker's whole life)
    would charge that set-up to the measured operations.
    """
    return {"server_cpu_us": watch.peer_cpu / count * 1e6}


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


async def gather_requesters(
    request: Callable[[], Awaitable[object]],
    failure: type[BaseException],
    workers: int,
    per_worker: int,
    count_switches: bool,
) -> dict[str, float]:
    """An asyncio client's side of the concurrent-request cases: ``workers`` tasks on one
    connection making ``per_worker`` ``request()`` calls each, a failure counted as an
    error; with ``count_switches``, a second round (untimed) under perf, as worker_sync's."""
    errors = 0

    async def requester() -> None:
        nonlocal errors
        for _ in range(per_worker):
            try:
                await request()
            except failure:
                errors += 1

    watch = Stopwatch().start()
    await asyncio.gather(*(requester() for _ in range(workers)))
    watch.stop()
    metrics = throughput_metrics(workers * per_worker, watch, "reqs")
    if count_switches:
        counter = SwitchCounter().start()
        await asyncio.gather(*(requester() for _ in range(workers)))
        metrics.update(counter.metrics(workers * per_worker))
    metrics["errors"] = errors
    return metrics

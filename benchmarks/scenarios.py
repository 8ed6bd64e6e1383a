"""What is measured (cases), at which sizes, and the targets the ratios are held to."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SYNC = "nats_sync"
NATSPY = "nats-py"
RAW = "raw"
#: The zero-dependency asyncio client, run on its own Python >= 3.13 (procs.python_for).
NATSIO = "natsio"
#: The WSGI case's app with no NATS call at all (its ceiling; benchmarks/wsgi_bench.py).
NO_NATS = "no NATS"
#: nats_sync in a process that ``gevent.monkey.patch_all()`` patched before importing it
#: (benchmarks/worker_gevent.py): its threads, and the requesters', are greenlets.
SYNC_GEVENT = "nats_sync gevent"
#: A target's denominator that stands for the faster (by median) of nats-py and natsio.
BEST_ASYNCIO = "best asyncio"


@dataclass(frozen=True)
class Case:
    """One scenario at one size, run for each of ``clients`` in its own process."""

    key: str
    title: str
    scenario: str
    full: dict[str, Any]
    quick: dict[str, Any]
    clients: tuple[str, ...] = (SYNC, NATSPY)
    # (metric key, label, unit) rows shown for this case; the first is the headline.
    metrics: tuple[tuple[str, str, str], ...] = ()
    # JetStream cases get the server's pid and take its CPU over the timed section
    # themselves (they create streams and store messages outside it).
    jetstream: bool = False
    # A point of the thread-scaling curve (issue 33): its number of requesters, shown
    # in the curve's own table rather than the results table; 0 = not on the curve.
    threads: int = 0
    # A point of the greenlet curve (issue 41): its number of greenlets; 0 = not on it.
    greenlets: int = 0
    # The client the case is about: it and nats-py run first, their order swapped every
    # other repetition; the other clients follow.
    lead: str = SYNC

    def args(self, quick: bool) -> dict[str, Any]:
        return dict(self.quick if quick else self.full)


@dataclass(frozen=True)
class Target:
    """``ratio = median(numerator) / median(denominator)`` of one metric must be >= minimum.

    Throughputs put nats_sync on top; latencies put it below, so higher is better for
    every ratio. ``zero`` lists metrics that must be 0 in every run of nats_sync.
    """

    label: str
    case: str
    metric: str
    numerator: str
    denominator: str
    minimum: float
    text: str
    zero: tuple[str, ...] = field(default=())
    unit: str = ""
    #: The client whose runs ``zero`` is checked on.
    checked: str = SYNC


_PUB_METRICS = (("msgs_per_s", "throughput", "msgs/s"), ("cpu_us_per_msg", "CPU per msg", "µs"))
#: What the other processes on the two cores spent per request (see run.add_peer_cpu).
_PEER_CPU = (
    ("server_cpu_us", "nats-server CPU per request", "µs"),
    ("responder_cpu_us", "responder CPU per request", "µs"),
)
_REQ_METRICS = (
    ("reqs_per_s", "throughput", "req/s"),
    ("cpu_us_per_req", "CPU per request", "µs"),
    *_PEER_CPU,
)
_WARMUP = 200
#: The server's CPU over the timed section (taken by the worker itself; see common.Stopwatch).
_JS_SERVER_CPU = "nats-server CPU per msg"
#: One object of ``mib`` MiB in 128 KiB chunks (both clients' default chunk size).
_OBJ_METRICS = (
    ("mib_per_s", "throughput", "MiB/s"),
    ("cpu_ms_per_mib", "CPU per MiB", "ms"),
    ("server_cpu_ms_per_mib", "nats-server CPU per MiB", "ms"),
)

_MICRO_FULL = {"size": 16, "count": 100_000, "warmup": 1_000}
_MICRO_QUICK = {"size": 16, "count": 20_000, "warmup": 1_000}
_MICRO_METRICS = (
    ("reqs_per_s", "served", "req/s"),
    ("service_cpu_us", "service process CPU per request", "µs"),
    ("service_cs_per_req", "service context switches", "per request"),
    ("service_futex_per_req", "service futex calls", "per request"),
    ("cpu_us_per_req", "driver CPU per request (same driver)", "µs"),
    ("errors", "missing or wrong replies", "requests"),
)

#: The thread-scaling curve (issue 33): T requesters on one connection, T threads for
#: nats_sync and T coroutines for the asyncio clients, sequential 64 B requests each, the
#: same ``request_concurrent`` scenario as ``request_8``. About the same number of
#: requests at every T (SCALE_TOTAL, rounded to whole requests per requester), with
#: context switches and futex calls per request counted by ``perf`` where it can.
SCALE_THREADS = (1, 2, 4, 8, 16, 64)
SCALE_TOTAL = 9_600
SCALE_QUICK_TOTAL = 640
SCALE_METRICS = (
    ("reqs_per_s", "throughput", "req/s"),
    ("cpu_us_per_req", "CPU per request", "µs"),
    ("cs_per_req", "context switches per request", ""),
    ("futex_per_req", "futex calls per request", ""),
    ("errors", "failed requests", "requests"),
)


def _scale_case(threads: int) -> Case:
    common = {"size": 64, "workers": threads, "count_switches": True}
    return Case(
        f"scale_t{threads}",
        f"{threads} requester(s) on one connection",
        "request_concurrent",
        {**common, "per_worker": SCALE_TOTAL // threads, "warmup": _WARMUP},
        {**common, "per_worker": SCALE_QUICK_TOTAL // threads, "warmup": 50},
        (SYNC, NATSPY, NATSIO),
        SCALE_METRICS,
        threads=threads,
    )


SCALE_CASES = tuple(_scale_case(threads) for threads in SCALE_THREADS)

#: The greenlet curve (issue 41): the same requests as the thread curve's (T requesters
#: on one connection, sequential 64 B requests to the raw echo responder, about
#: SCALE_TOTAL in all), with nats_sync in a gevent-patched process (T greenlets), against
#: nats-py and natsio (T coroutines) and nats_sync's OS threads at the same T. No perf
#: round: the nats-server's and the responder's CPU per request are taken over each
#: worker's life (run.add_peer_cpu), as for the other request rows.
GEVENT_TASKS = (1, 16, 64, 256)
GEVENT_METRICS = (
    ("reqs_per_s", "throughput", "req/s"),
    ("cpu_us_per_req", "CPU per request", "µs"),
    *_PEER_CPU,
    ("errors", "failed requests", "requests"),
)


def _gevent_case(tasks: int) -> Case:
    common = {"size": 64, "workers": tasks}
    return Case(
        f"gevent_t{tasks}",
        f"{tasks} greenlet(s) on one connection",
        "request_concurrent",
        {**common, "per_worker": SCALE_TOTAL // tasks, "warmup": _WARMUP},
        {**common, "per_worker": max(1, SCALE_QUICK_TOTAL // tasks), "warmup": 50},
        (SYNC_GEVENT, NATSPY, NATSIO, SYNC),
        GEVENT_METRICS,
        greenlets=tasks,
        lead=SYNC_GEVENT,
    )


GEVENT_CASES = tuple(_gevent_case(tasks) for tasks in GEVENT_TASKS)

#: The WSGI row (issue 33): a gunicorn app (``-k gthread -w 1 --threads 16``) under
#: ``ab -k -c 16``, each HTTP request making one 64 B request to the raw echo responder:
#: nats_sync (one module-level client), nats-py through a background event-loop thread,
#: and the same app with no NATS call (see benchmarks/wsgi_bench.py). Shown in a table
#: of its own, with the NATS call's cost against the app's no-NATS throughput.
WSGI_KEY = "wsgi_t16"
WSGI_CLIENTS = (SYNC, NATSPY, NO_NATS)
WSGI_METRICS = (
    ("reqs_per_s", "HTTP throughput", "req/s"),
    ("p50_ms", "latency p50", "ms"),
    ("p99_ms", "latency p99", "ms"),
    ("app_cpu_us", "gunicorn worker CPU per request", "µs"),
    ("errors", "failed requests or bad replies", "requests"),
)
_WSGI_COMMON = {"size": 64, "threads": 16, "concurrency": 16}
#: The largest share of the no-NATS throughput the NATS call may cost (issue 33's target).
WSGI_MAX_COST = 0.20
#: The same app and load under gunicorn's gevent worker (``-k gevent -w 1``; issue 41):
#: gunicorn patches its worker before it imports the app, so the 16 concurrent HTTP
#: requests are greenlets, and nats-py's loop "thread" (``threading.Thread``) is one too.
WSGI_GEVENT_KEY = "wsgi_gevent_t16"
WSGI_KEYS = (WSGI_KEY, WSGI_GEVENT_KEY)
_WSGI_GEVENT_COMMON = {"size": 64, "concurrency": 16, "worker_class": "gevent"}

#: The services curve (issue 33): one echo service process with ``max_workers`` W
#: against nats-py's service (no worker pool: the same service at every W), under the
#: same driver, a request_batch of 1,024 in flight (see benchmarks/micro_service.py).
MICRO_WORKERS = (1, 4, 16)


def _micro_case(workers: int) -> Case:
    return Case(
        f"micro_w{workers}",
        f"service echo 16 B, max_workers {workers}",
        "micro_service",
        {**_MICRO_FULL, "workers": workers},
        {**_MICRO_QUICK, "workers": workers},
        metrics=_MICRO_METRICS,
    )


MICRO_CASES = tuple(_micro_case(workers) for workers in MICRO_WORKERS)


def _wsgi_case(key: str, title: str, common: dict[str, Any]) -> Case:
    """A WSGI row: the same sizes and clients under each gunicorn worker class."""
    return Case(
        key,
        title,
        "wsgi",
        {**common, "count": 10_000, "warmup": 500},
        {**common, "count": 1_000, "warmup": 100},
        WSGI_CLIENTS,
        WSGI_METRICS,
    )


CASES: tuple[Case, ...] = (
    Case(
        "publish_16",
        "publish 16 B",
        "publish",
        {"size": 16, "count": 800_000},
        {"size": 16, "count": 50_000},
        (SYNC, NATSPY, RAW),
        _PUB_METRICS,
    ),
    Case(
        "publish_128",
        "publish 128 B",
        "publish",
        {"size": 128, "count": 600_000},
        {"size": 128, "count": 50_000},
        (SYNC, NATSPY, RAW),
        _PUB_METRICS,
    ),
    Case(
        "publish_4k",
        "publish 4 KiB",
        "publish",
        {"size": 4096, "count": 200_000},
        {"size": 4096, "count": 20_000},
        (SYNC, NATSPY, RAW),
        _PUB_METRICS,
    ),
    Case(
        "pubsub",
        "pub → sub, 16 B",
        "pubsub",
        {"size": 16, "count": 100_000},
        {"size": 16, "count": 20_000},
        metrics=(
            ("msgs_per_s", "received", "msgs/s"),
            ("lost", "lost", "msgs"),
            ("duplicates", "duplicates", "msgs"),
            ("out_of_order", "out of order", "msgs"),
            ("dropped", "slow-consumer drops", "msgs"),
            ("cpu_us_per_msg", "CPU per msg (both ends)", "µs"),
        ),
    ),
    Case(
        "request_seq",
        "sequential request 64 B",
        "request_seq",
        {"size": 64, "count": 5_000, "warmup": _WARMUP},
        {"size": 64, "count": 500, "warmup": 50},
        (SYNC, NATSPY, RAW),
        (
            ("p50_us", "latency p50", "µs"),
            ("p90_us", "latency p90", "µs"),
            ("p99_us", "latency p99", "µs"),
            ("cpu_us_per_req", "CPU per request", "µs"),
            *_PEER_CPU,
        ),
    ),
    Case(
        "request_8",
        "8 concurrent requesters",
        "request_concurrent",
        {"size": 64, "workers": 8, "per_worker": 2_000, "warmup": _WARMUP},
        {"size": 64, "workers": 8, "per_worker": 100, "warmup": 50},
        metrics=_REQ_METRICS,
    ),
    *SCALE_CASES,
    *GEVENT_CASES,
    Case(
        "request_pipelined",
        "pipelined requests",
        "request_pipelined",
        {"size": 64, "count": 10_000, "warmup": _WARMUP},
        {"size": 64, "count": 2_000, "warmup": 50},
        metrics=_REQ_METRICS,
    ),
    # Scatter-gather: one request, a reply from each of 5 raw responders (their own
    # processes; see benchmarks/request_many.py).
    Case(
        "request_many_5",
        "request_many, 5 responders",
        "request_many",
        {"size": 64, "count": 3_000, "responders": 5, "warmup": _WARMUP},
        {"size": 64, "count": 300, "responders": 5, "warmup": 50},
        metrics=(
            ("replies_per_s", "replies gathered", "replies/s"),
            ("reqs_per_s", "requests", "req/s"),
            ("cpu_us_per_reply", "CPU per reply", "µs"),
            ("server_cpu_us", "nats-server CPU per request", "µs"),
            ("errors", "missing replies", "replies"),
        ),
    ),
    # Services: one echo service process (nats_sync.micro or nats.micro) answering the
    # same driver, nats_sync's request_batch (see benchmarks/micro_service.py).
    # nats-py's service has no worker pool: every key runs it the same way.
    *MICRO_CASES,
    _wsgi_case(WSGI_KEY, "WSGI app, gunicorn 16 threads", _WSGI_COMMON),
    _wsgi_case(WSGI_GEVENT_KEY, "WSGI app, gunicorn -k gevent", _WSGI_GEVENT_COMMON),
    # JetStream last: a file store's background writes must not fall into the core cases.
    Case(
        "js_publish_seq",
        "JetStream publish, sequential 128 B",
        "js_publish_seq",
        {"size": 128, "count": 3_000, "warmup": _WARMUP},
        {"size": 128, "count": 300, "warmup": 50},
        metrics=(
            ("p50_us", "latency p50", "µs"),
            ("p90_us", "latency p90", "µs"),
            ("p99_us", "latency p99", "µs"),
            ("cpu_us_per_req", "CPU per publish", "µs"),
            ("server_cpu_us", "nats-server CPU per publish", "µs"),
        ),
        jetstream=True,
    ),
    Case(
        "js_publish_async",
        "JetStream publish_async 128 B",
        "js_publish_async",
        {"size": 128, "count": 50_000, "warmup": _WARMUP},
        {"size": 128, "count": 5_000, "warmup": 50},
        metrics=(
            ("acks_per_s", "acked", "acks/s"),
            ("cpu_us_per_msg", "CPU per msg", "µs"),
            ("server_cpu_us", _JS_SERVER_CPU, "µs"),
            ("errors", "failed or not stored", "msgs"),
        ),
        jetstream=True,
    ),
    # Fast ingest (ADR-50) against nats-py's publish_async: its way of storing many.
    Case(
        "js_fast_publish",
        "JetStream fast-ingest batch 128 B (nats-py: publish_async)",
        "js_fast_publish",
        {"size": 128, "count": 100_000, "warmup": _WARMUP},
        {"size": 128, "count": 5_000, "warmup": 50},
        metrics=(
            ("msgs_per_s", "stored", "msgs/s"),
            ("cpu_us_per_msg", "CPU per msg", "µs"),
            ("server_cpu_us", _JS_SERVER_CPU, "µs"),
            ("core_cpu_us_per_msg", "core publish CPU per msg (same process)", "µs"),
            ("cpu_vs_core_publish", "CPU per msg / core publish's", "x"),
            ("errors", "not stored in order", "msgs"),
        ),
        jetstream=True,
    ),
    Case(
        "js_fetch",
        "JetStream fetch(500) + ack 128 B",
        "js_fetch",
        {"size": 128, "count": 50_000},
        {"size": 128, "count": 5_000},
        metrics=(
            ("msgs_per_s", "received and acked", "msgs/s"),
            ("cpu_us_per_msg", "CPU per msg", "µs"),
            ("server_cpu_us", _JS_SERVER_CPU, "µs"),
            ("errors", "not received", "msgs"),
            ("unacked", "left un-acked", "msgs"),
        ),
        jetstream=True,
    ),
    # Push delivery beside it (issue 40): the same messages and acks, the server sending
    # unasked, with flow control and idle heartbeats (nats-py: js.subscribe + next_msg).
    Case(
        "js_push",
        "JetStream push consumer + ack 128 B (flow control)",
        "js_push",
        {"size": 128, "count": 50_000},
        {"size": 128, "count": 5_000},
        metrics=(
            ("msgs_per_s", "received and acked", "msgs/s"),
            ("cpu_us_per_msg", "CPU per msg", "µs"),
            ("server_cpu_us", _JS_SERVER_CPU, "µs"),
            ("errors", "not received", "msgs"),
            ("unacked", "left un-acked", "msgs"),
        ),
        jetstream=True,
    ),
    # Key-value and object store: buckets are streams, so these run with the JetStream
    # cases (a fresh file-storage bucket per run, deleted after).
    Case(
        "kv_get",
        "key-value get 100 B",
        "kv_get",
        {"size": 100, "count": 3_000, "warmup": _WARMUP},
        {"size": 100, "count": 300, "warmup": 50},
        metrics=(
            ("p50_us", "latency p50", "µs"),
            ("p90_us", "latency p90", "µs"),
            ("p99_us", "latency p99", "µs"),
            ("cpu_us_per_req", "CPU per get", "µs"),
            ("server_cpu_us", "nats-server CPU per get", "µs"),
            ("errors", "wrong value", "gets"),
        ),
        jetstream=True,
    ),
    Case(
        "kv_put",
        "key-value put 100 B",
        "kv_put",
        {"size": 100, "count": 5_000, "warmup": _WARMUP},
        {"size": 100, "count": 500, "warmup": 50},
        metrics=(
            ("puts_per_s", "throughput", "puts/s"),
            ("cpu_us_per_put", "CPU per put", "µs"),
            ("server_cpu_us", "nats-server CPU per put", "µs"),
            ("errors", "not stored", "puts"),
        ),
        jetstream=True,
    ),
    Case(
        "obj_put",
        "object store put",
        "obj_put",
        {"mib": 64},
        {"mib": 4},
        metrics=(*_OBJ_METRICS, ("errors", "wrong size stored", "objects")),
        jetstream=True,
    ),
    Case(
        "obj_get",
        "object store get",
        "obj_get",
        {"mib": 64},
        {"mib": 4},
        metrics=(*_OBJ_METRICS, ("errors", "wrong bytes read", "objects")),
        jetstream=True,
    ),
)

SPARK_KEY = "spark"
SPARK_VECTOR = "request_udf"
SPARK_ROW = "row_udf"
# Spark and JetStream (benchmarks/spark_js_bench.py): each a key of its own for --only
# ("spark_js" names all three); the read and write compare SYNC with NATSPY.
SPARK_JS_READ = "spark_js_read"
SPARK_JS_WRITE = "spark_js_write"
SPARK_KV = "spark_kv_lookup"
SPARK_JS_PARTS = (SPARK_JS_READ, SPARK_JS_WRITE, SPARK_KV)
SPARK_JS_ALL = "spark_js"
SPARK_KV_UDF = "kv_lookup_udf"
SPARK_KV_ROW = "kv_row_udf"
#: The sink's publishMode async variant of SPARK_JS_WRITE (SYNC is publishMode fast).
SINK_ASYNC = "nats_sync async"

TARGETS: tuple[Target, ...] = (
    Target("publish 16 B msgs/s", "publish_16", "msgs_per_s", SYNC, NATSPY, 2.0, "≥ 2.0x"),
    Target("publish 4 KiB msgs/s", "publish_4k", "msgs_per_s", SYNC, NATSPY, 1.5, "≥ 1.5x"),
    Target("publish 4 KiB vs raw socket", "publish_4k", "msgs_per_s", SYNC, RAW, 0.6, "≥ 0.6x raw"),
    Target(
        "pub → sub received msgs/s",
        "pubsub",
        "msgs_per_s",
        SYNC,
        NATSPY,
        2.0,
        "≥ 2.0x, 0 lost",
        zero=("lost", "duplicates", "out_of_order"),
    ),
    Target(
        "request p50 vs nats-py",
        "request_seq",
        "p50_us",
        NATSPY,
        SYNC,
        1 / 0.75,
        "p50 ≤ 0.75x nats-py (ratio ≥ 1.33x)",
    ),
    Target(
        "request p50 vs raw socket",
        "request_seq",
        "p50_us",
        RAW,
        SYNC,
        1 / 1.3,
        "p50 ≤ 1.3x raw (ratio ≥ 0.77x)",
    ),
    Target("8 requesters req/s", "request_8", "reqs_per_s", SYNC, NATSPY, 2.0, "≥ 2.0x"),
    Target("pipelined req/s", "request_pipelined", "reqs_per_s", SYNC, NATSPY, 1.5, "≥ 1.5x"),
    Target(
        "service max_workers 1 req/s",
        "micro_w1",
        "reqs_per_s",
        SYNC,
        NATSPY,
        1.5,
        "≥ 1.5x, 0 wrong",
        zero=("errors",),
    ),
    Target(
        "service max_workers 4 req/s",
        "micro_w4",
        "reqs_per_s",
        SYNC,
        NATSPY,
        1.5,
        "≥ 1.5x, 0 wrong",
        zero=("errors",),
    ),
    Target(
        "WSGI req/s vs nats-py on a loop thread",
        WSGI_KEY,
        "reqs_per_s",
        SYNC,
        NATSPY,
        1.3,
        "≥ 1.3x, 0 failed",
        zero=("errors",),
    ),
    Target(
        "WSGI req/s vs the app without NATS",
        WSGI_KEY,
        "reqs_per_s",
        SYNC,
        NO_NATS,
        1 - WSGI_MAX_COST,
        f"≥ {1 - WSGI_MAX_COST:.2f}x (NATS cost ≤ {WSGI_MAX_COST:.0%})",
        zero=("errors",),
    ),
    Target(
        'WSGI -k gevent req/s vs nats-py on a loop "thread" (a greenlet)',
        WSGI_GEVENT_KEY,
        "reqs_per_s",
        SYNC,
        NATSPY,
        1.3,
        "≥ 1.3x, 0 failed",
        zero=("errors",),
    ),
    Target(
        "1 greenlet req/s vs nats_sync's 1 thread",
        "gevent_t1",
        "reqs_per_s",
        SYNC_GEVENT,
        SYNC,
        1.0,
        "≥ 1.0x (no slower), 0 failed",
        zero=("errors",),
        checked=SYNC_GEVENT,
    ),
    *(
        Target(
            f"{tasks} greenlets req/s vs best asyncio",
            f"gevent_t{tasks}",
            "reqs_per_s",
            SYNC_GEVENT,
            BEST_ASYNCIO,
            minimum,
            f"≥ {minimum:.1f}x, 0 failed",
            zero=("errors",),
            checked=SYNC_GEVENT,
        )
        for tasks, minimum in ((16, 1.3), (64, 1.0), (256, 1.0))
    ),
    Target(
        "JetStream publish p50 vs nats-py",
        "js_publish_seq",
        "p50_us",
        NATSPY,
        SYNC,
        1 / 0.75,
        "p50 ≤ 0.75x nats-py (ratio ≥ 1.33x)",
    ),
    Target(
        "JetStream publish_async acks/s",
        "js_publish_async",
        "acks_per_s",
        SYNC,
        NATSPY,
        2.0,
        "≥ 2.0x, 0 failed",
        zero=("errors",),
    ),
    Target(
        "JetStream fast-ingest msgs/s vs nats-py publish_async",
        "js_fast_publish",
        "msgs_per_s",
        SYNC,
        NATSPY,
        4.0,
        "≥ 4.0x, 0 wrong",
        zero=("errors",),
    ),
    Target(
        "JetStream fetch(500) + ack msgs/s",
        "js_fetch",
        "msgs_per_s",
        SYNC,
        NATSPY,
        2.0,
        "≥ 2.0x, 0 missed",
        zero=("errors", "unacked"),
    ),
    Target(
        "key-value get p50 vs nats-py",
        "kv_get",
        "p50_us",
        NATSPY,
        SYNC,
        1 / 0.75,
        "p50 ≤ 0.75x nats-py (ratio ≥ 1.33x)",
        zero=("errors",),
    ),
    Target(
        "key-value put puts/s",
        "kv_put",
        "puts_per_s",
        SYNC,
        NATSPY,
        1.5,
        "≥ 1.5x, 0 missing",
        zero=("errors",),
    ),
    Target(
        "object store put MiB/s",
        "obj_put",
        "mib_per_s",
        SYNC,
        NATSPY,
        2.0,
        "≥ 2.0x",
        zero=("errors",),
    ),
    Target(
        "object store get MiB/s",
        "obj_get",
        "mib_per_s",
        SYNC,
        NATSPY,
        2.0,
        "≥ 2.0x, bytes intact",
        zero=("errors",),
    ),
    Target(
        "Spark request_udf vs row UDF rows/s",
        SPARK_KEY,
        "rows_per_s",
        SPARK_VECTOR,
        SPARK_ROW,
        20.0,
        "≥ 20x",
    ),
    Target(
        "Spark jetstream source rows/s",
        SPARK_JS_READ,
        "rows_per_s",
        SYNC,
        "",
        100_000,
        "≥ 100,000 rows/s",
        unit="rows/s",
    ),
    Target(
        "Spark jetstream sink (publishMode fast) rows/s",
        SPARK_JS_WRITE,
        "rows_per_s",
        SYNC,
        "",
        100_000,
        "≥ 100,000 rows/s",
        unit="rows/s",
    ),
    Target(
        "Spark kv_lookup_udf vs row UDF rows/s",
        SPARK_KV,
        "rows_per_s",
        SPARK_KV_UDF,
        SPARK_KV_ROW,
        10.0,
        "≥ 10x",
    ),
)

SPARK_FULL = {"vector_rows": 200_000, "row_rows": 200_000, "reps": 3}
SPARK_QUICK = {"vector_rows": 20_000, "row_rows": 5_000, "reps": 1}
# kv_rows: enough that the query's fixed cost (~0.5-1 s) is a small part of the time,
# as it is for the row UDF's 50,000 rows at ~10k rows/s.
SPARK_JS_FULL = {
    "read_messages": 1_000_000,
    "size": 128,
    "write_rows": 200_000,
    "kv_keys": 10_000,
    "kv_rows": 600_000,
    "kv_row_rows": 50_000,
    "value_size": 100,
    "reps": 3,
}
SPARK_JS_QUICK = {
    "read_messages": 50_000,
    "size": 128,
    "write_rows": 20_000,
    "kv_keys": 1_000,
    "kv_rows": 20_000,
    "kv_row_rows": 5_000,
    "value_size": 100,
    "reps": 1,
}

"""The Spark rows of ``make reliability`` (``spark_*``): a streaming query from one R3
stream into another through faults of the NATS cluster and of Spark's Python workers.

Shared by ``tools/reliability.py`` (which writes the rows into docs/RELIABILITY.md) and
``tests/spark/test_cluster_restarts.py`` (which runs one row in ``make test``), so both
measure the same thing the same way.

How a row works: a 3-node JetStream cluster (``nats_sync.testing``) holds two R3 streams,
``IN`` and ``OUT`` (file storage, a 600 s duplicate window; ``OUT`` with
``allow_batched`` when the sink's ``publishMode`` is ``fast``), and the sink's R3
``spark_commits`` key-value bucket. A publisher (`IdPublisher`) stores numbered
messages in ``IN`` with ``js.publish`` and a message id each, ~300 a second, and
publishes again, with the same id, whatever was not acknowledged. One streaming
query on the given SparkSession reads ``IN`` (``format("jetstream")``,
``maxOffsetsPerTrigger`` 2000, a trigger every second) and writes every row to
``out.all`` in ``OUT`` (``format("jetstream")``, ``msgIdColumns`` ``stream,seq``), every
node's URL in the connect options of both. `SupervisedQuery` watches it: when the query
dies it keeps the error, counts a restart and starts it again from its checkpoint (as
a job scheduler would), and it collects every micro-batch's progress.

The fault (`SPARK_FAULTS`) runs from the first micro-batch until the input stops,
`INPUT_SECONDS` after that first micro-batch (the publisher starts before the query).
Then every node is up, the publisher's unacknowledged messages are stored, and the
query gets up to `CATCH_UP` seconds to reach ``IN``'s last sequence. ``OUT`` is read
back and compared with ``IN`` by the ``IN:<seq>`` message ids of its messages
(`SparkTally`):

- **missing**: sequences of ``IN`` up to the highest one ``OUT`` holds that ``OUT``
  does not hold (a hole: data skipped). **duplicated**: copies beyond the first of one
  id. **lag**: ``IN``'s last sequence minus the highest ``OUT`` holds (the tail not
  written after the catch-up).
- **query restarts**: deaths of the query (each with its error); **longest gap**:
  the longest time between the ends of two micro-batches that read rows (across
  restarts), with the fault that was under way then.

A row is **ok** when the query never died, nothing is missing, duplicated or left
behind, and the longest gap is under `GAP_LIMIT` seconds.
"""

from __future__ import annotations

import contextlib
import datetime
import itertools
import json
import logging
import os
import random
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import nats_sync
from nats_sync.jetstream import JetStream, Stream
from nats_sync.testing import NatsCluster, NatsServer
from tools._jsfaults import MSG_ID, current
from tools._streamcheck import PAYLOAD, now

log = logging.getLogger("reliability.spark")
T = TypeVar("T")

RATE = 300  # messages a second into IN
MAX_OFFSETS = 2000  # maxOffsetsPerTrigger
TRIGGER = "1 second"  # processingTime
DUPLICATE_WINDOW = 600.0  # IN and OUT
INPUT_SECONDS = 65.0  # steady input per row, faults included
CATCH_UP = 30.0  # after the input stops, for the query to reach IN's last seq
GAP_LIMIT = 20.0  # the longest gap between micro-batches a row may show
IN_STREAM, OUT_STREAM = "IN", "OUT"
IN_SUBJECT, OUT_SUBJECT = "in.data", "out.all"
COMMIT_BUCKET = "spark_commits"  # the sink's default commitBucket, made R3 here
MODES = ("fast", "async")

FIRST_BATCH_TIMEOUT = 90.0  # query start -> its first micro-batch with rows
SETTLE_BEFORE_FAULTS = 3.0  # after the first micro-batch, before the first fault
POLL = 0.5  # the supervisor's look at the query
RESTART_PAUSE = 1.0  # a dead query -> started again
STOP_TIMEOUT = 60.0  # query.stop() and the supervisor's thread
STOP_TIMEOUT_CONF = "spark.sql.streaming.stopTimeout"
PUBLISH_THREADS = 8  # publishing threads: a few stuck on a dead node, the rest go on
ACK_TIMEOUT = 2.0  # a publish into IN not acknowledged within this is sent again
RETRY_WAIT = 0.2  # after a failed publish, before the same message is sent again
PUBLISH_FINISH = 30.0  # after the input: every message of IN acknowledged
REPLICAS_TIMEOUT = 30.0  # a restarted node is a current replica of IN and OUT
SERVER_EXIT_TIMEOUT = 20.0  # lame duck -> the process is gone
READ_BATCH = 5000
SETUP_TIMEOUT = 30.0  # a new cluster takes the row's streams

KILL_EVERY, KILL_DOWN = 6.0, 3.0  # spark_kill
STEPDOWN_EVERY = 5.0  # spark_stepdown
ROLL_PAUSE = 2.0  # spark_rolling: after a node is back, before the next one
WORKER_KILL_EVERY = 8.0  # spark_worker
ACTIVE_STAGE_TIMEOUT = 5.0  # spark_worker: waiting for a micro-batch to run
#: spark_rolling: the lame duck mode as short as the server allows (30 s at least; with
#: few clients it exits well before), so a rolling restart fits into one row.
LAME_DUCK_CONFIG = 'lame_duck_duration: "30s"\nlame_duck_grace_period: "1s"\n'


@dataclass(frozen=True)
class SparkFault:
    """One fault of the Spark rows; each runs once per publish mode."""

    key: str
    title: str


SPARK_FAULTS = [
    SparkFault(
        "spark_kill",
        f"kill -9 of a random node every {KILL_EVERY:.0f} s, down "
        f"{KILL_DOWN:.0f} s, restarted on its ports",
    ),
    SparkFault("spark_rolling", "rolling restart: each node in lame duck mode, then restarted"),
    SparkFault(
        "spark_stepdown", f"stream-leader step-downs of IN and OUT every {STEPDOWN_EVERY:.0f} s"
    ),
    SparkFault(
        "spark_worker", f"a Spark Python worker killed -9 mid-task every {WORKER_KILL_EVERY:.0f} s"
    ),
]


@dataclass(frozen=True)
class SparkRow:
    """A fault in one publish mode: one row of the table."""

    fault: SparkFault
    mode: str

    @property
    def key(self) -> str:
        return f"{self.fault.key}_{self.mode}"

    @property
    def title(self) -> str:
        return f"Spark: {self.fault.title} (publishMode {self.mode})"


SPARK_ROWS = [SparkRow(fault, mode) for fault in SPARK_FAULTS for mode in MODES]


def spark_row(key: str) -> SparkRow:
    """The row of ``key`` (e.g. ``spark_kill_async``)."""
    return next(row for row in SPARK_ROWS if row.key == key)


def select_rows(wanted: Sequence[str]) -> list[SparkRow]:
    """The rows ``wanted`` names: ``spark`` (all), a fault (both modes) or a row's key."""
    return [
        row for row in SPARK_ROWS if any(w in ("spark", row.fault.key, row.key) for w in wanted)
    ]


# --- results ------------------------------------------------------------------------------


@dataclass
class Death:
    """The query died: when (wall clock), and why."""

    at: float
    error: str

    @property
    def summary(self) -> str:
        return summarize_error(self.error)


@dataclass
class Batch:
    """A completed micro-batch (wall-clock seconds)."""

    run_id: str
    batch_id: int
    started: float
    ended: float
    rows: int
    end_seq: int | None  # the source's end offset: the next sequence to read


@dataclass
class SparkTally:
    """``OUT`` read back against ``IN`` (see the module)."""

    stored_in: int = 0
    in_last_seq: int = 0
    stored_out: int = 0
    highest: int = 0  # the highest IN sequence OUT holds
    missing: list[int] = field(default_factory=list)
    duplicated: int = 0  # copies beyond the first
    foreign: int = 0  # OUT messages without an IN:<seq> id

    @property
    def lag(self) -> int:
        return self.in_last_seq - self.highest


@dataclass
class SparkResult:
    key: str
    title: str
    mode: str
    tally: SparkTally = field(default_factory=SparkTally)
    deaths: list[Death] = field(default_factory=list)
    batches: list[Batch] = field(default_factory=list)
    faults: list[tuple[float, float, str]] = field(default_factory=list)  # (from, to, what)
    published: int = 0
    publish_retries: int = 0
    input_seconds: float = 0.0
    caught_up_after: float | None = None  # seconds after the input stopped
    elapsed: float = 0.0
    notes: list[str] = field(default_factory=list)
    error: str | None = None

    @property
    def restarts(self) -> int:
        return len(self.deaths)

    @property
    def longest_gap(self) -> tuple[float, float, float] | None:
        """(seconds, from, to) of the longest time between two micro-batch ends."""
        ends = sorted(b.ended for b in self.batches if b.rows)
        gaps = [(b - a, a, b) for a, b in itertools.pairwise(ends)]
        return max(gaps, default=None)

    def faults_during(self, start: float, end: float) -> list[str]:
        """What the faults injected between ``start`` and ``end`` were."""
        return [what for at, until, what in self.faults if at < end and until > start]

    @property
    def ok(self) -> bool:
        gap = self.longest_gap
        t = self.tally
        return (
            self.error is None
            and not self.deaths
            and not t.missing
            and not t.duplicated
            and not t.foreign
            and t.lag == 0
            and t.stored_in > 0
            and gap is not None
            and gap[0] < GAP_LIMIT
        )


def summarize_error(text: str) -> str:
    """What a query's error says happened, without the stacks: Spark's error class and
    its sentence, then the last Python exception of the traceback it carries."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return "(no message)"
    # Spark's advice on faulthandlers and the Python stack are not what happened.
    head = lines[0].split(": Traceback", 1)[0].split(". Consider setting", 1)[0]
    python = [line for line in lines if re.match(r"^[\w.]+(Error|Exception): ", line)]
    parts = [head] if head not in python else []
    if python:
        parts.append(python[-1])
    text = " / ".join(parts)
    # Which stage, task and host a failure was in differs from one death to the next
    # and says nothing about why: left out, so that like deaths read alike.
    text = re.sub(r"\b(stage|task|TID) \d+(\.\d+)?", r"\1 n", text)
    text = re.sub(r" \([^()]* executor [^()]*\)", "", text)
    return text if len(text) <= 500 else text[:497] + "..."


# --- the input ----------------------------------------------------------------------------


class IdPublisher:
    """Stores numbered messages in IN (``msg_id=<row>-<number>``, 16-byte payloads:
    the number and when it fell due), ``rate`` a second from `PUBLISH_THREADS`
    threads; a publish that fails is sent again, same id, until it is acknowledged.

    Synchronous ``js.publish`` on purpose: with ``publish_async`` and done-callbacks the
    driver process of the Spark rows crashed (SIGSEGV in the ack future's lazy
    attributes, CPython 3.11), which this input is not here to test.
    """

    def __init__(self, js: JetStream, subject: str, key: str, rate: int) -> None:
        self.js, self.subject, self.key, self.rate = js, subject, key, rate
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._give_up_at = float("inf")
        self._next = 0
        self._epoch = 0.0
        self.acked = self.retries = self.unacked = 0
        self.failures: Counter[str] = Counter()
        self.failure: BaseException | None = None
        self._threads = [
            threading.Thread(target=self._run, name=f"reliability-spark-pub-{n}", daemon=True)
            for n in range(PUBLISH_THREADS)
        ]

    @property
    def published(self) -> int:
        """Numbers sent at least once."""
        with self._lock:
            return self.acked + self.unacked

    def start(self) -> None:
        self._epoch = now()
        for thread in self._threads:
            thread.start()

    def _run(self) -> None:
        try:
            while not self._stopping.is_set():
                with self._lock:
                    number = self._next
                    self._next += 1
                if self._stopping.wait(max(0.0, self._epoch + number / self.rate - now())):
                    return  # stopped before it fell due: never sent
                self._store(number)
        except BaseException as error:  # reported by stop(), not lost on a thread
            self.failure = error

    def _store(self, number: int) -> None:
        payload = PAYLOAD.pack(number, now())
        msg_id = f"{self.key}-{number}"
        while True:
            try:
                self.js.publish(self.subject, payload, msg_id=msg_id, timeout=ACK_TIMEOUT)
            except nats_sync.Error as error:
                with self._lock:
                    self.failures[type(error).__name__] += 1
                    if now() > self._give_up_at:
                        self.unacked += 1
                        return
                    self.retries += 1
                time.sleep(RETRY_WAIT)
                continue
            with self._lock:
                self.acked += 1
            return

    def stop(self) -> None:
        """Sends nothing new; each thread finishes its message, retrying it for up to
        `PUBLISH_FINISH` s. Raises if a thread hangs or failed."""
        self._give_up_at = now() + PUBLISH_FINISH
        self._stopping.set()
        for thread in self._threads:
            thread.join(max(0.0, self._give_up_at + ACK_TIMEOUT + 5.0 - now()))
        if any(thread.is_alive() for thread in self._threads):
            raise RuntimeError("a publisher thread did not end (publish hangs?)")
        if self.failure is not None:
            raise RuntimeError(f"a publisher thread failed: {self.failure}") from self.failure

    def is_alive(self) -> bool:
        return any(thread.is_alive() for thread in self._threads)


# --- the query ----------------------------------------------------------------------------


def start_query(
    spark: Any,
    urls: Sequence[str],
    mode: str,
    checkpoint: Path,
    options: Mapping[str, str],
) -> Any:
    """IN -> OUT: the row's streaming query, started (from ``checkpoint`` if it has one)."""
    servers = ",".join(urls)
    reader = (
        spark.readStream.format("jetstream")
        .option("servers", servers)
        .option("stream", IN_STREAM)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(MAX_OFFSETS))
    )
    for key, value in options.items():
        reader = reader.option(key, value)
    writer = (
        reader.load()
        .select("stream", "seq", "data")
        .writeStream.format("jetstream")
        .option("servers", servers)
        .option("subject", OUT_SUBJECT)
        .option("msgIdColumns", "stream,seq")
        .option("publishMode", mode)
        .option("commitBucket", COMMIT_BUCKET)
        .option("checkpointLocation", str(checkpoint))
    )
    for key, value in options.items():
        writer = writer.option(key, value)
    # No queryName(): Spark passes it to the sink as an option, which the sink refuses.
    return writer.trigger(processingTime=TRIGGER).start()


def wall_time(timestamp: str) -> float:
    """A progress timestamp (ISO 8601, UTC) as seconds since the epoch."""
    return datetime.datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()


def end_seq_of(progress: Any) -> int | None:
    """The next IN sequence after a micro-batch (its source's end offset)."""
    with contextlib.suppress(Exception):
        offset = progress["sources"][0]["endOffset"]
        if isinstance(offset, str):
            offset = json.loads(offset)
        return int(offset[IN_STREAM]["seq"])
    return None


class SupervisedQuery(threading.Thread):
    """Keeps the row's query running: a dead query's error is kept and it is started
    again from its checkpoint; every micro-batch's progress is collected.

    Only this thread touches the query while it runs; `stop` ends the thread first.
    """

    def __init__(self, spark: Any, start: Callable[[], Any], result: SparkResult) -> None:
        super().__init__(name="reliability-spark-query", daemon=True)
        self.spark, self._start, self.result = spark, start, result
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._seen: dict[tuple[str, int], Batch] = {}
        self.query: Any = None
        self.failure: BaseException | None = None

    def begin(self) -> None:
        """Starts the query (here: a failure to start is the caller's) and the thread."""
        self.query = self._start()
        self.start()

    def run(self) -> None:
        try:
            # The JVM keeps the active session per thread, and the data sources
            # registered with it: without this, a query started again from this
            # thread fails with DATA_SOURCE_NOT_FOUND for "jetstream".
            jvm = self.spark._jvm
            jvm.org.apache.spark.sql.SparkSession.setActiveSession(self.spark._jsparkSession)
            while not self._stopping.wait(POLL):
                self._collect()
                if not self.query.isActive and not self._stopping.is_set():
                    self._died()
        except BaseException as error:  # reported by stop(), not lost on a thread
            self.failure = error

    def _died(self) -> None:
        try:
            error = self.query.exception()
            text = str(error) if error is not None else "stopped without an exception"
        except Exception as err:  # the JVM side could not say
            text = f"(no exception: {type(err).__name__}: {err})"
        death = Death(time.time(), text)
        with self._lock:
            self.result.deaths.append(death)
        log.info("query died: %s", text)
        print(f"  [{self.result.key}] query died: {death.summary}", flush=True)
        while not self._stopping.wait(RESTART_PAUSE):
            try:
                self.query = self._start()
                return
            except Exception as err:  # could not even start: a death of its own
                death = Death(time.time(), f"{type(err).__name__}: {err}")
                with self._lock:
                    self.result.deaths.append(death)
                print(f"  [{self.result.key}] query did not start: {death.summary}", flush=True)

    def _collect(self) -> None:
        for progress in self.query.recentProgress:
            key = (str(progress["runId"]), int(progress["batchId"]))
            rows = int(progress["numInputRows"])
            earlier = self._seen.get(key)
            if earlier is not None and (earlier.rows or not rows):
                continue  # known (a report without data does not hide the batch's)
            started = wall_time(progress["timestamp"])
            took = (progress["durationMs"] or {}).get("triggerExecution", 0) / 1000
            batch = Batch(
                key[0],
                key[1],
                started,
                started + took,
                rows,
                end_seq_of(progress),
            )
            with self._lock:
                if earlier is not None:
                    self.result.batches.remove(earlier)
                self._seen[key] = batch
                self.result.batches.append(batch)

    def batches(self) -> list[Batch]:
        with self._lock:
            return list(self._seen.values())

    def reached(self) -> int:
        """The next IN sequence after the last completed micro-batch (0: none yet)."""
        return max((b.end_seq or 0 for b in self.batches()), default=0)

    def stop(self) -> None:
        """Ends the thread, then the query (each within `STOP_TIMEOUT`)."""
        self._stopping.set()
        self.join(STOP_TIMEOUT)
        if self.is_alive():
            raise RuntimeError(f"{self.name} did not end within {STOP_TIMEOUT:.0f} s")
        if self.query is not None:
            with contextlib.suppress(Exception):
                self._collect()
            self.query.stop()
        if self.failure is not None:
            raise RuntimeError(f"{self.name} failed: {self.failure}") from self.failure


# --- the cluster --------------------------------------------------------------------------


class SparkCluster(NatsCluster):
    """A 3-node JetStream cluster whose servers have a short lame duck mode."""

    def _new_server(
        self, index: int, routes: str | None, ports: list[int] | None = None
    ) -> NatsServer:
        server = super()._new_server(index, routes, ports)
        server.config = LAME_DUCK_CONFIG
        return server


def make_streams(js: JetStream, mode: str) -> tuple[Stream, Stream]:
    """IN, OUT (``allow_batched`` for the fast mode) and the commit bucket, all R3."""
    source = retried(
        lambda: js.create_stream(
            name=IN_STREAM, subjects=["in.>"], num_replicas=3, duplicate_window=DUPLICATE_WINDOW
        )
    )
    sink = retried(
        lambda: js.create_stream(
            name=OUT_STREAM,
            subjects=[OUT_SUBJECT],
            num_replicas=3,
            duplicate_window=DUPLICATE_WINDOW,
            allow_batched=mode == "fast",
        )
    )
    retried(lambda: js.create_key_value(bucket=COMMIT_BUCKET, replicas=3))
    return source, sink


def retried(call: Callable[[], T]) -> T:
    """``call()``, again every 0.5 s while it raises a `nats_sync.Error`, for up to
    `SETUP_TIMEOUT` s: a cluster just started may not count every peer online yet ("no
    suitable peers for placement")."""
    deadline = now() + SETUP_TIMEOUT
    while True:
        try:
            return call()
        except nats_sync.Error:
            if now() > deadline:
                raise
        time.sleep(0.5)


# --- the faults ---------------------------------------------------------------------------


class Context:
    """What a fault works with: the cluster, an admin client, the row's streams."""

    def __init__(
        self,
        spark: Any,
        cluster: NatsCluster,
        admin: nats_sync.Client,
        result: SparkResult,
        seed: int,
    ) -> None:
        self.spark, self.cluster, self.admin, self.result = spark, cluster, admin, result
        self.rng = random.Random(seed)
        self.streams = [
            admin.jetstream(timeout=10).stream(name) for name in (IN_STREAM, OUT_STREAM)
        ]

    def fault(self, what: str) -> contextlib.AbstractContextManager[None]:
        """Notes the block as a fault (its wall-clock span and what it was)."""
        return _noted(self.result, what)

    def wait_current(self, name: str) -> None:
        """Until node ``name`` is a current replica of IN and OUT again."""
        deadline = now() + REPLICAS_TIMEOUT
        while True:
            with contextlib.suppress(nats_sync.Error):
                if all(current(s.info().cluster or {}, name) for s in self.streams):
                    return
            if now() > deadline:
                raise RuntimeError(
                    f"{name} was not a current replica within "
                    f"{REPLICAS_TIMEOUT:.0f} s of its restart"
                )
            time.sleep(0.2)


@contextlib.contextmanager
def _noted(result: SparkResult, what: str) -> Iterator[None]:
    began = time.time()
    try:
        yield
    finally:
        result.faults.append((began, time.time(), what))


def sleep_until(moment: float) -> None:
    delay = moment - now()
    if delay > 0:
        time.sleep(delay)


def fault_kill(ctx: Context, until: float) -> None:
    """A random node gets SIGKILL every `KILL_EVERY` s and starts again on its ports and
    store `KILL_DOWN` s later."""
    next_at = now()
    while next_at + KILL_DOWN < until:
        sleep_until(next_at)
        node = ctx.rng.choice(ctx.cluster.servers)
        with ctx.fault(f"kill -9 of {node.name}"):
            node.kill()
            time.sleep(KILL_DOWN)
            node.start()
        next_at += KILL_EVERY


def fault_rolling(ctx: Context, until: float) -> None:
    """Node after node, in turn, until the input stops: lame duck mode (SIGUSR2), the
    process exits, it starts again; the next waits until it is a current replica."""
    index = 0
    while now() < until:
        node = ctx.cluster.servers[index % len(ctx.cluster.servers)]
        with ctx.fault(f"lame duck mode of {node.name}, restart"):
            node.signal_lame_duck()
            deadline = now() + SERVER_EXIT_TIMEOUT
            while node.is_running and now() < deadline:
                time.sleep(0.1)
            if node.is_running:
                ctx.result.notes.append(f"{node.name} did not leave lame duck mode in time: killed")
                node.kill()
            node.start()
        ctx.cluster.wait_for_mesh()
        ctx.cluster.wait_for_jetstream()
        ctx.wait_current(node.name or "")
        index += 1
        time.sleep(ROLL_PAUSE)


def fault_stepdown(ctx: Context, until: float) -> None:
    """Every `STEPDOWN_EVERY` s the leaders of IN and OUT step down."""
    next_at = now()
    while next_at < until:
        sleep_until(next_at)
        for name in (IN_STREAM, OUT_STREAM):
            with ctx.fault(f"step-down of {name}'s leader"):
                try:
                    reply = ctx.admin.request(
                        f"$JS.API.STREAM.LEADER.STEPDOWN.{name}", b"", timeout=10
                    )
                    answer = json.loads(reply.data)
                except nats_sync.Error as err:
                    answer = {"error": f"{type(err).__name__}: {err}"}
                if not answer.get("success"):
                    ctx.result.notes.append(f"a step-down of {name} was refused: {answer}")
        next_at += STEPDOWN_EVERY


def fault_worker(ctx: Context, until: float) -> None:
    """Every `WORKER_KILL_EVERY` s, while a task of a micro-batch runs, the Python worker
    running it gets SIGKILL."""
    tracker = ctx.spark.sparkContext.statusTracker()
    jvm = jvm_pid(ctx.spark)
    next_at = now()
    while next_at < until:
        sleep_until(next_at)
        next_at += WORKER_KILL_EVERY
        victim = worker_in_task(tracker, jvm, now() + ACTIVE_STAGE_TIMEOUT)
        if victim is None:
            ctx.result.notes.append(
                f"once no Python worker was found in a task within {ACTIVE_STAGE_TIMEOUT:.0f} s"
            )
            continue
        with ctx.fault(f"SIGKILL of Python worker {victim}"), contextlib.suppress(OSError):
            os.kill(victim, signal.SIGKILL)


FAULT_RUNNERS: dict[str, Callable[[Context, float], None]] = {
    "spark_kill": fault_kill,
    "spark_rolling": fault_rolling,
    "spark_stepdown": fault_stepdown,
    "spark_worker": fault_worker,
}


# --- Spark's Python workers ---------------------------------------------------------------


def jvm_pid(spark: Any) -> int:
    """The process id of the SparkSession's JVM (a child of this process, local mode)."""
    return int(spark.sparkContext._gateway.proc.pid)


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            stat = (entry / "stat").read_text()
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def argv_of(pid: int) -> list[str]:
    """The command line of process ``pid`` (empty when it is gone)."""
    with contextlib.suppress(OSError):
        raw = (Path("/proc") / str(pid) / "cmdline").read_bytes()
        return [arg.decode(errors="replace") for arg in raw.split(b"\0") if arg]
    return []


def python_workers(jvm: int) -> list[int]:
    """The Python workers that run Spark's tasks: the children of the JVM's
    ``pyspark.daemon`` for module ``pyspark.worker`` (one forked per worker).

    The JVM has a daemon per worker module (``pyspark.sql.worker.*``: the driver's
    side of Python data sources, planning, the streaming source and sink runners);
    only the tasks' is looked at.
    """
    workers = []
    for child in children(jvm):
        argv = argv_of(child)
        if "pyspark.daemon" in argv and argv[-1] in ("pyspark.daemon", "pyspark.worker"):
            workers += children(child)
    return workers


def io_calls(pid: int) -> int:
    """Read and write system calls process ``pid`` made so far (-1: gone)."""
    with contextlib.suppress(OSError, ValueError):
        lines = (Path("/proc") / str(pid) / "io").read_text().splitlines()
        fields = dict(line.split(":", 1) for line in lines if ":" in line)
        return int(fields["syscr"]) + int(fields["syscw"])
    return -1


def busy_worker(pids: Sequence[int], window: float = 0.02) -> int | None:
    """Of ``pids``, the one that made the most read and write calls over ``window`` s;
    None when none made any. A worker between tasks waits on its socket to the JVM and
    makes (nearly) none; one in a task reads its rows and talks to NATS."""
    before = {pid: io_calls(pid) for pid in pids}
    time.sleep(window)
    calls = {pid: io_calls(pid) - first for pid, first in before.items() if first >= 0}
    busy = {pid: n for pid, n in calls.items() if n > 0}
    return max(busy, key=lambda pid: busy[pid]) if busy else None


def worker_in_task(tracker: Any, jvm: int, deadline: float) -> int | None:
    """A Python worker of the JVM's that is running a task now; None if none is seen
    before ``deadline``."""
    while now() < deadline:
        # Any active stage: its task count (numActiveTasks) lags behind short tasks.
        if tracker.getActiveStageIds():
            victim = busy_worker(python_workers(jvm))
            if victim is not None:
                return victim
        else:
            time.sleep(0.01)
    return None


# --- the row ------------------------------------------------------------------------------


def spark_session(master: str = "local[2]") -> Any:
    """A SparkSession for the rows, as tests/spark/conftest.py makes one, with the data
    sources registered."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession  # noqa: PLC0415 - only the Spark rows need it

    from nats_sync.spark import register  # noqa: PLC0415

    session = (
        SparkSession.builder.master(master)
        .appName("nats-sync-reliability")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    return session


def read_ids(stream: Stream, last_seq: int) -> list[str | None]:
    """The message id of every message of ``stream``, in order."""
    ids: list[str | None] = []
    if last_seq < 1:
        return ids
    for run in stream.get_msg_columns(1, end_seq=last_seq, batch=READ_BATCH, timeout=30):
        for headers in run.headers:
            msg_id = (headers or {}).get(MSG_ID)
            ids.append(msg_id if isinstance(msg_id, str) else None)
    return ids


def compare(in_stream: Stream, out_stream: Stream) -> SparkTally:
    """``OUT`` against ``IN`` by the ``IN:<seq>`` ids (see the module)."""
    state = in_stream.info().state
    t = SparkTally(stored_in=state.messages, in_last_seq=state.last_seq)
    copies: Counter[int] = Counter()
    for msg_id in read_ids(out_stream, out_stream.info().state.last_seq):
        stream, _, seq = (msg_id or "").partition(":")
        if stream != IN_STREAM or not seq.isdigit():
            t.foreign += 1
            continue
        copies[int(seq)] += 1
    t.stored_out = sum(copies.values()) + t.foreign
    t.highest = max(copies, default=0)
    t.missing = [seq for seq in range(1, t.highest + 1) if not copies[seq]]
    t.duplicated = sum(n - 1 for n in copies.values())
    return t


def wait_first_batch(query: SupervisedQuery) -> None:
    """Until the query has completed a micro-batch with rows."""
    deadline = now() + FIRST_BATCH_TIMEOUT
    while not any(b.rows for b in query.batches()):
        if now() > deadline:
            raise RuntimeError(f"no micro-batch within {FIRST_BATCH_TIMEOUT:.0f} s")
        time.sleep(0.2)


def catch_up(query: SupervisedQuery, last_seq: int, timeout: float) -> float | None:
    """Seconds until the query's micro-batches passed ``last_seq``; None if not within
    ``timeout``."""
    began = now()
    while query.reached() <= last_seq:
        if now() - began > timeout:
            return None
        time.sleep(0.5)
    return now() - began


def run_spark_row(
    spark: Any,
    row: SparkRow,
    *,
    input_seconds: float = INPUT_SECONDS,
    catch_up_seconds: float = CATCH_UP,
    options: Mapping[str, str] | None = None,
    track: Callable[[NatsCluster], None] = lambda cluster: None,
    seed: int = 0,
) -> SparkResult:
    """Runs one row on ``spark`` (a SparkSession with nats_sync's data sources
    registered) and returns its figures; a broken harness is the result's ``error``."""
    result = SparkResult(row.key, row.title, row.mode)
    print(f"{row.key}: {row.title}", flush=True)
    began = now()
    cluster = SparkCluster(3, name=f"reliability-{row.key.replace('_', '-')}", jetstream=True)
    track(cluster)
    workdir = Path(tempfile.mkdtemp(prefix="nats-sync-reliability-spark-"))
    nc = admin = None
    publisher: IdPublisher | None = None
    query: SupervisedQuery | None = None
    stop_timeout = spark.conf.get(STOP_TIMEOUT_CONF, None)
    # query.stop() waits for the micro-batch under way; bounded, so a batch stuck in
    # a server call cannot hang the row.
    spark.conf.set(STOP_TIMEOUT_CONF, f"{STOP_TIMEOUT:.0f}s")
    try:
        cluster.start()
        admin = nats_sync.connect(
            cluster.urls,
            name="reliability-spark-admin",
            max_reconnect_attempts=-1,
            reconnect_delay_cb=lambda attempt: 0.1,
        )
        in_stream, out_stream = make_streams(admin.jetstream(timeout=10), row.mode)
        nc = nats_sync.connect(
            cluster.urls,
            name="reliability-spark-pub",
            max_reconnect_attempts=-1,
            reconnect_delay_cb=lambda attempt: 0.1,
        )
        publisher = IdPublisher(nc.jetstream(), IN_SUBJECT, row.key, RATE)
        publisher.start()
        query = SupervisedQuery(
            spark,
            lambda: start_query(
                spark, cluster.urls, row.mode, workdir / "checkpoint", options or {}
            ),
            result,
        )
        query.begin()
        wait_first_batch(query)
        # The input counts from the query's first micro-batch (Spark's start-up, which
        # takes longer in a fresh session, is not input the query streamed).
        streaming_began = now()
        input_ends = streaming_began + input_seconds
        time.sleep(SETTLE_BEFORE_FAULTS)
        try:
            FAULT_RUNNERS[row.fault.key](Context(spark, cluster, admin, result, seed), input_ends)
        finally:
            for server in cluster.servers:  # the rest of the row needs every node
                if not server.is_running:
                    server.start()
        sleep_until(input_ends)
        publisher.stop()
        result.input_seconds = now() - streaming_began
        last_seq = in_stream.info().state.last_seq
        result.caught_up_after = catch_up(query, last_seq, catch_up_seconds)
        query.stop()
        result.tally = compare(in_stream, out_stream)
        result.published = publisher.published
        result.publish_retries = publisher.retries
        if publisher.unacked:
            result.notes.append(f"{publisher.unacked} messages were never acknowledged into IN")
    except Exception as err:  # a broken row is reported, the others still run
        log.exception("row %s failed", row.key)
        result.error = f"{type(err).__name__}: {err}"
    finally:
        for stoppable in (publisher, query):
            if stoppable is not None and stoppable.is_alive():
                with contextlib.suppress(Exception):
                    stoppable.stop()
        if query is not None and query.query is not None:
            with contextlib.suppress(Exception):
                query.query.stop()
        for client in (nc, admin):
            if client is not None:
                with contextlib.suppress(Exception):
                    client.close()
        cluster.cleanup()
        shutil.rmtree(workdir, ignore_errors=True)
        if stop_timeout is None:
            spark.conf.unset(STOP_TIMEOUT_CONF)
        else:
            spark.conf.set(STOP_TIMEOUT_CONF, stop_timeout)
    result.elapsed = now() - began
    print(f"  [{row.key}] {summary(result)}", flush=True)
    return result


def summary(r: SparkResult) -> str:
    """One line of a row's figures, for the console and a test's failure message."""
    t, gap = r.tally, r.longest_gap
    return (
        f"in {t.stored_in:,}, out {t.stored_out:,}, missing {len(t.missing):,}, duplicated "
        f"{t.duplicated:,}, query restarts {r.restarts}, longest gap "
        f"{'-' if gap is None else f'{gap[0]:.1f} s'}, lag {t.lag:,}, faults "
        f"{len(r.faults)} [{r.elapsed:.0f} s]" + (f" ERROR {r.error}" if r.error else "")
    )

"""Spark and JetStream: the ``format("jetstream")`` source and sink, and ``kv_lookup_udf``.

Run by ``benchmarks.spark_bench`` in its SparkSession (local[2]) after the request_udf
comparison, each part against a nats-py counterpart doing the same work the way a
nats-py user would write it in Spark:

- read: a file stream with allow_direct of ``read_messages`` x 128 B (filled with
  ``publish_async``, not timed), aggregated (``count``, ``sum(length(data))``,
  ``sum(seq)``, checked) through ``spark.read.format("jetstream")`` against a Python
  data source of this module (``natspy_jetstream``) whose reader fetches the same
  sequence ranges (the same partitions) with a nats-py pull consumer and yields one
  tuple per message.
- write: ``df.write.format("jetstream")`` of ``write_rows`` x 128 B with a ``msg_id``
  column, against ``foreachPartition`` publishing each row with nats-py's
  ``publish_async`` (``Nats-Msg-Id`` header) and waiting for every ack; each run
  writes to a fresh stream, which must then hold every row.
- kv: ``kv_lookup_udf`` over ``kv_rows`` lookups of a bucket of ``kv_keys`` keys (about
  one lookup in eleven misses), against a row-at-a-time Python UDF calling ``kv.get``
  on the worker's client (``kv_row_rows`` lookups: it is much slower).

Every run is checked (rows counted, bytes summed, stored messages counted); timing is
wall time of the Spark action alone. The functions return run records shaped as
``spark_bench``'s: ``{"case", "variant", "rep", "ok", "metrics" | "error"}``.
"""

from __future__ import annotations

import asyncio
import functools
import math
import os
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nats
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from pyspark.sql import functions as sf
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.functions import udf
from pyspark.sql.types import BinaryType, StructType

import nats_sync
from benchmarks.common import cpu_seconds, seq_payload
from benchmarks.scenarios import (
    NATSPY,
    SINK_ASYNC,
    SPARK_JS_READ,
    SPARK_JS_WRITE,
    SPARK_KV,
    SPARK_KV_ROW,
    SPARK_KV_UDF,
    SYNC,
)
from nats_sync.jetstream import KeyNotFoundError, KeyValue
from nats_sync.spark import kv_lookup_udf, register
from nats_sync.spark._defaults import SPARK_JS_MAX_SEQ_PER_PARTITION
from nats_sync.spark._jetstream.read import JS_READ_SCHEMA
from nats_sync.spark._worker import worker_client

#: Seconds for JetStream admin calls, acks and fetches (a busy VM stalls file writes).
JS_TIMEOUT = 30.0
#: Messages one fetch asks for: the jetstream source's default ``fetchBatch``.
FETCH_BATCH = 5_000
#: Acks awaited at once by either writer (both clients' default window).
MAX_PENDING_ACKS = 4_000
NATSPY_SOURCE = "natspy_jetstream"
#: Rows of the untimed first read of each variant (starts the data source's workers).
WARMUP_ROWS = 20_000

Run = dict[str, Any]


def _proc_stat(pid: int) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def tree_cpu(root: int) -> tuple[float, float]:
    """CPU seconds of ``root`` itself (all its threads) and of everything below it.

    Below: every live descendant's own and reaped children's time, plus the children
    ``root`` reaped (Spark's planning runners, workers that exited), from ``/proc``.
    """
    tick = os.sysconf("SC_CLK_TCK")
    children: dict[int, list[int]] = {}
    stats: dict[int, list[str]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (fields := _proc_stat(int(entry.name))) is not None:
            stats[int(entry.name)] = fields
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    own = stats.get(root)
    if own is None:
        return 0.0, 0.0
    below = int(own[13]) + int(own[14])
    pending = list(children.get(root, []))
    while pending:
        pid = pending.pop()
        fields = stats[pid]
        below += sum(int(fields[i]) for i in (11, 12, 13, 14))
        pending += children.get(pid, [])
    return (int(own[11]) + int(own[12])) / tick, below / tick


@dataclass
class CpuMeter:
    """The CPU nats-server, Spark's JVM and Spark's Python processes spend in a section.

    Spark's Python processes (the workers running the tasks, the data source runners)
    are the JVM's descendants; ``server_pid`` is None where the server is not ours to
    watch.
    """

    jvm_pid: int
    server_pid: int | None

    def sample(self) -> tuple[float, float, float]:
        jvm, python = tree_cpu(self.jvm_pid)
        return (cpu_seconds(self.server_pid) if self.server_pid else 0.0), jvm, python

    def per_row(self, before: tuple[float, float, float], rows: int) -> dict[str, float]:
        after = self.sample()
        names = ("server_cpu_us", "jvm_cpu_us", "python_cpu_us")
        out = {name: (b - a) / rows * 1e6 for name, a, b in zip(names, before, after, strict=True)}
        if not self.server_pid:
            del out["server_cpu_us"]
        return out


def _record(
    meter: CpuMeter, case: str, variant: str, rep: int, action: Callable[[], dict[str, Any]]
) -> Run:
    """Runs one measurement (with the CPU of every process); a failure is recorded."""
    try:
        before = meter.sample()
        metrics = action()
        metrics.update(meter.per_row(before, metrics["rows"]))
    except Exception as error:  # reported in the results; the suite goes on
        print(
            f"  rep {rep + 1} {case} {variant}: FAILED {type(error).__name__}: {error}"[:600],
            flush=True,
        )
        return {
            "case": case,
            "variant": variant,
            "rep": rep,
            "ok": False,
            "error": f"{type(error).__name__}: {error}"[:500],
        }
    cpu = ", ".join(
        f"{name.removesuffix('_cpu_us')} {metrics[name]:.1f}"
        for name in ("server_cpu_us", "jvm_cpu_us", "python_cpu_us")
        if name in metrics
    )
    print(
        f"  rep {rep + 1} {case} {variant}: {metrics['rows']:,} rows, "
        f"{metrics['rows_per_s']:,.0f} rows/s (CPU µs per row: {cpu})",
        flush=True,
    )
    return {"case": case, "variant": variant, "rep": rep, "ok": True, "metrics": metrics}


def _rate(rows: int, elapsed: float) -> dict[str, Any]:
    return {"rows": rows, "elapsed_s": elapsed, "rows_per_s": rows / elapsed}


def _alternating(variants: list[str], reps: int) -> Iterator[tuple[int, str]]:
    """(rep, variant), the order swapped every other repetition."""
    for rep in range(reps):
        for variant in variants if rep % 2 == 0 else list(reversed(variants)):
            yield rep, variant


# --- the nats-py source: row-at-a-time over a pull consumer ------------------------------


@dataclass(frozen=True)
class NatsPyRange(InputPartition):
    """Sequences ``lo`` (inclusive) to ``hi`` (exclusive), as the jetstream source plans."""

    lo: int
    hi: int


def planned_ranges(lo: int, hi: int) -> list[NatsPyRange]:
    """The ranges ``nats_sync.spark._jetstream.plan.Planner.ranges`` makes of ``[lo, hi)``
    (``minPartitions`` 1): the same partitions for both readers."""
    span = hi - lo
    count = min(max(1, math.ceil(span / SPARK_JS_MAX_SEQ_PER_PARTITION)), span)
    bounds = [lo + (span * index) // count for index in range(count + 1)]
    return [NatsPyRange(bounds[i], bounds[i + 1]) for i in range(count)]


class NatsPySource(DataSource):
    """``format("natspy_jetstream")``: options ``servers``, ``stream``, ``subject``,
    ``lo``, ``hi`` (the sequences to read, ``hi`` exclusive)."""

    @classmethod
    def name(cls) -> str:
        return NATSPY_SOURCE

    def schema(self) -> str:
        return JS_READ_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return NatsPyReader(dict(self.options))


class NatsPyReader(DataSourceReader):
    """Each range read by nats-py in the task: fetch, then one tuple per message."""

    def __init__(self, options: dict[str, str]) -> None:
        self.url = options["servers"]
        self.stream = options["stream"]
        self.subject = options["subject"]
        self.lo = int(options["lo"])
        self.hi = int(options["hi"])

    def partitions(self) -> list[NatsPyRange]:
        return planned_ranges(self.lo, self.hi)

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        assert isinstance(partition, NatsPyRange)
        return natspy_rows(self.url, self.stream, self.subject, partition.lo, partition.hi)


def natspy_rows(url: str, stream: str, subject: str, lo: int, hi: int) -> Iterator[tuple[Any, ...]]:
    """``[lo, hi)`` of ``stream`` through nats-py: an ephemeral pull consumer (in memory,
    no acks, from ``lo``) fetched ``FETCH_BATCH`` at a time on an event loop of the
    task's own; rows as the jetstream source's schema."""
    loop = asyncio.new_event_loop()
    nc = loop.run_until_complete(nats.connect(url))
    try:
        js = nc.jetstream(timeout=JS_TIMEOUT)
        config = ConsumerConfig(
            deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
            opt_start_seq=lo,
            ack_policy=AckPolicy.NONE,
            mem_storage=True,
            inactive_threshold=60.0,
        )
        sub = loop.run_until_complete(js.pull_subscribe(subject, stream=stream, config=config))
        consumer = str(config.name)  # pull_subscribe names the ephemeral consumer here
        next_seq = lo
        while next_seq < hi:
            msgs = loop.run_until_complete(
                sub.fetch(min(FETCH_BATCH, hi - next_seq), timeout=JS_TIMEOUT)
            )
            for msg in msgs:
                meta = msg.metadata
                seq = meta.sequence.stream
                yield (stream, seq, msg.subject, msg.data, msg.headers, meta.timestamp)
                next_seq = seq + 1
        loop.run_until_complete(sub.unsubscribe())
        loop.run_until_complete(js.delete_consumer(stream, consumer))
    finally:
        loop.run_until_complete(nc.close())
        loop.close()


# --- read ---------------------------------------------------------------------------------


def _fill(js: Any, subject: str, payloads: Iterator[tuple[bytes, dict[str, str] | None]]) -> int:
    """Publishes every payload with ``publish_async``, then waits for the acks."""
    futures = [js.publish_async(subject, data, headers=headers) for data, headers in payloads]
    js.publish_async_completed(timeout=120)
    failed = sum(1 for future in futures if future.exception() is not None)
    if failed:
        raise RuntimeError(f"{failed} of {len(futures)} messages not stored")
    return len(futures)


def _read_checked(frame: Any, count: int, size: int, lo: int = 1) -> dict[str, Any]:
    """Aggregates a read and checks it saw sequences ``lo .. lo+count-1`` of ``size`` B."""
    started = time.perf_counter()
    rows, total, seq_sum = frame.select(
        sf.count(sf.lit(1)), sf.sum(sf.length("data")), sf.sum("seq")
    ).first()
    elapsed = time.perf_counter() - started
    expected_seqs = (lo + lo + count - 1) * count // 2
    if (rows, total, seq_sum) != (count, count * size, expected_seqs):
        raise RuntimeError(
            f"read {rows} rows, {total} bytes, seq sum {seq_sum}; expected "
            f"{count}, {count * size}, {expected_seqs}"
        )
    return _rate(count, elapsed)


def run_read(spark: Any, meter: CpuMeter, url: str, count: int, size: int, reps: int) -> list[Run]:
    """The jetstream source against the nats-py row reader, same stream and ranges."""
    stream, subject = f"BENCH_SPARK_READ_{os.getpid()}", f"benchjs.{os.getpid()}.spark.read"
    spark.dataSource.register(NatsPySource)
    with nats_sync.connect(url) as nc:
        # The fill is not timed: a stall_wait that a busy machine (Spark's JVM beside the
        # server) cannot break, as the 0.2 s default once did (TooManyStalledMsgsError).
        js = nc.jetstream(timeout=JS_TIMEOUT, stall_wait=30)
        js.create_stream(name=stream, subjects=[subject], storage="file", allow_direct=True)
        try:
            started = time.perf_counter()
            _fill(js, subject, ((seq_payload(n, size), None) for n in range(1, count + 1)))
            print(
                f"  stored {count:,} x {size} B in {time.perf_counter() - started:.1f}s "
                "(not timed)",
                flush=True,
            )

            def frame(variant: str, hi: int) -> Any:
                if variant == SYNC:
                    reader = (
                        spark.read.format("jetstream")
                        .option("servers", url)
                        .option("stream", stream)
                    )
                    if hi <= count:
                        reader = reader.option("endingOffsets", f'{{"{stream}": {hi}}}')
                    return reader.load()
                return (
                    spark.read.format(NATSPY_SOURCE)
                    .option("servers", url)
                    .option("stream", stream)
                    .option("subject", subject)
                    .option("lo", "1")
                    .option("hi", str(hi))
                    .load()
                )

            for variant in (SYNC, NATSPY):  # workers started, modules imported, connected
                warm = min(WARMUP_ROWS, count)
                _read_checked(frame(variant, warm + 1), warm, size)
                print(f"  warm-up read {variant} done", flush=True)

            def whole(variant: str) -> dict[str, Any]:
                return _read_checked(frame(variant, count + 1), count, size)

            return [
                _record(meter, SPARK_JS_READ, variant, rep, functools.partial(whole, variant))
                for rep, variant in _alternating([SYNC, NATSPY], reps)
            ]
        finally:
            js.delete_stream(stream)


# --- write --------------------------------------------------------------------------------


def natspy_publish_partition(url: str, subject: str) -> Callable[[Iterator[Any]], None]:
    """What ``foreachPartition`` runs for the nats-py writer: each row published with
    ``publish_async`` and its ``msg_id`` as ``Nats-Msg-Id``, then every ack awaited."""

    def publish(rows: Iterator[Any]) -> None:
        async def main() -> None:
            nc = await nats.connect(url)
            try:
                js = nc.jetstream(timeout=JS_TIMEOUT, publish_async_max_pending=MAX_PENDING_ACKS)
                futures = [
                    await js.publish_async(
                        subject, bytes(row.data), headers={"Nats-Msg-Id": row.msg_id}
                    )
                    for row in rows
                ]
                await asyncio.wait_for(js.publish_async_completed(), JS_TIMEOUT * 4)
                failed = sum(1 for future in futures if future.exception() is not None)
                if failed:
                    raise RuntimeError(f"{failed} of {len(futures)} publishes failed")
            finally:
                await nc.close()

        asyncio.run(main())

    return publish


#: The sink's variants: ``publishMode`` "fast" (the headline, SYNC: the stream allows
#: batched) and "async" (SINK_ASYNC), each its own variant of the write part.
_SINK_MODES = {SYNC: "fast", SINK_ASYNC: "async"}


def run_write(spark: Any, meter: CpuMeter, url: str, rows: int, size: int, reps: int) -> list[Run]:
    """``df.write.format("jetstream")`` with ``publishMode`` "fast" and "async" against
    ``foreachPartition`` + nats-py, each run into a fresh file stream with
    ``allow_batched`` (nats-py publishes one message at a time either way)."""
    frame = (
        spark.range(rows, numPartitions=2)
        .select(
            sf.format_string(f"%0{size}d", "id").cast("binary").alias("data"),
            sf.format_string("row-%d", "id").alias("msg_id"),
        )
        .cache()
    )
    frame.count()  # the rows are made before the clock starts
    variants = [SYNC, SINK_ASYNC, NATSPY]
    runs: list[Run] = []
    try:
        with nats_sync.connect(url) as nc:
            js = nc.jetstream(timeout=JS_TIMEOUT)
            warm = frame.limit(min(WARMUP_ROWS, rows))
            plan = [(-1, variant) for variant in variants] + list(_alternating(variants, reps))
            for index, (rep, variant) in enumerate(plan):
                stream = f"BENCH_SPARK_WRITE_{os.getpid()}_{index}"
                subject = f"benchjs.{os.getpid()}.spark.write.{index}"
                js.create_stream(
                    name=stream, subjects=[subject], storage="file", allow_batched=True
                )
                try:
                    source, expected = (warm, min(WARMUP_ROWS, rows)) if rep < 0 else (frame, rows)

                    def write(
                        source: Any = source,
                        expected: int = expected,
                        subject: str = subject,
                        stream: str = stream,
                        variant: str = variant,
                    ) -> dict[str, Any]:
                        started = time.perf_counter()
                        if variant in _SINK_MODES:
                            (
                                source.write.format("jetstream")
                                .option("servers", url)
                                .option("subject", subject)
                                .option("timeout", str(JS_TIMEOUT))
                                .option("publishMode", _SINK_MODES[variant])
                                .mode("append")
                                .save()
                            )
                        else:
                            source.foreachPartition(natspy_publish_partition(url, subject))
                        elapsed = time.perf_counter() - started
                        stored = js.stream_info(stream).state.messages
                        if stored != expected:
                            raise RuntimeError(f"the stream holds {stored} of {expected} rows")
                        return _rate(expected, elapsed)

                    if rep < 0:
                        write()
                        print(f"  warm-up write {variant} done", flush=True)
                    else:
                        runs.append(_record(meter, SPARK_JS_WRITE, variant, rep, write))
                finally:
                    js.delete_stream(stream)
    finally:
        frame.unpersist()
    return runs


# --- kv_lookup_udf ------------------------------------------------------------------------


@functools.lru_cache(maxsize=4)
def _bucket(url: str, bucket: str) -> KeyValue:
    """This worker's handle on the bucket (bound once, on the worker's shared client)."""
    return worker_client(url, {}).jetstream(timeout=JS_TIMEOUT).key_value(bucket)


def row_kv_udf(url: str, bucket: str) -> Any:
    """A plain Python UDF: one ``kv.get`` per row, None where the key has no value."""

    def get(key: str) -> bytes | None:
        try:
            return _bucket(url, bucket).get(key).value
        except KeyNotFoundError:
            return None

    with warnings.catch_warnings():  # Spark 4 looks for Arrow hints in str -> bytes
        warnings.simplefilter("ignore", UserWarning)
        return udf(get, BinaryType())


def kv_value(number: int, size: int) -> bytes:
    return b"v" + seq_payload(number, size - 1)


def run_kv(
    spark: Any, meter: CpuMeter, url: str, keys: int, rows: int, row_rows: int, size: int, reps: int
) -> list[Run]:
    """``kv_lookup_udf`` against the row UDF; keys ``k0 .. k<keys*1.1>``, the top tenth
    never set."""
    bucket = f"BENCH_SPARK_KV_{os.getpid()}"
    span = keys + keys // 10  # keys >= `keys` are missing
    with nats_sync.connect(url) as nc:
        js = nc.jetstream(timeout=JS_TIMEOUT)
        js.create_key_value(bucket=bucket, storage="file")
        try:
            started = time.perf_counter()
            _fill_kv(js, bucket, keys, size)
            print(
                f"  stored {keys:,} keys x {size} B in {time.perf_counter() - started:.1f}s "
                "(not timed)",
                flush=True,
            )
            lookups = {
                SPARK_KV_UDF: kv_lookup_udf(bucket, url, timeout=JS_TIMEOUT),
                SPARK_KV_ROW: row_kv_udf(url, bucket),
            }
            sizes = {SPARK_KV_UDF: rows, SPARK_KV_ROW: row_rows}

            def lookup(variant: str, count: int) -> dict[str, Any]:
                frame = spark.range(count, numPartitions=2).select(
                    sf.concat(sf.lit("k"), (sf.col("id") % span).cast("string")).alias("key")
                )
                value = lookups[variant](frame["key"])
                started = time.perf_counter()
                found, total = frame.select(sf.count(value), sf.sum(sf.length(value))).first()
                elapsed = time.perf_counter() - started
                hits = sum((count - n + span - 1) // span for n in range(min(keys, count)))
                if (found, total or 0) != (hits, hits * size):
                    raise RuntimeError(
                        f"{found} values ({total} bytes); expected {hits} ({hits * size} bytes)"
                    )
                return _rate(count, elapsed)

            for variant in lookups:
                lookup(variant, min(2_000, row_rows))
                print(f"  warm-up {variant} done", flush=True)
            return [
                _record(
                    meter,
                    SPARK_KV,
                    variant,
                    rep,
                    functools.partial(lookup, variant, sizes[variant]),
                )
                for rep, variant in _alternating([SPARK_KV_UDF, SPARK_KV_ROW], reps)
            ]
        finally:
            js.delete_key_value(bucket)


def _fill_kv(js: Any, bucket: str, keys: int, size: int) -> None:
    subject = f"$KV.{bucket}."
    futures = [js.publish_async(subject + f"k{n}", kv_value(n, size)) for n in range(keys)]
    js.publish_async_completed(timeout=120)
    failed = sum(1 for future in futures if future.exception() is not None)
    if failed:
        raise RuntimeError(f"{failed} of {keys} keys not stored")


# --- all of it ----------------------------------------------------------------------------


def run_all(spark: Any, args: dict[str, Any]) -> list[Run]:
    """The parts named in ``args["js_parts"]``; a part that fails to set up is recorded."""
    register(spark)
    jvm_pid = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
    meter = CpuMeter(jvm_pid, args.get("server_pid"))
    url, reps, parts, size = args["url"], args["reps"], args["js_parts"], args["size"]
    jobs: dict[str, Callable[[], list[Run]]] = {
        SPARK_JS_READ: lambda: run_read(spark, meter, url, args["read_messages"], size, reps),
        SPARK_JS_WRITE: lambda: run_write(spark, meter, url, args["write_rows"], size, reps),
        SPARK_KV: lambda: run_kv(
            spark,
            meter,
            url,
            args["kv_keys"],
            args["kv_rows"],
            args["kv_row_rows"],
            args["value_size"],
            reps,
        ),
    }
    runs: list[Run] = []
    for part in parts:
        print(f"Spark {part}:", flush=True)
        try:
            runs += jobs[part]()
        except Exception as error:  # the set-up failed: recorded, the suite goes on
            print(f"  {part} FAILED: {type(error).__name__}: {error}"[:600], flush=True)
            runs.append(
                {
                    "case": part,
                    "variant": "-",
                    "rep": "-",
                    "ok": False,
                    "error": f"{type(error).__name__}: {error}"[:500],
                }
            )
    return runs

"""Spark: the pipelined ``request_udf`` against a row-at-a-time Python UDF.

Run by the suite in its own process (``python -m benchmarks.spark_bench JSON``) with
one local[2] SparkSession for all runs, the JetStream parts
(`benchmarks.spark_js_bench`) after this one. Both variants use the same per-worker client
(``nats_sync.spark._worker.worker_client``) and the same raw responder, so the only
difference is one blocking ``request()`` per row against pipelined Arrow batches.
Prints progress lines, then ``RESULT {json}`` (and ``RESULT_JS {json}``).
"""

from __future__ import annotations

import json
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as sf
from pyspark.sql.functions import udf
from pyspark.sql.types import BinaryType

from benchmarks import spark_js_bench
from benchmarks.common import ECHO_SUBJECT, REQUEST_TIMEOUT
from benchmarks.scenarios import SPARK_ROW, SPARK_VECTOR
from nats_sync.spark import request_udf
from nats_sync.spark._worker import worker_client

PAYLOAD_SIZE = 16
PARTITIONS = 2


def _session() -> Any:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    root = str(Path(__file__).resolve().parent.parent)
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (root, os.environ.get("PYTHONPATH", "")) if p
    )
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("nats-sync-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(PARTITIONS))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def row_udf(url: str) -> Any:
    """A plain Python UDF: one blocking request per row on the worker's shared client."""

    def echo(payload: bytes) -> bytes:
        client = worker_client(url, {})
        return client.request(ECHO_SUBJECT, payload, timeout=REQUEST_TIMEOUT).data

    with warnings.catch_warnings():  # Spark 4 looks for Arrow hints in bytes -> bytes
        warnings.simplefilter("ignore", UserWarning)
        return udf(echo, BinaryType())


def vector_udf(url: str) -> Any:
    """``nats_sync.spark.request_udf``: each Arrow batch pipelined with request_batch."""
    return request_udf(ECHO_SUBJECT, url, timeout=REQUEST_TIMEOUT)


def run_once(spark: Any, make_udf: Any, rows: int) -> dict[str, Any]:
    """Sends ``rows`` requests through the UDF and checks every reply came back."""
    frame = spark.range(rows, numPartitions=PARTITIONS).select(
        sf.format_string(f"%0{PAYLOAD_SIZE}d", "id").cast("binary").alias("payload")
    )
    reply = make_udf(frame["payload"])
    started = time.perf_counter()
    total, answered = frame.select(sf.sum(sf.length(reply)), sf.count(reply)).first()
    elapsed = time.perf_counter() - started
    if answered != rows or total != rows * PAYLOAD_SIZE:
        raise RuntimeError(f"{answered} of {rows} rows answered ({total} bytes)")
    return {"rows": rows, "elapsed_s": elapsed, "rows_per_s": rows / elapsed}


def run_udfs(spark: Any, args: dict[str, Any]) -> list[dict[str, Any]]:
    """request_udf against the row UDF, ``args["reps"]`` times, interleaved."""
    url = args["url"]
    runs: list[dict[str, Any]] = []
    variants = {
        SPARK_VECTOR: (vector_udf(url), args["vector_rows"]),
        SPARK_ROW: (row_udf(url), args["row_rows"]),
    }
    for name, (make_udf, _) in variants.items():  # start workers, connect clients
        run_once(spark, make_udf, 2_000)
        print(f"  warm-up {name} done", flush=True)
    for rep in range(args["reps"]):
        order = list(variants) if rep % 2 == 0 else list(reversed(variants))
        for name in order:
            make_udf, rows = variants[name]
            result: dict[str, Any]
            try:
                metrics = run_once(spark, make_udf, rows)
                result = {"variant": name, "rep": rep, "ok": True, "metrics": metrics}
                print(
                    f"  rep {rep + 1} {name}: {rows:,} rows, {metrics['rows_per_s']:,.0f} rows/s",
                    flush=True,
                )
            except Exception as error:
                result = {
                    "variant": name,
                    "rep": rep,
                    "ok": False,
                    "error": f"{type(error).__name__}: {error}"[:500],
                }
                print(f"  rep {rep + 1} {name}: FAILED {result['error']}", flush=True)
            runs.append(result)
    return runs


def main() -> None:
    """Entry point: ``python -m benchmarks.spark_bench '{"url": ..., ...}'``.

    ``args["udf"]`` (the request_udf comparison) and ``args["js"]`` (the JetStream
    parts, see `benchmarks.spark_js_bench`) say what to run, either absent to skip it;
    each prints its own result line (``RESULT`` and ``RESULT_JS``) as soon as it is done,
    so a later part timing out loses nothing measured before it.
    """
    args = json.loads(sys.argv[1])
    url = args["url"]
    print("  starting SparkSession (local[2])", flush=True)
    spark = _session()
    try:
        if args.get("udf") is not None:
            udf_args = {**args["udf"], "url": url}
            runs = run_udfs(spark, udf_args)
            print("RESULT " + json.dumps({"runs": runs, "args": args["udf"]}), flush=True)
        if args.get("js") is not None:
            js_args = {**args["js"], "url": url, "server_pid": args.get("server_pid")}
            runs = spark_js_bench.run_all(spark, js_args)
            print("RESULT_JS " + json.dumps({"runs": runs, "args": args["js"]}), flush=True)
    finally:
        spark.stop()


if __name__ == "__main__":
    main()

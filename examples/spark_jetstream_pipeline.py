"""A durable Spark pipeline on JetStream: every order lands exactly once, across a restart.

1. Orders are stored in the ORDERS stream (``publish_async``, each with a ``msg_id``) and
   product prices in the ``products`` key-value bucket.
2. A Spark structured streaming query reads the stream with ``format("jetstream")``
   (offsets are stream sequences, kept in the query's checkpoint), prices each order
   with ``kv_lookup_udf`` (the keys of a batch looked up together) and writes Parquet.
3. The query is stopped between two micro-batches, as a deploy stops it
   (``stop_between_batches``: no task is cut off, so Spark logs nothing), and more
   orders arrive while none runs; restarted from the same checkpoint with
   ``availableNow``, it goes on where its last committed batch ended, reads what is
   there and stops by itself. (A crash or a plain ``stop()`` mid-batch recovers the same
   way, re-planning the batch it cut off, but Spark and pyspark log the interrupted work:
   docs/guides/spark.md, "Stopping a streaming query cleanly".)
4. Spark reads the Parquet back: every order is there once, none missing, none twice
   (a replayable source plus the file sink's commit log: exactly-once).

Run it on a laptop (embedded nats-server with JetStream, local Spark):
    python examples/spark_jetstream_pipeline.py
Point it at a deployment (it deletes and recreates the ORDERS stream and the products
bucket there) or a Spark cluster:
    python examples/spark_jetstream_pipeline.py --servers nats://nats:4222 --master spark://...
``make demo`` runs it after examples/spark_lookup.py (both from examples/demo.py).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pyspark.sql import functions as sf
from spark_session import build_session

import nats_sync
from nats_sync.jetstream import BucketNotFoundError, JetStream, StreamNotFoundError
from nats_sync.spark import kv_lookup_udf, register
from nats_sync.testing import server_url

STREAM = "ORDERS"
BUCKET = "products"
REGIONS = ["emea", "amer", "apac"]
ORDER_SCHEMA = "order_id long, sku string, quantity int"
PRODUCT_SCHEMA = "name string, price double"


def sku(number: int) -> str:
    """The catalogue's key for product ``number``."""
    return f"SKU-{number:06d}"


def order(order_id: int, products: int) -> bytes:
    """Order ``order_id`` as JSON; 1 in 100 names a SKU the catalogue does not have."""
    product = products + order_id if order_id % 100 == 99 else (order_id * 7919) % products
    return json.dumps(
        {"order_id": order_id, "sku": sku(product), "quantity": order_id % 5 + 1}
    ).encode()


def prepare(js: JetStream, products: int) -> None:
    """A fresh ORDERS stream and a ``products`` bucket holding every product's price."""
    with contextlib.suppress(StreamNotFoundError):
        js.delete_stream(STREAM)
    with contextlib.suppress(BucketNotFoundError):
        js.delete_key_value(BUCKET)
    js.create_stream(name=STREAM, subjects=["orders.>"], allow_direct=True, duplicate_window=120.0)
    kv = js.create_key_value(bucket=BUCKET)
    rng = random.Random(7)
    for number in range(products):
        kv.put(
            sku(number),
            json.dumps(
                {"name": f"product {number}", "price": round(rng.uniform(1, 200), 2)}
            ).encode(),
        )


def publish_orders(js: JetStream, first: int, count: int, products: int) -> float:
    """Stores orders ``first .. first+count-1`` with acknowledgements; returns seconds."""
    began = time.perf_counter()
    for order_id in range(first, first + count):
        js.publish_async(
            f"orders.{REGIONS[order_id % len(REGIONS)]}",
            order(order_id, products),
            msg_id=f"order-{order_id}",
        )
    js.publish_async_completed(timeout=60)
    return time.perf_counter() - began


def start_query(spark: Any, url: str, out: Path, per_trigger: int, trigger: dict[str, Any]) -> Any:
    """The streaming query: ORDERS -> parse -> price from the bucket -> Parquet;
    ``trigger`` as ``DataStreamWriter.trigger``'s keywords."""
    orders = (
        spark.readStream.format("jetstream")
        .option("servers", url)
        .option("stream", STREAM)
        .option("startingOffsets", "earliest")  # a new query only: a restart resumes
        .option("maxOffsetsPerTrigger", str(per_trigger))
        .load()
    )
    price_of = kv_lookup_udf(BUCKET, url)
    parsed = orders.select(
        "stream",
        "seq",
        "subject",
        "timestamp",
        sf.from_json(sf.col("data").cast("string"), ORDER_SCHEMA).alias("order"),
    )
    priced = parsed.withColumn(
        "product", sf.from_json(price_of(sf.col("order.sku")).cast("string"), PRODUCT_SCHEMA)
    )
    enriched = priced.select(
        "stream",
        "seq",
        sf.element_at(sf.split("subject", r"\."), 2).alias("region"),
        "order.order_id",
        "order.sku",
        "order.quantity",
        "product.price",
        sf.round(sf.col("product.price") * sf.col("order.quantity"), 2).alias("amount"),
        sf.col("timestamp").alias("ordered_at"),
    )
    return (
        enriched.writeStream.format("parquet")
        .option("path", str(out / "orders"))
        .option("checkpointLocation", str(out / "checkpoint"))
        .queryName("orders_enriched")
        .trigger(**trigger)
        .start()
    )


def wait_for_batches(query: Any, batches: int, timeout: float) -> int:
    """Blocks until ``batches`` micro-batches with rows have completed; returns rows."""
    deadline = time.monotonic() + timeout
    while True:
        if query.exception() is not None:
            raise RuntimeError(f"the query failed: {query.exception()}")
        done = [p for p in query.recentProgress if p["numInputRows"] > 0]
        if len(done) >= batches:
            return sum(p["numInputRows"] for p in done)
        if time.monotonic() > deadline:
            raise RuntimeError(f"fewer than {batches} micro-batches within {timeout}s")
        time.sleep(0.1)


def stop_between_batches(query: Any, timeout: float) -> bool:
    """Stops ``query`` just after one of its triggers ends; False (the query still runs)
    if none ended within ``timeout`` seconds.

    ``query.stop()`` interrupts the query's thread wherever it is: in a micro-batch it
    cancels the running tasks (a file sink's abort logs ``ERROR ... Aborting task``), and
    while the thread asks a Python data source for offsets it closes the socket to
    pyspark's source runner, which prints an ``EOFError`` traceback. After a trigger the
    thread sleeps (the processing-time trigger's wait, or the default trigger's 10 ms once
    it has caught up); ``stop()`` marks the query stopped before it interrupts, so in that
    sleep nothing is cut off. Idle on two polls a millisecond apart is that sleep, not the
    instant between two back-to-back micro-batches. docs/guides/spark.md, "Stopping a
    streaming query cleanly", has the same function.
    """
    deadline = time.monotonic() + timeout
    seen_active = idle_once = False
    while query.isActive:
        if query.status["isTriggerActive"]:
            seen_active, idle_once = True, False
        elif seen_active and idle_once:
            query.stop()
            return True
        elif seen_active:
            idle_once = True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.001)
    return True  # it ended by itself (availableNow) or failed: query.exception() says


def next_seq(progress: dict[str, Any] | None) -> str:
    """The stream sequence a query's last completed batch ended at (next to read)."""
    if not progress:
        return "?"
    offset = progress["sources"][0]["endOffset"]
    if isinstance(offset, str):
        offset = json.loads(offset)
    entry = offset.get(STREAM, offset) if isinstance(offset, dict) else offset
    return str(entry.get("seq", entry) if isinstance(entry, dict) else entry)


def run_pipeline(
    spark: Any,
    url: str,
    *,
    orders: int,
    products: int,
    out: Path,
    per_trigger: int,
    first_share: float = 0.6,
) -> bool:
    """The whole demo on a running SparkSession and NATS server; True if exactly once."""
    register(spark)
    out.mkdir(parents=True, exist_ok=True)
    for part in ("orders", "checkpoint"):
        shutil.rmtree(out / part, ignore_errors=True)
    first = int(orders * first_share)
    with nats_sync.connect(url, name="pipeline-demo-producer") as nc:
        # A loader waits for room rather than fail: with 4,000 acks awaited, the default
        # 0.2 s wait for one (nats.go's) ran out on a machine busy with Spark and other
        # jobs (TooManyStalledMsgsError, 1 make demo in 10).
        js = nc.jetstream(stall_wait=10.0)
        prepare(js, products)
        took = publish_orders(js, 0, first, products)
        print(
            f"stored {first:,} orders in stream {STREAM} ({first / took:,.0f}/s); "
            f"{products:,} prices in bucket {BUCKET!r}",
            flush=True,
        )

        began = time.perf_counter()
        # A trigger interval longer than a micro-batch leaves the query asleep between
        # batches, where it can stop mid-stream without cutting a batch off: here at the
        # first end of a trigger once a batch is done (that batch's own end, when its
        # progress shows before its trigger has quite ended, else the next one's).
        query = start_query(spark, url, out, per_trigger, {"processingTime": "5 seconds"})
        wait_for_batches(query, 1, timeout=120)
        if not stop_between_batches(query, timeout=120):
            query.stop()
            raise RuntimeError("no micro-batch ended within 120 s")
        if query.exception() is not None:
            raise RuntimeError(f"the query failed: {query.exception()}")
        first_run = time.perf_counter() - began
        rows = sum(p["numInputRows"] for p in query.recentProgress)
        stopped_at = next_seq(query.lastProgress)
        print(
            f"query stopped between micro-batches: {rows:,} orders read, "
            f"next to read seq {stopped_at}",
            flush=True,
        )

        took = publish_orders(js, first, orders - first, products)
        print(
            f"stored {orders - first:,} more orders while no query ran "
            f"({(orders - first) / took:,.0f}/s)",
            flush=True,
        )

        began = time.perf_counter()
        # Same checkpoint: it resumes. availableNow reads what is there and ends the
        # query itself after its last micro-batch: nothing to interrupt.
        query = start_query(spark, url, out, per_trigger, {"availableNow": True})
        if not query.awaitTermination(120):
            query.stop()
            raise RuntimeError("the restarted query did not finish within 120 s")
        if query.exception() is not None:
            raise RuntimeError(f"the query failed: {query.exception()}")
        second_run = time.perf_counter() - began
        resumed = (
            query.recentProgress[0]["sources"][0]["startOffset"] if (query.recentProgress) else None
        )
        resumed_at = next_seq({"sources": [{"endOffset": resumed}]}) if resumed else "?"
        batches = sum(1 for p in query.recentProgress if p["numInputRows"] > 0)
        print(
            f"query restarted from its checkpoint at seq {resumed_at}, read what was "
            f"there in {batches} batches and stopped by itself (availableNow)",
            flush=True,
        )

    landed = count_landed(spark, out / "orders", orders)
    elapsed = first_run + second_run
    print()
    print(
        f"{orders:,} orders published, {landed['rows']:,} rows landed, "
        f"{landed['missing']:,} missing, {landed['duplicated']:,} duplicated"
    )
    print(
        f"query time         {elapsed:.1f} s over two runs  "
        f"({landed['rows'] / elapsed:,.0f} rows/s)"
    )
    print(f"unknown SKUs       {landed['unpriced']:,} (1 in 100 by design: no price)")
    print(f"revenue            {landed['revenue']:,.2f}")
    print(f"output (Parquet)   {out / 'orders'}")
    return landed["rows"] == orders and landed["missing"] == 0 and landed["duplicated"] == 0


def count_landed(spark: Any, path: Path, orders: int) -> dict[str, Any]:
    """What the Parquet output holds: ``rows``, ``missing`` (of orders 0 .. orders-1),
    ``duplicated`` (rows beyond one per stream message), ``unpriced`` and ``revenue``."""
    landed = spark.read.parquet(str(path))  # through the sink's commit log: committed files
    totals = landed.agg(
        sf.count("*").alias("rows"),
        sf.count_distinct("stream", "seq").alias("messages"),
        sf.count_if(sf.col("price").isNull()).alias("unpriced"),
        sf.round(sf.sum("amount"), 2).alias("revenue"),
    ).first()
    found = (
        landed.where(sf.col("order_id").between(0, orders - 1))
        .select("order_id")
        .distinct()
        .count()
    )
    return {
        "rows": totals["rows"],
        "missing": orders - found,
        "duplicated": totals["rows"] - totals["messages"],
        "unpriced": totals["unpriced"],
        "revenue": totals["revenue"] or 0.0,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", help="NATS URL(s), commas between (default: embedded)")
    parser.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    parser.add_argument("--orders", type=int, default=50_000, help="orders to publish")
    parser.add_argument("--products", type=int, default=2_000, help="prices in the bucket")
    parser.add_argument(
        "--per-trigger",
        type=int,
        default=None,
        help="maxOffsetsPerTrigger (default: a fifth of the orders)",
    )
    parser.add_argument("--out", default=None, help="output folder (default: temp)")
    args = parser.parse_args()

    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="nats-sync-pipeline-"))
    per_trigger = args.per_trigger or max(1, args.orders // 5)
    with server_url(args.servers, jetstream=True) as url:
        if not args.servers:
            print(f"embedded nats-server {url} with JetStream")
        print(f"starting Spark ({args.master}) ...", flush=True)
        began = time.perf_counter()
        spark = build_session(args.master, "nats-sync-jetstream-pipeline")
        print(f"Spark ready in {time.perf_counter() - began:.1f}s")
        try:
            ok = run_pipeline(
                spark,
                url,
                orders=args.orders,
                products=args.products,
                out=out,
                per_trigger=per_trigger,
            )
        finally:
            spark.stop()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

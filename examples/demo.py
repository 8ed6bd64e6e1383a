"""``make demo``: the two Spark examples on one nats-server and one SparkSession.

1. examples/spark_lookup.py: a DataFrame enriched through NATS request-reply (a lookup
   service on nats_sync.micro), written to Parquet, a summary published back over NATS.
2. examples/spark_jetstream_pipeline.py: the durable pipeline: orders in a JetStream
   stream read by a streaming query with ``format("jetstream")``, priced from a
   key-value bucket, written to Parquet with a checkpoint, stopped between two
   micro-batches (as a deploy stops it: nothing cut off, nothing logged) and restarted,
   and counted: every order exactly once.

Spark starts once (about ten seconds), so both fit in about a minute on two cores.
``--local-cluster`` (``make demo-cluster``) runs the same jobs on a Spark standalone
master and worker started on this machine from pyspark's own jars
(`nats_sync.spark.testing.SparkStandaloneCluster`); ``--master spark://...`` uses a
cluster of yours (then ``--servers`` must name a NATS server its workers can reach).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from spark_jetstream_pipeline import run_pipeline
from spark_lookup import run_lookup
from spark_session import build_session

from nats_sync.spark.testing import SparkStandaloneCluster
from nats_sync.testing import server_url


@contextlib.contextmanager
def spark_master(given: str, local_cluster: bool) -> Iterator[str]:
    """``given``, or the URL of a standalone cluster started here for the demo."""
    if not local_cluster:
        yield given
        return
    print("starting a Spark standalone master and worker on 127.0.0.1 ...", flush=True)
    began = time.perf_counter()
    with SparkStandaloneCluster(cores=2, memory="2g") as cluster:
        print(
            f"cluster {cluster.master_url} ready in {time.perf_counter() - began:.1f}s "
            f"(web UI {cluster.web_ui_url}, logs {cluster.workdir})",
            flush=True,
        )
        os.environ.update(cluster.driver_env())  # before the driver's JVM starts
        yield cluster.master_url


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", help="NATS URL (default: embedded, with JetStream)")
    parser.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    parser.add_argument(
        "--local-cluster",
        action="store_true",
        help="start a standalone master and worker here and use them",
    )
    parser.add_argument("--rows", type=int, default=100_000, help="rows the lookup job enriches")
    parser.add_argument("--orders", type=int, default=50_000, help="orders of the pipeline")
    parser.add_argument("--out", default=None, help="output folder (default: temp)")
    args = parser.parse_args()

    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="nats-sync-demo-"))
    began = time.perf_counter()
    with (
        server_url(args.servers, jetstream=True) as url,
        spark_master(args.master, args.local_cluster) as master,
    ):
        if not args.servers:
            print(f"embedded nats-server {url} with JetStream")
        print(f"starting Spark ({master}) ...", flush=True)
        started = time.perf_counter()
        spark = build_session(master, "nats-sync-demo")
        print(f"Spark ready in {time.perf_counter() - started:.1f}s")
        try:
            print("\n== 1. enrich a DataFrame through request-reply (examples/spark_lookup.py)")
            started = time.perf_counter()
            lookup_ok = run_lookup(
                spark,
                url,
                rows=args.rows,
                products=20_000,
                workers=4,
                partitions=4,
                out=out / "lookup",
            )
            lookup_took = time.perf_counter() - started
            print(
                "\n== 2. the durable pipeline: JetStream -> Spark -> Parquet, exactly once "
                "(examples/spark_jetstream_pipeline.py)"
            )
            started = time.perf_counter()
            pipeline_ok = run_pipeline(
                spark,
                url,
                orders=args.orders,
                products=2_000,
                out=out / "pipeline",
                per_trigger=max(1, args.orders // 5),
            )
            pipeline_took = time.perf_counter() - started
        finally:
            spark.stop()
    print(
        f"\ndemo done in {time.perf_counter() - began:.1f}s (lookup job {lookup_took:.1f}s, "
        f"pipeline {pipeline_took:.1f}s)"
    )
    if not (lookup_ok and pipeline_ok):
        print(
            "demo FAILED: "
            + ", ".join(
                name for name, ok in (("lookup", lookup_ok), ("pipeline", pipeline_ok)) if not ok
            )
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The Spark guide's calls under Spark Connect: ``SparkSession.builder.remote("local[2]")``.

pyspark starts its own local Spark Connect server in this process (a classic session
with the Connect plugin) and talks to it over gRPC, as a client talks to a remote
server: the data sources and UDFs are pickled by the client and run in the server's
Python workers. pyspark refuses to start that server beside a classic session
(``SESSION_ALREADY_EXIST``), which the rest of tests/spark keeps open for the whole run,
so ``test_spark_connect.py`` runs this file in its own pytest process. Run it alone with
``pytest tests/spark/connect_cases.py`` (pytest collects a file it is given by name).

One Connect session serves the module; every query is bounded in time and stopped.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import nats_sync
from nats_sync.jetstream import JetStream
from nats_sync.spark import kv_lookup_udf, register, request_df, request_udf
from nats_sync.spark.errors import SparkWorkerPythonError
from nats_sync.testing import NatsServer

pytestmark = [pytest.mark.spark, pytest.mark.timeout(180)]

QUERY_TIMEOUT = 120
ORDERS = 300


@pytest.fixture(scope="module")
def connect() -> Iterator[Any]:
    """A Spark Connect session on pyspark's local Connect server (started here)."""
    # SPARK_TESTING: the local server binds a free port (not 15002, which another run
    # may hold) and pyspark's client asks the server which one.
    os.environ["SPARK_TESTING"] = "1"
    os.environ["PYSPARK_PYTHON"] = os.environ.get("PYSPARK_PYTHON") or _this_python()
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.remote("local[2]")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    try:
        from pyspark.sql.connect.session import SparkSession as ConnectSession

        assert isinstance(session, ConnectSession), type(session)
        register(session)
        yield session
    finally:
        session.stop()  # stops the local server too


def _this_python() -> str:
    import sys

    return sys.executable


@pytest.fixture(scope="module")
def orders(js_server: NatsServer) -> Iterator[JetStream]:
    """Stream ORDERS: ORDERS messages on orders.<n % 3>; bucket "products"."""
    with nats_sync.connect(js_server.url, name="connect-fill") as nc:
        js = nc.jetstream()
        js.create_stream(name="ORDERS", subjects=["orders.>"])
        for n in range(1, ORDERS + 1):
            js.publish_async(f"orders.{n % 3}", json.dumps({"order": n}).encode())
        js.publish_async_completed(60)
        products = js.create_key_value(bucket="products")
        for n in range(3):
            products.put(f"orders.{n}", str(n * 1.5).encode())
        yield js


def test_register_checks_the_local_servers_workers(connect: Any) -> None:
    """The local Connect server's workers are this machine's: register checks them."""
    from pyspark import SparkContext

    from nats_sync.spark import _worker_python

    context = SparkContext._active_spark_context
    assert context is not None, "remote('local[2]') runs a SparkContext in this process"
    before = context.pythonExec
    context.pythonExec = "/nonexistent/python3"
    _worker_python._import_problem.cache_clear()
    try:
        with pytest.raises(SparkWorkerPythonError, match="/nonexistent/python3"):
            register(connect)
    finally:
        context.pythonExec = before
    register(connect)


def test_batch_read(connect: Any, js_server: NatsServer, orders: JetStream) -> None:
    df = (
        connect.read.format("jetstream")
        .option("servers", js_server.url)
        .option("stream", "ORDERS")
        .load()
    )
    assert df.columns == ["stream", "seq", "subject", "data", "headers", "timestamp"]
    rows = df.select("seq", "subject", "data").orderBy("seq").collect()
    assert [row.seq for row in rows] == list(range(1, ORDERS + 1))
    assert rows[0].subject == "orders.1"
    assert json.loads(rows[-1].data) == {"order": ORDERS}


def test_available_now_streaming_read_with_kv_lookup(
    connect: Any, js_server: NatsServer, orders: JetStream, tmp_path: Path
) -> None:
    stream = (
        connect.readStream.format("jetstream")
        .option("servers", js_server.url)
        .option("stream", "ORDERS")
        .option("startingOffsets", "earliest")
        .load()
    )
    price = kv_lookup_udf("products", js_server.url, decode="utf-8")
    raw = kv_lookup_udf("products", js_server.url)
    priced = stream.select("seq", price("subject").alias("price"), raw("subject").alias("raw"))
    out = tmp_path / "out"
    query = (
        priced.writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(QUERY_TIMEOUT), "the query did not finish in time"
        assert query.exception() is None
    finally:
        query.stop()
    rows = connect.read.parquet(str(out)).orderBy("seq").collect()
    assert len(rows) == ORDERS
    assert [(row.seq, row.price, row.raw) for row in rows[:3]] == [
        (1, "1.5", b"1.5"),
        (2, "3.0", b"3.0"),
        (3, "0.0", b"0.0"),
    ]


def test_batch_and_streaming_sinks(
    connect: Any, js_server: NatsServer, orders: JetStream, tmp_path: Path
) -> None:
    orders.create_stream(name="COPIED", subjects=["copied.>"])
    batch = (
        connect.read.format("jetstream")
        .option("servers", js_server.url)
        .option("stream", "ORDERS")
        .load()
    )
    (
        batch.selectExpr("data", "stream", "seq")
        .write.format("jetstream")
        .option("servers", js_server.url)
        .option("subject", "copied.batch")
        .option("msgIdColumns", "stream,seq")
        .mode("append")
        .save()
    )
    assert orders.stream_info("COPIED").state.messages == ORDERS

    stream = (
        connect.readStream.format("jetstream")
        .option("servers", js_server.url)
        .option("stream", "ORDERS")
        .option("startingOffsets", "earliest")
        .load()
    )
    query = (
        stream.selectExpr("data", "concat('streamed-', seq) AS msg_id")
        .writeStream.format("jetstream")
        .option("servers", js_server.url)
        .option("subject", "copied.stream")
        .option("checkpointLocation", str(tmp_path / "sink-cp"))
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(QUERY_TIMEOUT), "the query did not finish in time"
        assert query.exception() is None
    finally:
        query.stop()
    assert orders.stream_info("COPIED").state.messages == 2 * ORDERS
    # Each committed micro-batch is recorded in the commit bucket (the exactly-once log).
    assert orders.key_value("spark_commits").keys()


def test_request_udf_and_request_df(connect: Any, js_server: NatsServer) -> None:
    with nats_sync.connect(js_server.url, name="connect-service") as service:
        service.subscribe(
            "products.lookup", queue="lookup", cb=lambda m: m.respond(b"thing " + m.data)
        )
        service.flush()
        skus = connect.createDataFrame([("a1",), ("b2",), (None,)], "sku string")
        lookup = request_udf("products.lookup", js_server.url, timeout=5.0)
        rows = skus.withColumn("product", lookup("sku")).collect()
        assert [row.product for row in rows] == [b"thing a1", b"thing b2", None]
        checked = request_df(skus, "products.lookup", js_server.url, "sku", timeout=5.0)
        assert checked.columns == ["sku", "reply", "error"]
        assert [(row.reply, row.error) for row in checked.collect()] == [
            (b"thing a1", None),
            (b"thing b2", None),
            (None, "payload is null"),
        ]


def _on_threads(work: Any, count: int = 1) -> None:
    """Runs ``work`` on ``count`` new threads at once; an exception is raised here."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            work()
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=run, name=f"connect-{n}") for n in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(QUERY_TIMEOUT)
    assert not any(thread.is_alive() for thread in threads), "a thread did not finish in time"
    if errors:
        raise errors[0]


def test_writes_from_another_thread_and_register_twice(
    connect: Any, js_server: NatsServer, orders: JetStream, tmp_path: Path
) -> None:
    """A Connect server runs each request with its session active: a batch and a
    streaming write started on another thread find both formats, as do writes after
    register ran again from two threads at once."""
    together = threading.Barrier(2)

    def register_with_the_other() -> None:
        together.wait(30)
        register(connect)

    _on_threads(register_with_the_other, count=2)
    orders.create_stream(name="THREADED", subjects=["threaded.>"])
    numbers = connect.range(20).selectExpr("CAST(id AS STRING) AS data")

    def batch_write(fmt: str, subject: str) -> None:
        writer = numbers.write.format(fmt).mode("append").option("servers", js_server.url)
        writer.option("subject", subject).save()

    def streaming_write() -> None:
        query = (
            connect.readStream.format("jetstream")
            .option("servers", js_server.url)
            .option("stream", "ORDERS")
            .option("startingOffsets", "earliest")
            .load()
            .select("data")
            .writeStream.format("jetstream")
            .option("servers", js_server.url)
            .option("subject", "threaded.stream")
            .option("checkpointLocation", str(tmp_path / "thread-cp"))
            .trigger(availableNow=True)
            .start()
        )
        try:
            assert query.awaitTermination(QUERY_TIMEOUT), "the query did not finish in time"
            assert query.exception() is None
        finally:
            query.stop()

    _on_threads(lambda: batch_write("jetstream", "threaded.batch"))
    _on_threads(lambda: batch_write("nats", "threaded.core"))  # stored: a stream subject
    _on_threads(streaming_write)
    assert orders.stream_info("THREADED").state.messages == 20 + 20 + ORDERS

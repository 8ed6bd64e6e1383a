"""request_udf and request_df on a local[2] Spark against a real nats-server."""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from typing import Any

import pytest
from pyspark.sql import functions as F

import nats_sync
from nats_sync.spark import request_df, request_udf
from nats_sync.testing import NatsServer

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def echo(client: nats_sync.Client) -> Iterator[None]:
    """A responder on 'spark.echo' answering ``re:<payload>``; 'spark.silent' never answers."""
    responder = client.subscribe("spark.echo", cb=lambda msg: msg.respond(b"re:" + msg.data))
    silent = client.subscribe("spark.silent")
    client.flush()
    yield
    responder.unsubscribe()
    silent.unsubscribe()


def _connection_names(server: NatsServer) -> list[str]:
    return [conn.get("name", "") for conn in server.monitor("connz?limit=1024")["connections"]]


@pytest.mark.usefixtures("echo")
def test_every_one_of_10000_rows_gets_its_own_reply(spark: Any, server: NatsServer) -> None:
    df = spark.range(10_000, numPartitions=2).select(F.col("id").cast("string").alias("key"))
    lookup = request_udf("spark.echo", server.url)
    rows = df.withColumn("reply", lookup("key")).collect()
    assert len(rows) == 10_000
    wrong = [row for row in rows if row.reply != b"re:" + row.key.encode()]
    assert wrong == []


@pytest.mark.usefixtures("echo")
def test_binary_input_column_is_sent_as_is(spark: Any, server: NatsServer) -> None:
    df = spark.createDataFrame([(b"\x00\r\n\xff",), (None,)], "payload binary")
    rows = df.select(request_udf("spark.echo", server.url)("payload").alias("r")).collect()
    assert [row.r for row in rows] == [b"re:\x00\r\n\xff", None]


@pytest.mark.usefixtures("echo")
def test_no_responders_rows_are_null_and_with_errors_says_why(
    spark: Any, server: NatsServer
) -> None:
    df = spark.range(50).select(F.col("id").cast("string").alias("key"))
    plain = df.select(request_udf("spark.nobody", server.url)("key").alias("r")).collect()
    assert [row.r for row in plain] == [None] * 50
    detailed = df.select(
        request_udf("spark.nobody", server.url, with_errors=True)("key").alias("r")
    ).collect()
    assert all(row.r.reply is None for row in detailed)
    assert all("no responders" in row.r.error for row in detailed)


@pytest.mark.usefixtures("echo")
def test_a_responder_that_never_answers_gives_nulls_after_the_timeout(
    spark: Any, server: NatsServer
) -> None:
    df = spark.range(20).select(F.col("id").cast("string").alias("key"))
    lookup = request_udf("spark.silent", server.url, timeout=0.3, with_errors=True)
    rows = df.select(lookup("key").alias("r")).collect()
    assert len(rows) == 20
    assert all(row.r.reply is None and "timeout" in row.r.error for row in rows), rows[0]


@pytest.mark.usefixtures("echo")
def test_request_df_adds_reply_and_error_and_one_partition_uses_one_connection(
    spark: Any, server: NatsServer
) -> None:
    # 25,000 rows in one partition is three Arrow batches of at most 10,000 rows.
    df = spark.range(25_000, numPartitions=1).select(
        F.col("id"), F.col("id").cast("string").alias("key")
    )
    name = "spark-request-df-one-connection"
    result = request_df(df, "spark.echo", server.url, "key", name=name)
    assert result.columns == ["id", "key", "reply", "error"]
    rows = result.collect()
    assert len(rows) == 25_000
    assert all(row.reply == b"re:" + row.key.encode() and row.error is None for row in rows)
    assert _connection_names(server).count(name) == 1


@pytest.mark.usefixtures("echo")
def test_request_df_reports_failures_per_row(spark: Any, server: NatsServer) -> None:
    df = spark.createDataFrame([("a",), (None,)], "key string")
    rows = request_df(df, "spark.nobody", server.url, "key").collect()
    assert rows[0].reply is None and "no responders" in rows[0].error
    assert rows[1].reply is None and rows[1].error == "payload is null"


def test_bad_arguments_fail_on_the_driver_before_any_task(spark: Any, server: NatsServer) -> None:
    df = spark.createDataFrame([("a",)], "key string")
    with pytest.raises(nats_sync.BadSubjectError):
        request_udf("bad subject", server.url)
    with pytest.raises(ValueError, match="timeout"):
        request_udf("ok", server.url, timeout=0)
    with pytest.raises(ValueError, match="max_in_flight"):
        request_df(df, "ok", server.url, "key", max_in_flight=0)
    with pytest.raises(ValueError, match="'missing' not in"):
        request_df(df, "ok", server.url, "missing")
    with pytest.raises(ValueError, match="already has"):
        request_df(df.withColumnRenamed("key", "reply"), "ok", server.url, "reply")


def test_a_client_cannot_be_captured_in_a_closure(client: nats_sync.Client) -> None:
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(client)

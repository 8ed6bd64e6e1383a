"""request_udf and request_df carry the driver's OpenTelemetry trace context to the
executors' requests (local[2] Spark, a real nats-server, an instrumented responder)."""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pyspark.sql import functions as F

import nats_sync
from nats_sync import otel
from nats_sync.spark import request_df, request_udf
from nats_sync.testing import NatsServer

pytestmark = pytest.mark.timeout(180)


def test_executor_requests_continue_the_drivers_trace(spark: Any, server: NatsServer) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with nats_sync.connect(server.url) as responder:
        otel.instrument(responder, tracer_provider=provider)
        responder.subscribe("spark.traced", cb=lambda msg: msg.respond(msg.data))
        responder.flush()
        df = spark.range(20, numPartitions=2).select(F.col("id").cast("string").alias("key"))
        with provider.get_tracer("driver").start_as_current_span("nightly job") as job:
            lookup = request_udf("spark.traced", server.url)
            enriched = request_df(df, "spark.traced", server.url, "key")
        untraced = request_udf("spark.traced", server.url)  # no span current here
        assert len(df.withColumn("r", lookup("key")).collect()) == 20
        assert len(enriched.collect()) == 20
        assert len(df.withColumn("r", untraced("key")).collect()) == 20
        deadline = time.monotonic() + 10
        while len(exporter.get_finished_spans()) < 60 and time.monotonic() < deadline:
            time.sleep(0.05)
    spans = [span for span in exporter.get_finished_spans() if span.name == "spark.traced process"]
    assert len(spans) == 60
    job_id = job.get_span_context().span_id
    parents = [span.parent.span_id if span.parent else None for span in spans]
    assert parents.count(job_id) == 40 and parents.count(None) == 20
    provider.shutdown()


def test_making_a_udf_does_not_import_opentelemetry() -> None:
    code = (
        "import sys; from nats_sync.spark.udf import driver_trace_headers; "
        "print(driver_trace_headers(), 'opentelemetry' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    assert out.strip() == "None False"

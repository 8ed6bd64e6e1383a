"""nats_sync.otel against a real nats-server: trace context across clients and a micro
service, the spans' attributes, error spans, metrics, and that nothing of OpenTelemetry
is loaded or sent by a client that is not instrumented."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)
from opentelemetry.trace import SpanKind, StatusCode

import nats_sync
from nats_sync import micro, otel
from nats_sync._core.components.port import port_of
from nats_sync.testing import NatsServer

pytestmark = pytest.mark.timeout(30)

ClientFactory = Callable[..., nats_sync.Client]


class Telemetry:
    """An in-memory tracer provider and metric reader."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])

    def instrument(self, nc: nats_sync.Client) -> nats_sync.Client:
        otel.instrument(
            nc, tracer_provider=self.tracer_provider, meter_provider=self.meter_provider
        )
        return nc

    def spans(self, name: str | None = None) -> list[ReadableSpan]:
        return [
            span for span in self.exporter.get_finished_spans() if name is None or span.name == name
        ]

    def wait_span(self, name: str, count: int = 1, timeout: float = 5.0) -> list[ReadableSpan]:
        deadline = threading.Event()
        for _ in range(int(timeout / 0.02)):
            spans = self.spans(name)
            if len(spans) >= count:
                return spans
            deadline.wait(0.02)
        raise AssertionError(
            f"no {count} span(s) {name!r} in {timeout}s: {[span.name for span in self.spans()]}"
        )

    def metric(self, name: str) -> list[Any]:
        data = self.reader.get_metrics_data()
        points: list[Any] = []
        for resource in data.resource_metrics if data is not None else []:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == name:
                        points.extend(metric.data.data_points)
        return points


@pytest.fixture
def telemetry() -> Iterator[Telemetry]:
    found = Telemetry()
    yield found
    found.tracer_provider.shutdown()
    found.meter_provider.shutdown()


def test_a_callback_span_is_the_child_of_the_publish_span(
    connect: ClientFactory, telemetry: Telemetry, nats_server: NatsServer
) -> None:
    sender = telemetry.instrument(connect())
    receiver = telemetry.instrument(connect())
    got: list[nats_sync.Msg] = []
    done = threading.Event()

    def cb(msg: nats_sync.Msg) -> None:
        got.append(msg)
        done.set()

    receiver.subscribe("orders.new", cb=cb)
    receiver.flush()
    tracer = telemetry.tracer_provider.get_tracer("test")
    with tracer.start_as_current_span("web request") as root:
        sender.publish("orders.new", b"0123456789abcdef", headers={"k": "v"})
    assert done.wait(5)

    publish = telemetry.wait_span("orders.new publish")[0]
    process = telemetry.wait_span("orders.new process")[0]
    assert publish.kind is SpanKind.PRODUCER and process.kind is SpanKind.CONSUMER
    assert publish.parent is not None and publish.parent.span_id == root.get_span_context().span_id
    assert process.context.trace_id == root.get_span_context().trace_id
    assert process.parent is not None and process.parent.span_id == publish.context.span_id
    # the header the caller gave is kept, and the context travels as W3C traceparent
    headers = got[0].headers or {}
    assert headers["k"] == "v"
    assert headers["traceparent"].split("-")[2] == format(publish.context.span_id, "016x")

    port = int(nats_server.url.rsplit(":", 1)[1])
    assert dict(publish.attributes or {}) == {
        "messaging.system": "nats",
        "messaging.destination.name": "orders.new",
        "messaging.operation.type": "send",
        "messaging.operation.name": "publish",
        "messaging.message.body.size": 16,
        "messaging.client.id": str(sender.client_id),
        "server.address": "127.0.0.1",
        "server.port": port,
    }
    attributes = dict(process.attributes or {})
    assert attributes["messaging.operation.type"] == "process"
    assert attributes["messaging.destination.subscription.name"] == "orders.new"
    assert attributes["messaging.client.id"] == str(receiver.client_id)


def test_next_msg_makes_a_receive_span_linked_to_the_sender(
    connect: ClientFactory, telemetry: Telemetry
) -> None:
    sender = telemetry.instrument(connect())
    receiver = telemetry.instrument(connect())
    sub = receiver.subscribe("jobs.>")
    receiver.flush()
    sender.publish("jobs.a", b"x")
    msg = sub.next_msg(timeout=5)
    assert msg.data == b"x"
    publish = telemetry.wait_span("jobs.a publish")[0]
    receive = telemetry.wait_span("jobs.a receive")[0]
    assert receive.kind is SpanKind.CONSUMER
    assert receive.parent is None  # no current span here: its own trace, linked
    assert [link.context.span_id for link in receive.links] == [publish.context.span_id]
    assert (receive.attributes or {})["messaging.destination.subscription.name"] == "jobs.>"
    # next_msgs too
    sender.publish("jobs.b", b"1")
    sender.publish("jobs.b", b"2")
    sender.flush()
    assert len(sub.next_msgs(2, timeout=5)) >= 1


def test_request_and_reply_are_one_trace_across_a_micro_service(
    connect: ClientFactory, telemetry: Telemetry
) -> None:
    server = telemetry.instrument(connect())
    caller = telemetry.instrument(connect())
    backend = telemetry.instrument(connect())
    backend.subscribe("db.get", cb=lambda msg: msg.respond(b"row"))
    backend.flush()

    def handler(req: micro.Request) -> None:
        row = server.request("db.get", req.data, timeout=5)
        req.respond(row.data.upper())

    svc = micro.add_service(server, "users", "1.0.0")
    svc.add_endpoint("lookup", handler)
    server.flush()
    tracer = telemetry.tracer_provider.get_tracer("test")
    with tracer.start_as_current_span("page") as root:
        reply = caller.request("lookup", b"42", timeout=5)
    assert reply.data == b"ROW"
    trace_id = root.get_span_context().trace_id

    request = telemetry.wait_span("lookup request")[0]
    handled = telemetry.wait_span("lookup process")[0]
    inner = telemetry.wait_span("db.get request")[0]
    backend_span = telemetry.wait_span("db.get process")[0]
    assert request.kind is SpanKind.CLIENT and handled.kind is SpanKind.SERVER
    assert {span.context.trace_id for span in (request, handled, inner, backend_span)} == {trace_id}
    assert request.parent is not None and request.parent.span_id == root.get_span_context().span_id
    assert handled.parent is not None and handled.parent.span_id == request.context.span_id
    assert inner.parent is not None and inner.parent.span_id == handled.context.span_id
    assert backend_span.parent is not None
    assert backend_span.parent.span_id == inner.context.span_id
    # the reply carries the handler's context back
    assert (reply.headers or {})["traceparent"].split("-")[1] == format(trace_id, "032x")
    assert not telemetry.spans("$SRV.PING process")  # discovery not asked: no span


def test_a_failing_micro_handler_records_an_error_span(
    connect: ClientFactory, telemetry: Telemetry
) -> None:
    server = telemetry.instrument(connect())
    caller = connect()

    def handler(req: micro.Request) -> None:
        raise ValueError("bad input")

    svc = micro.add_service(server, "calc", "1.0.0")
    svc.add_endpoint("div", handler)
    svc.add_endpoint("soft", lambda req: req.respond_error(400, "nope"))
    server.flush()
    assert caller.request("div", b"", timeout=5).headers is not None
    assert caller.request("soft", b"", timeout=5).headers is not None
    failed = telemetry.wait_span("div process")[0]
    assert failed.status.status_code is StatusCode.ERROR
    assert [event.name for event in failed.events] == ["exception"]
    assert (failed.attributes or {})["error.type"] == "ValueError"
    soft = telemetry.wait_span("soft process")[0]
    assert soft.status.status_code is StatusCode.ERROR
    assert soft.status.description == "400:nope"


def test_a_request_that_times_out_records_an_error_span(
    connect: ClientFactory, telemetry: Telemetry
) -> None:
    caller = telemetry.instrument(connect())
    silent = connect()
    silent.subscribe("slow", cb=lambda msg: None)
    silent.flush()
    with pytest.raises(TimeoutError):
        caller.request("slow", b"", timeout=0.2)
    span = telemetry.wait_span("slow request")[0]
    assert span.status.status_code is StatusCode.ERROR
    assert (span.attributes or {})["error.type"] == "TimeoutError"
    assert [event.name for event in span.events] == ["exception"]
    # the duration histogram counts it, with its error type
    points = telemetry.metric("messaging.client.operation.duration")
    assert [(point.count, point.attributes["error.type"]) for point in points] == [
        (1, "TimeoutError")
    ]
    assert points[0].sum >= 0.2


def test_request_future_and_request_batch_are_traced(
    connect: ClientFactory, telemetry: Telemetry
) -> None:
    caller = telemetry.instrument(connect())
    echo = connect()
    seen: list[nats_sync.Msg] = []

    def respond(msg: nats_sync.Msg) -> None:
        seen.append(msg)
        msg.respond(msg.data)

    echo.subscribe("echo", cb=respond)
    echo.flush()
    assert caller.request_future("echo", b"f", timeout=5).result(5).data == b"f"
    replies = caller.request_batch("echo", [b"1", b"2", b"3"], timeout=5)
    assert [reply.data for reply in replies if isinstance(reply, nats_sync.Msg)] == [
        b"1",
        b"2",
        b"3",
    ]
    spans = telemetry.wait_span("echo request", 2)
    future_span, batch_span = sorted(spans, key=lambda span: span.start_time or 0)
    assert (batch_span.attributes or {})["messaging.batch.message_count"] == 3
    parents = {format(span.context.span_id, "016x") for span in spans}
    assert {(msg.headers or {})["traceparent"].split("-")[2] for msg in seen} == parents
    assert future_span.status.status_code is StatusCode.UNSET


def test_an_uninstrumented_client_sends_no_traceparent(
    connect: ClientFactory, telemetry: Telemetry
) -> None:
    plain, receiver = connect(), connect()
    sub = receiver.subscribe("plain")
    receiver.flush()
    tracer = telemetry.tracer_provider.get_tracer("test")
    with tracer.start_as_current_span("outer"):
        plain.publish("plain", b"a")
        plain.publish("plain", b"b", headers={"x": "1"})
    assert sub.next_msg(timeout=5).headers is None
    assert sub.next_msg(timeout=5).headers == {"x": "1"}
    # the plain hot path is still bound directly: no wrapper in between
    assert type(plain.publish.__self__).__name__ == "Publisher"  # type: ignore[attr-defined]
    assert [span.name for span in telemetry.spans()] == ["outer"]


def test_metrics_count_what_was_sent_and_received(
    connect: ClientFactory, telemetry: Telemetry
) -> None:
    sender = telemetry.instrument(connect())
    receiver = telemetry.instrument(connect())
    sub = receiver.subscribe("m")
    receiver.flush()
    for _ in range(7):
        sender.publish("m", b"x" * 10)
    sender.flush()
    for _ in range(7):
        sub.next_msg(timeout=5)

    def value(name: str, nc: nats_sync.Client) -> int:
        points = [
            point
            for point in telemetry.metric(name)
            if point.attributes.get("messaging.client.id") == str(nc.client_id)
        ]
        assert len(points) == 1, (name, points)
        return int(points[0].value)

    assert value("messaging.client.sent.messages", sender) == 7
    assert value("nats.client.sent.bytes", sender) == 70
    assert value("messaging.client.consumed.messages", receiver) == 7
    assert value("nats.client.received.bytes", receiver) == 70
    assert value("nats.client.reconnects", sender) == 0
    assert value("nats.client.outbox.pending", sender) == 0
    assert value("nats.client.slow_consumer.dropped", receiver) == 0


def test_slow_consumer_drops_are_counted(connect: ClientFactory, telemetry: Telemetry) -> None:
    sender = connect()
    receiver = telemetry.instrument(connect(error_cb=lambda err: None))
    sub = receiver.subscribe("flood", pending_msgs_limit=2)
    receiver.flush()
    for _ in range(10):
        sender.publish("flood", b"x")
    sender.flush()
    receiver.flush()
    points = telemetry.metric("nats.client.slow_consumer.dropped")
    assert [point.value for point in points] == [sub.dropped] == [8]


def test_connect_tracing_uses_the_global_providers(connect: ClientFactory) -> None:
    nc = connect(tracing=True)
    assert port_of(nc).instrumentation is not None
    with pytest.raises(nats_sync.InvalidArgumentError, match="instrumented already"):
        otel.instrument(nc)
    with pytest.raises(nats_sync.InvalidArgumentError, match="tracing must be a bool"):
        connect(tracing="yes")


def test_import_nats_sync_does_not_import_opentelemetry() -> None:
    code = (
        "import sys, nats_sync, nats_sync.micro, nats_sync.jetstream; "
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=20, check=True
    ).stdout
    assert out.strip() == "[]"


def test_jetstream_publish_and_fetch_carry_the_trace_and_count_acks(
    connect: ClientFactory, telemetry: Telemetry, jetstream_server: NatsServer
) -> None:
    nc = telemetry.instrument(connect(servers=jetstream_server.url))
    js = nc.jetstream()
    js.create_stream(name="S", subjects=["s.>"])
    tracer = telemetry.tracer_provider.get_tracer("test")
    with tracer.start_as_current_span("ingest") as root:
        js.publish("s.one", b"1")
        futures = [js.publish_async("s.async", b"%d" % i) for i in range(3)]
        for future in futures:
            future.result(5)
        js.publish_batch("s.batch", [b"a", b"b"])
    with pytest.raises(nats_sync.jetstream.NoStreamResponseError):
        js.publish("nowhere", b"x", retry_attempts=0)
    trace_id = root.get_span_context().trace_id

    consumer = js.create_consumer("S", durable_name="C", ack_policy="explicit")
    batch = consumer.fetch(6, max_wait=5)
    assert len(batch) == 6
    for msg in batch:  # each stored message carries the trace of its publish
        assert (msg.headers or {})["traceparent"].split("-")[1] == format(trace_id, "032x")
        msg.ack()
    senders = {
        span.context.span_id
        for span in telemetry.spans()
        if span.name.endswith((" publish", " request"))
    }
    receives = [span for span in telemetry.spans() if span.name.endswith(" receive")]
    assert len(receives) == 6
    assert all(span.links and span.links[0].context.span_id in senders for span in receives)
    assert len(telemetry.spans("s.async publish")) == 3  # PRODUCER spans of publish_async

    def total(name: str) -> int:
        return sum(int(point.value) for point in telemetry.metric(name))

    assert total("nats.jetstream.publish.acks") == 6
    failures = telemetry.metric("nats.jetstream.publish.failures")
    assert [(point.value, point.attributes["error.type"]) for point in failures] == [
        (1, "NoStreamResponseError")
    ]


def test_a_micro_endpoint_with_workers_is_traced_too(
    connect: ClientFactory, telemetry: Telemetry
) -> None:
    server = telemetry.instrument(connect())
    caller = telemetry.instrument(connect())
    svc = micro.add_service(server, "pool", "1.0.0")
    svc.add_endpoint("work", lambda req: req.respond(req.data), max_workers=2)
    server.flush()
    assert [
        reply.data for reply in caller.request_batch("work", [b"1", b"2", b"3"], timeout=5)
    ] == [b"1", b"2", b"3"]
    request = telemetry.wait_span("work request")[0]
    handled = telemetry.wait_span("work process", 3)
    assert all(span.kind is SpanKind.SERVER for span in handled)
    assert {span.parent.span_id for span in handled if span.parent} == {request.context.span_id}
    assert not telemetry.spans("work receive")  # the workers' reads make no span


def test_jetstream_consume_runs_the_callback_in_a_child_of_the_publish(
    connect: ClientFactory, telemetry: Telemetry, jetstream_server: NatsServer
) -> None:
    nc = telemetry.instrument(connect(servers=jetstream_server.url))
    js = nc.jetstream()
    js.create_stream(name="C", subjects=["c.>"])
    tracer = telemetry.tracer_provider.get_tracer("test")
    with tracer.start_as_current_span("ingest"):
        js.publish("c.one", b"1")
    consumer = js.create_consumer("C", durable_name="worker", ack_policy="explicit")
    seen = threading.Event()

    def cb(msg: Any) -> None:
        msg.ack()
        seen.set()

    with consumer.consume(cb, max_wait=1):
        assert seen.wait(5)
        process = telemetry.wait_span("c.one process")[0]
    publish = telemetry.wait_span("c.one request")[0]
    assert process.kind is SpanKind.CONSUMER
    assert process.parent is not None and process.parent.span_id == publish.context.span_id
    assert (process.attributes or {})["messaging.destination.subscription.name"] == "worker"

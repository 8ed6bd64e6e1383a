"""OpenTelemetry traces and metrics for a client (the optional ``otel`` extra).

The trace context travels in the message headers through the configured propagator
(W3C ``traceparent``/``tracestate`` by default). Spans follow OpenTelemetry's messaging
semantic conventions: ``"<subject> publish"`` (PRODUCER), ``"<subject> request"``
(CLIENT), ``"<subject> process"`` (CONSUMER, a callback's, child of the sender's
context), ``"<subject> receive"`` (CONSUMER, ``next_msg``'s, linked to the sender's
context) and ``"<endpoint> process"`` (SERVER, a micro handler's). Metrics are read
from the client's counters when the meter collects (observable instruments: nothing on
the hot path), but for the request duration histogram. This is the only module of the
library that imports OpenTelemetry; it is imported by the caller, by
``connect(tracing=True)``, or by ``spark.udf`` once the program itself has loaded
OpenTelemetry (for the trace headers of its requests); an uninstrumented client runs
exactly its plain code.

How it works: :func:`instrument` makes an :class:`_Instrumentation` for one client and
hands it to the client's port (``nats_sync._core.components.port``, its
``instrument``). The client then
binds this module's traced ``publish``, ``request``, ``request_future`` and
``request_batch``, and the port's ``publish_inbox`` (JetStream's ``publish_async`` and
fast ingest), instead of the plain ones, wraps the callbacks of the subscriptions made
from then on, and tells it of each message ``next_msg`` returns. Threads and state: it
starts no thread. Spans are made on whichever thread publishes, requests, runs a
callback or a micro handler, or completes a ``request_future`` (the callback thread). An
``_Instrumentation``'s ``_lock`` guards its sets of subscriptions (``subscribed``,
``serving``) and their drop counts; its span attributes and the URL they were made for
are one tuple replaced whole (no lock). The meter's collection thread calls the
observable instruments' callbacks: ``_Observers`` (one per meter, found under the
module's ``_observers_lock``) copies its weak set of clients under its own ``_lock`` and
reads each client's counters without one (plain int reads).
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

from opentelemetry import metrics, propagate, trace
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from nats_sync import _defaults as d
from nats_sync._core.components.port import port_of
from nats_sync._version import __version__

if TYPE_CHECKING:
    from opentelemetry.metrics import CallbackOptions, Meter, MeterProvider, Observation
    from opentelemetry.trace import Span, Tracer, TracerProvider

    from nats_sync._core.components.instrumentation import SubscriptionView
    from nats_sync.msg import Msg

#: The instrumentation scope's name.
SCOPE = "nats_sync"

_SYSTEM = "messaging.system"
_DESTINATION = "messaging.destination.name"
_OPERATION_TYPE = "messaging.operation.type"
_OPERATION_NAME = "messaging.operation.name"
_BODY_SIZE = "messaging.message.body.size"
_CLIENT_ID = "messaging.client.id"
_SUBSCRIPTION = "messaging.destination.subscription.name"
_BATCH_COUNT = "messaging.batch.message_count"
_ERROR_TYPE = "error.type"


class InstrumentedClient(Protocol):
    """What the instrumentation reads of the client it instruments: a
    :class:`nats_sync.Client` (named as a protocol, so that this module, which the
    client imports when ``tracing=True``, does not import the client back)."""

    @property
    def connected_url(self) -> str | None:
        """The server connected to (span attributes)."""
        ...

    @property
    def client_id(self) -> int | None:
        """The id the server gave the connection (span attributes)."""
        ...

    @property
    def is_closed(self) -> bool:
        """Whether the client is closed (its gauges then report nothing)."""
        ...

    @property
    def pending_data_size(self) -> int:
        """Bytes waiting to be sent (a gauge)."""
        ...

    @property
    def stats(self) -> dict[str, int]:
        """The message and byte counters (the counters' values)."""
        ...


def instrument(
    nc: InstrumentedClient,
    tracer_provider: TracerProvider | None = None,
    meter_provider: MeterProvider | None = None,
) -> None:
    """Turns on traces and metrics for one client.

    From then on its publishes and requests carry the current trace context in their
    headers and make spans, and the subscriptions it makes afterwards continue the
    senders' traces (subscriptions made before are left as they are).

    Args:
        nc: a connected client.
        tracer_provider: where spans go; None uses OpenTelemetry's global provider.
        meter_provider: where metrics go; None uses OpenTelemetry's global provider.

    Raises:
        InvalidArgumentError: the client is instrumented already.
    """
    port_of(nc).instrument(_Instrumentation(nc, tracer_provider, meter_provider))


def trace_headers() -> dict[str, str]:
    """The current trace context as message headers (``traceparent``, ...), through the
    configured propagator; empty when no span is current.

    For code that sends on another thread or process than where the trace is current:
    the Spark UDFs take the driver's context to the executors' requests this way.
    """
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier


def _size(payload: Any) -> int:
    try:
        return len(payload)
    except TypeError:
        return 0


def _error_type(err: BaseException) -> str:
    return type(err).__qualname__


class _Instrumentation:
    """One client's spans and metrics
    (``nats_sync._core.components.instrumentation.Instrumentation``)."""

    def __init__(
        self,
        nc: InstrumentedClient,
        tracer_provider: TracerProvider | None,
        meter_provider: MeterProvider | None,
    ) -> None:
        self._client = weakref.ref(nc)
        self._tracer: Tracer = trace.get_tracer(SCOPE, __version__, tracer_provider)
        meter: Meter = metrics.get_meter(SCOPE, __version__, meter_provider)
        self._lock = threading.Lock()
        #: The connected URL these span attributes were made for, and the attributes.
        self._base_for: tuple[str | None, dict[str, Any]] = (None, {_SYSTEM: "nats"})
        # Slow-consumer drops: subscriptions made since, and the last count seen of
        # each (by sid), so that an ended subscription's drops stay counted.
        self._subs: weakref.WeakSet[SubscriptionView] = weakref.WeakSet()
        self._dropped: dict[int, int] = {}
        self._serving: weakref.WeakSet[SubscriptionView] = weakref.WeakSet()
        self._js_acks = meter.create_counter(
            "nats.jetstream.publish.acks",
            unit="{message}",
            description="JetStream publishes the stream acknowledged",
        )
        self._js_failures = meter.create_counter(
            "nats.jetstream.publish.failures",
            unit="{message}",
            description="JetStream publishes that failed (no ack, or an error)",
        )
        self._request_duration = meter.create_histogram(
            "messaging.client.operation.duration",
            unit="s",
            description="Duration of requests, from sending to the reply (or failure)",
        )
        _observers_of(meter).add(self)

    # --- attributes --------------------------------------------------------------------

    def _refresh_base(self) -> dict[str, Any]:
        """The attributes every span and metric of this client has (the server's are
        made again when the connected URL changes).

        Any thread: the URL and the attributes made for it are one tuple, replaced
        whole, so a reader never pairs one URL with another's attributes; two threads
        seeing a new URL at once both make the same dict, and either may win.
        """
        url_seen, base = self._base_for
        nc = self._client()
        if nc is not None:
            url = nc.connected_url
            if url != url_seen:
                base = {_SYSTEM: "nats"}
                if url:
                    parts = urlsplit(url)
                    if parts.hostname:
                        base["server.address"] = parts.hostname
                    if parts.port:
                        base["server.port"] = parts.port
                client_id = nc.client_id
                if client_id is not None:
                    base[_CLIENT_ID] = str(client_id)
                self._base_for = (url, base)
        return base

    def _attributes(
        self, destination: str, operation_type: str, operation_name: str
    ) -> dict[str, Any]:
        """The attributes of a span on ``destination``."""
        attributes = dict(self._refresh_base())
        attributes[_DESTINATION] = destination
        attributes[_OPERATION_TYPE] = operation_type
        attributes[_OPERATION_NAME] = operation_name
        return attributes

    # --- propagation ------------------------------------------------------------------

    def inject(self, headers: Any, context: Any = None) -> Any:
        """``headers`` (a mapping, None, or an encoded block) with the trace context of
        ``context`` (None: the current one) added; the caller's mapping is not changed."""
        carrier: dict[str, str] = {}
        propagate.inject(carrier, context=context)
        if not carrier:
            return headers
        if isinstance(headers, bytes):  # a block JetStream encoded: NATS/1.0 ... \r\n\r\n
            lines = b"".join(b"%s: %s\r\n" % (k.encode(), v.encode()) for k, v in carrier.items())
            return headers[:-2] + lines + b"\r\n"
        merged: dict[str, Any] = dict(headers) if headers else {}
        merged.update(carrier)
        return merged

    @staticmethod
    def _extract(msg: Any) -> Any:
        headers = msg.headers
        return propagate.extract(headers) if headers else None

    # --- client methods ---------------------------------------------------------------

    def wrap_client_methods(self, methods: dict[str, Callable[..., Any]]) -> None:
        """Replaces the client's publish and request methods with traced ones."""
        methods["publish"] = self._traced_publish(methods["publish"])
        methods["publish_inbox"] = self._traced_publish_inbox(methods["publish_inbox"])
        methods["request"] = self._traced_request(methods["request"])
        methods["request_future"] = self._traced_request_future(methods["request_future"])
        methods["request_batch"] = self._traced_request_batch(methods["request_batch"])

    def _traced_publish(self, plain: Callable[..., None]) -> Callable[..., None]:
        tracer, attributes, inject = self._tracer, self._attributes, self.inject

        def publish(
            subject: str,
            payload: bytes = b"",
            reply: str = "",
            headers: Mapping[str, str | Sequence[str]] | None = None,
        ) -> None:
            span_attributes = attributes(subject, "send", "publish")
            span_attributes[_BODY_SIZE] = _size(payload)
            with tracer.start_as_current_span(
                f"{subject} publish", kind=SpanKind.PRODUCER, attributes=span_attributes
            ):
                plain(subject, payload, reply, inject(headers))

        publish.__doc__ = plain.__doc__
        return publish

    def _traced_publish_inbox(self, plain: Callable[..., None]) -> Callable[..., None]:
        tracer, attributes, inject = self._tracer, self._attributes, self.inject

        def publish_inbox(subject: str, payload: bytes, inbox: bytes, headers: Any = None) -> None:
            span_attributes = attributes(subject, "send", "publish")
            span_attributes[_BODY_SIZE] = _size(payload)
            with tracer.start_as_current_span(
                f"{subject} publish", kind=SpanKind.PRODUCER, attributes=span_attributes
            ):
                plain(subject, payload, inbox, inject(headers))

        return publish_inbox

    def _traced_request(self, plain: Callable[..., Msg]) -> Callable[..., Msg]:
        tracer, attributes, inject = self._tracer, self._attributes, self.inject
        duration = self._request_duration

        def request(
            subject: str,
            payload: bytes = b"",
            timeout: float = d.DEFAULT_REQUEST_TIMEOUT,
            headers: Mapping[str, str | Sequence[str]] | None = None,
        ) -> Msg:
            span_attributes = attributes(subject, "send", "request")
            span_attributes[_BODY_SIZE] = _size(payload)
            start = time.perf_counter()
            with tracer.start_as_current_span(
                f"{subject} request", kind=SpanKind.CLIENT, attributes=span_attributes
            ) as span:
                try:
                    return plain(subject, payload, timeout, inject(headers))
                except BaseException as err:
                    span.set_attribute(_ERROR_TYPE, _error_type(err))
                    span_attributes[_ERROR_TYPE] = _error_type(err)
                    raise
                finally:
                    duration.record(
                        time.perf_counter() - start, _metric_attributes(span_attributes)
                    )

        request.__doc__ = plain.__doc__
        return request

    def _traced_request_future(
        self, plain: Callable[..., Future[Msg]]
    ) -> Callable[..., Future[Msg]]:
        tracer, attributes, inject = self._tracer, self._attributes, self.inject
        duration = self._request_duration

        def request_future(
            subject: str,
            payload: bytes = b"",
            timeout: float = d.DEFAULT_REQUEST_TIMEOUT,
            headers: Mapping[str, str | Sequence[str]] | None = None,
        ) -> Future[Msg]:
            span_attributes = attributes(subject, "send", "request")
            span_attributes[_BODY_SIZE] = _size(payload)
            start = time.perf_counter()
            span = tracer.start_span(
                f"{subject} request", kind=SpanKind.CLIENT, attributes=span_attributes
            )
            context = trace.set_span_in_context(span)
            try:
                future = plain(subject, payload, timeout, inject(headers, context))
            except BaseException as err:
                _end_failed(span, err)
                raise

            def done(future: Future[Msg]) -> None:
                err = future.exception() if not future.cancelled() else None
                if err is not None:
                    span_attributes[_ERROR_TYPE] = _error_type(err)
                    _end_failed(span, err)
                else:
                    span.end()
                duration.record(time.perf_counter() - start, _metric_attributes(span_attributes))

            future.add_done_callback(done)
            return future

        request_future.__doc__ = plain.__doc__
        return request_future

    def _traced_request_batch(self, plain: Callable[..., list[Any]]) -> Callable[..., list[Any]]:
        tracer, attributes, inject = self._tracer, self._attributes, self.inject

        def request_batch(
            subject: str,
            payloads: Sequence[bytes],
            timeout: float = d.DEFAULT_REQUEST_TIMEOUT,
            headers: Mapping[str, str | Sequence[str]] | None = None,
            max_in_flight: int = d.DEFAULT_REQUEST_MAX_IN_FLIGHT,
        ) -> list[Any]:
            span_attributes = attributes(subject, "send", "request")
            span_attributes[_BATCH_COUNT] = _size(payloads)
            with tracer.start_as_current_span(
                f"{subject} request", kind=SpanKind.CLIENT, attributes=span_attributes
            ) as span:
                results = plain(subject, payloads, timeout, inject(headers), max_in_flight)
                failures = [item for item in results if isinstance(item, BaseException)]
                if failures:
                    span.set_attribute(_ERROR_TYPE, _error_type(failures[0]))
                    span.set_status(
                        Status(
                            StatusCode.ERROR, f"{len(failures)} of {len(results)} requests failed"
                        )
                    )
                return results

        request_batch.__doc__ = plain.__doc__
        return request_batch

    # --- receiving ------------------------------------------------------------------

    def wrap_callback(self, subject: str, cb: Callable[[Any], None]) -> Callable[[Any], None]:
        """A callback that runs ``cb`` in a CONSUMER "process" span, child of the
        sender's context (for a ``Msg`` or a JetStream ``JsMsg``)."""
        if getattr(cb, "_nats_sync_server_span", False):
            return cb  # a micro handler: its SERVER span is the one
        tracer, attributes, extract = self._tracer, self._attributes, self._extract

        def process(msg: Any) -> None:
            span_attributes = attributes(msg.subject, "process", "process")
            span_attributes[_BODY_SIZE] = len(msg.data)
            span_attributes[_SUBSCRIPTION] = subject
            with tracer.start_as_current_span(
                f"{msg.subject} process",
                context=extract(msg),
                kind=SpanKind.CONSUMER,
                attributes=span_attributes,
            ):
                cb(msg)

        return process

    def received(self, sub: SubscriptionView, msg: Msg) -> None:
        """A CONSUMER "receive" span for a message ``next_msg`` returned, in the current
        context and linked to the sender's (status messages, and those of a micro
        endpoint's worker pool, which has its SERVER spans, are left out)."""
        if msg.status is not None or sub in self._serving:
            return
        span_attributes = self._attributes(msg.subject, "receive", "receive")
        span_attributes[_BODY_SIZE] = len(msg.data)
        span_attributes[_SUBSCRIPTION] = sub.subject
        links: list[Link] = []
        context = self._extract(msg)
        if context is not None:
            sender = trace.get_current_span(context).get_span_context()
            if sender.is_valid:
                links.append(Link(sender))
        self._tracer.start_span(
            f"{msg.subject} receive",
            kind=SpanKind.CONSUMER,
            attributes=span_attributes,
            links=links,
        ).end()

    def serving(self, sub: SubscriptionView) -> None:
        """Leaves ``sub``'s messages to the SERVER spans of a micro worker pool."""
        with self._lock:
            self._serving.add(sub)

    def subscribed(self, sub: SubscriptionView) -> None:
        """Counts the slow-consumer drops of ``sub`` from now on."""
        with self._lock:
            self._subs.add(sub)

    # --- micro ------------------------------------------------------------------------

    def wrap_service_handler(
        self, endpoint: str, subject: str, handler: Callable[[Msg], None]
    ) -> Callable[[Msg], None]:
        """A micro endpoint's message handler run in a SERVER "process" span."""
        tracer, attributes, extract = self._tracer, self._attributes, self._extract

        def process(msg: Msg) -> None:
            span_attributes = attributes(msg.subject, "process", "process")
            span_attributes[_BODY_SIZE] = len(msg.data)
            span_attributes[_SUBSCRIPTION] = subject
            span_attributes["nats.micro.endpoint"] = endpoint
            with tracer.start_as_current_span(
                f"{endpoint} process",
                context=extract(msg),
                kind=SpanKind.SERVER,
                attributes=span_attributes,
            ):
                handler(msg)

        process._nats_sync_server_span = True  # type: ignore[attr-defined]
        return process

    # --- JetStream ----------------------------------------------------------------------

    def js_acked(self, subject: str, error: BaseException | None) -> None:
        """Counts a JetStream publish's ack, or its failure (by error type)."""
        attributes = dict(self._refresh_base())
        if error is None:
            self._js_acks.add(1, attributes)
        else:
            attributes[_ERROR_TYPE] = _error_type(error)
            self._js_failures.add(1, attributes)

    def failed(self, error: BaseException | str) -> None:
        """Marks the current span failed (a micro handler's error answer)."""
        span = trace.get_current_span()
        if isinstance(error, BaseException):
            span.record_exception(error)
            span.set_attribute(_ERROR_TYPE, _error_type(error))
            span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
        else:
            span.set_status(Status(StatusCode.ERROR, error))

    # --- metrics ----------------------------------------------------------------------

    def observe(self, what: str) -> Observation | None:
        """This client's value of the metric ``what`` (a ``stats`` key, ``"dropped"``
        or ``"pending"``); None once the client is gone or closed."""
        nc = self._client()
        if nc is None or nc.is_closed:
            return None
        base = dict(self._refresh_base())
        if what == "pending":
            value = nc.pending_data_size
        elif what == "dropped":
            with self._lock:
                for sub in list(self._subs):
                    self._dropped[sub.sid] = sub.dropped
                value = sum(self._dropped.values())
        else:
            value = nc.stats[what]
        return metrics.Observation(value, base)


class _Observers:
    """The observable instruments of one meter, shared by the clients instrumented
    with it (a second instrument of the same name would be the first one, without the
    second's callbacks): each collection observes every client still open."""

    def __init__(self, meter: Meter) -> None:
        self._lock = threading.Lock()
        self._clients: weakref.WeakSet[_Instrumentation] = weakref.WeakSet()
        for name, what, unit, description in (
            (
                "messaging.client.sent.messages",
                "out_msgs",
                "{message}",
                "Messages the client published",
            ),
            (
                "messaging.client.consumed.messages",
                "in_msgs",
                "{message}",
                "Messages the client received",
            ),
            ("nats.client.sent.bytes", "out_bytes", "By", "Payload bytes published"),
            ("nats.client.received.bytes", "in_bytes", "By", "Payload bytes received"),
            ("nats.client.reconnects", "reconnects", "{reconnect}", "Reconnections made"),
            (
                "nats.client.slow_consumer.dropped",
                "dropped",
                "{message}",
                "Messages dropped by subscriptions that fell behind",
            ),
        ):
            meter.create_observable_counter(
                name, [self._callback(what)], unit=unit, description=description
            )
        meter.create_observable_gauge(
            "nats.client.outbox.pending",
            [self._callback("pending")],
            unit="By",
            description="Bytes queued for the server and not yet sent",
        )

    def add(self, client: _Instrumentation) -> None:
        with self._lock:
            self._clients.add(client)

    def _callback(self, what: str) -> Callable[[CallbackOptions], Iterable[Observation]]:
        def observe(options: CallbackOptions) -> Iterable[Observation]:
            with self._lock:
                clients = list(self._clients)
            found = (client.observe(what) for client in clients)
            return [observation for observation in found if observation is not None]

        return observe


_observers_lock = threading.Lock()
_observers: weakref.WeakKeyDictionary[Any, _Observers] = weakref.WeakKeyDictionary()


def _observers_of(meter: Meter) -> _Observers:
    with _observers_lock:
        try:
            found = _observers.get(meter)
            if found is None:
                found = _observers[meter] = _Observers(meter)
        except TypeError:  # a meter that takes no weak reference: its own observers
            found = _Observers(meter)
        return found


def _metric_attributes(span_attributes: dict[str, Any]) -> dict[str, Any]:
    """A span's attributes without the per-message ones (for a histogram)."""
    return {
        key: value
        for key, value in span_attributes.items()
        if key not in (_BODY_SIZE, _BATCH_COUNT)
    }


def _end_failed(span: Span, err: BaseException) -> None:
    span.record_exception(err)
    span.set_attribute(_ERROR_TYPE, _error_type(err))
    span.set_status(Status(StatusCode.ERROR, f"{type(err).__name__}: {err}"))
    span.end()


__all__ = ["instrument", "trace_headers"]

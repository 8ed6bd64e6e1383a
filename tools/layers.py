"""The layers of nats_sync and its threads, as data: the one table of both.

``LAYERS`` places every module of the package (names relative to ``nats_sync``; ``""`` is
the package itself) in a layer; ``tests/unit/test_import_layers.py`` enforces it (every
import goes down), ``tests/docs/test_architecture.py`` holds docs/ARCHITECTURE.md's layer
table to it, and ``tools/arch_diagram.py`` draws it. ``THREADS`` says which components
each of the client's threads touches, for the picture of the threads; each component is
named with the module that defines it, which must have a layer.

Plain data and no import of the package: the package never imports this (it is no
runtime dependency), and the tests and the tool load it from ``tools/``.
"""

from __future__ import annotations

from typing import NamedTuple

#: The layers bottom up: their short names, as the page's table and the picture give them.
LAYER_NAMES: tuple[str, ...] = (
    "protocol core",
    "transport",
    "connection threads",
    "components",
    "handler",
    "JetStream",
    "client",
    "on the public API",
)

#: The modules of each layer, bottom up. A new module must be placed here.
LAYER_MODULES: tuple[tuple[str, ...], ...] = (
    # 0 the protocol core and plain data
    (
        "errors",
        "_defaults",
        "_version",
        "msg",
        "_core",
        "_core.validate",
        "_core.state",
        "_core.session",
        "_core.nuid",
        "_core.proto",
        "_core.proto.ops",
        "_core.proto.headers",
        "_core.proto.encoder",
        "_core.proto.parser",
    ),
    # 1 transport: addresses, credentials, options, streams and the handshake
    (
        "_core.transport",
        "_core.transport.pool",
        "_core.transport.auth",
        "_core.transport.contexts",
        "_core.transport.options",
        "_core.transport.streams",
        "_core.transport.websocket",
        "_core.transport.handshake",
        "_core.transport.greenlets",
    ),
    # 2 connection threads and the small threaded parts
    (
        "_core.threads",
        "_core.threads.outbox",
        "_core.threads.connection",
        "_core.threads.callbacks",
        "_core.threads.timer",
        "_core.threads.lifecycle",
        "_core.threads.waiting",
    ),
    # 3 components the handler composes, and the port the extensions take
    (
        "_core.components",
        "_core.components.reply_mux",
        "_core.components.subscription",
        "_core.components.publishing",
        "_core.components.requester",
        "_core.components.request_many",
        "_core.components.reconnect",
        "_core.components.pings",
        "_core.components.dispatch",
        "_core.components.link",
        "_core.components.closing",
        "_core.components.instrumentation",
        "_core.components.port",
    ),
    # 4 the handler
    ("_core.handler",),
    # 5 JetStream: on the client's public API (a protocol of it) and its port, below the client
    (
        "jetstream",
        "jetstream.errors",
        "jetstream.api",
        "jetstream._streams",
        "jetstream._streams.wire",
        "jetstream._streams.context",
        "jetstream._streams.context_protocol",
        "jetstream._streams.context_compat",
        "jetstream._streams.context_buckets",
        "jetstream._streams.stream",
        "jetstream._streams.ranges",
        "jetstream._publishing",
        "jetstream._publishing.publish",
        "jetstream._publishing.acks",
        "jetstream._publishing.ack_future",
        "jetstream._publishing.fast",
        "jetstream._publishing.atomic",
        "jetstream._publishing.batch_replies",
        "jetstream._publishing.counter",
        "jetstream._publishing.schedule",
        "jetstream._consumers",
        "jetstream._consumers.consumer",
        "jetstream._consumers.pull",
        "jetstream._consumers.pull_wire",
        "jetstream._consumers.push",
        "jetstream._consumers.push_stream",
        "jetstream._consumers.reader_end",
        "jetstream._consumers.priority",
        "jetstream._consumers.ordered",
        "jetstream._consumers.msg",
        "jetstream._consumers.compat",
        "jetstream._kv",
        "jetstream._kv.bucket",
        "jetstream._kv.config",
        "jetstream._kv.watch",
        "jetstream._kv.many",
        "jetstream._object_store",
        "jetstream._object_store.store",
        "jetstream._object_store.config",
        "jetstream._object_store.watch",
        "jetstream.pcgroups",
        "jetstream.pcgroups._defaults",
        "jetstream.pcgroups._config",
        "jetstream.pcgroups._member",
        "jetstream.pcgroups.static",
        "jetstream.pcgroups.elastic",
        "jetstream.pcgroups.errors",
        "jetstream.kvcodec",
        "jetstream.kvcodec.errors",
        "jetstream.kvcodec._codecs",
        "jetstream.kvcodec._bucket",
    ),
    # 6 the public client, and its OpenTelemetry instrumentation (connect(tracing=True)
    # imports it; it names the client as a protocol, InstrumentedClient)
    ("client", "_trace", "otel"),
    # 7 built on the public client
    (
        "",
        "__main__",
        "_process",
        "testing",
        "pytest_plugin",
        "cli",
        "_cli",
        "_cli._defaults",
        "_cli.jetstream",
        "_cli.object",
        "_cli.counter",
        "_cli.micro",
        "_cli.pcgroups",
        "_cli.server",
        "_cli.trace",
        "_cli.sys",
        "micro",
        "micro._defaults",
        "micro._api",
        "micro.request",
        "micro.service",
        "micro.discovery",
        "sys",
        "spark",
        "spark._defaults",
        "spark._options",
        "spark._worker",
        "spark._worker_python",
        "spark._active_session",
        "spark.datasource",
        "spark.udf",
        "spark._kv_udf",
        "spark.jetstream",
        "spark._jetstream",
        "spark._jetstream.source",
        "spark._jetstream.plan",
        "spark._jetstream.read",
        "spark._jetstream.sink",
        "spark._jetstream.rows",
        "spark._jetstream.fast",
        "spark._jetstream.async_publish",
        "spark._jetstream.commits",
        "spark._jetstream.retry",
        "spark.testing",
        "locust",
    ),
)

#: Layer of every module.
LAYERS: dict[str, int] = {
    module: layer for layer, modules in enumerate(LAYER_MODULES) for module in modules
}


class Component(NamedTuple):
    """A component threads touch: its name, and the module that defines it."""

    name: str
    module: str


class Thread(NamedTuple):
    """One kind of thread: its name in the page's thread table, where it starts (a module
    and a text of that module naming it, so a renamed thread is noticed; both empty for
    the users' own threads), and the components it touches."""

    name: str
    started_in: str
    named_by: str
    touches: tuple[str, ...]


#: The components of the threads' picture, top down (by layer, as the layers' picture).
COMPONENTS: tuple[Component, ...] = (
    Component("micro Endpoint", "micro.service"),
    Component("AsyncPublisher (publish_async)", "jetstream._publishing.acks"),
    Component("FastPublisher (keep-alive)", "jetstream._publishing.fast"),
    Component("MessageStream (messages, consume)", "jetstream._consumers.pull"),
    Component("Handler (INFO, -ERR)", "_core.handler"),
    Component("Link (connection swap)", "_core.components.link"),
    Component("Closer (drain, close)", "_core.components.closing"),
    Component("Publisher", "_core.components.publishing"),
    Component("Requester", "_core.components.requester"),
    Component("RequestMux", "_core.components.reply_mux"),
    Component("Subscription", "_core.components.subscription"),
    Component("Deliveries", "_core.components.subscription"),
    Component("Reconnector", "_core.components.reconnect"),
    Component("Pings", "_core.components.pings"),
    Component("Dispatcher", "_core.components.dispatch"),
    Component("Outbox", "_core.threads.outbox"),
    Component("Connection (socket, parser)", "_core.threads.connection"),
    Component("CallbackRunner", "_core.threads.callbacks"),
    Component("StatusListeners", "_core.threads.callbacks"),
    Component("Timer", "_core.threads.timer"),
    Component("Session (state, subs)", "_core.session"),
)

#: The threads of the picture, left to right, with what each touches (by component name).
#: A thread that sees a connection event (lost, back, closed) tells the status listeners
#: on itself, so it touches the JetStream readers that listen (and ``publish_async``'s
#: session, on "closed"). A micro endpoint with one worker runs on its subscription's
#: delivery thread.
THREADS: tuple[Thread, ...] = (
    Thread(
        "user threads",
        "",
        "",
        (
            "AsyncPublisher (publish_async)",
            "FastPublisher (keep-alive)",
            "MessageStream (messages, consume)",
            "Handler (INFO, -ERR)",
            "Link (connection swap)",
            "Closer (drain, close)",
            "Publisher",
            "Requester",
            "RequestMux",
            "Subscription",
            "Outbox",
            "Connection (socket, parser)",
            "CallbackRunner",
            "StatusListeners",
            "Timer",
            "Session (state, subs)",
        ),
    ),
    Thread(
        "reader",
        "_core.components.link",
        '"reader"',
        (
            "AsyncPublisher (publish_async)",
            "MessageStream (messages, consume)",
            "Handler (INFO, -ERR)",
            "Link (connection swap)",
            "Closer (drain, close)",
            "RequestMux",
            "Subscription",
            "Pings",
            "Dispatcher",
            "Outbox",
            "Connection (socket, parser)",
            "CallbackRunner",
            "StatusListeners",
            "Session (state, subs)",
        ),
    ),
    Thread(
        "writer",
        "_core.components.link",
        '"writer"',
        (
            "MessageStream (messages, consume)",
            "Handler (INFO, -ERR)",
            "Link (connection swap)",
            "Closer (drain, close)",
            "Outbox",
            "Connection (socket, parser)",
            "StatusListeners",
            "Session (state, subs)",
        ),
    ),
    Thread(
        "a requester",
        "_core.threads.connection",
        "def lead",
        (
            "AsyncPublisher (publish_async)",
            "Handler (INFO, -ERR)",
            "Link (connection swap)",
            "Closer (drain, close)",
            "RequestMux",
            "Subscription",
            "Dispatcher",
            "Connection (socket, parser)",
            "Session (state, subs)",
        ),
    ),
    Thread(
        "reconnect",
        "_core.components.reconnect",
        '"reconnect"',
        (
            "AsyncPublisher (publish_async)",
            "MessageStream (messages, consume)",
            "Handler (INFO, -ERR)",
            "Link (connection swap)",
            "Closer (drain, close)",
            "Reconnector",
            "Pings",
            "Outbox",
            "StatusListeners",
            "Session (state, subs)",
        ),
    ),
    Thread(
        "timer",
        "_core.threads.timer",
        '"timer"',
        (
            "FastPublisher (keep-alive)",
            "MessageStream (messages, consume)",
            "Handler (INFO, -ERR)",
            "Link (connection swap)",
            "Closer (drain, close)",
            "RequestMux",
            "Pings",
            "Outbox",
            "StatusListeners",
            "Timer",
            "Session (state, subs)",
        ),
    ),
    Thread("callback", "_core.handler", '"callbacks"', ("CallbackRunner",)),
    Thread(
        "delivery",
        "_core.components.subscription",
        'f"sub-',
        ("micro Endpoint", "Subscription", "Deliveries"),
    ),
    Thread(
        "JetStream consume",
        "jetstream._consumers.consumer",
        "nats_sync-js-consume-",
        ("MessageStream (messages, consume)", "Publisher", "Subscription", "Outbox"),
    ),
    Thread(
        "JetStream acks",
        "jetstream._publishing.acks",
        "nats_sync-js-acks",
        ("AsyncPublisher (publish_async)", "Publisher", "RequestMux", "Outbox", "CallbackRunner"),
    ),
    Thread(
        "micro endpoint workers",
        "micro.service",
        "nats_sync-micro-",
        ("micro Endpoint", "Publisher", "Subscription", "Outbox"),
    ),
)

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
    ("errors", "_validate", "_defaults", "_state", "_version", "_nuid", "msg", "_proto",
     "_proto.ops", "_proto.headers", "_proto.encoder", "_proto.parser"),
    # 1 transport: addresses, credentials, options, streams and the handshake
    ("_pool", "_auth", "_contexts", "_options", "_transport", "_websocket", "_handshake"),
    # 2 connection threads and the small threaded parts
    ("_outbox", "_connection", "_callbacks", "_timer", "_threads", "_waiting"),
    # 3 components the handler composes, and the port the extensions take
    ("_requests", "subscription", "_publishing", "_requesting", "_request_many",
     "_reconnect", "_pings", "_instrumentation", "_port"),
    # 4 the handler
    ("_handler",),
    # 5 JetStream: on the client's public API (a protocol of it) and its port, below the client
    ("jetstream", "jetstream.errors", "jetstream._api", "jetstream.api", "jetstream.context",
     "jetstream._context_api", "jetstream._context_compat", "jetstream._compat",
     "jetstream.stream", "jetstream._ranges", "jetstream._msg",
     "jetstream.publish", "jetstream._acks", "jetstream.fast", "jetstream.atomic",
     "jetstream._batch_replies", "jetstream.counter", "jetstream.schedule",
     "jetstream.consumer", "jetstream._pull", "jetstream._pull_wire", "jetstream._priority",
     "jetstream.ordered",
     "jetstream.kv", "jetstream._kv_config", "jetstream._kv_watch", "jetstream._kv_many",
     "jetstream.object_store", "jetstream._obs_config", "jetstream._obs_watch",
     "jetstream.pcgroups", "jetstream.pcgroups._config", "jetstream.pcgroups._member",
     "jetstream.pcgroups.static", "jetstream.pcgroups.elastic", "jetstream.pcgroups.errors",
     "jetstream.kvcodec", "jetstream.kvcodec.errors", "jetstream.kvcodec._codecs",
     "jetstream.kvcodec._bucket"),
    # 6 the public client, and its OpenTelemetry instrumentation (connect(tracing=True)
    # imports it; it names the client as a protocol, InstrumentedClient)
    ("client", "_client_support", "_trace", "otel"),
    # 7 built on the public client
    ("", "__main__", "_process", "testing", "pytest_plugin",
     "cli", "_cli_jetstream", "_cli_object", "_cli_counter", "_cli_micro", "_cli_pcgroups",
     "_cli_server", "_cli_trace", "_cli_sys",
     "micro", "micro._api", "micro.request", "micro.service", "micro.discovery",
     "sys",
     "spark", "spark._options", "spark._worker", "spark._worker_python", "spark.datasource",
     "spark.udf", "spark._kv_udf", "spark.jetstream", "spark._js_source", "spark._js_plan",
     "spark._js_read", "spark._js_sink", "spark._js_rows", "spark._js_fast",
     "spark._js_commits", "spark.testing"),
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
    Component("AsyncPublisher (publish_async)", "jetstream._acks"),
    Component("FastPublisher (keep-alive)", "jetstream.fast"),
    Component("MessageStream (messages, consume)", "jetstream._pull"),
    Component("Handler (state, subs, dispatch)", "_handler"),
    Component("Publisher", "_publishing"),
    Component("Requester", "_requesting"),
    Component("RequestMux", "_requests"),
    Component("Subscription", "subscription"),
    Component("Deliveries", "subscription"),
    Component("Reconnector", "_reconnect"),
    Component("Pings", "_pings"),
    Component("Outbox", "_outbox"),
    Component("Connection (socket, parser)", "_connection"),
    Component("CallbackRunner", "_callbacks"),
    Component("StatusListeners", "_callbacks"),
    Component("Timer", "_timer"),
)

#: The threads of the picture, left to right, with what each touches (by component name).
#: A thread that sees a connection event (lost, back, closed) tells the status listeners
#: on itself, so it touches the JetStream readers that listen (and ``publish_async``'s
#: session, on "closed"). A micro endpoint with one worker runs on its subscription's
#: delivery thread.
THREADS: tuple[Thread, ...] = (
    Thread("user threads", "", "", (
        "AsyncPublisher (publish_async)", "FastPublisher (keep-alive)",
        "MessageStream (messages, consume)", "Handler (state, subs, dispatch)", "Publisher",
        "Requester", "RequestMux", "Subscription", "Outbox", "Connection (socket, parser)",
        "CallbackRunner", "StatusListeners", "Timer")),
    Thread("reader", "_handler", '"reader"', (
        "AsyncPublisher (publish_async)", "MessageStream (messages, consume)",
        "Handler (state, subs, dispatch)", "RequestMux", "Subscription", "Pings", "Outbox",
        "Connection (socket, parser)", "CallbackRunner", "StatusListeners")),
    Thread("writer", "_handler", '"writer"', (
        "MessageStream (messages, consume)",
        "Handler (state, subs, dispatch)", "Outbox", "Connection (socket, parser)",
        "StatusListeners")),
    Thread("a requester", "_connection", "def lead", (
        "AsyncPublisher (publish_async)", "Handler (state, subs, dispatch)", "RequestMux",
        "Subscription", "Connection (socket, parser)")),
    Thread("reconnect", "_reconnect", '"reconnect"', (
        "AsyncPublisher (publish_async)", "MessageStream (messages, consume)",
        "Handler (state, subs, dispatch)", "Reconnector", "Pings", "Outbox",
        "StatusListeners")),
    Thread("timer", "_timer", '"timer"', (
        "FastPublisher (keep-alive)", "MessageStream (messages, consume)",
        "Handler (state, subs, dispatch)", "RequestMux", "Pings", "Outbox",
        "StatusListeners", "Timer")),
    Thread("callback", "_handler", '"callbacks"', ("CallbackRunner",)),
    Thread("delivery", "subscription", 'f"sub-', ("micro Endpoint", "Subscription",
                                                 "Deliveries")),
    Thread("JetStream consume", "jetstream.consumer", "nats_sync-js-consume-", (
        "MessageStream (messages, consume)", "Publisher", "Subscription", "Outbox")),
    Thread("JetStream acks", "jetstream._acks", "nats_sync-js-acks", (
        "AsyncPublisher (publish_async)", "Publisher", "RequestMux", "Outbox",
        "CallbackRunner")),
    Thread("micro endpoint workers", "micro.service", "nats_sync-micro-", (
        "micro Endpoint", "Publisher", "Subscription", "Outbox")),
)

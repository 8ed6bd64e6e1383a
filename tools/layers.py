"""The layers of nats_sync and its threads, as data: the one source of both.

``PARTS`` declares the package by its parts (a package, or a module at the top), each
with its layer and what it holds; every module of a package takes its part's layer
(the most specific part naming it), so a new module needs no entry. ``LAYERS`` is the
layer of every module, found by walking ``nats_sync/``. ``THREADS`` lists the client's
threads: the names they run under, the module starting each, what they run, and the
components they touch.

What reads it: ``tests/unit/test_import_layers.py`` enforces it (every import goes
down); ``tools/arch_diagram.py`` draws the two pictures of docs/ARCHITECTURE.md and
writes its tree, its layer table and its thread table from it, and
``tests/docs/test_architecture.py`` fails when any of those is stale;
``tests/integration/test_thread_names.py`` runs a client through every thread and
checks each started under a name and from a module given here.

Plain data and no import of the package: the package never imports this (it is no
runtime dependency), and the tests and the tool load it from ``tools/``.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

PACKAGE_DIR = Path(__file__).resolve().parents[1] / "nats_sync"

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

#: What each layer is, for the page's layer table.
LAYER_WHAT: tuple[str, ...] = (
    "sans-IO: bytes in, ops out, and ops to bytes; the session's protocol state; plain "
    "data, the error tree, the argument checks and the defaults.",
    "server addresses, credentials, CLI contexts, validated options, the byte streams and "
    "the handshake.",
    "the outbox, the reader and writer threads, the callback and timer threads, thread "
    "start and join, interruptible waits.",
    "the narrow objects the handler composes, and the port the extensions take.",
    "drives the session with threads, locks and sockets: composes the components (the "
    "link: the connection swap; the closer: drain and close), acts on an INFO or an "
    "`-ERR`, registers subscriptions and listeners.",
    "streams, publishing, consumers, key-value, object store, consumer groups and codecs, "
    "on a protocol of the client's public API and the client's port: below the client.",
    "the public `Client` and `connect()`, message tracing, the OpenTelemetry instrumentation.",
    "what users and tests import: the package's names, the CLI, services, monitoring, "
    "Spark, the test helpers, Locust's `NatsUser`.",
)


class Part(NamedTuple):
    """A package, or a module at the package's top: its layer and what it holds.

    A package's part covers every module under it that no more specific part names;
    ``""`` is the package ``nats_sync`` itself (its ``__init__`` only).
    """

    name: str
    layer: int
    what: str


#: The parts, in the order of the page's tree.
PARTS: tuple[Part, ...] = (
    Part("", 7, "the package's names: connect, Client, Msg, the errors"),
    Part("client", 6, "the public Client and connect()"),
    Part("msg", 0, "the Msg users get"),
    Part("errors", 0, "the one error tree"),
    Part("otel", 6, "the OpenTelemetry instrumentation (the otel extra)"),
    Part("_trace", 6, "message tracing, the client's helper"),
    Part("sys", 7, "monitoring: the $SYS requests"),
    Part("testing", 7, "nats-server for tests and demos: NatsServer, NatsCluster"),
    Part("pytest_plugin", 7, "the pytest fixtures"),
    Part("locust", 7, "Locust's NatsUser"),
    Part("cli", 7, "the CLI's entry point"),
    Part("__main__", 7, "python -m nats_sync: the CLI"),
    Part("_process", 7, "the nats-server child process"),
    Part("_defaults", 0, "every default and limit of the core"),
    Part("_version", 0, "the version"),
    Part("_core", 0, "the core, nothing public; at its top validate, state, nuid"),
    Part("_core.session", 0, "the protocol state under the handler (sans-IO)"),
    Part("_core.proto", 0, "the wire: parser, encoder, headers, ops (sans-IO)"),
    Part("_core.transport", 1, "addresses, credentials, options, streams, handshake"),
    Part("_core.threads", 2, "reader, writer, outbox, callbacks, timer, thread life"),
    Part("_core.components", 3, "what the handler composes: the link, the closer, ...; the port"),
    Part("_core.handler", 4, "the handler"),
    Part("jetstream", 5, "JetStream: the package's names, api (configs, infos), errors"),
    Part("jetstream._streams", 5, "the wire, the context, bound streams, range reads"),
    Part("jetstream._publishing", 5, "publish, publish_async, fast and atomic batches, counters"),
    Part(
        "jetstream._consumers", 5, "pull and push consumers, pulls, priority groups, ordered, JsMsg"
    ),
    Part("jetstream._kv", 5, "key-value buckets"),
    Part("jetstream._object_store", 5, "object stores"),
    Part("jetstream.pcgroups", 5, "partitioned consumer groups (public)"),
    Part("jetstream.kvcodec", 5, "key-value codecs (public)"),
    Part("micro", 7, "services"),
    Part("spark", 7, "the Spark data sources and UDFs"),
    Part("spark._jetstream", 7, "the JetStream source and sink"),
    Part("_cli", 7, "the CLI's subcommands"),
)


def module_name(path: Path, package_dir: Path = PACKAGE_DIR) -> str:
    """The module at ``path`` (a file of the package at ``package_dir``), dotted under
    the package; ``""`` for the package's own ``__init__.py``."""
    parts = path.relative_to(package_dir).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _module_names() -> list[str]:
    """Every module of the package, dotted under it, sorted."""
    return sorted(module_name(path) for path in PACKAGE_DIR.rglob("*.py"))


def part_of(module: str) -> Part | None:
    """The most specific part naming ``module``; None when no part does."""
    best: Part | None = None
    for part in PARTS:
        covers = module == part.name or (part.name and module.startswith(part.name + "."))
        if covers and (best is None or len(part.name) > len(best.name)):
            best = part
    return best


#: Layer of every module of the package that a part names (a module no part names is
#: left out, and tests/unit/test_import_layers.py reports it).
LAYERS: dict[str, int] = {
    module: part.layer for module in _module_names() if (part := part_of(module)) is not None
}


class Component(NamedTuple):
    """A component threads touch: its name, and the module that defines it."""

    name: str
    module: str


class Started(NamedTuple):
    """A thread the library starts: its name (``<...>`` for a part that varies) and the
    module that starts it."""

    name: str
    module: str


class Thread(NamedTuple):
    """One kind of thread: its name in the picture; how many there are; the threads
    started for it (none for the users' own threads); what it runs, for the page's
    table; the components it touches; and whether the picture has a column for it."""

    name: str
    count: str
    started: tuple[Started, ...]
    runs: str
    touches: tuple[str, ...]
    drawn: bool = True


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

#: The threads, the picture's columns left to right first, with what each touches (by
#: component name). A thread that sees a connection event (lost, back, closed) tells the
#: status listeners on itself, so it touches the JetStream readers that listen (and
#: ``publish_async``'s session, on "closed"). A micro endpoint with one worker runs on
#: its subscription's delivery thread.
THREADS: tuple[Thread, ...] = (
    Thread(
        "user threads",
        "the callers'",
        (),
        (
            "publish (into the outbox, or writing one message themselves when the writer is "
            "idle), request and wait, read subscriptions (`next_msg`), read JetStream "
            "`messages()` and `fetch` (the pulls run on the reading thread), `publish_async`, "
            "fast and atomic batches; subscribe, drain and close through the handler."
        ),
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
        "one per connection",
        (Started("nats_sync-reader", "_core.components.link"),),
        (
            "reads, parses, dispatches (the `Dispatcher`): messages to subscription queues, "
            "replies to the request mux, a PONG for each PING, PONG to the pings, INFO and -ERR "
            "to the handler. Never user code."
        ),
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
        "one per connection",
        (Started("nats_sync-writer", "_core.components.link"),),
        (
            "takes everything in the outbox at once; joins small frames; `sendmsg` of many "
            "buffers. On a failed send, puts back whole messages. Ends a direct-send claim whose "
            "thread left its write (a Ctrl-C cut its give-back)."
        ),
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
        "a user's thread inside `request()`",
        (),
        (
            "on plain TCP with nothing else needing the reader, reads its own reply (the reader "
            "parks)."
        ),
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
        "while reconnecting",
        (Started("nats_sync-reconnect", "_core.components.reconnect"),),
        (
            "passes over the pool with tenacity's backoff until a handshake works; hands it to "
            "the link."
        ),
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
        "one per client",
        (Started("nats_sync-timer", "_core.threads.timer"),),
        (
            "keepalive PINGs and stale detection; `request_future` deadlines; fast-ingest "
            "batches' keep-alive pings."
        ),
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
    Thread(
        "callback",
        "one per client",
        (Started("nats_sync-callbacks", "_core.handler"),),
        "user callbacks of the client, in order.",
        ("CallbackRunner",),
    ),
    Thread(
        "delivery",
        "one per callback subscription",
        (Started("nats_sync-sub-<sid>", "_core.components.subscription"),),
        "that subscription's `cb(msg)`, in order, checking its hand-out limit before each call.",
        ("micro Endpoint", "Subscription", "Deliveries"),
    ),
    Thread(
        "JetStream consume",
        (
            "one per `consume(cb)` of a pull or an ordered consumer, and per member of a "
            "partitioned consumer group"
        ),
        (Started("nats_sync-js-consume-<consumer>", "jetstream._consumers.consumer"),),
        (
            "reads its `MessageStream` and runs `cb(msg)` in order; ends at `stop()`, `drain()`, "
            "the client's close or a terminal error (`ConsumerDeletedError`). A group member's "
            "(`static_consume`/`elastic_consume`, named `<group>-<member>`) also, between "
            "callbacks, applies the group's config changes from its key-value watch (at most 0.25"
            " s late; never while a callback holds a message), makes or remakes the member's "
            "consumer, and reads it; it ends at `stop()`, the group's deletion, a config it "
            "cannot follow (`GroupConfigChangedError`) or the client's close."
        ),
        ("MessageStream (messages, consume)", "Publisher", "Subscription", "Outbox"),
    ),
    Thread(
        "JetStream acks",
        "one per context with `publish_async` in use",
        (Started("nats_sync-js-acks", "jetstream._publishing.acks"),),
        (
            "fails `publish_async` futures at their ack timeout (from a deque of deadlines per "
            "timeout value, read at its head), re-publishes after a no-responders status, and "
            "drops settled entries every 0.25 s; the acks themselves are settled by the reader "
            'thread (see "JetStream publish_async" below). Ends with the client, or after 10 s '
            "with nothing in flight."
        ),
        ("AsyncPublisher (publish_async)", "Publisher", "RequestMux", "Outbox", "CallbackRunner"),
    ),
    Thread(
        "micro endpoint workers",
        "`max_workers` > 1",
        (Started("nats_sync-micro-<service>-<endpoint>-<i>", "micro.service"),),
        (
            "read the endpoint's subscription, each taking its share of the waiting requests at "
            "once (`next_msgs`, at most `MICRO_WORKER_BATCH`, and only while the handlers average"
            " under `MICRO_BATCH_HANDLER_NS`), and run its handler on each in queue order; when "
            "none waits, one sleeps on the subscription and the others on the endpoint's lock (an"
            " arrival wakes every thread asleep on the subscription); with `max_workers=1` the "
            "subscription's own delivery thread runs it, in order. End when the service stops or "
            "the client closes."
        ),
        ("micro Endpoint", "Publisher", "Subscription", "Outbox"),
    ),
    Thread(
        "micro service events",
        "short-lived",
        (
            Started("nats_sync-micro-<service>-error", "micro.service"),
            Started("nats_sync-micro-<service>-closed", "micro.service"),
        ),
        (
            "an asynchronous error on one of the service's subscriptions (told by the client's "
            "error listeners, `port.add_error_listener`): runs `error_handler(service, error)`, "
            "then stops the service; the client closing: stops it. Either way "
            "`done_handler(service)` runs once, at the end of the stop."
        ),
        ("micro Endpoint", "Subscription"),
        drawn=False,
    ),
    Thread(
        "run to completion",
        "short-lived, from the main thread only",
        (
            Started("nats_sync-close", "_core.handler"),
            Started("nats_sync-js-acks-open", "jetstream._publishing.acks"),
            Started("nats_sync-lose", "_core.components.link"),
            Started("nats_sync-lost", "_core.threads.connection"),
        ),
        (
            "work that must not stop half-way when called on the main thread, where Ctrl-C lands:"
            " `close()`, the opening of a `publish_async` session, and a lost connection's "
            "hand-over to the reconnect thread; the caller only waits for it "
            "(`_core.threads.lifecycle.run_to_completion`)."
        ),
        (),
        drawn=False,
    ),
)

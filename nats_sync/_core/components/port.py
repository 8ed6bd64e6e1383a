"""The one port between the client and its extensions (JetStream, micro, otel, spark).

How it works: a :class:`ClientPort` is made by each ``Client`` at construction and
carries exactly what the extensions need besides the client's public API: status
and error listeners, the shared request inbox and publishing under it, the timer thread, and the
tracing hook with the instrumentation it installed. Extensions reach it with
:func:`port_of`, never through the client's private attributes (a test holds them to
it: ``tests/unit/test_import_layers.py``). It owns no thread and no lock: its entries
are bound methods of the handler's components, which are thread-safe themselves, and
``publish_inbox`` and ``instrumentation`` are replaced once, by ``instrument`` (under
the client's own once-only check), before any extension made after it reads them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from nats_sync._core.components.instrumentation import Instrumentation
from nats_sync._core.components.reply_mux import InboxRoute


class PublishInbox(Protocol):
    """Publishes with our own ``inbox`` as the reply subject (not validated: bytes, ready
    for the wire); ``headers`` may be a header block already encoded. Raises as
    ``Client.publish``."""

    def __call__(self, subject: str, payload: bytes, inbox: bytes, headers: Any = None) -> None: ...


@dataclass(slots=True, eq=False)
class ClientPort:
    """What the client offers its extensions beyond the public API.

    Attributes:
        add_status_listener: ``add_status_listener(listener)``: ``listener(event)`` gets
            ``"disconnected"``, ``"reconnected"`` and ``"closed"`` on the client's own
            threads and must return at once (on "closed" it may wait
            ``CLOSE_CALLBACK_GRACE`` for a thread of its own); returns the call that
            removes it (JetStream consumers, KV watchers, ``publish_async``).
        add_error_listener: ``add_error_listener(listener)``: ``listener(error)`` gets
            each asynchronous error ``error_cb`` gets (``SlowConsumerError``,
            ``PermissionsViolationError``, ...), on the thread that saw it, and must
            return at once; returns the call that removes it (micro services).
        inbox_route: the client's shared request inbox (subscribed on first use) and the
            callback thread's runner; waiters registered in its mux are completed on the
            reader thread, so they must not block or run user code. Raises
            ``ConnectionClosedError`` once the client is closed.
        publish_inbox: a publish whose reply is under one of our own inboxes (see
            :class:`PublishInbox`): ``publish_async`` and fast-ingest batches.
        schedule: ``schedule(deadline, fn)``: ``fn()`` on the timer thread at
            ``deadline`` (``time.monotonic()``), returning at once; never once closed.
        instrument: installs an ``Instrumentation`` (``nats_sync.otel.instrument``);
            once per client, else ``InvalidArgumentError``.
        instrumentation: the installed instrumentation, or None (micro services and
            JetStream publishes trace through it).
    """

    add_status_listener: Callable[[Callable[[str], None]], Callable[[], None]]
    add_error_listener: Callable[[Callable[[BaseException], None]], Callable[[], None]]
    inbox_route: Callable[[], InboxRoute]
    publish_inbox: PublishInbox
    schedule: Callable[[float, Callable[[], None]], None]
    instrument: Callable[[Instrumentation], None]
    instrumentation: Instrumentation | None = None


def port_of(client: object) -> ClientPort:
    """The port of a ``nats_sync`` client (or of a test's stand-in that carries one).

    Raises:
        TypeError: ``client`` is not a ``nats_sync`` client.
    """
    port = getattr(client, "_port", None)
    if not isinstance(port, ClientPort):
        raise TypeError(f"expected a nats_sync client, got {type(client).__name__}")
    return port

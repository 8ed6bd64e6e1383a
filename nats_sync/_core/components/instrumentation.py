"""The instrumentation hook: what the client calls when tracing is on (no OpenTelemetry).

How it works: a client has no instrumentation by default (``None``) and its hot paths
are exactly as without this module. The client port's ``instrument(hooks)`` (called
by ``nats_sync.otel.instrument``) binds the traced ``publish``, ``request``,
``request_future``, ``request_batch`` and the port's ``publish_inbox`` the hooks make
in place of the plain ones, and keeps the hooks for what cannot be rebound: a subscription's
callback (wrapped once, at ``subscribe``), ``next_msg``/``next_msgs`` (one attribute
check per call) and micro handlers. ``nats_sync.otel`` is the only implementation and
the only module that imports OpenTelemetry.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from nats_sync.msg import Msg


class SubscriptionView(Protocol):
    """What the instrumentation reads of a subscription (a protocol: ``subscription``
    imports this module, so this one does not import it back, even for types)."""

    @property
    def subject(self) -> str:
        """The subject subscribed to."""
        ...

    @property
    def sid(self) -> int:
        """Its subscription id."""
        ...

    @property
    def dropped(self) -> int:
        """Messages it dropped for falling behind."""
        ...


class Instrumentation(Protocol):
    """What a client asks of its instrumentation (see the module docstring)."""

    def wrap_client_methods(self, methods: dict[str, Callable[..., Any]]) -> None:
        """Replaces, in ``methods`` (name -> the client's plain bound method), the ones
        it traces; the client binds the results."""

    def wrap_callback(self, subject: str, cb: Callable[[Any], None]) -> Callable[[Any], None]:
        """The callback run instead of ``cb`` for messages of a subscription on
        ``subject`` (a ``Msg``) or of a JetStream ``consume`` named ``subject`` (a
        ``JsMsg``: ``subject``, ``data`` and ``headers`` as a ``Msg``)."""

    def subscribed(self, sub: SubscriptionView) -> None:
        """A subscription was made (its slow-consumer drops are counted)."""

    def received(self, sub: SubscriptionView, msg: Msg) -> None:
        """A message was taken with ``next_msg`` from ``sub``."""

    def serving(self, sub: SubscriptionView) -> None:
        """``sub``'s messages are handled under the spans of ``wrap_service_handler``
        (a micro endpoint's worker pool): its ``next_msg`` makes no span of its own."""

    def wrap_service_handler(
        self, endpoint: str, subject: str, handler: Callable[[Msg], None]
    ) -> Callable[[Msg], None]:
        """A micro endpoint's message handler, run instead of ``handler``."""

    def inject(self, headers: Any) -> Any:
        """``headers`` (a mapping or None) with the current trace context added."""

    def js_acked(self, subject: str, error: BaseException | None) -> None:
        """A JetStream publish to ``subject`` was acknowledged (``error`` None) or
        failed."""

    def failed(self, error: BaseException | str) -> None:
        """Marks the current span failed (a micro handler's error answer)."""


#: The client's methods a traced client replaces with traced ones.
TRACED_METHODS = ("publish", "request", "request_future", "request_batch")


class TracedPort(Protocol):
    """The one entry of the client's port a traced client replaces (``publish_inbox``)."""

    publish_inbox: Callable[..., None]


def bind_traced_methods(client: object, port: TracedPort, otel: Instrumentation) -> None:
    """Replaces the client's publish and request methods (``TRACED_METHODS``, as
    instance attributes) and the port's ``publish_inbox`` with the traced ones ``otel``
    makes from them (``Client._instrument``), by name: nothing here imports the client
    or ``nats_sync.otel``."""
    methods: dict[str, Callable[..., Any]] = {
        name: getattr(client, name) for name in TRACED_METHODS
    }
    methods["publish_inbox"] = port.publish_inbox
    otel.wrap_client_methods(methods)
    port.publish_inbox = methods.pop("publish_inbox")
    for name, method in methods.items():
        setattr(client, name, method)

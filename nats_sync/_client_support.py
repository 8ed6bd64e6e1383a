"""What ``connect()`` and ``Client`` need around them: the optional extras' checks
(OpenTelemetry, WebSocket), a close that outlasts Ctrl-C, binding traced methods.

How it works: plain functions, called on the caller's thread; no state, no locks.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from nats_sync._core.transport.pool import parse_server_url
from nats_sync.errors import NotSupportedError

if TYPE_CHECKING:
    from nats_sync._core.components.instrumentation import Instrumentation
    from nats_sync._core.components.port import ClientPort
    from nats_sync._core.handler import Handler
    from nats_sync.otel import InstrumentedClient


def otel_instrument() -> Callable[[InstrumentedClient], object]:
    """``nats_sync.otel.instrument``, imported only now (``tracing=True``).

    Raises:
        NotSupportedError: OpenTelemetry's API is not installed.
    """
    if importlib.util.find_spec("opentelemetry") is None:
        raise NotSupportedError("tracing=True needs OpenTelemetry: pip install 'nats-sync[otel]'")
    from nats_sync import otel  # noqa: PLC0415 - the optional extra, only when asked for

    return otel.instrument


def close_despite_interrupts(handler: Handler) -> None:
    """Closes ``handler``; a second Ctrl-C meanwhile (the first is being raised) only
    makes it wait for the close again, which goes on regardless."""
    while True:
        try:
            handler.close()
            return
        except KeyboardInterrupt:
            continue


def check_websocket_support(urls: Sequence[str]) -> None:
    """Raises NotSupportedError when ``urls`` name a WebSocket server and the optional
    ``wsproto`` is not installed."""
    if any(parse_server_url(url).is_websocket for url in urls) and (
        importlib.util.find_spec("wsproto") is None
    ):
        raise NotSupportedError(
            "ws:// and wss:// servers need wsproto: pip install 'nats-sync[websocket]'"
        )


#: The client's methods a traced client replaces with traced ones.
TRACED_METHODS = ("publish", "request", "request_future", "request_batch")


def bind_traced_methods(client: object, port: ClientPort, otel: Instrumentation) -> None:
    """Replaces the client's publish and request methods (``TRACED_METHODS``, as
    instance attributes) and the port's ``publish_inbox`` with the traced ones ``otel``
    makes from them (``Client._instrument``)."""
    methods: dict[str, Callable[..., Any]] = {
        name: getattr(client, name) for name in TRACED_METHODS
    }
    methods["publish_inbox"] = port.publish_inbox
    otel.wrap_client_methods(methods)
    port.publish_inbox = methods.pop("publish_inbox")
    for name, method in methods.items():
        setattr(client, name, method)

"""Every public call refuses a bad argument the same way: ``InvalidArgumentError``.

That is an ``Error`` and a ``ValueError``, raised before anything is sent, so the client
stays usable afterwards.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
from conftest import ClientFactory

import nats_sync
from nats_sync.msg import Msg
from nats_sync.testing import NatsServer

Call = Callable[[nats_sync.Client], object]

BAD_CALLS: dict[str, tuple[Call, str]] = {
    "flush-zero": (lambda nc: nc.flush(0), "timeout"),
    "flush-bool": (lambda nc: nc.flush(True), "timeout"),
    "drain-negative": (lambda nc: nc.drain(-1), "timeout"),
    "request-zero": (lambda nc: nc.request("arg.x", b"", timeout=0), "timeout"),
    "request-future-nan": (lambda nc: nc.request_future("arg.x", timeout=math.nan), "timeout"),
    "request-batch-negative": (lambda nc: nc.request_batch("arg.x", [b""], timeout=-1), "timeout"),
    "request-batch-in-flight": (
        lambda nc: nc.request_batch("arg.x", [b""], max_in_flight=0),
        "max_in_flight",
    ),
    "subscribe-max-msgs": (lambda nc: nc.subscribe("arg.x", max_msgs=-1), "max_msgs"),
    "subscribe-pending": (
        lambda nc: nc.subscribe("arg.x", pending_msgs_limit="9"),  # type: ignore[arg-type]
        "pending_msgs_limit",
    ),
    "unsubscribe-limit": (lambda nc: nc.subscribe("arg.x").unsubscribe(limit=-1), "limit"),
    "sub-drain-inf": (lambda nc: nc.subscribe("arg.x").drain(math.inf), "timeout"),
    "next-msg-with-callback": (
        lambda nc: nc.subscribe("arg.x", cb=lambda msg: None).next_msg(),
        "callback",
    ),
    "respond-without-reply": (lambda nc: Msg("arg.x", "", b"").respond(b""), "no reply subject"),
    "subject": (lambda nc: nc.publish("bad subject", b""), "subject"),
}


@pytest.mark.parametrize("name", list(BAD_CALLS))
def test_bad_argument_raises_invalid_argument_error(client: nats_sync.Client, name: str) -> None:
    call, named = BAD_CALLS[name]
    with pytest.raises(nats_sync.InvalidArgumentError, match=named) as caught:
        call(client)
    assert isinstance(caught.value, ValueError)
    assert isinstance(caught.value, nats_sync.Error)
    client.flush(5)  # nothing half-done: the client still works
    assert client.is_connected


def test_force_reconnect_when_reconnecting_is_off(connect: ClientFactory) -> None:
    nc = connect(allow_reconnect=False)
    with pytest.raises(nats_sync.InvalidArgumentError, match="allow_reconnect"):
        nc.force_reconnect()
    assert nc.is_connected


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"connect_timeout": 0}, "connect_timeout"),
        ({"drain_timeout": math.nan}, "drain_timeout"),
        ({"flush_timeout": -1}, "flush_timeout"),
        ({"reconnect_time_wait": -1}, "reconnect_time_wait"),
        ({"pending_size": -1}, "pending_size"),
        ({"max_reconnect_attempts": -2}, "max_reconnect_attempts"),
        ({"servers": "gopher://127.0.0.1:4222"}, "scheme"),
    ],
)
def test_bad_connect_option_raises_invalid_argument_error(
    nats_server: NatsServer, options: dict[str, Any], named: str
) -> None:
    options.setdefault("servers", nats_server.url)
    with pytest.raises(nats_sync.InvalidArgumentError, match=named):
        nats_sync.connect(**options)

"""close() leaves no JetStream thread behind: the consume thread and the publish_async
ack timer end before it returns (as the client's own callback threads do)."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

import nats_sync
from nats_sync.testing import NatsServer

pytestmark = pytest.mark.timeout(30)


def js_threads() -> list[str]:
    return [
        t.name
        for t in threading.enumerate()
        if t.name.startswith(("nats_sync-js-consume", "nats_sync-js-acks")) and t.is_alive()
    ]


def test_close_ends_consume_and_ack_threads_before_it_returns(
    jetstream_server: NatsServer, connect: Callable[..., nats_sync.Client]
) -> None:
    nc = connect(servers=jetstream_server.url)
    js = nc.jetstream()
    js.create_stream(name="CL", subjects=["cl.>"])
    for n in range(5):
        js.publish_async("cl.a", b"%d" % n)
    js.publish_async_completed(timeout=10)
    got = threading.Event()
    consumer = js.create_consumer("CL", durable_name="c", ack_policy="explicit")
    consumer.consume(lambda msg: (msg.ack(), got.set()))
    assert got.wait(10)
    assert any(name.startswith("nats_sync-js-consume") for name in js_threads())
    assert any(name.startswith("nats_sync-js-acks") for name in js_threads())
    nc.close()
    assert js_threads() == []

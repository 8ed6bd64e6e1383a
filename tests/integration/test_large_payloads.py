"""Payloads on both sides of the large-payload threshold reach a subscriber intact.

Below ``LARGE_PAYLOAD_THRESHOLD`` a payload is joined into its frame (by the publish hot
path, or by the general path for replies and headers); from it up, the frame is a list
``[control line, payload, CRLF]`` the writer sends as separate buffers. Either way the
bytes on the wire must be the same frame, so a real nats-server (which would drop the
connection on a malformed one) must deliver every payload, exactly, in publish order.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

import nats_sync
from nats_sync import _defaults as d
from nats_sync.testing import NatsServer

ServerFactory = Callable[..., NatsServer]

THRESHOLD = d.LARGE_PAYLOAD_THRESHOLD
KIB = 1024
MIB = 1024 * KIB
#: Each side of the threshold, sizes the threshold was measured at, and up to past the
#: server's default max_payload (the server here allows 8 MiB).
SIZES = sorted(
    {
        0,
        1,
        2,
        1023,
        4 * KIB - 1,
        4 * KIB,
        4 * KIB + 1,
        THRESHOLD - 1,
        THRESHOLD,
        THRESHOLD + 1,
        2 * THRESHOLD,
        16 * KIB,
        64 * KIB + 7,
        256 * KIB,
        MIB - 1,
        MIB,
        MIB + 1,
    }
)


def payload_of(index: int, size: int) -> bytes:
    """Distinct bytes per message, so a swap, a cut or a shift shows."""
    return random.Random(index).randbytes(size)


@pytest.fixture
def big_server(nats_server_factory: ServerFactory) -> NatsServer:
    return nats_server_factory(config="max_payload: 8MB\n")


@pytest.mark.timeout(60)
def test_every_size_around_the_threshold_arrives_intact_and_in_order(
    big_server: NatsServer,
) -> None:
    with nats_sync.connect(big_server.url) as receiver, nats_sync.connect(big_server.url) as nc:
        assert nc.max_payload == 8 * MIB
        sub = receiver.subscribe("big.>", pending_bytes_limit=1 << 30)
        receiver.flush(5)
        sent: list[tuple[str, bytes, str, dict[str, str] | None]] = []
        # Three times over, without waiting in between: the writer takes mixed runs of
        # joined and separate frames, small and large, in one batch.
        for _ in range(3):
            for size in SIZES:
                index = len(sent)
                for reply, headers in (("", None), ("big.reply", None), ("", {"n": str(index)})):
                    data = payload_of(len(sent), size)
                    subject = f"big.{size}"
                    nc.publish(subject, data, reply=reply, headers=headers)
                    sent.append((subject, data, reply, headers))
        nc.flush(30)
        for subject, data, reply, headers in sent:
            msg = sub.next_msg(timeout=10)
            assert (msg.subject, len(msg.data), msg.reply) == (subject, len(data), reply)
            assert msg.data == data
            assert msg.headers == headers
        assert nc.stats["reconnects"] == 0
        assert nc.stats["out_msgs"] == len(sent)
        assert nc.stats["out_bytes"] == sum(len(data) for _, data, _, _ in sent)


@pytest.mark.timeout(60)
def test_requests_around_the_threshold_get_their_own_payload_back(
    big_server: NatsServer,
) -> None:
    """Requests take the general path (a small one may be written from the caller's
    thread) and ``request_batch`` its own chunked one: each size comes back exactly."""

    def echo(msg: nats_sync.Msg) -> None:
        msg.respond(msg.data)

    with nats_sync.connect(big_server.url) as responder, nats_sync.connect(big_server.url) as nc:
        responder.subscribe("big.echo", cb=echo, pending_bytes_limit=1 << 30)
        responder.flush(5)
        payloads = [payload_of(index, size) for index, size in enumerate(SIZES)]
        for data in payloads:
            assert nc.request("big.echo", data, timeout=10).data == data
        replies = nc.request_batch("big.echo", payloads, timeout=20)
        assert [getattr(reply, "data", reply) for reply in replies] == payloads

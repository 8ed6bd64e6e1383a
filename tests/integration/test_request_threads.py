"""Many threads requesting on one connection, over plain TCP and WebSocket: each thread
gets its own replies, and replies that come together (one read) reach every thread,
also threads that make no further request (a design that wakes threads one at a time
must not leave any waiting for a turn; see benchmarks/ANALYSIS.md, issue 33)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
from threads_helper import run_threads

import nats_sync
from nats_sync.testing import NatsServer

ClientFactory = Callable[..., nats_sync.Client]
ServerFactory = Callable[..., NatsServer]

pytestmark = pytest.mark.timeout(60)

WS_CONFIG = "websocket {\n  host: 127.0.0.1\n  port: -1\n  no_tls: true\n}\n"
#: A request's timeout here; a thread left waiting for its turn would take all of it.
REQUEST_TIMEOUT = 6.0


@pytest.fixture(params=["tcp", "websocket"])
def servers(
    request: pytest.FixtureRequest, nats_server: NatsServer, nats_server_factory: ServerFactory
) -> str:
    if request.param == "tcp":
        return nats_server.url
    return nats_server_factory(config=WS_CONFIG).websocket_url()


def test_sixteen_threads_each_get_their_own_replies(connect: ClientFactory, servers: str) -> None:
    responder = connect(servers=servers)
    seen: list[bytes] = []  # on the subscription's one delivery thread

    def echo(msg: nats_sync.Msg) -> None:
        seen.append(msg.data)
        msg.respond(b"re:" + msg.data)

    responder.subscribe("threads.echo", cb=echo)
    responder.flush(5)
    nc = connect(servers=servers)
    wrong: list[tuple[bytes, bytes]] = []

    def requester(index: int) -> None:
        for n in range(150):
            data = b"%d.%d" % (index, n)
            got = nc.request("threads.echo", data, timeout=REQUEST_TIMEOUT).data
            if got != b"re:" + data:
                wrong.append((data, got))

    assert run_threads(16, requester, join_within=50) == []
    assert wrong == []
    # Each request reached the server once, however it was written (by its own thread,
    # by another thread writing its own, or by the writer thread).
    assert sorted(seen) == sorted(b"%d.%d" % (i, n) for i in range(16) for n in range(150))


def test_each_threads_publishes_and_requests_keep_their_order(
    connect: ClientFactory, servers: str
) -> None:
    """Publishes go through the writer, requests may be written by their own or another
    requesting thread: on the wire each thread's messages stay in the order it made them."""
    recorder = connect(servers=servers)
    wire = recorder.subscribe("order.>")
    responder = connect(servers=servers)
    responder.subscribe("order.req.*", cb=lambda msg: msg.respond(b"ok"))
    recorder.flush(5)
    responder.flush(5)
    nc = connect(servers=servers)
    threads_count, rounds = 8, 100

    def worker(index: int) -> None:
        for n in range(rounds):
            nc.publish(f"order.pub.{index}", b"%d" % n)
            nc.request(f"order.req.{index}", b"%d" % n, timeout=REQUEST_TIMEOUT)

    assert run_threads(threads_count, worker, join_within=50) == []
    by_thread: dict[str, list[tuple[str, int]]] = {}
    for _ in range(threads_count * rounds * 2):
        msg = wire.next_msg(5)
        _, kind, index = msg.subject.split(".")
        by_thread.setdefault(index, []).append((kind, int(msg.data)))
    expected = [(kind, n) for n in range(rounds) for kind in ("pub", "req")]
    assert by_thread == {str(i): expected for i in range(threads_count)}


def test_replies_that_come_together_reach_threads_that_request_no_more(
    connect: ClientFactory, servers: str
) -> None:
    """A gate answers 8 requests at once; each requester then leaves (its thread ends)."""
    count = 8
    gate = connect(servers=servers)
    pending = gate.subscribe("threads.gate")
    gate.flush(5)
    nc = connect(servers=servers)
    took: dict[int, float] = {}
    replies: dict[int, bytes] = {}

    def requester(index: int) -> None:
        started = time.monotonic()
        replies[index] = nc.request("threads.gate", b"%d" % index, timeout=REQUEST_TIMEOUT).data
        took[index] = time.monotonic() - started

    threads = [threading.Thread(target=requester, args=(index,)) for index in range(count)]
    for thread in threads:
        thread.start()
    held = [pending.next_msg(5) for _ in range(count)]
    for msg in held:  # all at once: the client reads them in one or a few reads
        msg.respond(b"ok:" + msg.data)
    gate.flush(5)
    for thread in threads:
        thread.join(REQUEST_TIMEOUT + 5)
    assert replies == {index: b"ok:%d" % index for index in range(count)}
    # Liveness, not speed: a thread left for its timeout would take REQUEST_TIMEOUT.
    assert max(took.values()) < REQUEST_TIMEOUT / 2, took

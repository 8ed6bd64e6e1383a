"""Many threads sharing one client: nothing lost, nothing reordered, nothing crossed."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from threads_helper import run_threads

import nats_sync
from nats_sync.msg import Msg

ClientFactory = Callable[..., nats_sync.Client]

PUBLISHERS = 16
PER_PUBLISHER = 5_000
REQUESTERS = 8
PER_REQUESTER = 500


@pytest.mark.timeout(60)
def test_concurrent_publishers_lose_and_reorder_nothing(connect: ClientFactory) -> None:
    total = PUBLISHERS * PER_PUBLISHER
    receiver = connect()
    sub = receiver.subscribe(
        "ts.pub", pending_msgs_limit=2 * total, pending_bytes_limit=64 * 1024 * 1024
    )
    receiver.flush(5)
    publisher = connect()

    def publish_all(index: int) -> None:
        for seq in range(PER_PUBLISHER):
            publisher.publish("ts.pub", f"{index}:{seq}".encode())

    errors = run_threads(PUBLISHERS, publish_all)
    assert errors == []
    publisher.flush(20)
    receiver.flush(20)

    assert sub.dropped == 0
    assert sub.pending_msgs == total
    next_seq = [0] * PUBLISHERS
    out_of_order: list[bytes] = []
    for _ in range(total):
        data = sub.next_msg(1).data
        index, seq = (int(part) for part in data.split(b":"))
        if seq != next_seq[index]:
            out_of_order.append(data)
        next_seq[index] = seq + 1
    assert out_of_order[:5] == []
    assert next_seq == [PER_PUBLISHER] * PUBLISHERS
    assert publisher.stats["out_msgs"] == total
    assert receiver.stats["in_msgs"] == total


@pytest.mark.timeout(60)
def test_concurrent_requesters_each_get_their_own_replies(connect: ClientFactory) -> None:
    responder = connect()

    def echo(msg: Msg) -> None:
        msg.respond(msg.data)

    responder.subscribe("ts.echo", queue="echoers", cb=echo)
    responder.flush(5)
    requester = connect()
    replies: list[list[bytes]] = [[] for _ in range(REQUESTERS)]
    mismatches: list[tuple[bytes, bytes]] = []

    def request_all(index: int) -> None:
        for seq in range(PER_REQUESTER):
            payload = f"{index}:{seq}".encode()
            reply = requester.request("ts.echo", payload, timeout=10)
            if reply.data != payload:
                mismatches.append((payload, reply.data))
            replies[index].append(reply.data)

    errors = run_threads(REQUESTERS, request_all)

    assert errors == []
    assert mismatches == []
    for index in range(REQUESTERS):
        assert replies[index] == [f"{index}:{seq}".encode() for seq in range(PER_REQUESTER)]
    snapshot = requester._handler.debug_snapshot()
    assert snapshot["request_inbox"] is not None
    assert snapshot["requests_in_flight"] == 0
    assert snapshot["late_replies"] == 0


@pytest.mark.timeout(60)
def test_concurrent_subscribe_and_unsubscribe_keep_sids_apart(connect: ClientFactory) -> None:
    nc = connect()
    publisher = connect()
    per_thread = 50

    def churn(index: int) -> None:
        subs = [nc.subscribe(f"ts.churn.{index}.{i}") for i in range(per_thread)]
        nc.flush(10)
        for i in range(per_thread):
            publisher.publish(f"ts.churn.{index}.{i}", f"{index}.{i}".encode())
        publisher.flush(10)
        for i, sub in enumerate(subs):
            msg = sub.next_msg(10)
            assert msg.data == f"{index}.{i}".encode()
            assert msg.sid == sub.sid
            sub.unsubscribe()

    errors = run_threads(8, churn)

    assert errors == []
    assert nc._handler.debug_snapshot()["subscriptions"] == 0
    # After every UNSUB (flushed, so the server has them), nothing published to those
    # subjects reaches the client.
    nc.flush(5)
    in_before = nc.stats["in_msgs"]
    publisher.publish("ts.churn.0.0", b"late")
    publisher.flush(5)
    nc.flush(5)
    assert nc.stats["in_msgs"] == in_before


@pytest.mark.timeout(60)
def test_close_while_threads_publish_ends_each_with_connection_closed(
    connect: ClientFactory,
) -> None:
    nc = connect()
    started = threading.Barrier(9)
    outcomes: list[BaseException | None] = [None] * 8

    def publish_forever(index: int) -> None:
        started.wait(10)
        try:
            while True:
                nc.publish("ts.closing", b"x" * 64)
        except BaseException as err:
            outcomes[index] = err

    threads = [threading.Thread(target=publish_forever, args=(i,), daemon=True) for i in range(8)]
    for thread in threads:
        thread.start()
    started.wait(10)
    nc.close()
    for thread in threads:
        thread.join(10)

    assert not any(thread.is_alive() for thread in threads)
    assert all(isinstance(err, nats_sync.ConnectionClosedError) for err in outcomes), outcomes

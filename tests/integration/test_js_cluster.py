"""An R3 stream on a 3-node JetStream cluster keeps taking publishes and handing them to
a consumer while a node that leads neither the stream nor the consumer restarts."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

import nats_sync
from nats_sync.testing import NatsCluster

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]

ClientFactory = Callable[..., nats_sync.Client]
TOTAL = 600


def test_publish_and_consume_through_a_follower_restart(
    jetstream_cluster: NatsCluster, connect: ClientFactory
) -> None:
    nc = connect(servers=jetstream_cluster.urls, reconnect_time_wait=0.1)
    js = nc.jetstream(timeout=10)
    stream = js.create_stream(name="R3", subjects=["r3.>"], num_replicas=3)
    consumer = js.create_consumer(
        "R3", durable_name="reader", ack_policy="explicit", num_replicas=3
    )
    stream_leader = stream.info().cluster["leader"]  # type: ignore[index]
    consumer_leader = (consumer.info().cluster or {}).get("leader")
    follower = next(
        server
        for server in jetstream_cluster.servers
        if server.name not in (stream_leader, consumer_leader)
    )

    acked: list[int] = []
    publish_errors: list[BaseException] = []

    def publish() -> None:
        for n in range(TOTAL):
            for _ in range(20):  # a publish during the restart may time out: retry it
                try:
                    acked.append(js.publish("r3.x", b"%d" % n, msg_id=f"m{n}", timeout=2).seq)
                    break
                except (nats_sync.TimeoutError, nats_sync.NatsConnectionError) as err:
                    publish_errors.append(err)
            time.sleep(0.002)

    publisher = threading.Thread(target=publish)
    publisher.start()
    seen: dict[int, int] = {}
    restarted = False
    deadline = time.monotonic() + 90
    with consumer.messages(max_messages=100) as reader:
        while len(seen) < TOTAL and time.monotonic() < deadline:
            try:
                msg = reader.next(timeout=1)
            except nats_sync.TimeoutError:
                continue
            seq = msg.metadata.sequence.stream
            seen[seq] = seen.get(seq, 0) + 1
            msg.ack()
            if not restarted and len(seen) == TOTAL // 3:
                follower.restart()
                restarted = True
    publisher.join(60)
    assert restarted
    assert len(acked) == TOTAL, f"{len(publish_errors)} publish errors: {publish_errors[:3]}"
    assert sorted(set(acked)) == list(range(1, TOTAL + 1))  # msg_id kept retries single
    assert sorted(seen) == list(range(1, TOTAL + 1))
    assert stream.info().state.messages == TOTAL


def test_bulk_reads_of_an_r3_stream_from_every_node(
    jetstream_cluster: NatsCluster, connect: ClientFactory
) -> None:
    """Stream.get_msg_columns (Spark's reader) on an R3 stream, through each server in
    turn: the temporary consumer may land on any replica; every read is whole."""
    writer = connect(servers=jetstream_cluster.urls).jetstream(timeout=10)
    writer.create_stream(name="R3BULK", subjects=["bulk.>"], num_replicas=3)
    for n in range(3_000):
        writer.publish_async(f"bulk.{n % 3}", b"%d" % n)
    writer.publish_async_completed(60)
    for server in jetstream_cluster.servers:
        js = connect(servers=[server.url], dont_randomize=True).jetstream(timeout=10)
        seqs = [
            seq for run in js.stream("R3BULK").get_msg_columns(1, batch=500) for seq in run.seqs
        ]
        assert seqs == list(range(1, 3_001)), server.name
        filtered = [
            seq
            for run in js.stream("R3BULK").get_msg_columns(
                1_000, subject="bulk.2", end_seq=2_000, batch=100
            )
            for seq in run.seqs
        ]
        assert filtered == [seq for seq in range(1_000, 2_001) if (seq - 1) % 3 == 2]

"""publish's cached control lines (one per subject, for the last size) under threads,
and what it refuses."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

import nats_sync

ClientFactory = Callable[..., nats_sync.Client]


@pytest.mark.timeout(30)
def test_threads_publishing_changing_sizes_to_one_subject_send_exact_frames(
    connect: ClientFactory,
) -> None:
    receiver = connect()
    sub = receiver.subscribe("pub.sizes", pending_msgs_limit=100_000)
    receiver.flush(5)
    nc = connect()
    expected: list[bytes] = []
    lock = threading.Lock()

    def publish(index: int) -> None:
        for n in range(1_000):
            payload = bytes([65 + index]) * ((n * 7 + index) % 300)
            with lock:
                expected.append(payload)
            nc.publish("pub.sizes", payload)

    threads = [threading.Thread(target=publish, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    nc.flush(10)
    got = [sub.next_msg(timeout=5).data for _ in range(4_000)]
    assert sorted(got) == sorted(expected)  # every frame intact, whatever the interleaving
    for index in range(4):  # and each thread's messages in its order
        mine = [p for p in got if p[:1] == bytes([65 + index])]
        assert mine == [p for p in expected if p[:1] == bytes([65 + index])]


@pytest.mark.timeout(10)
def test_a_reply_subject_must_be_a_str(client: nats_sync.Client) -> None:
    with pytest.raises(TypeError, match="reply must be a str"):
        client.publish("pub.x", b"data", reply=b"bad subject")  # type: ignore[arg-type]
    with pytest.raises(nats_sync.BadSubjectError):
        client.publish("pub.x", b"data", reply="bad subject")
    client.publish("pub.x", b"data", reply="good.reply")
    client.flush(5)

"""A subscription's queue used from two threads at once, as the reader and a user do:
the reader appends without the lock while another thread discards or counts."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from nats_sync._core.components.subscription import _MessageQueue
from nats_sync.msg import Msg

#: How long each race runs: long enough to interleave many times, with or without the GIL.
RACE_SECONDS = 0.5


def race_the_producer(queue: _MessageQueue, other_side: Callable[[], None]) -> int:
    """Appends messages as the reader does (no lock) while ``other_side`` runs in a loop
    on this thread; returns how many were appended."""
    stop = threading.Event()
    appended = [0]

    def produce() -> None:
        count = 0
        while not stop.is_set():
            queue._items.append(Msg("race", data=b"x"))
            queue._bytes_in += 1
            count += 1
        appended[0] = count

    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    try:
        deadline = time.monotonic() + RACE_SECONDS
        while time.monotonic() < deadline:
            other_side()
    finally:
        stop.set()
        producer.join(10)
    assert not producer.is_alive()
    return appended[0]


def test_discard_while_the_reader_appends_counts_every_message_once() -> None:
    queue = _MessageQueue(0, 1 << 40)
    discarded = [0]

    def discard() -> None:
        discarded[0] += queue.discard()

    appended = race_the_producer(queue, discard)
    discarded[0] += queue.discard()

    assert appended > 0
    assert discarded[0] == appended  # none dropped uncounted, none counted twice
    assert queue.bytes == 0


def test_discard_keeps_the_end_marker_behind_what_came_later() -> None:
    queue = _MessageQueue(0, 1 << 40)
    queue._items.append(Msg("race", data=b"x"))
    queue.append_end()
    assert queue.discard() == 1
    assert len(queue) == 0
    assert list(queue._items) == [queue._items[0]] and type(queue._items[0]).__name__ == "_End"


def test_pending_count_while_consumers_take_the_last_message() -> None:
    queue = _MessageQueue(0, 1 << 40)
    counts: list[int] = []

    def count_and_take() -> None:
        counts.append(len(queue))  # raced a consumer popping the tail: IndexError before
        queue.take_ready(1)

    race_the_producer(queue, count_and_take)

    assert counts and min(counts) >= 0

"""The streaming reader's buffer bound and its pickling, driven directly (no Spark job)."""

from __future__ import annotations

import pickle
import time
from collections.abc import Iterator

import pytest

import nats_sync
from nats_sync.spark._options import parse_source_options
from nats_sync.spark._worker import close_worker_clients, worker_client_count
from nats_sync.spark.datasource import NatsStreamReader
from nats_sync.testing import NatsServer

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def reader(server: NatsServer) -> Iterator[NatsStreamReader]:
    # Spark tests run before this one in the same process may have left their in-process
    # clients cached; the count asserted below is this reader's alone.
    close_worker_clients()
    options = {"servers": server.url, "subject": "reader.bound", "max_buffered": "10"}
    yield NatsStreamReader(parse_source_options(options, need_subject=True))
    close_worker_clients()


def test_a_full_buffer_drops_counts_and_keeps_the_first_messages(
    reader: NatsStreamReader, client: nats_sync.Client, caplog: pytest.LogCaptureFixture
) -> None:
    assert reader.initialOffset() == {"received": 0}
    for n in range(50):
        client.publish("reader.bound", str(n).encode())
    client.flush()
    deadline = time.monotonic() + 10
    while reader.dropped < 40:
        assert time.monotonic() < deadline, f"only {reader.dropped} drops counted"
        time.sleep(0.01)
    rows: list[tuple[object, ...]] = []
    offset = {"received": 0}
    while len(rows) < 10:  # the delivery thread may still be moving them into the buffer
        assert time.monotonic() < deadline, f"only {len(rows)} rows reached the buffer"
        batch, offset = reader.read(offset)
        rows += batch
    assert [row[2] for row in rows] == [str(n).encode() for n in range(10)]
    assert offset == {"received": 10}
    assert reader.dropped == 40
    assert "buffer of 10 messages full" in caplog.text or "slow consumer" in caplog.text
    assert worker_client_count() == 1


def test_the_reader_pickles_before_it_subscribes_and_cannot_replay(
    reader: NatsStreamReader,
) -> None:
    copy = pickle.loads(pickle.dumps(reader))
    assert copy.settings == reader.settings
    assert list(copy.readBetweenOffsets({"received": 0}, {"received": 5})) == []

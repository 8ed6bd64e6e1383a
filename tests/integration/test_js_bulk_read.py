"""Stream.get_msg_columns, the bulk reader behind Spark's format("jetstream"): two pulls
kept in flight, byte limits, filters and gaps, against get_msgs (the per-message path)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

import nats_sync
from nats_sync.jetstream import JetStream, StoredColumns
from nats_sync.testing import NatsServer

pytestmark = pytest.mark.timeout(90)

ClientFactory = Callable[..., nats_sync.Client]


@pytest.fixture
def js(jetstream_server: NatsServer, connect: ClientFactory) -> JetStream:
    # 12,345 publish_async in a row: on a loaded 2-core machine (make test beside the
    # matrix) the 4,000 acks in flight can wait past the default 0.2 s stall_wait; the
    # stall is not what these tests are about.
    return connect(servers=jetstream_server.url).jetstream(stall_wait=30)


def _fill(js: JetStream, stream: str, count: int, size: int = 16) -> None:
    js.create_stream(name=stream, subjects=[f"{stream.lower()}.>"])
    for index in range(count):
        payload = (b"%08d" % index).ljust(size, b"x")
        js.publish_async(
            f"{stream.lower()}.{index % 3}",
            payload,
            headers={"i": str(index)} if index % 7 == 0 else None,
        )
    js.publish_async_completed(60)


def _flat(runs: list[StoredColumns]) -> list[tuple[object, ...]]:
    return [
        row
        for run in runs
        for row in zip(
            run.seqs,
            run.subjects,
            run.datas,
            [dict(h) if h else None for h in run.headers],
            strict=True,
        )
    ]


def _slow(js: JetStream, stream: str, **kwargs: object) -> list[tuple[object, ...]]:
    return [
        (m.seq, m.subject, m.data, m.headers)
        for m in js.stream(stream).get_msgs(1, direct=False, **kwargs)
    ]  # type: ignore[arg-type]


def test_columns_equal_the_per_message_read_over_many_pulls(js: JetStream) -> None:
    _fill(js, "BULK", 12_345)
    runs = list(js.stream("BULK").get_msg_columns(1, batch=1_000))
    assert all(len(run) <= 2_000 for run in runs) and len(runs) >= 6
    rows = _flat(runs)
    assert [row[0] for row in rows] == list(range(1, 12_346))
    assert rows == _slow(js, "BULK")
    stamps = [stamp for run in runs for stamp in run.times_ns]
    assert stamps == sorted(stamps) and stamps[0] > 1_700_000_000 * 10**9


def test_a_byte_limit_ends_pulls_early_and_nothing_is_lost(js: JetStream) -> None:
    _fill(js, "BIG", 120, size=300_000)  # 36 MB: several pulls of at most max_bytes
    runs = list(js.stream("BIG").get_msg_columns(1, batch=50, max_bytes=1_000_000))
    assert [row[0] for row in _flat(runs)] == list(range(1, 121))
    assert all(len(data) == 300_000 for run in runs for data in run.datas)


def test_a_range_with_a_filter_gaps_and_an_end(js: JetStream) -> None:
    _fill(js, "GAPS", 3_000)
    stream = js.stream("GAPS")
    stream.purge(subject="gaps.1")
    for seq in range(1_000, 1_100, 3):
        stream.delete_msg(seq)
    for subject, start, end in ((None, 1, None), ("gaps.2", 10, 2_500), (None, 990, 1_101)):
        runs = list(stream.get_msg_columns(start, subject=subject, end_seq=end, batch=256))
        expected = _slow(js, "GAPS", subject=subject)
        expected = [row for row in expected if row[0] >= start and (end is None or row[0] <= end)]  # type: ignore[operator]
        assert _flat(runs) == expected, (subject, start, end)
    assert list(stream.get_msg_columns(3_001)) == []
    assert list(stream.get_msg_columns(5, end_seq=4)) == []

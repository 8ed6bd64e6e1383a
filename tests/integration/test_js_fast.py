"""Fast-ingest batches (ADR-50) against a real ``nats-server -js`` (2.14+): commit and
close counts, gap ``fail`` and ``ok``, the flow the server sets with several publishers
on one connection, lost acks recovered by ping, a paused server, msg_id de-duplication,
ttl, and nats-py reading what the fast publisher stored."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator

import pytest

import nats_sync
from nats_sync.errors import InvalidArgumentError, SlowConsumerError, TimeoutError
from nats_sync.jetstream import (
    BatchAck,
    BatchClosedError,
    BatchGapError,
    BatchMessageError,
    FastBatchNotEnabledError,
    FastBatchUnknownError,
    FastPubAck,
    FastPublisher,
    JetStream,
    JetStreamError,
    NoStreamResponseError,
    PublishAckTimeoutError,
    WrongLastSequenceError,
)
from nats_sync.jetstream._publishing import fast as fast_module
from nats_sync.jetstream._streams.wire import ttl_header
from nats_sync.msg import Msg
from nats_sync.testing import NatsServer

pytestmark = pytest.mark.timeout(60)

ClientFactory = Callable[..., nats_sync.Client]


@pytest.fixture
def connect_js(jetstream_server: NatsServer) -> Iterator[ClientFactory]:
    """``connect_js(**kwargs)``: clients of the JetStream server, closed after the test."""
    made: list[nats_sync.Client] = []

    def factory(**kwargs: object) -> nats_sync.Client:
        nc = nats_sync.connect(jetstream_server.url, **kwargs)  # type: ignore[arg-type]
        made.append(nc)
        return nc

    yield factory
    for nc in made:
        nc.close()


@pytest.fixture
def js(connect_js: ClientFactory) -> JetStream:
    context = connect_js().jetstream()
    context.create_stream(name="FAST", subjects=["fast.>"], allow_batched=True)
    return context


def stored(js: JetStream, stream: str = "FAST") -> int:
    return js.stream_info(stream).state.messages


def add_until_closed(fp: FastPublisher, subject: str, limit: float = 10.0) -> BatchClosedError:
    """Adds until the batch refuses (the server's end travels back asynchronously)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            fp.add(subject, b"after the end")
        except BatchClosedError as err:
            return err
        time.sleep(0.01)
    raise AssertionError(f"the batch was not closed within {limit}s")


# --- the happy path ---------------------------------------------------------------------


@pytest.mark.timeout(120)
def test_100000_messages_are_committed_stored_in_order_and_counted(js: JetStream) -> None:
    count = 100_000
    with js.fast_publisher() as fp:
        for index in range(1, count):
            ack = fp.add("fast.bulk", b"%08d" % index + b"." * 119)
            assert ack.batch_sequence == index
        final = fp.commit("fast.bulk", b"%08d" % count + b"." * 119)
    assert final == BatchAck(stream="FAST", seq=count, batch_id=fp.batch_id, count=count)
    assert fp.is_closed and fp.batch_sequence == count
    assert stored(js) == count
    datas = [data for run in js.stream("FAST").get_msg_columns(batch=20_000) for data in run.datas]
    assert [int(data[:8]) for data in datas] == list(range(1, count + 1))


def test_close_ends_the_batch_without_storing_anything(js: JetStream) -> None:
    with js.fast_publisher() as fp:
        for index in range(10):
            fp.add("fast.eob", str(index).encode())
        # Queued acks are taken (without waiting) and the window is not full.
        assert fp.ack_sequence <= fp.batch_sequence == 10
        fp_final = fp.close()
        assert fp.is_closed
    assert fp_final == BatchAck(stream="FAST", seq=10, batch_id=fp.batch_id, count=10)
    assert stored(js) == 10
    assert js.stream("FAST").get_msg(10).data == b"9"
    assert fp.close() == fp_final  # the with-block's close again: the same final ack
    with pytest.raises(BatchClosedError):
        fp.add("fast.eob", b"late")
    assert stored(js) == 10


def test_a_commit_alone_is_a_one_message_batch(js: JetStream) -> None:
    fp = js.fast_publisher()
    final = fp.commit("fast.one", b"only")
    assert (final.stream, final.seq, final.count) == ("FAST", 1, 1)
    assert fp.is_closed and stored(js) == 1


def test_closing_an_empty_batch_asks_the_server_nothing(js: JetStream) -> None:
    with js.fast_publisher() as fp:
        pass
    assert fp.close() == BatchAck(stream="", seq=0, batch_id=fp.batch_id, count=0)
    assert stored(js) == 0


# --- refusals -------------------------------------------------------------------------------


def test_a_stream_without_allow_batched_refuses_the_first_add(js: JetStream) -> None:
    js.create_stream(name="PLAIN", subjects=["plain.>"])
    fp = js.fast_publisher()
    with pytest.raises(FastBatchNotEnabledError) as raised:
        fp.add("plain.x", b"1")
    assert raised.value.err_code == 10205
    assert fp.is_closed
    with pytest.raises(BatchClosedError) as closed:
        fp.add("plain.x", b"2")
    assert closed.value.__cause__ is raised.value
    assert stored(js, "PLAIN") == 0


def test_a_subject_no_stream_stores_raises_no_stream_response(js: JetStream) -> None:
    with pytest.raises(NoStreamResponseError):
        js.fast_publisher(ack_timeout=5).add("nowhere.x", b"1")


def test_ttl_is_checked_before_anything_is_sent(js: JetStream) -> None:
    fp = js.fast_publisher()
    for ttl in (0, 0.5, -1, True, float("inf"), float("nan"), "forever", "1h"):
        with pytest.raises(InvalidArgumentError, match="ttl"):
            fp.add("fast.ttl", b"x", ttl=ttl)
    assert fp.batch_sequence == 0 and not fp.is_closed
    assert ttl_header(5) == "5"
    assert ttl_header(2.0) == "2"
    assert ttl_header(1.5) == "1"  # whole seconds, as the server keeps
    assert ttl_header("never") == "never"


def test_ttl_is_sent_as_nats_ttl(js: JetStream) -> None:
    js.create_stream(name="TTL", subjects=["ttl.>"], allow_batched=True, allow_msg_ttl=True)
    with js.fast_publisher() as fp:
        fp.add("ttl.a", b"five", ttl=5)
        fp.add("ttl.b", b"never", ttl="never")
        fp.add("ttl.c", b"plain")
    assert fp.close().count == 3
    stream = js.stream("TTL")
    first, second, third = (stream.get_msg(seq) for seq in (1, 2, 3))
    assert first.headers is not None and first.headers["Nats-TTL"] == "5"
    assert second.headers is not None and second.headers["Nats-TTL"] == "never"
    assert not third.headers or "Nats-TTL" not in third.headers


def test_arguments_are_checked(js: JetStream) -> None:
    for kwargs in (
        {"flow": 0},
        {"flow": 65_536},
        {"max_outstanding_acks": 0},
        {"max_outstanding_acks": 11},
        {"ack_timeout": 0},
        {"continue_on_gap": 1},
        {"error_cb": "print"},
    ):
        with pytest.raises(InvalidArgumentError):
            js.fast_publisher(**kwargs)


# --- gap fail and gap ok ----------------------------------------------------------------------


def test_gap_fail_a_failed_check_ends_the_batch_with_the_stored_count(js: JetStream) -> None:
    heard: list[JetStreamError] = []
    fp = js.fast_publisher(error_cb=heard.append)
    for index in range(5):
        fp.add("fast.checked", str(index).encode())
    fp.add("fast.checked", b"wrong", expected_last_subject_seq=999)
    closed = add_until_closed(fp, "fast.checked")
    cause = closed.__cause__
    assert isinstance(cause, BatchMessageError) and cause.seq == 6
    assert isinstance(cause.error, WrongLastSequenceError)
    assert fp.is_closed
    # Neither commit nor close raise for it: both give the server's count.
    final = fp.commit("fast.checked", b"not sent")
    assert (final.stream, final.seq, final.count) == ("FAST", 5, 5)
    assert fp.close() == final
    assert stored(js) == 5
    assert [type(error) for error in heard] == [BatchMessageError]


def test_gap_fail_on_the_first_message_stores_nothing(js: JetStream) -> None:
    fp = js.fast_publisher()
    fp.add("fast.first", b"wrong", expected_last_subject_seq=7)
    closed = add_until_closed(fp, "fast.first")
    assert isinstance(closed.__cause__, BatchMessageError)
    assert closed.__cause__.seq == 1
    final = fp.close()
    assert (final.seq, final.count) == (0, 0)
    assert stored(js) == 0


def test_gap_fail_a_refused_message_leaves_a_gap_that_ends_the_batch(js: JetStream) -> None:
    js.create_stream(name="SMALL", subjects=["small.>"], allow_batched=True, max_msg_size=1024)
    fp = js.fast_publisher()
    for _ in range(3):
        fp.add("small.x", b"ok")
    fp.add("small.x", b"x" * 2000)  # over max_msg_size: refused, never counted
    closed = add_until_closed(fp, "small.x")
    assert isinstance(closed.__cause__, (BatchMessageError, BatchGapError))
    final = fp.close()
    assert (final.seq, final.count) == (3, 3)
    assert stored(js, "SMALL") == 3


def test_gap_ok_reports_to_error_cb_and_goes_on(js: JetStream) -> None:
    js.create_stream(name="SMALL", subjects=["small.>"], allow_batched=True, max_msg_size=1024)
    heard: list[JetStreamError] = []
    # One ack per message, one awaited: each refused message would stall add (no ack
    # covers it) did the publisher not count the server's refusal as its answer.
    fp = js.fast_publisher(
        continue_on_gap=True, error_cb=heard.append, flow=1, max_outstanding_acks=1, ack_timeout=3
    )
    fp.add("small.a", b"1")
    fp.add("small.a", b"2", expected_last_subject_seq=99)  # refused by its check
    fp.add("small.a", b"3")
    fp.add("small.a", b"x" * 2000)  # refused outright: a gap before the next one
    fp.add("small.a", b"5")
    final = fp.commit("small.a", b"6")
    assert not any(isinstance(error, BatchClosedError) for error in heard)
    refused = [error for error in heard if isinstance(error, BatchMessageError)]
    gaps = [error for error in heard if isinstance(error, BatchGapError)]
    assert [error.seq for error in refused] == [2, 4]
    assert isinstance(refused[0].error, WrongLastSequenceError)
    assert [(gap.expected_seq, gap.seq) for gap in gaps] == [(4, 5)]
    assert final.count == 6  # the server counts the batch's sequence, gaps included
    assert [js.stream("SMALL").get_msg(seq).data for seq in (1, 2, 3)] == [b"1", b"3", b"5"]
    assert stored(js, "SMALL") == 4


# --- flow control and lost acks ------------------------------------------------------------


@pytest.mark.timeout(120)
def test_four_threads_on_one_connection_follow_the_servers_flow(js: JetStream) -> None:
    threads, per_thread, max_outstanding = 4, 25_000, 2
    start = threading.Barrier(threads)
    started = threading.Barrier(threads)
    flows: list[tuple[int, int]] = []  # (first, last) flow of each publisher
    finals: list[BatchAck] = []
    failures: list[BaseException] = []

    def publish(worker: int) -> None:
        try:
            with js.fast_publisher(max_outstanding_acks=max_outstanding) as fp:
                start.wait(10)
                fp.add(f"fast.t{worker}", b"0")
                first_flow = fp.flow
                started.wait(10)  # every batch exists before any goes on
                for index in range(1, per_thread):
                    ack = fp.add(f"fast.t{worker}", b"%d" % index)
                    # The window the server's latest flow allows, never more.
                    assert ack.batch_sequence - ack.ack_sequence < fp.flow * max_outstanding
                flows.append((first_flow, fp.flow))
                finals.append(fp.close())
        except BaseException as err:
            failures.append(err)

    workers = [threading.Thread(target=publish, args=(n,)) for n in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(100)
    assert not failures, failures
    # The first batch of a stream starts at our flow; the others at 1 (2 once the first
    # message is acked), and the server doubles theirs up to its share, at most ours.
    assert sorted(first for first, _ in flows)[-1] == 100
    slow_starters = sorted(flows)[:3]
    assert all(first <= 2 < last <= 100 for first, last in slow_starters), flows
    assert [final.count for final in finals] == [per_thread] * threads
    assert stored(js) == threads * per_thread
    for number in range(threads):
        own = js.stream("FAST").get_msgs(subject=f"fast.t{number}")
        assert [int(msg.data) for msg in own] == list(range(per_thread)), number


class AckLosingPublisher(FastPublisher):
    """Loses every flow ack that answers an appended message, as a lossy path would;
    the answers to pings (op 4) and the final ack get through."""

    lost = 0

    def _take(self, msgs: list[Msg]) -> None:
        kept = [
            msg
            for msg in msgs
            if not (msg.subject.endswith(".1.$FI") and b'"type":"ack"' in msg.data)
        ]
        self.lost += len(msgs) - len(kept)
        super()._take(kept)


def test_lost_acks_are_recovered_by_ping(js: JetStream) -> None:
    count, flow = 100, 20
    fp = AckLosingPublisher(js, flow=flow, max_outstanding_acks=1, ack_timeout=1)
    acks = [fp.add("fast.lossy", b"%d" % index) for index in range(count)]
    final = fp.close()
    assert final.count == count and stored(js) == count
    assert fp.lost >= count // flow - 1  # the server acked, the publisher never saw it
    assert fp._pings >= count // flow - 1  # each window full: a ping got the ack again
    assert acks[-1].ack_sequence == count  # from the repeated ack a ping asked for
    assert all(ack.batch_sequence - ack.ack_sequence < flow for ack in acks)


def test_an_inbox_dropping_answers_still_ends_in_the_right_count(
    js: JetStream, connect_js: ClientFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An inbox that holds one answer: acks arriving back to back are really dropped.
    monkeypatch.setattr(fast_module, "_INBOX_PENDING_MSGS", 1)
    slow: list[BaseException] = []
    context = connect_js(error_cb=slow.append).jetstream()
    count = 2000
    fp = context.fast_publisher(flow=1, max_outstanding_acks=10, ack_timeout=5)
    for index in range(count):
        fp.add("fast.lossy", b"%d" % index)
    assert any(isinstance(error, SlowConsumerError) for error in slow)  # acks were lost
    try:
        final = fp.close()
    except FastBatchUnknownError:
        # The final ack itself was dropped: the server forgot the batch after sending
        # it, so no count can be had; what was stored is still all of it.
        pass
    else:
        assert final.count == count
    assert stored(js) == count


def test_a_server_paused_shorter_than_ack_timeout_changes_nothing(
    js: JetStream, jetstream_server: NatsServer
) -> None:
    fp = js.fast_publisher(flow=10, max_outstanding_acks=1, ack_timeout=10)
    for index in range(50):
        fp.add("fast.pause", b"%d" % index)
    with jetstream_server.paused():
        resumer = threading.Timer(0.5, jetstream_server.resume)
        resumer.start()
        try:
            for index in range(50, 100):  # blocks on the window until the server is back
                fp.add("fast.pause", b"%d" % index)
        finally:
            resumer.join()
    assert fp.close().count == 100
    assert stored(js) == 100


def test_no_ack_within_ack_timeout_raises_and_closes_the_batch(
    js: JetStream, jetstream_server: NatsServer
) -> None:
    fp = js.fast_publisher(flow=10, max_outstanding_acks=1, ack_timeout=0.5)
    fp.add("fast.stuck", b"first")
    began = time.monotonic()
    with jetstream_server.paused(), pytest.raises(PublishAckTimeoutError) as raised:
        for _ in range(100):
            fp.add("fast.stuck", b"more")
    assert isinstance(raised.value, TimeoutError)
    assert 0.5 <= time.monotonic() - began < 5
    assert fp.is_closed
    with pytest.raises(BatchClosedError) as closed:
        fp.add("fast.stuck", b"late")
    assert closed.value.__cause__ is raised.value
    with pytest.raises(BatchClosedError):
        fp.close()


# --- msg_id --------------------------------------------------------------------------------


def test_msg_id_dedupes_within_a_batch_and_across_batches(js: JetStream) -> None:
    def batch() -> BatchAck:
        with js.fast_publisher() as fp:
            for index in range(50):
                fp.add("fast.ids", b"%d" % index, msg_id=f"id-{index}")
            for index in range(10):  # repeated inside the same batch
                fp.add("fast.ids", b"again", msg_id=f"id-{index}")
            return fp.close()

    first = batch()
    assert (first.seq, first.count) == (50, 60)
    assert stored(js) == 50
    again = batch()  # all duplicates: nothing new, seq 0, every message counted
    assert (again.seq, again.count) == (0, 60)
    assert stored(js) == 50


def test_add_returns_a_fast_pub_ack(js: JetStream) -> None:
    with js.fast_publisher(flow=2, max_outstanding_acks=1) as fp:
        acks = [fp.add("fast.acks", b"x") for _ in range(6)]
    assert all(isinstance(ack, FastPubAck) for ack in acks)
    assert [ack.batch_sequence for ack in acks] == [1, 2, 3, 4, 5, 6]
    # With flow 2 and one outstanding ack, add waits until the one before is acked.
    assert all(ack.batch_sequence - ack.ack_sequence < 2 for ack in acks)
    assert acks[0] == FastPubAck(batch_sequence=1, ack_sequence=0)


# --- interop ---------------------------------------------------------------------------------


def test_nats_py_reads_what_the_fast_publisher_stored(
    js: JetStream, jetstream_server: NatsServer
) -> None:
    import nats

    sent = [
        (f"fast.py.{index % 3}", b"payload %d" % index, {"K": str(index)} if index % 2 else None)
        for index in range(200)
    ]
    with js.fast_publisher() as fp:
        for subject, data, headers in sent[:-1]:
            fp.add(subject, data, headers=headers)
        subject, data, headers = sent[-1]
        assert fp.commit(subject, data, headers=headers).count == len(sent)

    async def read() -> list[tuple[str, bytes, dict[str, str] | None]]:
        nc = await nats.connect(jetstream_server.url)
        try:
            sub = await nc.jetstream().pull_subscribe("fast.py.>", durable="py", stream="FAST")
            got: list[tuple[str, bytes, dict[str, str] | None]] = []
            while len(got) < len(sent):
                for msg in await sub.fetch(len(sent) - len(got), timeout=5):
                    got.append((msg.subject, msg.data, msg.headers or None))
                    await msg.ack()
            return got
        finally:
            await nc.close()

    assert asyncio.run(read()) == sent


def test_an_add_that_waits_while_the_batch_ends_raises(js: JetStream) -> None:
    # One ack per message, one awaited: the refused message's own add waits for room,
    # and the server's end of the batch comes while it waits.
    fp = js.fast_publisher(flow=1, max_outstanding_acks=1, ack_timeout=5)
    fp.add("fast.wait", b"1")
    with pytest.raises(BatchClosedError) as closed:
        fp.add("fast.wait", b"2", expected_last_subject_seq=99)
    assert "10071" in str(closed.value.__cause__)
    assert fp.close().count == 1
    assert stored(js) == 1

"""JetStream publishing against a real ``nats-server -js``: acks, de-duplication,
expectations, no stream, publish_async (order, the window, timeouts, close), publish_batch,
headers, and interop with nats-py's JetStream."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future

import pytest

import nats_sync
from nats_sync import _defaults as d
from nats_sync.jetstream import (
    APIError,
    BadRequestError,
    JetStream,
    NoStreamResponseError,
    PubAck,
    PublishAckTimeoutError,
    StreamNotMatchError,
    TooManyStalledMsgsError,
    WrongLastMsgIdError,
    WrongLastSequenceError,
)
from nats_sync.testing import NatsCluster, NatsServer

pytestmark = pytest.mark.timeout(60)

ClientFactory = Callable[..., nats_sync.Client]


@pytest.fixture
def js(jetstream_server: NatsServer, connect: ClientFactory) -> JetStream:
    context = connect(servers=jetstream_server.url).jetstream()
    context.create_stream(name="ORDERS", subjects=["orders.>"])
    return context


# --- publish ---------------------------------------------------------------------------


def test_publish_returns_the_ack(js: JetStream) -> None:
    first = js.publish("orders.new", b"one")
    second = js.publish("orders.new", b"two")
    assert first == PubAck(stream="ORDERS", seq=1, duplicate=False, domain=None)
    assert (second.stream, second.seq, second.duplicate) == ("ORDERS", 2, False)
    assert js.stream("ORDERS").get_msg(2).data == b"two"


def test_msg_id_dedupes_within_the_window(js: JetStream) -> None:
    first = js.publish("orders.new", b"a", msg_id="order-1")
    again = js.publish("orders.new", b"a (retried)", msg_id="order-1")
    other = js.publish("orders.new", b"b", msg_id="order-2")
    assert (first.seq, first.duplicate) == (1, False)
    assert (again.seq, again.duplicate) == (1, True)
    assert (other.seq, other.duplicate) == (2, False)
    assert js.stream("ORDERS").info().state.messages == 2
    assert js.stream("ORDERS").get_msg(1).data == b"a"


def test_expected_last_sequence(js: JetStream) -> None:
    js.publish("orders.a", b"1")
    js.publish("orders.b", b"2")
    with pytest.raises(WrongLastSequenceError) as raised:
        js.publish("orders.a", b"3", expected_last_seq=1)
    assert raised.value.err_code == 10071 and raised.value.code == 400
    assert isinstance(raised.value, BadRequestError)
    assert js.publish("orders.a", b"3", expected_last_seq=2).seq == 3
    assert js.publish("orders.new", b"first on its subject", expected_last_seq=3).seq == 4


def test_expected_last_subject_sequence(js: JetStream) -> None:
    js.publish("orders.a", b"1")
    js.publish("orders.b", b"2")
    with pytest.raises(WrongLastSequenceError):
        js.publish("orders.a", b"3", expected_last_subject_seq=2)  # 2 is orders.b's
    assert js.publish("orders.a", b"3", expected_last_subject_seq=1).seq == 3
    # 0: the subject must have nothing yet (how key-value's create works).
    with pytest.raises(WrongLastSequenceError):
        js.publish("orders.a", b"4", expected_last_subject_seq=0)
    assert js.publish("orders.c", b"4", expected_last_subject_seq=0).seq == 4


def test_expected_last_msg_id(js: JetStream) -> None:
    js.publish("orders.a", b"1", msg_id="m1")
    with pytest.raises(WrongLastMsgIdError) as raised:
        js.publish("orders.a", b"2", msg_id="m2", expected_last_msg_id="nope")
    assert raised.value.err_code == 10070
    assert js.publish("orders.a", b"2", msg_id="m2", expected_last_msg_id="m1").seq == 2


def test_expected_stream(js: JetStream) -> None:
    with pytest.raises(StreamNotMatchError) as raised:
        js.publish("orders.a", b"x", expected_stream="INVOICES")
    assert raised.value.err_code == 10060
    assert js.publish("orders.a", b"x", expected_stream="ORDERS").seq == 1
    assert js.stream("ORDERS").info().state.messages == 1


def test_no_stream_raises_after_the_retries(js: JetStream) -> None:
    started = time.monotonic()
    with pytest.raises(NoStreamResponseError) as raised:
        js.publish("nowhere.a", b"x", retry_attempts=2, retry_wait=0.3)
    elapsed = time.monotonic() - started
    assert 0.6 <= elapsed < 5.0
    assert "'nowhere.a'" in str(raised.value)
    started = time.monotonic()
    with pytest.raises(NoStreamResponseError):
        js.publish("nowhere.a", b"x", retry_attempts=0, retry_wait=5.0)
    assert time.monotonic() - started < 4.0  # no retry: the 5 s wait never happens


def test_a_publish_whose_ack_times_out_is_not_retried(js: JetStream) -> None:
    # A plain subscriber takes the message and never answers: no ack comes.
    silent = js.client.subscribe("silent.x")
    js.client.flush()
    started = time.monotonic()
    with pytest.raises(PublishAckTimeoutError) as raised:
        js.publish("silent.x", b"x", timeout=0.5, retry_attempts=3)
    assert time.monotonic() - started >= 0.5
    assert isinstance(raised.value, TimeoutError)
    assert isinstance(raised.value, nats_sync.TimeoutError)
    assert silent.next_msg(1).data == b"x"
    with pytest.raises(nats_sync.TimeoutError):
        silent.next_msg(0.5)  # sent once: a retry could have stored it twice


def test_headers_round_trip(js: JetStream) -> None:
    ack = js.publish(
        "orders.h", b"body", headers={"Trace": "t-1", "Multi": ["a", "b"]}, msg_id="h-1"
    )
    stored = js.stream("ORDERS").get_msg(ack.seq)
    assert stored.data == b"body" and stored.subject == "orders.h"
    assert stored.headers is not None
    assert stored.headers["Trace"] == "t-1"
    assert stored.headers["Multi"] == ["a", "b"]
    assert stored.headers["Nats-Msg-Id"] == "h-1"


def test_a_failed_publish_names_the_error_and_keeps_nothing(js: JetStream) -> None:
    js.update_stream(name="ORDERS", subjects=["orders.>"], max_msg_size=16)
    with pytest.raises(APIError) as raised:
        js.publish("orders.big", b"x" * 100)
    assert raised.value.code == 400 and raised.value.err_code
    assert js.stream("ORDERS").info().state.messages == 0


# --- publish_async ----------------------------------------------------------------------


def test_ten_thousand_async_acks_in_publish_order(js: JetStream) -> None:
    futures = [js.publish_async("orders.bulk", b"%d" % n) for n in range(10_000)]
    js.publish_async_completed(timeout=30)
    assert js.publish_async_pending() == 0
    acks = [future.result(0) for future in futures]
    assert [ack.seq for ack in acks] == list(range(1, 10_001))
    assert all(ack.stream == "ORDERS" and not ack.duplicate for ack in acks)
    assert js.stream("ORDERS").get_msg(10_000).data == b"9999"


def test_async_errors_land_in_the_future(js: JetStream) -> None:
    js.publish("orders.a", b"1", msg_id="m1")
    wrong_seq = js.publish_async("orders.a", b"2", expected_last_seq=7)
    wrong_id = js.publish_async("orders.a", b"2", expected_last_msg_id="m0")
    duplicate = js.publish_async("orders.a", b"1 again", msg_id="m1")
    assert isinstance(wrong_seq.exception(10), WrongLastSequenceError)
    assert isinstance(wrong_id.exception(10), WrongLastMsgIdError)
    assert duplicate.result(10) == PubAck(stream="ORDERS", seq=1, duplicate=True)
    assert not wrong_seq.cancel()  # a published message cannot be taken back


def test_async_without_a_stream_fails_after_the_retries(js: JetStream) -> None:
    started = time.monotonic()
    future = js.publish_async("nowhere.b", b"x", retry_attempts=2, retry_wait=0.3)
    assert isinstance(future.exception(10), NoStreamResponseError)
    assert 0.6 <= time.monotonic() - started < 5.0
    assert js.publish_async_pending() == 0


def test_async_retries_until_the_stream_exists(js: JetStream) -> None:
    future = js.publish_async("later.x", b"x", retry_attempts=20, retry_wait=0.1)
    time.sleep(0.3)
    assert not future.done()  # still retrying: the stream is not there yet
    js.create_stream(name="LATER", subjects=["later.>"])
    assert future.result(10) == PubAck(stream="LATER", seq=1)


def test_the_window_stalls_then_raises(
    jetstream_server: NatsServer, connect: ClientFactory
) -> None:
    js = connect(servers=jetstream_server.url).jetstream(max_pending_acks=10, stall_wait=0.4)
    js.create_stream(name="S", subjects=["s.>"])
    js.publish("s.warm", b"")
    with jetstream_server.paused():
        futures = [js.publish_async("s.x", b"%d" % n) for n in range(10)]
        assert js.publish_async_pending() == 10
        started = time.monotonic()
        with pytest.raises(TooManyStalledMsgsError):
            js.publish_async("s.x", b"one too many")
        assert 0.4 <= time.monotonic() - started < 3.0
    assert [future.result(10).seq for future in futures] == list(range(2, 12))
    assert js.publish_async("s.x", b"room again").result(10).seq == 12


def test_a_stalled_publish_goes_on_when_an_ack_frees_room(js: JetStream) -> None:
    window = js.client.jetstream(max_pending_acks=2, stall_wait=10.0)
    silent = js.client.subscribe("silent.y")  # never answers: those acks time out
    js.client.flush()
    first = window.publish_async("silent.y", b"", timeout=0.5)
    window.publish_async("silent.y", b"", timeout=10.0)
    started = time.monotonic()
    third = window.publish_async("orders.c", b"3")  # waits for the first to time out
    assert 0.4 <= time.monotonic() - started < 5.0
    assert isinstance(first.exception(0), PublishAckTimeoutError)
    assert third.result(10).seq == 1
    silent.unsubscribe()


def test_an_ack_timeout_fails_the_future(
    jetstream_server: NatsServer, connect: ClientFactory
) -> None:
    js = connect(servers=jetstream_server.url).jetstream()
    js.create_stream(name="S", subjects=["s.>"])
    with jetstream_server.paused():
        started = time.monotonic()
        short = js.publish_async("s.x", b"short", timeout=0.5)
        longer = js.publish_async("s.x", b"longer", timeout=1.0)
        error = short.exception(10)
        assert isinstance(error, PublishAckTimeoutError)
        assert isinstance(error, TimeoutError)
        assert 0.5 <= time.monotonic() - started < 5.0
        assert isinstance(longer.exception(10), PublishAckTimeoutError)
        assert time.monotonic() - started >= 1.0
        assert js.publish_async_pending() == 0
    # The late acks find nobody waiting; the stream did store both.
    assert js.publish("s.x", b"after").seq == 3


def test_close_fails_the_pending_acks(jetstream_server: NatsServer, connect: ClientFactory) -> None:
    nc = connect(servers=jetstream_server.url)
    js = nc.jetstream()
    js.create_stream(name="S", subjects=["s.>"])
    with jetstream_server.paused():
        futures = [js.publish_async("s.x", b"x", timeout=30) for _ in range(3)]
        nc.close()
        for future in futures:
            assert isinstance(future.exception(10), nats_sync.ConnectionClosedError)
    assert js.publish_async_pending() == 0
    with pytest.raises(nats_sync.ConnectionClosedError):
        js.publish_async("s.x", b"after close")


def test_publish_async_completed_waits_and_times_out(
    jetstream_server: NatsServer, connect: ClientFactory
) -> None:
    js = connect(servers=jetstream_server.url).jetstream()
    js.create_stream(name="S", subjects=["s.>"])
    js.publish_async_completed(timeout=0.1)  # nothing in flight: at once
    with jetstream_server.paused():
        future = js.publish_async("s.x", b"x", timeout=20)
        started = time.monotonic()
        with pytest.raises(nats_sync.TimeoutError):
            js.publish_async_completed(timeout=0.4)
        assert 0.4 <= time.monotonic() - started < 3.0
        assert js.publish_async_pending() == 1
    js.publish_async_completed(timeout=10)
    assert future.done() and future.result(0).seq == 1


def test_done_callbacks_run_off_the_reader_and_may_publish_again(js: JetStream) -> None:
    window = js.client.jetstream(max_pending_acks=1, stall_wait=0.2)
    seen: list[tuple[str, int]] = []
    chained: list[Future[PubAck]] = []
    done = threading.Event()

    def on_done(future: Future[PubAck]) -> None:
        seen.append((threading.current_thread().name, future.result().seq))
        if len(chained) < 3:
            # The window is full (this one is still counted): it must not wait for itself.
            chained.append(window.publish_async("orders.chain", b"next"))
            chained[-1].add_done_callback(on_done)
        else:
            done.set()

    window.publish_async("orders.chain", b"first").add_done_callback(on_done)
    assert done.wait(10)
    assert [seq for _, seq in seen] == [1, 2, 3, 4]
    assert all(name.startswith("nats_sync-") and name != "nats_sync-reader" for name, _ in seen)


def test_the_idle_session_ends_its_thread_and_comes_back(
    js: JetStream,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(d, "JS_ACK_TIMER_IDLE_EXIT", 0.3)
    assert js.publish_async("orders.a", b"1").result(10).seq == 1
    deadline = time.monotonic() + 5
    while any(t.name == "nats_sync-js-acks" for t in threading.enumerate()):
        assert time.monotonic() < deadline, "the ack timer thread did not end when idle"
        time.sleep(0.05)
    assert js.publish_async("orders.a", b"2").result(10).seq == 2


@pytest.mark.timeout(90)
def test_async_publishing_across_a_server_restart(
    jetstream_server: NatsServer, connect: ClientFactory
) -> None:
    nc = connect(servers=jetstream_server.url, reconnect_time_wait=0.1, max_reconnect_attempts=-1)
    js = nc.jetstream()
    js.create_stream(name="S", subjects=["s.>"])
    assert [f.result(10).seq for f in [js.publish_async("s.x", b"") for _ in range(100)]] == list(
        range(1, 101)
    )
    jetstream_server.restart()
    deadline = time.monotonic() + 20
    while not nc.is_connected:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    js.stream("S")  # JetStream answers again
    futures = [js.publish_async("s.x", b"") for _ in range(100)]
    assert [f.result(10).seq for f in futures] == list(range(101, 201))


# --- publish_batch ----------------------------------------------------------------------


def test_publish_batch_one_result_per_item_in_order(js: JetStream) -> None:
    js.update_stream(name="ORDERS", subjects=["orders.>"], max_msg_size=64)
    payloads: list[bytes] = [b"a", b"b", b"x" * 200, b"c", "not bytes", b"d"]  # type: ignore[list-item]
    results = js.publish_batch("orders.batch", payloads)
    assert len(results) == 6
    assert [r.seq for r in results if isinstance(r, PubAck)] == [1, 2, 3, 4]
    assert isinstance(results[2], BadRequestError)  # too big for the stream
    assert isinstance(results[4], (TypeError, ValueError))
    assert [isinstance(r, PubAck) for r in results] == [True, True, False, True, False, True]
    assert js.stream("ORDERS").get_msg(3).data == b"c"


def test_publish_batch_without_a_stream_and_with_headers(js: JetStream) -> None:
    results = js.publish_batch("nowhere.c", [b"1", b"2"])
    assert all(isinstance(r, NoStreamResponseError) for r in results) and len(results) == 2
    acks = js.publish_batch("orders.h", [b"1", b"2"], headers={"K": "v"})
    assert [a.seq for a in acks if isinstance(a, PubAck)] == [1, 2]
    assert js.stream("ORDERS").get_msg(2).headers == {"K": "v"}


def test_publish_batch_of_many(js: JetStream) -> None:
    results = js.publish_batch("orders.many", [b"%d" % n for n in range(5000)])
    assert [r.seq for r in results if isinstance(r, PubAck)] == list(range(1, 5001))


# --- interop with nats-py ---------------------------------------------------------------


def test_nats_py_publishes_and_we_read(js: JetStream, jetstream_server: NatsServer) -> None:
    import nats

    async def publish() -> list[int]:
        nc = await nats.connect(jetstream_server.url)
        try:
            theirs = nc.jetstream()
            first = await theirs.publish(
                "orders.py", b"from nats-py", headers={"Nats-Msg-Id": "py-1", "K": "v"}
            )
            again = await theirs.publish("orders.py", b"again", headers={"Nats-Msg-Id": "py-1"})
            return [first.seq, again.seq, int(bool(again.duplicate))]
        finally:
            await nc.close()

    assert asyncio.run(publish()) == [1, 1, 1]
    stored = js.stream("ORDERS").get_msg(1)
    assert stored.data == b"from nats-py" and stored.headers is not None
    assert stored.headers["K"] == "v" and stored.headers["Nats-Msg-Id"] == "py-1"
    # Our msg_id de-duplicates against theirs: same header, same window.
    assert js.publish("orders.py", b"ours", msg_id="py-1") == PubAck(
        stream="ORDERS", seq=1, duplicate=True
    )


def test_we_publish_and_nats_py_reads(js: JetStream, jetstream_server: NatsServer) -> None:
    import nats

    js.publish("orders.sync", b"one", headers={"K": "1"}, msg_id="ours-1")
    js.publish_async("orders.async", b"two").result(10)
    js.publish_batch("orders.batch", [b"three"])

    async def read() -> tuple[bytes, dict[str, str] | None, list[bytes]]:
        nc = await nats.connect(jetstream_server.url)
        try:
            theirs = nc.jetstream()
            first = await theirs.get_msg("ORDERS", 1)
            sub = await theirs.pull_subscribe("orders.>", durable="py", stream="ORDERS")
            fetched = await sub.fetch(3, timeout=5)
            for msg in fetched:
                await msg.ack()
            return first.data or b"", first.headers, [msg.data for msg in fetched]
        finally:
            await nc.close()

    data, headers, fetched = asyncio.run(read())
    assert data == b"one"
    assert headers is not None and headers["K"] == "1" and headers["Nats-Msg-Id"] == "ours-1"
    assert fetched == [b"one", b"two", b"three"]


# --- a replicated stream ------------------------------------------------------------------


@pytest.mark.timeout(90)
def test_publishing_to_a_three_replica_stream(
    jetstream_cluster: NatsCluster, connect: ClientFactory
) -> None:
    # Each client on its own server: at most one of them talks to the stream's leader.
    contexts = [
        connect(servers=server.url).jetstream(timeout=10) for server in jetstream_cluster.servers
    ]
    contexts[0].create_stream(name="R3", subjects=["r3.>"], num_replicas=3)
    seqs = [js.publish("r3.a", b"%d" % n, msg_id=f"id-{n}").seq for n, js in enumerate(contexts)]
    assert seqs == [1, 2, 3]
    assert contexts[2].publish("r3.a", b"0", msg_id="id-0").duplicate
    with pytest.raises(WrongLastSequenceError):  # 10071, or 10164 on a replicated stream
        contexts[1].publish("r3.a", b"x", expected_last_seq=1)
    futures = [contexts[n % 3].publish_async("r3.b", b"") for n in range(300)]
    for js in contexts:
        js.publish_async_completed(timeout=30)
    assert sorted(future.result(0).seq for future in futures) == list(range(4, 304))
    results = contexts[1].publish_batch("r3.c", [b"1", b"2", b"3"])
    assert [r.seq for r in results if isinstance(r, PubAck)] == [304, 305, 306]


def test_results_awaited_while_the_acks_arrive_are_all_acks(js: JetStream) -> None:
    # A caller blocked in result() when the ack lands gets the decoded PubAck, never the
    # kept bytes' placeholder (the CLI's pub --js reads its window this way).
    futures = [js.publish_async("orders.awaited", b"%d" % n) for n in range(3000)]
    seqs = [future.result(timeout=30).seq for future in futures]
    assert seqs == list(range(1, 3001))

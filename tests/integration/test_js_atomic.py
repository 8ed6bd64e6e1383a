"""Atomic batches (ADR-50) against a real ``nats-server -js`` (2.15): all or nothing, the
feature check on the first message, the 1,000-message limit (ours and the server's),
discard (at once and after the server's idle abandon), msg-id de-duplication, the
end-of-batch commit, ``publish_atomic``, the BatchAck, TTLs, and nats-py reading back
what a batch stored."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator

import pytest

import nats_sync
from nats_sync.errors import InvalidArgumentError
from nats_sync.jetstream import (
    APIError,
    AtomicBatch,
    AtomicBatchNotEnabledError,
    AtomicBatchTooManyInflightError,
    BatchAck,
    BatchClosedError,
    BatchDuplicateMsgIdError,
    BatchIncompleteError,
    BatchTooLargeError,
    BatchUnsupportedHeaderError,
    JetStream,
    NoStreamResponseError,
    PublishAckTimeoutError,
    StoredMsg,
    WrongLastSequenceError,
)
from nats_sync.testing import NatsServer

pytestmark = pytest.mark.timeout(60)

ClientFactory = Callable[..., nats_sync.Client]
ServerFactory = Callable[..., NatsServer]

#: The server's batch limits made small, so limits and the idle abandon show quickly.
SMALL_BATCH_LIMITS = (
    'jetstream { limits { batch { max_msgs: 5, timeout: "1s", max_inflight_per_stream: 3 } } }'
)


@pytest.fixture
def js(jetstream_server: NatsServer, connect: ClientFactory) -> JetStream:
    context = connect(servers=jetstream_server.url).jetstream()
    context.create_stream(name="ORDERS", subjects=["orders.>"], allow_atomic=True)
    return context


@pytest.fixture
def wire(
    js: JetStream, jetstream_server: NatsServer, connect: ClientFactory
) -> Iterator[Callable[[], int]]:
    """``wire()``: how many messages were published on ``orders.>`` so far, as a core
    subscriber of another connection sees them (a batch's messages cross the wire as
    they are added, committed or not)."""
    watcher_client = connect(servers=jetstream_server.url)
    watcher = watcher_client.subscribe("orders.>")
    watcher_client.flush()

    def seen() -> int:
        js.client.flush()  # our publishes reached the server, and so its deliveries ...
        watcher_client.flush()  # ... reached the watcher before this PONG
        return watcher.pending_msgs

    yield seen


def stored(js: JetStream, stream: str = "ORDERS") -> list[StoredMsg]:
    return list(js.stream(stream).get_msgs(1))


def message_count(js: JetStream, stream: str = "ORDERS") -> int:
    return js.stream(stream).info().state.messages


# --- commit -----------------------------------------------------------------------------


def test_commit_with_a_last_message_stores_all_and_returns_the_batch_ack(js: JetStream) -> None:
    js.publish("orders.before", b"not in the batch")
    with js.atomic_batch() as batch:
        assert isinstance(batch, AtomicBatch) and batch.size == 0
        batch.add("orders.1", b"one")
        batch.add("orders.2", b"two", headers={"K": "v"})
        batch.add("orders.3", b"three")
        ack = batch.commit("orders.4", b"four")
        assert batch.is_closed and batch.size == 4

    assert ack == BatchAck(stream="ORDERS", seq=5, batch_id=batch.batch_id, count=4, domain=None)
    assert len(batch.batch_id) <= 64
    messages = stored(js)
    assert [(m.seq, m.subject, m.data) for m in messages[1:]] == [
        (2, "orders.1", b"one"),
        (3, "orders.2", b"two"),
        (4, "orders.3", b"three"),
        (5, "orders.4", b"four"),
    ]
    for position, message in enumerate(messages[1:], start=1):
        assert message.headers is not None
        assert message.headers["Nats-Batch-Id"] == batch.batch_id
        assert message.headers["Nats-Batch-Sequence"] == str(position)
    assert messages[2].headers is not None and messages[2].headers["K"] == "v"
    assert messages[4].headers is not None and messages[4].headers["Nats-Batch-Commit"] == "1"


def test_end_of_batch_commit_stores_exactly_the_added_messages(js: JetStream) -> None:
    with js.atomic_batch() as batch:
        for number in range(3):
            batch.add(f"orders.{number}", b"payload %d" % number)
        ack = batch.commit()  # no message: the end-of-batch marker, not stored

    assert (ack.seq, ack.count, ack.batch_id) == (3, 3, batch.batch_id)
    messages = stored(js)
    assert [m.data for m in messages] == [b"payload 0", b"payload 1", b"payload 2"]
    # The server marks the last stored message as the commit.
    assert messages[-1].headers is not None
    assert messages[-1].headers["Nats-Batch-Commit"] == "1"
    assert batch.size == 3


def test_a_single_message_batch_is_its_own_commit(js: JetStream) -> None:
    batch = js.atomic_batch()
    ack = batch.commit("orders.only", b"alone")
    assert (ack.seq, ack.count) == (1, 1)
    assert stored(js)[0].data == b"alone"


def test_a_batch_is_closed_after_commit_and_discard_is_then_harmless(js: JetStream) -> None:
    with js.atomic_batch() as batch:
        batch.add("orders.1")
        batch.commit()
    batch.discard()  # after a commit: nothing to do, the batch stays stored
    with pytest.raises(BatchClosedError):
        batch.add("orders.2")
    with pytest.raises(BatchClosedError):
        batch.commit("orders.2")
    assert message_count(js) == 1


def test_commit_refuses_an_empty_batch_and_data_without_a_subject(js: JetStream) -> None:
    with js.atomic_batch() as batch:
        with pytest.raises(InvalidArgumentError, match="empty"):
            batch.commit()
        with pytest.raises(InvalidArgumentError, match="subject"):
            batch.commit(data=b"where to?")
        assert not batch.is_closed  # refused before sending: still usable
        batch.add("orders.1", b"x")
        assert batch.commit().count == 1


# --- all or nothing ------------------------------------------------------------------------


def test_a_failed_check_on_message_three_of_five_stores_nothing(js: JetStream) -> None:
    js.publish("orders.s2", b"already there")  # orders.s2's last sequence is 1
    batch = js.atomic_batch()
    batch.add("orders.s0", b"0")
    batch.add("orders.s1", b"1")
    batch.add("orders.s2", b"2", expected_last_subject_seq=7)  # wrong: it is 1
    batch.add("orders.s3", b"3")
    with pytest.raises(WrongLastSequenceError) as raised:
        batch.commit("orders.s4", b"4")
    assert raised.value.err_code == 10071

    assert message_count(js) == 1  # only what was there before
    assert batch.is_closed
    with pytest.raises(BatchClosedError) as closed:
        batch.add("orders.s5")
    assert isinstance(closed.value.__cause__, WrongLastSequenceError)


def test_right_expectations_commit(js: JetStream) -> None:
    js.publish("orders.a", b"before")
    with js.atomic_batch() as batch:
        batch.add("orders.a", b"1", expected_last_seq=1, expected_last_subject_seq=1)
        batch.add("orders.b", b"2", expected_last_subject_seq=0)
        ack = batch.commit()
    assert (ack.seq, ack.count) == (3, 2)


def test_a_wrong_expected_last_seq_on_the_first_message_stores_nothing(js: JetStream) -> None:
    js.publish("orders.a", b"before")
    batch = js.atomic_batch()
    batch.add("orders.a", b"1", expected_last_seq=5)
    batch.add("orders.b", b"2")
    with pytest.raises(WrongLastSequenceError):
        batch.commit()
    assert message_count(js) == 1


def test_expected_last_seq_is_refused_after_the_first_message(
    js: JetStream, wire: Callable[[], int]
) -> None:
    with js.atomic_batch() as batch:
        batch.add("orders.a", b"1")
        with pytest.raises(InvalidArgumentError, match="first message"):
            batch.add("orders.b", b"2", expected_last_seq=1)
        with pytest.raises(InvalidArgumentError, match="first message"):
            batch.commit("orders.b", b"2", expected_last_seq=1)
        assert wire() == 1 and not batch.is_closed  # refused before sending
        ack = batch.commit("orders.b", b"2")
    assert ack.count == 2 and message_count(js) == 2


def test_a_message_to_a_subject_without_a_stream_fails_the_batch_with_its_own_error(
    js: JetStream,
) -> None:
    batch = js.atomic_batch()
    batch.add("orders.1", b"fine")
    batch.add("nowhere.at.all", b"no stream stores this")
    batch.add("orders.2", b"fine")
    # The refusal is raised by a later call (add or commit), not the bare "incomplete".
    with pytest.raises(NoStreamResponseError, match="message 2"):
        batch.add("orders.3", b"fine")
        batch.commit()
    assert batch.is_closed
    assert message_count(js) == 0


def test_an_unsupported_header_fails_the_commit(js: JetStream) -> None:
    batch = js.atomic_batch()
    batch.add("orders.1", b"x", headers={"Nats-Expected-Last-Msg-Id": "some-id"})
    with pytest.raises(BatchUnsupportedHeaderError) as raised:
        batch.commit()
    assert raised.value.err_code == 10177
    assert message_count(js) == 0


def test_the_batch_headers_are_not_the_users(js: JetStream) -> None:
    with js.atomic_batch() as batch, pytest.raises(InvalidArgumentError, match="batch"):
        batch.add("orders.1", b"x", headers={"Nats-Batch-Sequence": "9"})


def test_one_batch_may_be_filled_from_several_threads(js: JetStream) -> None:
    with js.atomic_batch() as batch:

        def fill(worker: int) -> None:
            for number in range(50):
                batch.add(f"orders.w{worker}", b"%d-%d" % (worker, number))

        batch.add("orders.first", b"the feature check")
        threads = [threading.Thread(target=fill, args=(worker,)) for worker in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        ack = batch.commit()
    assert (ack.count, batch.size) == (201, 201)
    messages = stored(js)
    # Numbered in the order the adds took the batch: no gap, no repeat.
    assert [int((m.headers or {})["Nats-Batch-Sequence"]) for m in messages] == list(range(1, 202))
    assert sorted(m.data for m in messages[1:]) == sorted(
        b"%d-%d" % (worker, number) for worker in range(4) for number in range(50)
    )


# --- timeouts --------------------------------------------------------------------------


def test_a_commit_without_an_answer_says_the_outcome_is_unknown(
    js: JetStream, jetstream_server: NatsServer
) -> None:
    batch = js.atomic_batch(timeout=0.5)
    batch.add("orders.1", b"one")
    with (
        jetstream_server.paused(),
        pytest.raises(PublishAckTimeoutError, match="may or may not be stored"),
    ):
        batch.commit()
    with pytest.raises(BatchClosedError) as closed:
        batch.add("orders.2")
    assert isinstance(closed.value.__cause__, PublishAckTimeoutError)


def test_a_first_message_without_an_answer_ends_the_batch(
    js: JetStream, jetstream_server: NatsServer
) -> None:
    batch = js.atomic_batch(timeout=0.5)
    with jetstream_server.paused(), pytest.raises(PublishAckTimeoutError, match="nothing stored"):
        batch.add("orders.1", b"one")
    assert batch.is_closed
    assert message_count(js) == 0


def test_atomic_batch_checks_its_settings(js: JetStream) -> None:
    for bad in ({"timeout": 0}, {"timeout": -1.0}, {"max_messages": 0}, {"max_messages": 1.5}):
        with pytest.raises(InvalidArgumentError):
            js.atomic_batch(**bad)  # type: ignore[arg-type]


# --- the first message: the feature check -------------------------------------------------


def test_a_stream_without_allow_atomic_refuses_the_first_add(
    js: JetStream, wire: Callable[[], int]
) -> None:
    js.create_stream(name="PLAIN", subjects=["plain.>"])
    batch = js.atomic_batch()
    with pytest.raises(AtomicBatchNotEnabledError) as raised:
        batch.add("plain.1", b"x")
    assert raised.value.err_code == 10174
    assert batch.is_closed
    with pytest.raises(BatchClosedError) as closed:
        batch.add("plain.2", b"y")
    assert closed.value.__cause__ is raised.value
    assert message_count(js, "PLAIN") == 0


def test_the_first_add_to_a_subject_without_a_stream_raises_no_stream(js: JetStream) -> None:
    with pytest.raises(NoStreamResponseError):
        js.atomic_batch().add("nowhere.1", b"x")


# --- the limit --------------------------------------------------------------------------


def test_a_thousand_messages_commit_and_the_next_is_refused_before_sending(
    js: JetStream, wire: Callable[[], int]
) -> None:
    with js.atomic_batch() as batch:
        for number in range(1000):
            batch.add("orders.bulk", b"%d" % number)
        with pytest.raises(BatchTooLargeError):
            batch.add("orders.bulk", b"one too many")
        with pytest.raises(BatchTooLargeError):
            batch.commit("orders.bulk", b"one too many")
        assert wire() == 1000  # the 1,001st never left the client
        assert not batch.is_closed and batch.size == 1000
        ack = batch.commit()
    assert (ack.count, ack.seq) == (1000, 1000)
    assert message_count(js) == 1000


def test_publish_atomic_over_the_limit_sends_nothing(
    js: JetStream, wire: Callable[[], int]
) -> None:
    with pytest.raises(BatchTooLargeError) as raised:
        js.publish_atomic([("orders.bulk", b"x")] * 1001)
    assert raised.value.err_code == 10199
    assert wire() == 0
    assert message_count(js) == 0
    assert js.publish_atomic([("orders.bulk", b"x")] * 1000).count == 1000


def test_the_servers_smaller_limit_is_raised_as_batch_too_large(
    nats_server_factory: ServerFactory, connect: ClientFactory
) -> None:
    server = nats_server_factory(jetstream=True, config=SMALL_BATCH_LIMITS)
    js = connect(servers=server.url).jetstream()
    js.create_stream(name="SMALL", subjects=["small.>"], allow_atomic=True)
    batch = js.atomic_batch()  # our limit is the default 1,000: the server's 5 decides
    for number in range(6):
        batch.add("small.x", b"%d" % number)
    with pytest.raises(BatchTooLargeError) as raised:
        batch.commit()
    assert raised.value.err_code == 10199 and "5" in raised.value.description
    assert message_count(js, "SMALL") == 0
    # max_messages= tells the client the server's limit: refused before sending.
    with js.atomic_batch(max_messages=5) as small:
        for number in range(5):
            small.add("small.x", b"%d" % number)
        with pytest.raises(BatchTooLargeError):
            small.add("small.x", b"sixth")
        assert small.commit().count == 5


# --- discard ----------------------------------------------------------------------------


def test_leaving_the_block_without_commit_stores_nothing(js: JetStream) -> None:
    with js.atomic_batch() as batch:
        batch.add("orders.1", b"one")
        batch.add("orders.2", b"two")
    assert batch.is_closed
    assert message_count(js) == 0
    with pytest.raises(BatchClosedError):
        batch.commit()


def test_an_exception_in_the_block_discards_the_batch(js: JetStream) -> None:
    class BoomError(Exception):
        pass

    with pytest.raises(BoomError), js.atomic_batch() as batch:
        batch.add("orders.1", b"one")
        raise BoomError
    assert batch.is_closed and message_count(js) == 0


def test_discard_stores_nothing_and_closes_the_batch(js: JetStream) -> None:
    batch = js.atomic_batch()
    batch.add("orders.1", b"one")
    batch.add("orders.2", b"two")
    batch.discard()
    batch.discard()  # again: nothing happens
    with pytest.raises(BatchClosedError):
        batch.add("orders.3", b"three")
    assert message_count(js) == 0


def test_discard_frees_the_servers_batch_slot_at_once(
    nats_server_factory: ServerFactory, connect: ClientFactory
) -> None:
    server = nats_server_factory(jetstream=True, config=SMALL_BATCH_LIMITS)
    js = connect(servers=server.url).jetstream()
    js.create_stream(name="SMALL", subjects=["small.>"], allow_atomic=True)
    # The stream holds at most 3 open batches: a fourth is refused while they are open ...
    held = [js.atomic_batch() for _ in range(3)]
    for batch in held:
        batch.add("small.held")
    with pytest.raises(AtomicBatchTooManyInflightError):
        js.atomic_batch().add("small.fourth")
    for batch in held:
        batch.discard()
    # ... and discarded ones free their slot now, not after the server's idle timeout.
    for _ in range(6):
        with js.atomic_batch() as batch:
            batch.add("small.discarded")
    assert js.publish_atomic([("small.kept", b"x")]).count == 1
    assert message_count(js, "SMALL") == 1


def test_a_batch_idle_past_the_servers_timeout_fails_and_stores_nothing(
    nats_server_factory: ServerFactory, connect: ClientFactory
) -> None:
    server = nats_server_factory(jetstream=True, config=SMALL_BATCH_LIMITS)  # 1 s timeout
    js = connect(servers=server.url).jetstream()
    js.create_stream(name="SMALL", subjects=["small.>"], allow_atomic=True)
    batch = js.atomic_batch()
    batch.add("small.1", b"one")
    time.sleep(1.5)  # the server abandons the batch
    with pytest.raises(BatchIncompleteError):
        batch.add("small.2", b"two")
        batch.commit()
    assert message_count(js, "SMALL") == 0


@pytest.mark.slow
def test_nothing_is_stored_after_the_servers_ten_second_abandon(js: JetStream) -> None:
    with js.atomic_batch() as discarded:
        discarded.add("orders.discarded", b"x")
    forgotten = js.atomic_batch()  # never committed nor discarded: the server drops it
    forgotten.add("orders.forgotten", b"y")
    forgotten.add("orders.forgotten", b"z")
    assert message_count(js) == 0
    time.sleep(11)
    assert message_count(js) == 0
    with pytest.raises(BatchIncompleteError):
        forgotten.commit()
    assert message_count(js) == 0


# --- msg-id de-duplication ------------------------------------------------------------


def test_a_batch_holding_a_stored_msg_id_stores_nothing(js: JetStream) -> None:
    js.publish("orders.1", b"first", msg_id="order-1")
    batch = js.atomic_batch()
    batch.add("orders.2", b"new", msg_id="order-2")
    batch.add("orders.1", b"again", msg_id="order-1")
    batch.add("orders.3", b"new", msg_id="order-3")
    with pytest.raises(BatchDuplicateMsgIdError) as raised:
        batch.commit()
    assert raised.value.err_code == 10201
    assert [m.data for m in stored(js)] == [b"first"]


def test_a_batch_holding_one_msg_id_twice_stores_nothing(js: JetStream) -> None:
    with pytest.raises(BatchDuplicateMsgIdError):
        js.publish_atomic(
            [
                ("orders.1", b"a", {"Nats-Msg-Id": "same"}),
                ("orders.2", b"b", {"Nats-Msg-Id": "same"}),
            ]
        )
    assert message_count(js) == 0


def test_new_msg_ids_commit_and_dedupe_later_publishes(js: JetStream) -> None:
    with js.atomic_batch() as batch:
        batch.add("orders.1", b"a", msg_id="batch-a")
        batch.add("orders.2", b"b", msg_id="batch-b")
        batch.commit()
    again = js.publish("orders.1", b"a (retried)", msg_id="batch-a")
    assert (again.seq, again.duplicate) == (1, True)


# --- TTL ------------------------------------------------------------------------------


def test_ttl_is_sent_as_nats_ttl(js: JetStream) -> None:
    js.create_stream(name="TTL", subjects=["ttl.>"], allow_atomic=True, allow_msg_ttl=True)
    with js.atomic_batch() as batch:
        batch.add("ttl.a", b"a", ttl=60)
        batch.add("ttl.b", b"b", ttl=90.7)  # whole seconds: the server drops fractions
        batch.commit("ttl.c", b"c", ttl="never")
    assert [(m.headers or {}).get("Nats-TTL") for m in stored(js, "TTL")] == ["60", "90", "never"]


@pytest.mark.parametrize("ttl", [0, 0.5, -1, float("inf"), float("nan"), True, "forever", "5s"])
def test_a_bad_ttl_is_refused_before_sending(
    js: JetStream, wire: Callable[[], int], ttl: object
) -> None:
    with js.atomic_batch() as batch:
        with pytest.raises(InvalidArgumentError, match="ttl"):
            batch.add("orders.1", b"x", ttl=ttl)  # type: ignore[arg-type]
        assert wire() == 0 and not batch.is_closed


def test_ttl_on_a_stream_without_allow_msg_ttl_stores_nothing(js: JetStream) -> None:
    batch = js.atomic_batch()
    batch.add("orders.1", b"x")
    batch.add("orders.2", b"y", ttl=60)
    with pytest.raises(APIError) as raised:
        batch.commit()
    assert raised.value.err_code == 10166  # per-message TTL is disabled
    assert message_count(js) == 0


# --- publish_atomic -------------------------------------------------------------------


def test_publish_atomic_round_trip(js: JetStream) -> None:
    ack = js.publish_atomic(
        [
            ("orders.1", b"one"),
            ("orders.2", b"two", {"K": "v"}),
            ["orders.3", bytearray(b"three")],
        ]
    )
    assert isinstance(ack, BatchAck)
    assert (ack.stream, ack.seq, ack.count) == ("ORDERS", 3, 3)
    messages = stored(js)
    assert [(m.subject, m.data) for m in messages] == [
        ("orders.1", b"one"),
        ("orders.2", b"two"),
        ("orders.3", b"three"),
    ]
    assert messages[1].headers is not None and messages[1].headers["K"] == "v"
    assert {(m.headers or {}).get("Nats-Batch-Id") for m in messages} == {ack.batch_id}


@pytest.mark.parametrize(
    "messages",
    [
        [],
        [("orders.1",)],
        [("orders.1", "text, not bytes")],
        [("orders.1", b"x"), ("", b"empty subject")],
        [("orders.1", b"x", "not headers")],
        b"not a list",
    ],
)
def test_publish_atomic_refuses_bad_items_before_sending(
    js: JetStream, wire: Callable[[], int], messages: object
) -> None:
    with pytest.raises(InvalidArgumentError):
        js.publish_atomic(messages)  # type: ignore[arg-type]
    assert wire() == 0


def test_publish_atomic_to_a_stream_without_allow_atomic(js: JetStream) -> None:
    js.create_stream(name="PLAIN", subjects=["plain.>"])
    with pytest.raises(AtomicBatchNotEnabledError):
        js.publish_atomic([("plain.1", b"x"), ("plain.2", b"y")])
    assert message_count(js, "PLAIN") == 0


# --- interop ---------------------------------------------------------------------------


def test_nats_py_reads_back_exactly_what_a_batch_stored(
    js: JetStream, jetstream_server: NatsServer
) -> None:
    import nats

    sent = [
        ("orders.a", b"alpha", {"K": "1"}),
        ("orders.b", b"", None),
        ("orders.c", bytes(range(256)), {"K": "3", "L": "x"}),
    ]
    ack = js.publish_atomic([(s, d, h) if h else (s, d) for s, d, h in sent])

    async def read() -> tuple[int, list[tuple[str, bytes, dict[str, str]]]]:
        nc = await nats.connect(jetstream_server.url)
        try:
            theirs = nc.jetstream()
            info = await theirs.stream_info("ORDERS")
            got = []
            for seq in range(1, ack.seq + 1):
                msg = await theirs.get_msg("ORDERS", seq)
                got.append((msg.subject or "", msg.data or b"", dict(msg.headers or {})))
            return info.state.messages, got
        finally:
            await nc.close()

    count, got = asyncio.run(read())
    assert count == 3
    assert [(subject, data) for subject, data, _ in got] == [(s, d) for s, d, _ in sent]
    pairs = zip(got, sent, strict=True)
    for position, ((_, _, headers), (_, _, extra)) in enumerate(pairs, start=1):
        assert headers["Nats-Batch-Id"] == ack.batch_id
        assert headers["Nats-Batch-Sequence"] == str(position)
        for name, value in (extra or {}).items():
            assert headers[name] == value
    assert got[-1][2]["Nats-Batch-Commit"] == "1"

"""The inlined fast paths give what the general paths give for the same input.

``Publisher.publish`` inlines ``Outbox.put_messages`` and caches ``PUB`` lines;
``Subscription._deliver`` and ``next_msg`` reach into the message queue. Each is held
here to the general path: the same frames, sizes, counters and errors.
"""

from __future__ import annotations

from typing import Any

import pytest

from nats_sync import _defaults as d
from nats_sync._core.components.publishing import Publisher
from nats_sync._core.components.subscription import Subscription
from nats_sync._core.threads.connection import Connection
from nats_sync._core.threads.outbox import Frame, Outbox
from nats_sync.errors import (
    BadSubscriptionError,
    ConnectionClosedError,
    Error,
    InvalidArgumentError,
    OutboundBufferLimitError,
)
from nats_sync.msg import Msg


class _Host:
    """The handler's side of a publisher, with a refusal to raise on demand."""

    def __init__(self) -> None:
        self.refusal: Exception | None = None

    def check_can_publish(self) -> None:
        if self.refusal is not None:
            raise self.refusal

    def connection(self) -> Connection | None:
        return None


def _publisher(limit: int = 1 << 22) -> tuple[Publisher, Outbox, _Host]:
    outbox = Outbox(limit, full_wait=0.05)
    outbox.set_connected(True)
    host = _Host()
    return Publisher(outbox, host), outbox, host


def _wire(frames: list[Frame]) -> bytes:
    return b"".join(frame if isinstance(frame, bytes) else b"".join(frame) for frame in frames)


def _state(outbox: Outbox) -> tuple[bytes, int, int, int]:
    return _wire(outbox.frames), outbox.size, outbox.out_msgs, outbox.out_bytes


def _general(publisher: Publisher, subject: str, payload: Any) -> None:
    """The general path of a plain publish: what headers or a reply would take."""
    publisher._encode_and_queue(subject, payload, b"", None, False)


SIZES = sorted(
    {
        0,
        1,
        2,
        100,
        4095,
        d.LARGE_PAYLOAD_THRESHOLD - 1,
        d.LARGE_PAYLOAD_THRESHOLD,
        d.LARGE_PAYLOAD_THRESHOLD + 1,
        70_000,
    }
)


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("subject", ["a", "orders.eu.created", "_INBOX.x.1"])
def test_publish_queues_what_the_general_path_queues(subject: str, size: int) -> None:
    fast, fast_outbox, _ = _publisher()
    slow, slow_outbox, _ = _publisher()
    payload = bytes(range(256)) * (size // 256) + bytes(size % 256)
    for _ in range(3):  # the first publish fills the line cache; the rest read it
        fast.publish(subject, payload)
        _general(slow, subject, payload)
    assert _state(fast_outbox) == _state(slow_outbox)
    assert _wire(fast_outbox.frames).startswith(b"PUB %s %d\r\n" % (subject.encode(), size))


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("subject", ["a", "orders.eu.created", "_INBOX.x.1"])
@pytest.mark.parametrize(
    "headers", [None, {"Nats-Msg-Id": "m-1"}, b"NATS/1.0\r\nNats-Msg-Id: m-1\r\n\r\n"]
)
def test_publish_inbox_queues_what_the_general_path_queues(
    subject: str, size: int, headers: dict[str, str] | bytes | None
) -> None:
    fast, fast_outbox, _ = _publisher()
    slow, slow_outbox, _ = _publisher()
    payload = bytes(range(256)) * (size // 256) + bytes(size % 256)
    for token in range(3):  # the first fills the line cache; the rest read it
        inbox = b"_INBOX.abc.%x" % token
        fast.publish_inbox(subject, payload, inbox, headers)
        slow._encode_and_queue(subject, payload, inbox, headers, False)
    assert _state(fast_outbox) == _state(slow_outbox)
    verb = b"HPUB" if headers else b"PUB"
    assert _wire(fast_outbox.frames).startswith(b"%s %s _INBOX.abc.0 " % (verb, subject.encode()))


def test_publish_inbox_refuses_what_the_general_path_refuses() -> None:
    fast, _, fast_host = _publisher()
    with pytest.raises(Error, match="subject"):
        fast.publish_inbox("bad subject", b"x", b"_INBOX.a.1")
    with pytest.raises(Error, match="max_payload"):
        fast.publish_inbox("a", bytes(d.DEFAULT_MAX_PAYLOAD + 1), b"_INBOX.a.1")
    fast.accepting = False
    fast_host.refusal = ConnectionClosedError("closed")
    with pytest.raises(ConnectionClosedError):
        fast.publish_inbox("a", b"x", b"_INBOX.a.1")


def test_a_cached_line_is_not_reused_for_another_size() -> None:
    fast, fast_outbox, _ = _publisher()
    slow, slow_outbox, _ = _publisher()
    for payload in (b"x", b"yy", b"x", b"", b"zzz"):
        fast.publish("sizes", payload)
        _general(slow, "sizes", payload)
    assert _state(fast_outbox) == _state(slow_outbox)


def _error_of(call: Any) -> tuple[type[BaseException], str] | None:
    try:
        call()
    except (Error, TypeError, ValueError) as err:
        return type(err), str(err)
    return None


@pytest.mark.parametrize(
    ("subject", "payload"),
    [
        ("", b"x"),
        ("a b", b"x"),
        ("a.*", b"x"),
        ("a.>", b"x"),
        ("a..b", b"x"),
        ("ok", "text"),
        ("ok", 5),
        ("ok", bytearray(b"fine")),
        ("ok", memoryview(b"fine")),
        ("ok", b"x" * (d.DEFAULT_MAX_PAYLOAD + 1)),
    ],
)
def test_publish_refuses_what_the_general_path_refuses(subject: str, payload: Any) -> None:
    fast, fast_outbox, _ = _publisher()
    slow, slow_outbox, _ = _publisher()
    assert _error_of(lambda: fast.publish(subject, payload)) == _error_of(
        lambda: _general(slow, subject, payload)
    )
    assert _state(fast_outbox) == _state(slow_outbox)


def test_a_full_outbox_refuses_both_paths_alike() -> None:
    fast, fast_outbox, _ = _publisher(limit=64)
    slow, slow_outbox, _ = _publisher(limit=64)
    for publisher in (fast, slow):
        publisher.outbox.set_connected(False)  # disconnected: refused at once
    first = b"x" * 30
    fast.publish("full", first)
    _general(slow, "full", first)
    fast_error = _error_of(lambda: fast.publish("full", first))
    assert fast_error is not None and fast_error[0] is OutboundBufferLimitError
    assert fast_error == _error_of(lambda: _general(slow, "full", first))
    assert _state(fast_outbox) == _state(slow_outbox)


def test_a_refused_publisher_raises_the_hosts_reason_on_every_path() -> None:
    publisher, outbox, host = _publisher()
    host.refusal = ConnectionClosedError("the client is closed")
    publisher.accepting = False
    for call in (
        lambda: publisher.publish("a", b"x"),
        lambda: publisher.publish("a", b"x", reply="r"),
        lambda: publisher.publish("a", b"x", headers={"k": "v"}),
        lambda: publisher.publish_request("a", b"x", b"_INBOX.r.1", None, True),
        lambda: publisher.queue_messages([b"PUB a 1\r\nx\r\n"], 12, 1),
    ):
        error = _error_of(call)
        assert error is not None and error[0] is ConnectionClosedError, error
    assert outbox.frames == [] and outbox.out_msgs == 0


# --- subscription queue: the reader's _deliver and next_msg against get ----------------


class _Owner:
    def __init__(self) -> None:
        self.errors: list[BaseException] = []

    def report_error(self, error: BaseException) -> None:
        self.errors.append(error)

    def check_process(self) -> None:
        return None

    def unsubscribe(self, sub: Subscription, limit: int = 0) -> None:
        raise AssertionError("not used here")

    def drain_subscription(self, sub: Subscription, timeout: float | None) -> None:
        raise AssertionError("not used here")


def _subscription(
    max_msgs: int = 0, pending_msgs: int = 0, pending_bytes: int = 1 << 20
) -> tuple[Subscription, _Owner]:
    owner = _Owner()
    return Subscription(owner, 1, "q", "", None, max_msgs, pending_msgs, pending_bytes), owner


def _msgs(count: int) -> list[Msg]:
    return [Msg("q", "", b"m%d" % n * (n % 5), sid=1) for n in range(count)]


@pytest.mark.parametrize(
    ("pending_msgs", "pending_bytes"), [(0, 1 << 20), (5, 1 << 20), (0, 40), (3, 25)]
)
def test_next_msg_and_the_queues_get_take_the_same_messages(
    pending_msgs: int, pending_bytes: int
) -> None:
    fast, fast_owner = _subscription(pending_msgs=pending_msgs, pending_bytes=pending_bytes)
    slow, slow_owner = _subscription(pending_msgs=pending_msgs, pending_bytes=pending_bytes)
    for msg in _msgs(12):
        assert fast._deliver(msg) == slow._deliver(msg)
    assert (fast.pending_msgs, fast.pending_bytes, fast.dropped) == (
        slow.pending_msgs,
        slow.pending_bytes,
        slow.dropped,
    )
    assert [type(e) for e in fast_owner.errors] == [type(e) for e in slow_owner.errors]
    taken_fast: list[Msg] = []
    taken_slow: list[Msg | object] = []
    while fast.pending_msgs:
        taken_fast.append(fast.next_msg(timeout=0.01))
        taken_slow.append(slow._messages.get(0.01))
        assert (fast.pending_msgs, fast.pending_bytes) == (slow.pending_msgs, slow.pending_bytes)
    assert taken_fast == taken_slow and fast.pending_bytes == 0


def test_max_msgs_ends_delivery_on_the_same_message_for_both() -> None:
    sub, _ = _subscription(max_msgs=3)
    results = [sub._deliver(msg) for msg in _msgs(3)]
    assert results == [True, True, False]


@pytest.mark.parametrize("chunk", [1, 2, 5, 64])
def test_next_msgs_takes_what_next_msg_takes_in_chunks(chunk: int) -> None:
    one, _ = _subscription(pending_msgs=9, pending_bytes=1 << 20)
    many, _ = _subscription(pending_msgs=9, pending_bytes=1 << 20)
    for msg in _msgs(12):  # three are dropped by both (pending limit 9)
        one._deliver(msg)
        many._deliver(msg)
    many._end()  # the end marker stays behind the messages
    one._end()
    by_one: list[Msg] = []
    while one.pending_msgs:
        by_one.append(one.next_msg(timeout=0.01))
    by_many: list[Msg] = []
    while many.pending_msgs:
        taken = many.next_msgs(chunk, timeout=0.01)
        assert 1 <= len(taken) <= chunk
        by_many.extend(taken)
    assert by_many == by_one and len(by_one) == 9
    assert (many.pending_bytes, many.dropped) == (one.pending_bytes, one.dropped) == (0, 3)
    with pytest.raises(BadSubscriptionError):
        many.next_msgs(chunk, timeout=0.01)
    with pytest.raises(InvalidArgumentError):
        many.next_msgs(0)

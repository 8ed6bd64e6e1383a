"""The pull machinery without a server: the status table (notes §2.4), the pull request
body, message sizes, and how ``MessageBatch`` (one fetch) and ``MessageStream``
(``messages()``) react to each status, on a fake client whose subscriptions are queues
the test fills by hand."""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from nats_sync import errors as core
from nats_sync._core import proto
from nats_sync._core.components.port import ClientPort
from nats_sync.jetstream._consumers.pull import MessageBatch, MessageStream
from nats_sync.jetstream._consumers.pull_wire import classify, message_size, pull_body
from nats_sync.jetstream.errors import (
    ConsumerDeletedError,
    ConsumerNotFoundError,
    NoHeartbeatError,
    PinIdMismatchError,
    StatusError,
)
from nats_sync.msg import Msg

pytestmark = pytest.mark.timeout(20)

NEXT = "$JS.API.CONSUMER.MSG.NEXT.S.C"
ACK = "$JS.ACK.S.C.1.{seq}.{seq}.1795428000000000000.0"


def status(code: int, description: str = "", **headers: str) -> Msg:
    return Msg("_INBOX.x", "", b"", dict(headers) or None, 1, code, description)


def message(seq: int, data: bytes = b"x", headers: dict[str, Any] | None = None) -> Msg:
    return Msg("s.a", ACK.format(seq=seq), data, headers, 1)


# --- the table ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("msg", "kind", "pending", "error"),
    [
        (message(1), "message", (None, None), None),
        (
            status(100, "Idle Heartbeat", **{"Nats-Last-Consumer": "3", "Nats-Last-Stream": "9"}),
            "heartbeat",
            (None, None),
            None,
        ),
        (status(404, "No Messages"), "done", (None, None), None),
        (
            status(
                408, "Request Timeout", **{"Nats-Pending-Messages": "7", "Nats-Pending-Bytes": "0"}
            ),
            "done",
            (7, 0),
            None,
        ),
        (
            status(
                408,
                "Interest Expired",
                **{"Nats-Pending-Messages": "2", "Nats-Pending-Bytes": "100"},
            ),
            "done",
            (2, 100),
            None,
        ),
        (status(408, "Requests Pending"), "done", (None, None), None),
        (
            status(
                409,
                "Message Size Exceeds MaxBytes",
                **{"Nats-Pending-Messages": "9", "Nats-Pending-Bytes": "10"},
            ),
            "done",
            (9, 10),
            None,
        ),
        (
            status(
                409, "Batch Completed", **{"Nats-Pending-Messages": "0", "Nats-Pending-Bytes": "5"}
            ),
            "done",
            (0, 5),
            None,
        ),
        (
            status(
                409, "Server Shutdown", **{"Nats-Pending-Messages": "4", "Nats-Pending-Bytes": "0"}
            ),
            "done",
            (4, 0),
            None,
        ),
        (status(409, "Leadership Change"), "reset", (None, None), None),
        (status(409, "Consumer Deleted"), "terminal", (None, None), ConsumerDeletedError),
        (status(409, "Consumer is push based"), "terminal", (None, None), StatusError),
        (status(409, "Exceeded MaxWaiting"), "warning", (None, None), StatusError),
        (status(409, "Exceeded MaxRequestBatch of 10"), "warning", (None, None), StatusError),
        (status(409, "Exceeded MaxRequestExpires of 1s"), "warning", (None, None), StatusError),
        (status(409, "Exceeded MaxRequestMaxBytes of 5"), "warning", (None, None), StatusError),
        (status(503), "no_responders", (None, None), ConsumerNotFoundError),
        (
            status(400, "Bad Request - heartbeat value too large"),
            "terminal",
            (None, None),
            StatusError,
        ),
        (status(412, "Required Api Level"), "terminal", (None, None), StatusError),
        (status(423, "Nats-Pin-Id mismatch"), "pin_lost", (None, None), PinIdMismatchError),
        (
            status(
                423,
                "Nats-Wrong-Pin-Id",
                **{"Nats-Pending-Messages": "3", "Nats-Pending-Bytes": "0"},
            ),
            "pin_lost",
            (3, 0),
            PinIdMismatchError,
        ),
    ],
)
def test_every_status_has_its_meaning(
    msg: Msg, kind: str, pending: tuple[Any, Any], error: type[Exception] | None
) -> None:
    got = classify(msg)
    assert got.kind == kind
    assert (got.pending_msgs, got.pending_bytes) == pending
    if error is None:
        assert got.error is None
    else:
        assert type(got.error) is error
    if isinstance(got.error, StatusError):
        assert got.error.status == msg.status and got.error.description == msg.description


def test_malformed_pending_headers_count_as_unsaid() -> None:
    got = classify(status(408, "Request Timeout", **{"Nats-Pending-Messages": "x"}))
    assert got.kind == "done" and got.pending_msgs is None


def test_the_pull_body_carries_durations_in_ns() -> None:
    assert json.loads(pull_body(5)) == {"batch": 5}
    assert json.loads(pull_body(5, expires=1.5, max_bytes=100, heartbeat=0.5)) == {
        "batch": 5,
        "expires": 1_500_000_000,
        "max_bytes": 100,
        "idle_heartbeat": 500_000_000,
    }
    assert json.loads(pull_body(3, no_wait=True)) == {"batch": 3, "no_wait": True}


def test_message_size_is_what_the_server_counts() -> None:
    plain = message(1, b"12345")
    assert message_size(plain) == len("s.a") + len(plain.reply) + 5
    headers = {"A": "1", "B": ["2", "3"]}
    with_headers = message(1, b"12345", headers)
    assert message_size(with_headers) == message_size(plain) + len(proto.encode_headers(headers))


# --- a fake client -----------------------------------------------------------------------

_END = object()
_CLOSED = object()


class FakeSub:
    """A pull subscription: a queue the test fills."""

    def __init__(self, subject: str) -> None:
        self.subject = subject
        self.items: queue.Queue[Any] = queue.Queue()
        self.ended = False

    def next_msg(self, timeout: float | None = 1.0) -> Msg:
        try:
            item = (
                self.items.get(timeout=timeout)
                if timeout is None or timeout > 0
                else self.items.get_nowait()
            )
        except queue.Empty:
            raise core.TimeoutError("nothing") from None
        if item is _END or item is _CLOSED:
            self.items.put(item)
            if item is _CLOSED:
                raise core.ConnectionClosedError("closed")
            raise core.BadSubscriptionError("ended")
        assert isinstance(item, Msg)
        return item

    def unsubscribe(self) -> None:
        if self.ended:
            raise core.BadSubscriptionError("ended")
        self.ended = True
        self.items.put(_END)

    def drain(self, timeout: float | None = None) -> None:
        self.unsubscribe()


def _unused(*args: Any) -> Any:
    raise AssertionError("a pull never uses this part of the port")


class FakeClient:
    def __init__(self) -> None:
        self.subs: list[FakeSub] = []
        self.pulls: list[dict[str, Any]] = []
        self.listeners: list[Callable[[str], None]] = []
        self._count = 0
        # What the extensions reach through nats_sync._core.components.port.port_of
        # (not instrumented).
        self._port = ClientPort(
            add_status_listener=self.add_status_listener,
            add_error_listener=_unused,
            inbox_route=_unused,
            publish_inbox=_unused,
            schedule=_unused,
            instrument=_unused,
        )

    def new_inbox(self) -> str:
        self._count += 1
        return f"_INBOX.{self._count}"

    def subscribe(
        self,
        subject: str,
        queue: str = "",
        cb: Any = None,
        max_msgs: int = 0,
        pending_msgs_limit: int = 0,
        pending_bytes_limit: int = 0,
    ) -> FakeSub:
        sub = FakeSub(subject)
        self.subs.append(sub)
        return sub

    def publish(
        self, subject: str, payload: bytes = b"", reply: str = "", headers: Any = None
    ) -> None:
        assert subject == NEXT and reply == self.subs[-1].subject
        self.pulls.append(json.loads(payload))

    def add_status_listener(self, listener: Callable[[str], None]) -> Callable[[], None]:
        self.listeners.append(listener)
        return lambda: self.listeners.remove(listener)

    def feed(self, *items: Msg) -> None:
        for item in items:
            self.subs[-1].items.put(item)


def batch_of(
    client: FakeClient,
    batch: int = 3,
    *,
    max_bytes: int | None = None,
    wait: float = 5.0,
    heartbeat: float | None = None,
) -> MessageBatch:
    body = pull_body(batch, expires=wait, max_bytes=max_bytes, heartbeat=heartbeat)
    return MessageBatch(
        client,
        NEXT,
        body,
        batch=batch,  # type: ignore[arg-type]
        max_bytes=max_bytes,
        wait=wait,
        heartbeat=heartbeat,
        ack_timeout=1.0,
    )


# --- one fetch ---------------------------------------------------------------------------


def test_a_fetch_ends_on_its_count_and_unsubscribes() -> None:
    client = FakeClient()
    batch = batch_of(client, 2)
    assert client.pulls == [{"batch": 2, "expires": 5_000_000_000}]
    client.feed(status(100, "Idle Heartbeat"), message(1), message(2), message(3))
    assert [m.metadata.sequence.stream for m in batch] == [1, 2]
    assert len(batch) == 2 and batch.done and batch.error is None
    assert client.subs[0].ended
    assert [m.data for m in batch] == [b"x", b"x"]  # kept: a second pass yields them again


@pytest.mark.parametrize(
    "end",
    [
        status(404, "No Messages"),
        status(408, "Request Timeout", **{"Nats-Pending-Messages": "2"}),
        status(409, "Message Size Exceeds MaxBytes"),
        status(409, "Leadership Change"),
        status(409, "Server Shutdown"),
    ],
)
def test_a_fetch_ends_quietly_when_the_request_is_over(end: Msg) -> None:
    client = FakeClient()
    batch = batch_of(client, 3)
    client.feed(message(1), end, message(2))
    assert len(batch) == 1 and batch.error is None and client.subs[0].ended


@pytest.mark.parametrize(
    ("end", "error"),
    [
        (status(409, "Consumer Deleted"), ConsumerDeletedError),
        (status(503), ConsumerNotFoundError),
        (status(409, "Exceeded MaxRequestBatch of 2"), StatusError),
        (status(400, "Bad Request - x"), StatusError),
    ],
)
def test_a_fetch_keeps_a_terminal_error(end: Msg, error: type[Exception]) -> None:
    client = FakeClient()
    batch = batch_of(client, 3)
    client.feed(message(1), end)
    assert [m.metadata.sequence.stream for m in batch] == [1]
    assert type(batch.error) is error


def test_an_empty_fetch_ends_at_its_deadline_without_error() -> None:
    client = FakeClient()
    start = time.monotonic()
    batch = batch_of(client, 3, wait=0.2)
    assert list(batch) == [] and batch.error is None
    assert 0.15 < time.monotonic() - start < 5


def test_a_fetch_whose_heartbeats_stop_ends_with_no_heartbeat() -> None:
    client = FakeClient()
    batch = batch_of(client, 3, wait=10.0, heartbeat=0.1)
    assert client.pulls[0]["idle_heartbeat"] == 100_000_000
    client.feed(message(1))
    start = time.monotonic()
    assert len(batch) == 1
    assert isinstance(batch.error, NoHeartbeatError)
    assert time.monotonic() - start < 5


def test_a_fetch_by_bytes_ends_at_the_limit() -> None:
    client = FakeClient()
    size = message_size(message(1, b"0123456789"))
    batch = batch_of(client, 1000, max_bytes=2 * size)
    client.feed(message(1, b"0123456789"), message(2, b"0123456789"), message(3))
    assert len(batch) == 2 and batch.error is None


def test_closing_a_fetch_from_another_thread_wakes_its_reader() -> None:
    client = FakeClient()
    batch = batch_of(client, 3, wait=30.0)
    threading.Timer(0.2, batch.close).start()
    start = time.monotonic()
    assert list(batch) == [] and time.monotonic() - start < 5


def test_a_client_closing_under_a_fetch_is_its_error() -> None:
    client = FakeClient()
    batch = batch_of(client, 3)
    client.feed(message(1))
    client.subs[0].items.put(_CLOSED)
    assert len(batch) == 1 and isinstance(batch.error, core.ConnectionClosedError)


# --- continuous pulls ----------------------------------------------------------------------


class Stream:
    """A MessageStream on a FakeClient, collecting its warnings."""

    def __init__(
        self,
        max_messages: int = 10,
        heartbeat: float = 5.0,
        exists: Callable[[float], bool] | None = None,
        max_bytes: int | None = None,
    ) -> None:
        self.client = FakeClient()
        self.warnings: list[BaseException] = []
        self.checks = 0

        def check(timeout: float) -> bool:
            self.checks += 1
            return exists(timeout) if exists else True

        self.stream = MessageStream(
            self.client,
            NEXT,
            "consumer 'C'",  # type: ignore[arg-type]
            max_messages=max_messages,
            max_bytes=max_bytes,
            max_wait=30.0,
            heartbeat=heartbeat,
            ack_timeout=1.0,
            exists=check,
            error_cb=self.warnings.append,
        )

    def batches(self) -> list[int]:
        return [pull["batch"] for pull in self.client.pulls]

    def read(self, count: int) -> list[int]:
        return [self.stream.next(timeout=2).metadata.sequence.stream for _ in range(count)]


def test_a_stream_pulls_at_once_then_again_at_half_the_buffer() -> None:
    s = Stream(10)
    assert s.client.pulls == [
        {"batch": 10, "expires": 30_000_000_000, "idle_heartbeat": 5_000_000_000}
    ]
    s.client.feed(*(message(i) for i in range(1, 11)))
    assert s.read(5) == [1, 2, 3, 4, 5]
    assert s.batches() == [10]  # half handed out: the next read asks for 5 more first
    s.read(1)
    assert s.batches() == [10, 5]
    s.read(4)
    assert s.batches() == [10, 5]  # 10 - 6 taken + 5 = 9 still asked for
    s.stream.stop()


def test_a_request_timeout_gives_back_what_it_still_owed() -> None:
    s = Stream(10)
    s.client.feed(
        message(1),
        message(2),
        status(408, "Request Timeout", **{"Nats-Pending-Messages": "8", "Nats-Pending-Bytes": "0"}),
        message(3),
    )
    assert s.read(3) == [1, 2, 3]
    # 2 taken, 8 given back: nothing pending, so the whole buffer is asked for again.
    assert s.batches() == [10, 10]
    s.stream.stop()


@pytest.mark.parametrize("reset", [status(409, "Leadership Change"), status(404, "No Messages")])
def test_a_reset_asks_for_the_whole_buffer_again(reset: Msg) -> None:
    s = Stream(10)
    s.client.feed(message(1), reset, message(2))
    assert s.read(2) == [1, 2]
    assert s.batches() == [10, 10]
    assert s.warnings == []
    s.stream.stop()


def test_a_deleted_consumer_ends_the_stream_for_good() -> None:
    s = Stream(10)
    s.client.feed(message(1), status(409, "Consumer Deleted"))
    assert s.read(1) == [1]
    for _ in range(2):
        with pytest.raises(ConsumerDeletedError):
            s.stream.next(timeout=1)
    assert isinstance(s.stream.error, ConsumerDeletedError)
    assert s.client.subs[0].ended and not s.client.listeners
    with pytest.raises(ConsumerDeletedError):
        list(s.stream)


def test_no_responders_with_the_consumer_gone_is_consumer_deleted() -> None:
    s = Stream(10, exists=lambda timeout: False)
    s.client.feed(status(503))
    with pytest.raises(ConsumerDeletedError):
        s.stream.next(timeout=2)
    assert s.checks == 1


def test_no_responders_with_the_consumer_there_pulls_again_with_backoff() -> None:
    s = Stream(10, exists=lambda timeout: True)
    s.client.feed(status(503))
    with pytest.raises(core.TimeoutError):
        s.stream.next(timeout=0.3)
    assert s.checks == 1 and s.batches() == [10, 10]
    s.client.feed(status(503))
    with pytest.raises(core.TimeoutError):
        s.stream.next(timeout=0.1)
    assert s.batches() == [10, 10]  # the second retry waits 0.25 s
    s.client.feed(message(1))
    assert s.read(1) == [1]
    time.sleep(0.3)
    with pytest.raises(core.TimeoutError):
        s.stream.next(timeout=0.1)
    assert s.batches() == [10, 10, 10]
    s.stream.stop()


def test_a_refused_pull_is_a_warning_and_is_retried_after_a_heartbeat() -> None:
    s = Stream(10, heartbeat=0.3)
    s.client.feed(status(409, "Exceeded MaxRequestBatch of 5"))
    with pytest.raises(core.TimeoutError):
        s.stream.next(timeout=0.1)
    assert s.batches() == [10]
    assert [type(w) for w in s.warnings] == [StatusError]
    with pytest.raises(core.TimeoutError):
        s.stream.next(timeout=0.5)
    assert s.batches() == [10, 10]
    s.stream.stop()


def test_a_missed_heartbeat_is_a_warning_and_a_new_pull() -> None:
    s = Stream(10, heartbeat=0.1)
    s.client.feed(message(1))
    assert s.read(1) == [1]
    with pytest.raises(core.TimeoutError):
        s.stream.next(timeout=0.5)
    assert any(isinstance(w, NoHeartbeatError) for w in s.warnings)
    assert s.batches()[:2] == [10, 10]
    s.client.feed(message(2))
    assert s.read(1) == [2]  # not terminal
    s.stream.stop()


def test_heartbeats_keep_the_stream_quiet() -> None:
    s = Stream(10, heartbeat=0.1)
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(0.05):
            s.client.feed(status(100, "Idle Heartbeat"))

    beater = threading.Thread(target=beat)
    beater.start()
    try:
        with pytest.raises(core.TimeoutError):
            s.stream.next(timeout=0.6)
    finally:
        stop.set()
        beater.join()
    assert s.warnings == [] and s.batches() == [10]
    s.stream.stop()


def test_a_reconnect_pulls_again_from_the_listener() -> None:
    s = Stream(10)
    (listener,) = s.client.listeners
    listener("disconnected")
    assert s.batches() == [10]
    listener("reconnected")
    assert s.batches() == [10, 10]  # the old requests may be gone with the connection
    s.stream.stop()
    assert not s.client.listeners


def test_stop_wakes_a_blocked_reader_and_ends_iteration() -> None:
    s = Stream(10)
    threading.Timer(0.2, s.stream.stop).start()
    start = time.monotonic()
    assert list(s.stream) == []
    assert time.monotonic() - start < 5
    with pytest.raises(core.BadSubscriptionError):
        s.stream.next(timeout=1)
    assert s.stream.is_closed


def test_drain_hands_over_what_was_received_then_ends() -> None:
    s = Stream(10)
    s.client.feed(message(1), message(2))
    s.stream.drain()
    assert [m.metadata.sequence.stream for m in s.stream] == [1, 2]
    assert s.batches() == [10]


def test_a_client_close_ends_the_stream() -> None:
    s = Stream(10)
    s.client.subs[0].items.put(_CLOSED)
    with pytest.raises(core.ConnectionClosedError):
        s.stream.next(timeout=1)
    assert list(s.stream) == []


def test_a_byte_limited_stream_asks_for_bytes_too() -> None:
    s = Stream(10, max_bytes=1000)
    assert s.client.pulls[0]["max_bytes"] == 1000
    s.client.feed(message(1, b"x" * 600))
    s.read(1)  # over half the bytes handed out: asks again for what was taken
    s.client.feed(message(2))
    s.read(1)
    assert s.client.pulls[1]["batch"] == 1
    assert 0 < s.client.pulls[1]["max_bytes"] <= 1000
    s.stream.stop()


def test_an_error_cb_that_raises_is_logged_not_propagated(caplog: pytest.LogCaptureFixture) -> None:
    client = FakeClient()

    def bad(error: BaseException) -> None:
        raise RuntimeError("boom")

    stream = MessageStream(
        client,
        NEXT,
        "c",
        max_messages=4,  # type: ignore[arg-type]
        max_bytes=None,
        max_wait=30.0,
        heartbeat=5.0,
        ack_timeout=1.0,
        exists=lambda timeout: True,
        error_cb=bad,
    )
    client.feed(status(409, "Exceeded MaxWaiting"))
    with pytest.raises(core.TimeoutError):
        stream.next(timeout=0.2)
    assert "error_cb raised" in caplog.text
    stream.stop()

"""A push consumer's reading without a server: flow-control answers, stalled heartbeats,
statuses, the heartbeat watch and drops, on a fake client whose subscription is a queue
the test fills by hand (with the counts a core subscription keeps)."""

from __future__ import annotations

import queue
import time
from collections.abc import Callable
from typing import Any

import pytest

from nats_sync import errors as core
from nats_sync._core.components.port import ClientPort
from nats_sync.jetstream._consumers.push_stream import PushMessageStream
from nats_sync.jetstream.api import ConsumerConfig, ConsumerInfo
from nats_sync.jetstream.errors import (
    ConsumerDeletedError,
    MissedHeartbeatError,
    NotPushConsumerError,
    StatusError,
)
from nats_sync.msg import Msg

pytestmark = pytest.mark.timeout(20)

DELIVER = "deliver.here"
ACK = "$JS.ACK.S.C.1.{seq}.{seq}.1795428000000000000.0"
_END = object()


def status(code: int, description: str = "", reply: str = "", **headers: str) -> Msg:
    return Msg(DELIVER, reply, b"", dict(headers) or None, 1, code, description)


def message(seq: int) -> Msg:
    return Msg("s.a", ACK.format(seq=seq), b"%d" % seq, None, 1)


class FakeSub:
    """A core subscription: a queue the test fills, with its counts."""

    def __init__(self, subject: str, queue_group: str) -> None:
        self.subject = subject
        self.queue = queue_group
        self.sid = 7
        self.items: queue.Queue[Any] = queue.Queue()
        self.received = 0
        self.dropped = 0

    @property
    def pending_msgs(self) -> int:
        return self.items.qsize()

    def arrive(self, *msgs: Msg) -> None:
        for msg in msgs:
            self.received += 1
            self.items.put(msg)

    def next_msg(self, timeout: float | None = 1.0) -> Msg:
        try:
            item = self.items.get(timeout=timeout) if timeout else self.items.get_nowait()
        except queue.Empty:
            raise core.TimeoutError("nothing") from None
        if item is _END:
            self.items.put(item)
            raise core.BadSubscriptionError("ended")
        assert isinstance(item, Msg)
        return item

    def unsubscribe(self) -> None:
        self.items.put(_END)

    def drain(self, timeout: float | None = None) -> None:
        self.unsubscribe()


def _unused(*args: Any) -> Any:
    raise AssertionError("a push read never uses this part of the port")


class FakeClient:
    def __init__(self) -> None:
        self.subs: list[FakeSub] = []
        self.published: list[tuple[str, bytes]] = []
        self.listeners: list[Callable[[str], None]] = []
        self._port = ClientPort(
            add_status_listener=self.add_status_listener,
            add_error_listener=_unused,
            inbox_route=_unused,
            publish_inbox=_unused,
            schedule=_unused,
            instrument=_unused,
        )

    def subscribe(
        self,
        subject: str,
        queue: str = "",
        cb: Any = None,
        max_msgs: int = 0,
        pending_msgs_limit: int = 0,
        pending_bytes_limit: int = 0,
    ) -> FakeSub:
        sub = FakeSub(subject, queue)
        self.subs.append(sub)
        return sub

    def publish(
        self, subject: str, payload: bytes = b"", reply: str = "", headers: Any = None
    ) -> None:
        self.published.append((subject, payload))

    def add_status_listener(self, listener: Callable[[str], None]) -> Callable[[], None]:
        self.listeners.append(listener)
        return lambda: self.listeners.remove(listener)

    def tell(self, event: str) -> None:
        for listener in list(self.listeners):
            listener(event)


def info(heartbeat: float | None = None, group: str | None = None) -> ConsumerInfo:
    config = ConsumerConfig(
        durable_name="C", deliver_subject=DELIVER, deliver_group=group, idle_heartbeat=heartbeat
    )
    return ConsumerInfo(stream_name="S", name="C", config=config)


def open_stream(
    client: FakeClient,
    heartbeat: float | None = None,
    exists: Callable[[float], bool] = lambda timeout: True,
    **options: Any,
) -> PushMessageStream:
    options.setdefault("raise_warnings", True)
    return PushMessageStream(
        client, info(heartbeat), "push consumer 'C'", ack_timeout=1.0, exists=exists, **options
    )


def test_it_subscribes_on_the_deliver_subject_in_the_group() -> None:
    client = FakeClient()
    PushMessageStream(
        client,
        info(group="workers"),
        "c",
        ack_timeout=1.0,
        exists=lambda timeout: True,
    )
    assert (client.subs[0].subject, client.subs[0].queue) == (DELIVER, "workers")
    with pytest.raises(NotPushConsumerError):
        PushMessageStream(
            client,
            ConsumerInfo(name="P", config=ConsumerConfig(durable_name="P")),
            "c",
            ack_timeout=1.0,
            exists=lambda timeout: True,
        )


def test_flow_control_is_answered_once_what_came_before_it_was_taken() -> None:
    client = FakeClient()
    stream = open_stream(client)
    sub = client.subs[0]
    sub.arrive(message(1), status(100, "FlowControl Request", reply="$JS.FC.S.x.1"), message(2))
    assert stream.next(timeout=1).metadata.sequence.stream == 1
    assert client.published == []  # message 1 was handed out, the request not yet taken
    assert stream.next(timeout=1).metadata.sequence.stream == 2
    assert client.published == [("$JS.FC.S.x.1", b"")]


def test_a_stalled_heartbeat_is_answered_at_the_subject_it_names() -> None:
    client = FakeClient()
    stream = open_stream(client)
    client.subs[0].arrive(
        status(100, "Idle Heartbeat", **{"Nats-Last-Consumer": "3", "Nats-Last-Stream": "9"}),
        status(100, "Idle Heartbeat", **{"Nats-Consumer-Stalled": "$JS.FC.S.y.2"}),
        message(3),
    )
    assert stream.next(timeout=1).data == b"3"
    assert client.published == [("$JS.FC.S.y.2", b"")]  # the plain heartbeat asks nothing


def test_consumer_deleted_ends_the_stream_and_other_statuses_warn_once() -> None:
    client = FakeClient()
    stream = open_stream(client)
    client.subs[0].arrive(status(409, "Leadership Change"), message(1))
    with pytest.raises(StatusError, match="409 Leadership Change"):
        stream.next(timeout=1)
    assert stream.next(timeout=1).data == b"1"  # the stream went on
    client.subs[0].arrive(status(409, "Consumer Deleted"), message(2))
    with pytest.raises(ConsumerDeletedError):
        stream.next(timeout=1)
    with pytest.raises(ConsumerDeletedError):  # and at every later call
        stream.next(timeout=1)
    assert stream.is_closed and isinstance(stream.error, ConsumerDeletedError)


def test_silence_for_two_intervals_is_a_missed_heartbeat_then_the_consumer_is_checked() -> None:
    client = FakeClient()
    asked: list[float] = []

    def exists(timeout: float) -> bool:
        asked.append(timeout)
        return len(asked) < 2  # there the first time, gone the second

    stream = open_stream(client, heartbeat=0.1, exists=exists)
    started = time.monotonic()
    with pytest.raises(MissedHeartbeatError):
        stream.next(timeout=2)
    assert 0.15 <= time.monotonic() - started < 1.0
    assert asked == []  # the warning first; the check at the next call
    with pytest.raises(MissedHeartbeatError):
        stream.next(timeout=2)  # checked (there), still silent: warned again
    assert len(asked) == 1
    with pytest.raises(ConsumerDeletedError, match="no longer exists"):
        stream.next(timeout=2)
    assert len(asked) == 2


def test_anything_arriving_keeps_the_watch_quiet_and_a_disconnect_pauses_it() -> None:
    client = FakeClient()
    stream = open_stream(client, heartbeat=0.1, exists=lambda timeout: True)
    sub = client.subs[0]
    deadline = time.monotonic() + 0.6
    while time.monotonic() < deadline:  # heartbeats every 50 ms: never silent
        sub.arrive(status(100, "Idle Heartbeat"))
        with pytest.raises(core.TimeoutError):
            stream.next(timeout=0.05)
    client.tell("disconnected")
    with pytest.raises(core.TimeoutError):
        stream.next(timeout=0.5)  # silent, but not connected: nothing to say
    client.tell("reconnected")
    with pytest.raises(MissedHeartbeatError):
        stream.next(timeout=1)


def test_drops_are_raised_once_with_their_count() -> None:
    client = FakeClient()
    stream = open_stream(client)
    sub = client.subs[0]
    sub.arrive(message(1))
    sub.dropped = 3
    with pytest.raises(core.SlowConsumerError, match="3 message"):
        stream.next(timeout=1)
    assert stream.dropped == 3
    assert stream.next(timeout=1).data == b"1"
    sub.dropped = 5
    with pytest.raises(core.SlowConsumerError, match=r"2 message\(s\) .* \(5 in all\)"):
        stream.next(timeout=1)


def test_with_an_error_cb_warnings_are_handed_over_and_reading_goes_on() -> None:
    client = FakeClient()
    errors: list[BaseException] = []
    stream = open_stream(client, error_cb=errors.append, raise_warnings=False)
    sub = client.subs[0]
    sub.dropped = 1
    sub.arrive(status(409, "Leadership Change"), message(1))
    assert stream.next(timeout=1).data == b"1"
    assert [type(e) for e in errors] == [core.SlowConsumerError, StatusError]


def test_stop_ends_it_and_drops_what_is_queued() -> None:
    client = FakeClient()
    stream = open_stream(client)
    client.subs[0].arrive(message(1))
    stream.stop()
    with pytest.raises(core.BadSubscriptionError):
        stream.next(timeout=1)
    assert list(iter(stream)) == []
    assert client.listeners == []  # the status listener went with it

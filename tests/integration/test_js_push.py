"""Push consumers against a real nats-server: make, bind, read (messages, consume),
acks, flow control, idle heartbeats, deliver groups, drops, and the refusals."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

import nats_sync
from nats_sync.jetstream import (
    ConsumerDeletedError,
    ConsumerNotFoundError,
    JetStream,
    JsMsg,
    MissedHeartbeatError,
    NoHeartbeatError,
    NotPullConsumerError,
    NotPushConsumerError,
    PushConsumer,
)
from nats_sync.testing import NatsServer

pytestmark = pytest.mark.timeout(90)

ClientFactory = Callable[..., nats_sync.Client]


@pytest.fixture
def js(jetstream_server: NatsServer, connect: ClientFactory) -> JetStream:
    js = connect(servers=jetstream_server.url).jetstream()
    js.create_stream(name="P", subjects=["p.>"])
    return js


def store(js: JetStream, count: int, subject: str = "p.a", size: int = 0) -> None:
    futures = [js.publish_async(subject, (b"%d" % n).ljust(size, b".")) for n in range(count)]
    js.publish_async_completed(timeout=30)
    assert all(f.exception() is None for f in futures)


def wait_for(check: Callable[[], bool], seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True


def test_a_push_consumer_is_made_with_an_inbox_read_with_messages_and_acked(
    js: JetStream,
) -> None:
    store(js, 10)
    push = js.create_push_consumer("P", durable_name="d", ack_policy="explicit")
    assert isinstance(push, PushConsumer)
    assert push.name == "d" and push.stream_name == "P"
    deliver = push.cached_info.config.deliver_subject
    assert deliver and deliver.startswith("_INBOX.")
    got: list[JsMsg] = []
    with push.messages() as stream:
        for msg in stream:
            got.append(msg)
            msg.ack()
            if len(got) == 10:
                break
    assert [m.data for m in got] == [b"%d" % n for n in range(10)]
    assert [m.metadata.sequence.stream for m in got] == list(range(1, 11))
    assert got[0].metadata.consumer == "d"
    assert wait_for(lambda: push.info().num_ack_pending == 0)
    assert push.cached_info.delivered.stream_seq == 10
    # Bound again by name: the same consumer, and it goes on where it stood.
    store(js, 1)
    again = js.push_consumer("P", "d")
    assert again.cached_info.config.deliver_subject == deliver
    with again.messages() as stream:
        msg = stream.next(timeout=5)
        assert msg.data == b"0" and msg.metadata.sequence.stream == 11
        msg.ack()


def test_create_or_update_changes_a_push_consumer(js: JetStream) -> None:
    made = js.create_or_update_push_consumer(
        "P", durable_name="u", deliver_subject="deliver.u", description="one"
    )
    assert made.cached_info.config.description == "one"
    changed = js.create_or_update_push_consumer(
        "P", durable_name="u", deliver_subject="deliver.u", description="two"
    )
    assert changed.cached_info.config.description == "two"
    assert changed.info().config.deliver_subject == "deliver.u"


def test_pull_and_push_calls_refuse_the_other_kind(js: JetStream) -> None:
    with pytest.raises(NotPullConsumerError, match="create_push_consumer") as raised:
        js.create_consumer("P", durable_name="x", deliver_subject="deliver.x")
    assert isinstance(raised.value, nats_sync.InvalidArgumentError)
    assert list(js.consumer_names("P")) == []  # refused before sending
    with pytest.raises(NotPullConsumerError, match="create_push_consumer"):
        js.create_or_update_consumer("P", durable_name="x", deliver_subject="deliver.x")
    js.create_push_consumer("P", durable_name="push")
    with pytest.raises(NotPullConsumerError, match="push_consumer") as bound:
        js.consumer("P", "push")
    assert isinstance(bound.value, nats_sync.InvalidArgumentError)
    js.create_consumer("P", durable_name="pull")
    with pytest.raises(NotPushConsumerError, match=r"js\.consumer"):
        js.push_consumer("P", "pull")
    with pytest.raises(ConsumerNotFoundError):
        js.push_consumer("P", "none")


def test_consume_runs_cb_on_its_thread_and_drain_hands_over_what_came(js: JetStream) -> None:
    store(js, 50)
    push = js.create_push_consumer("P", durable_name="c", ack_policy="explicit")
    seen: list[bytes] = []
    threads: set[str] = set()
    all_in = threading.Event()

    def on_msg(msg: JsMsg) -> None:
        threads.add(threading.current_thread().name)
        seen.append(msg.data)
        msg.ack()
        if len(seen) == 50:
            all_in.set()

    ctx = push.consume(on_msg)
    assert all_in.wait(20)
    ctx.drain(timeout=10)
    assert ctx.closed and ctx.error is None
    assert seen == [b"%d" % n for n in range(50)]
    assert threads == {"nats_sync-js-consume-c"}
    assert wait_for(lambda: push.info().num_ack_pending == 0)


def test_one_read_at_a_time_without_a_deliver_group(js: JetStream) -> None:
    push = js.create_push_consumer("P", durable_name="one")
    first = push.messages()
    with pytest.raises(nats_sync.InvalidArgumentError, match="being read"):
        push.messages()
    with pytest.raises(nats_sync.InvalidArgumentError, match="being read"):
        push.consume(lambda msg: None)
    first.stop()
    push.messages().stop()  # free again once the first stopped


def test_flow_control_is_answered_through_a_burst(
    js: JetStream, connect: ClientFactory, jetstream_server: NatsServer
) -> None:
    count = 20_000
    store(js, count, "p.burst", size=1024)  # 20 MB: far beyond one flow-control window
    push = js.create_push_consumer(
        "P",
        filter_subject="p.burst",
        ack_policy="none",
        flow_control=True,
        idle_heartbeat=1.0,
        deliver_subject="deliver.burst",
    )
    # A bystander on the deliver subject sees the server's flow-control requests.
    watcher = connect(servers=jetstream_server.url)
    requests: list[str] = []
    spy = watcher.subscribe(
        "deliver.burst",
        cb=lambda m: requests.append(m.reply) if m.status == 100 and m.reply else None,
        pending_msgs_limit=0,
        pending_bytes_limit=1 << 30,
    )
    watcher.flush()
    seqs: list[int] = []
    done = threading.Event()
    errors: list[BaseException] = []

    def on_msg(msg: JsMsg) -> None:
        seqs.append(msg.metadata.sequence.stream)
        if len(seqs) == count:
            done.set()

    ctx = push.consume(on_msg, error_cb=errors.append)
    try:
        assert done.wait(60), f"{len(seqs)} of {count} arrived"
    finally:
        ctx.stop()
        ctx.join(5)
        spy.unsubscribe()
    assert seqs == list(range(1, count + 1))  # all, in order, none twice
    assert requests, "the server never asked for flow control: the test proves nothing"
    assert errors == []


def test_a_missed_heartbeat_goes_to_error_cb_and_consume_goes_on(
    js: JetStream, jetstream_server: NatsServer
) -> None:
    push = js.create_push_consumer("P", durable_name="hb", idle_heartbeat=0.5)
    errors: list[BaseException] = []
    seen: list[bytes] = []
    ctx = push.consume(lambda m: seen.append(m.data), error_cb=errors.append)
    try:
        time.sleep(1.5)  # heartbeats flow: no warning
        assert errors == []
        with jetstream_server.paused():
            assert wait_for(lambda: bool(errors), 5)
        assert isinstance(errors[0], MissedHeartbeatError)
        assert isinstance(errors[0], NoHeartbeatError)
        store(js, 1)
        assert wait_for(lambda: seen == [b"0"], 10)  # still reading
        assert not ctx.closed
    finally:
        ctx.stop()
        ctx.join(5)


def test_messages_raises_a_missed_heartbeat_once_and_goes_on(
    js: JetStream, jetstream_server: NatsServer
) -> None:
    push = js.create_push_consumer("P", durable_name="hbm", idle_heartbeat=0.5)
    with push.messages() as stream:
        with pytest.raises(nats_sync.TimeoutError):
            stream.next(timeout=1.5)  # heartbeats only: a plain timeout
        jetstream_server.pause()
        try:
            started = time.monotonic()
            with pytest.raises(MissedHeartbeatError):
                stream.next(timeout=5)
            assert time.monotonic() - started < 3
        finally:
            jetstream_server.resume()
        store(js, 1)
        assert stream.next(timeout=10).data == b"0"


def test_a_deleted_consumer_ends_consume_with_consumer_deleted(js: JetStream) -> None:
    push = js.create_push_consumer("P", durable_name="gone", idle_heartbeat=0.5)
    errors: list[BaseException] = []
    ctx = push.consume(lambda m: None, error_cb=errors.append)
    js.delete_consumer("P", "gone")
    assert ctx.join(10)
    assert isinstance(ctx.error, ConsumerDeletedError)
    assert isinstance(errors[-1], ConsumerDeletedError)


def test_a_deliver_group_shares_the_messages_none_twice(js: JetStream) -> None:
    count = 300
    js.create_push_consumer("P", durable_name="grp", deliver_group="workers", ack_policy="explicit")
    got: dict[str, list[int]] = {"a": [], "b": []}
    lock = threading.Lock()

    def member(name: str) -> Callable[[JsMsg], None]:
        def on_msg(msg: JsMsg) -> None:
            with lock:
                got[name].append(msg.metadata.sequence.stream)
            msg.ack()

        return on_msg

    # Two bindings, as two processes would hold them.
    a = js.push_consumer("P", "grp").consume(member("a"))
    b = js.push_consumer("P", "grp").consume(member("b"))
    try:
        store(js, count)
        assert wait_for(lambda: len(got["a"]) + len(got["b"]) >= count, 20)
        time.sleep(0.3)  # a message delivered twice would show up by now
    finally:
        a.stop()
        b.stop()
        a.join(5)
        b.join(5)
    assert sorted(got["a"] + got["b"]) == list(range(1, count + 1))
    assert got["a"] and got["b"], "one member got everything: the group was not shared"
    assert js.consumer_info("P", "grp").num_ack_pending == 0


def test_drops_are_counted_and_raised_from_messages(js: JetStream) -> None:
    push = js.create_push_consumer("P", durable_name="slow", ack_policy="explicit")
    stream = push.messages(pending_msgs_limit=10)
    try:
        store(js, 100)
        assert wait_for(lambda: stream.dropped + stream.pending >= 100)
        assert stream.dropped == 90
        with pytest.raises(nats_sync.SlowConsumerError, match="90 message"):
            stream.next(timeout=1)
        kept = [stream.next(timeout=1) for _ in range(10)]  # then the stream goes on
        assert [m.data for m in kept] == [b"%d" % n for n in range(10)]
    finally:
        stream.stop()


def test_drops_in_consume_go_to_error_cb(js: JetStream) -> None:
    push = js.create_push_consumer("P", durable_name="slowcb", ack_policy="none")
    errors: list[BaseException] = []
    entered = threading.Event()
    release = threading.Event()
    seen: list[bytes] = []

    def on_msg(msg: JsMsg) -> None:
        entered.set()
        release.wait(10)  # the first message holds the thread while the rest arrive
        seen.append(msg.data)

    ctx = push.consume(on_msg, error_cb=errors.append, pending_msgs_limit=5)
    try:
        store(js, 1)
        assert entered.wait(10)
        store(js, 49)
        time.sleep(0.5)
        release.set()
        assert wait_for(lambda: len(seen) == 6)  # the one in cb and the five queued
        assert wait_for(lambda: bool(errors))
    finally:
        ctx.stop()
        ctx.join(5)
    assert isinstance(errors[0], nats_sync.SlowConsumerError)
    assert "44 message" in str(errors[0])


def test_messages_goes_on_after_a_server_restart(
    js: JetStream, jetstream_server: NatsServer
) -> None:
    # The stream is on file storage: the durable and its position survive the restart.
    push = js.create_push_consumer(
        "P", durable_name="survivor", ack_policy="explicit", idle_heartbeat=0.5
    )
    store(js, 3)
    got: list[int] = []
    with push.messages() as stream:
        for _ in range(3):
            msg = stream.next(timeout=5)
            msg.double_ack(timeout=5)
            got.append(msg.metadata.sequence.stream)
        jetstream_server.restart()
        deadline = time.monotonic() + 20
        while True:  # the client comes back on its own; store once it has
            try:
                js.publish("p.a", b"after", timeout=1)
                break
            except nats_sync.Error:  # timeouts, no responders, still reconnecting
                assert time.monotonic() < deadline, "could not store after the restart"
                time.sleep(0.2)
        while len(got) < 4:
            try:
                msg = stream.next(timeout=15)
            except MissedHeartbeatError:
                continue  # the restart's silence may be reported: a warning, not an end
            msg.ack()
            got.append(msg.metadata.sequence.stream)
    assert got == [1, 2, 3, 4]

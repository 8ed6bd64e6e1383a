"""Subscriptions: next_msg, iteration and how it ends, callbacks, limits, slow consumers."""

from __future__ import annotations

import builtins
import logging
import threading
import time
from collections.abc import Callable

import pytest

import nats_sync
from nats_sync.testing import NatsServer

ClientFactory = Callable[..., nats_sync.Client]


def collect(sub: nats_sync.Subscription, count: int, timeout: float = 5.0) -> list[nats_sync.Msg]:
    """Reads exactly ``count`` messages (each within ``timeout``)."""
    return [sub.next_msg(timeout=timeout) for _ in range(count)]


def publish_many(nc: nats_sync.Client, subject: str, count: int, size: int = 0) -> list[bytes]:
    """Publishes ``count`` distinct payloads (padded to ``size`` bytes) and flushes."""
    payloads = [str(index).encode().ljust(size, b".") for index in range(count)]
    for payload in payloads:
        nc.publish(subject, payload)
    nc.flush(timeout=10)
    return payloads


class Iterating:
    """Runs ``for msg in sub`` on a thread of its own, collecting the payloads."""

    def __init__(self, sub: nats_sync.Subscription) -> None:
        self.sub = sub
        self.got: list[bytes] = []
        self.error: BaseException | None = None
        self.ended = threading.Event()
        self.thread = threading.Thread(target=self._run, name="test-iterator", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            for msg in self.sub:
                self.got.append(msg.data)
        except BaseException as err:
            self.error = err
        finally:
            self.ended.set()

    def wait_for(self, count: int, timeout: float = 5.0) -> None:
        deadline = time.monotonic() + timeout
        while len(self.got) < count and time.monotonic() < deadline:
            time.sleep(0.005)

    def join(self, timeout: float = 5.0) -> None:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "iteration did not end"
        assert self.error is None, f"iteration raised {self.error!r}"


class Recorder:
    """A callback that records payloads and thread names; ``done`` is set at ``expect``."""

    def __init__(self, expect: int, fail_on: bytes | None = None) -> None:
        self.expect = expect
        self.fail_on = fail_on
        self.got: list[bytes] = []
        self.threads: set[str] = set()
        self.idents: set[int | None] = set()
        self.done = threading.Event()

    def __call__(self, msg: nats_sync.Msg) -> None:
        self.threads.add(threading.current_thread().name)
        self.idents.add(threading.current_thread().ident)
        if msg.data == self.fail_on:
            if len(self.got) + 1 >= self.expect:
                self.done.set()
            self.got.append(msg.data)
            raise RuntimeError("callback failed on purpose")
        self.got.append(msg.data)
        if len(self.got) >= self.expect:
            self.done.set()


# --- next_msg --------------------------------------------------------------------------


def test_next_msg_timeout_raises_timeout_error(client: nats_sync.Client) -> None:
    sub = client.subscribe("quiet")
    with pytest.raises(nats_sync.TimeoutError) as caught:
        sub.next_msg(timeout=0.2)
    assert isinstance(caught.value, builtins.TimeoutError)
    assert "quiet" in str(caught.value)
    client.publish("quiet", b"now")
    assert sub.next_msg(timeout=5).data == b"now"


def test_except_builtin_timeout_error_catches_it(client: nats_sync.Client) -> None:
    sub = client.subscribe("quiet.builtin")
    caught = False
    try:
        sub.next_msg(timeout=0.1)
    except TimeoutError:  # the builtin one
        caught = True
    assert caught


def test_next_msg_on_a_callback_subscription_raises(client: nats_sync.Client) -> None:
    sub = client.subscribe("cb.only", cb=lambda msg: None)
    with pytest.raises(nats_sync.Error, match="callback"):
        sub.next_msg(timeout=0.1)


def test_next_msg_with_no_timeout_wakes_on_a_message(client: nats_sync.Client) -> None:
    sub = client.subscribe("wait.forever")
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(sub.next_msg(timeout=None).data))
    reader.start()
    client.publish("wait.forever", b"woken")
    reader.join(5)
    assert not reader.is_alive()
    assert got == [b"woken"]


def test_next_msg_with_no_timeout_wakes_on_close(connect: ClientFactory) -> None:
    nc = connect()
    sub = nc.subscribe("wait.closed")
    errors: list[BaseException] = []

    def read() -> None:
        try:
            sub.next_msg(timeout=None)
        except BaseException as err:
            errors.append(err)

    reader = threading.Thread(target=read)
    reader.start()
    time.sleep(0.05)
    nc.close()
    reader.join(5)
    assert not reader.is_alive()
    assert len(errors) == 1
    assert isinstance(errors[0], nats_sync.ConnectionClosedError)


# --- iteration ends cleanly ------------------------------------------------------------


@pytest.mark.timeout(20)
def test_iteration_ends_on_unsubscribe(client: nats_sync.Client) -> None:
    sub = client.subscribe("iter.unsub")
    loop = Iterating(sub)
    sent = publish_many(client, "iter.unsub", 5)
    sub.unsubscribe()
    loop.join()
    assert loop.got == sent
    assert sub.is_closed
    client.publish("iter.unsub", b"late")
    client.flush(timeout=5)
    assert loop.got == sent


@pytest.mark.timeout(20)
def test_iteration_ends_on_subscription_drain(client: nats_sync.Client) -> None:
    sub = client.subscribe("iter.drain")
    loop = Iterating(sub)
    sent = publish_many(client, "iter.drain", 5)
    sub.drain(timeout=5)
    loop.join()
    assert loop.got == sent
    assert client.is_connected


@pytest.mark.timeout(20)
def test_iteration_ends_on_client_drain(connect: ClientFactory) -> None:
    nc = connect()
    sub = nc.subscribe("iter.cdrain")
    loop = Iterating(sub)
    sent = publish_many(nc, "iter.cdrain", 5)
    nc.drain(timeout=5)
    loop.join()
    assert loop.got == sent
    assert nc.is_closed


@pytest.mark.timeout(20)
def test_iteration_ends_at_max_msgs(client: nats_sync.Client) -> None:
    sub = client.subscribe("iter.max", max_msgs=3)
    loop = Iterating(sub)
    sent = publish_many(client, "iter.max", 6)
    loop.join()
    assert loop.got == sent[:3]
    assert sub.is_closed


@pytest.mark.timeout(20)
def test_iteration_ends_on_client_close(connect: ClientFactory) -> None:
    nc = connect()
    sub = nc.subscribe("iter.close")
    loop = Iterating(sub)
    sent = publish_many(nc, "iter.close", 5)
    loop.wait_for(5)
    nc.close()
    loop.join()
    assert loop.got == sent
    assert sub.is_closed


@pytest.mark.timeout(20)
def test_iteration_while_waiting_ends_on_client_close(connect: ClientFactory) -> None:
    nc = connect()
    sub = nc.subscribe("iter.idle")
    loop = Iterating(sub)
    time.sleep(0.05)  # let it block in next_msg
    assert not loop.ended.is_set()
    nc.close()
    loop.join()
    assert loop.got == []


@pytest.mark.timeout(20)
def test_iteration_ends_on_server_loss(nats_server: NatsServer) -> None:
    nc = nats_sync.connect(nats_server.url, allow_reconnect=False)
    try:
        sub = nc.subscribe("iter.lost")
        loop = Iterating(sub)
        sent = publish_many(nc, "iter.lost", 3)
        nats_server.kill()
        loop.join()
        assert loop.got == sent
    finally:
        nc.close()


# --- callbacks -------------------------------------------------------------------------


@pytest.mark.timeout(20)
def test_callbacks_run_in_order_on_a_thread_that_is_not_the_reader(
    client: nats_sync.Client,
) -> None:
    record = Recorder(expect=200)
    sub = client.subscribe("cb.order", cb=record)
    sent = publish_many(client, "cb.order", 200)
    assert record.done.wait(5)
    assert record.got == sent
    assert len(record.threads) == 1, record.threads
    (name,) = record.threads
    readers = [t for t in threading.enumerate() if t.name == "nats_sync-reader"]
    assert readers, "no reader thread found"
    assert name not in {t.name for t in readers}
    assert not record.idents & {t.ident for t in readers}
    assert threading.get_ident() not in record.idents
    assert sub.callback is record
    assert sub.delivered == 200


@pytest.mark.timeout(20)
def test_each_callback_subscription_has_its_own_thread(client: nats_sync.Client) -> None:
    first, second = Recorder(expect=1), Recorder(expect=1)
    client.subscribe("cb.one", cb=first)
    client.subscribe("cb.two", cb=second)
    client.publish("cb.one", b"1")
    client.publish("cb.two", b"2")
    assert first.done.wait(5) and second.done.wait(5)
    assert first.idents.isdisjoint(second.idents)


@pytest.mark.timeout(20)
def test_a_slow_callback_does_not_block_others(client: nats_sync.Client) -> None:
    release = threading.Event()

    def blocked(msg: nats_sync.Msg) -> None:
        release.wait(10)

    client.subscribe("cb.blocked", cb=blocked)
    fast = Recorder(expect=1)
    client.subscribe("cb.fast", cb=fast)
    client.publish("cb.blocked", b"hold")
    client.publish("cb.fast", b"go")
    try:
        assert fast.done.wait(5), "a blocked callback held up another subscription"
        pull = client.subscribe("cb.pull")
        client.publish("cb.pull", b"also")
        assert pull.next_msg(timeout=5).data == b"also"
    finally:
        release.set()


@pytest.mark.timeout(20)
def test_exception_in_callback_is_logged_and_not_fatal(
    connect: ClientFactory, caplog: pytest.LogCaptureFixture
) -> None:
    errors: list[BaseException] = []
    nc = connect(error_cb=errors.append)
    record = Recorder(expect=3, fail_on=b"boom")
    caplog.set_level(logging.ERROR, logger="nats_sync")
    nc.subscribe("cb.fail", cb=record)
    for payload in (b"before", b"boom", b"after"):
        nc.publish("cb.fail", payload)
    assert record.done.wait(5)
    assert record.got == [b"before", b"boom", b"after"]
    logged = [r for r in caplog.records if r.name == "nats_sync" and r.exc_info]
    assert logged, "the callback's exception was not logged"
    assert any(isinstance(r.exc_info[1], RuntimeError) for r in logged if r.exc_info is not None)
    nc.flush(timeout=5)
    assert nc.is_connected
    nc.close()  # runs every queued error_cb
    assert any(isinstance(err, RuntimeError) for err in errors)


@pytest.mark.timeout(20)
def test_callback_can_publish_and_unsubscribe_itself(client: nats_sync.Client) -> None:
    out = client.subscribe("cb.out")
    holder: list[nats_sync.Subscription] = []

    def once(msg: nats_sync.Msg) -> None:
        client.publish("cb.out", msg.data + b"!")
        holder[0].unsubscribe()

    holder.append(client.subscribe("cb.self", cb=once))
    client.publish("cb.self", b"first")
    assert out.next_msg(timeout=5).data == b"first!"
    client.publish("cb.self", b"second")
    client.flush(timeout=5)
    with pytest.raises(nats_sync.TimeoutError):
        out.next_msg(timeout=0.2)
    assert holder[0].is_closed


# --- limits ----------------------------------------------------------------------------


@pytest.mark.timeout(20)
def test_unsubscribe_with_limit(client: nats_sync.Client) -> None:
    sub = client.subscribe("limit.unsub")
    sub.unsubscribe(limit=5)
    sent = publish_many(client, "limit.unsub", 10)
    assert sub.pending_msgs == 5
    assert [m.data for m in collect(sub, 5)] == sent[:5]
    assert sub.is_closed
    with pytest.raises(nats_sync.BadSubscriptionError):
        sub.next_msg(timeout=5)


@pytest.mark.timeout(20)
def test_unsubscribe_limit_counts_messages_already_received(client: nats_sync.Client) -> None:
    sub = client.subscribe("limit.total")
    first = publish_many(client, "limit.total", 2)
    sub.unsubscribe(limit=5)
    more = publish_many(client, "limit.total", 10)
    got = [m.data for m in collect(sub, 5)]
    assert got == first + more[:3]
    assert sub.pending_msgs == 0
    assert sub.is_closed
    assert list(sub) == []


def test_unsubscribe_limit_below_received_ends_at_once(client: nats_sync.Client) -> None:
    sub = client.subscribe("limit.past")
    publish_many(client, "limit.past", 3)
    sub.unsubscribe(limit=2)
    assert sub.is_closed
    assert len(list(sub)) == 3, "what was received stays readable"


@pytest.mark.timeout(20)
def test_subscribe_max_msgs(client: nats_sync.Client) -> None:
    sub = client.subscribe("limit.max", max_msgs=4)
    sent = publish_many(client, "limit.max", 8)
    assert sub.pending_msgs == 4
    assert [m.data for m in collect(sub, 4)] == sent[:4]
    assert sub.is_closed
    with pytest.raises(nats_sync.BadSubscriptionError):
        sub.next_msg(timeout=5)


@pytest.mark.timeout(20)
def test_subscribe_max_msgs_with_callback(client: nats_sync.Client) -> None:
    record = Recorder(expect=3)
    sub = client.subscribe("limit.maxcb", cb=record, max_msgs=3)
    sent = publish_many(client, "limit.maxcb", 6)
    assert record.done.wait(5)
    client.flush(timeout=5)
    assert record.got == sent[:3]
    assert sub.is_closed


def test_unsubscribe_twice_raises(client: nats_sync.Client) -> None:
    sub = client.subscribe("unsub.twice")
    sub.unsubscribe()
    with pytest.raises(nats_sync.BadSubscriptionError):
        sub.unsubscribe()


@pytest.mark.parametrize("value", [-1, 1.5, "3"])
def test_bad_limits_raise(client: nats_sync.Client, value: object) -> None:
    with pytest.raises(ValueError, match="max_msgs"):
        client.subscribe("bad.limit", max_msgs=value)  # type: ignore[arg-type]
    sub = client.subscribe("bad.limit")
    with pytest.raises(ValueError, match="limit"):
        sub.unsubscribe(limit=value)  # type: ignore[arg-type]


# --- properties ------------------------------------------------------------------------


def test_subscription_properties(client: nats_sync.Client) -> None:
    plain = client.subscribe("props.plain")
    grouped = client.subscribe("props.*", queue="group")
    assert (plain.subject, plain.queue) == ("props.plain", "")
    assert (grouped.subject, grouped.queue) == ("props.*", "group")
    assert isinstance(plain.sid, int) and plain.sid > 0
    assert plain.sid != grouped.sid
    assert (plain.pending_msgs, plain.pending_bytes, plain.delivered, plain.dropped) == (0, 0, 0, 0)
    assert [plain.is_closed, grouped.is_closed] == [False, False]
    client.publish("props.plain", b"abc")
    client.publish("props.plain", b"defgh")
    client.flush(timeout=5)
    assert (plain.pending_msgs, plain.pending_bytes, plain.delivered) == (2, 8, 2)
    assert plain.next_msg(timeout=5).data == b"abc"
    assert (plain.pending_msgs, plain.pending_bytes, plain.delivered) == (1, 5, 2)
    assert grouped.delivered == 2
    plain.unsubscribe()
    assert plain.is_closed is True
    assert plain.pending_msgs == 1, "the end marker is not a pending message"
    assert "props.plain" in repr(plain)


# --- slow consumers --------------------------------------------------------------------


def _slow_consumers(errors: list[BaseException]) -> list[nats_sync.SlowConsumerError]:
    return [err for err in errors if isinstance(err, nats_sync.SlowConsumerError)]


@pytest.mark.timeout(20)
def test_slow_consumer_by_message_count(connect: ClientFactory) -> None:
    errors: list[BaseException] = []
    nc = connect(error_cb=errors.append)
    sub = nc.subscribe("slow.count", pending_msgs_limit=10)
    responder = nc.subscribe("slow.svc", cb=lambda msg: msg.respond(b"alive"))
    sent = publish_many(nc, "slow.count", 100)
    assert sub.pending_msgs == 10
    assert sub.dropped == 90
    assert sub.delivered == 10
    assert nc.is_connected
    assert nc.request("slow.svc", b"?", timeout=5).data == b"alive"
    assert [m.data for m in collect(sub, 10)] == sent[:10], "the oldest ones are kept"

    # A second episode: the subscription caught up, then fell behind again.
    publish_many(nc, "slow.count", 100)
    assert sub.pending_msgs == 10
    assert sub.dropped == 180
    nc.flush(timeout=5)
    assert responder.callback is not None
    nc.close()  # every queued error_cb has run once close() returns
    slow = _slow_consumers(errors)
    assert len(slow) == 2, f"expected one report per episode, got {errors}"
    for err in slow:
        assert err.subject == "slow.count"
        assert err.sid == sub.sid
        assert "slow.count" in str(err)
        assert str(sub.sid) in str(err)


@pytest.mark.timeout(20)
def test_slow_consumer_by_bytes(connect: ClientFactory) -> None:
    errors: list[BaseException] = []
    nc = connect(error_cb=errors.append)
    sub = nc.subscribe("slow.bytes", pending_bytes_limit=1000)
    publish_many(nc, "slow.bytes", 100, size=100)
    assert sub.pending_msgs == 10
    assert sub.pending_bytes == 1000
    assert sub.dropped == 90
    assert nc.is_connected
    nc.flush(timeout=5)
    nc.close()
    slow = _slow_consumers(errors)
    assert len(slow) == 1
    assert (slow[0].subject, slow[0].sid) == ("slow.bytes", sub.sid)


@pytest.mark.timeout(20)
def test_slow_callback_subscription_drops_and_connection_stays_up(
    connect: ClientFactory,
) -> None:
    errors: list[BaseException] = []
    nc = connect(error_cb=errors.append)
    started = threading.Event()
    release = threading.Event()
    seen: list[bytes] = []

    def blocked(msg: nats_sync.Msg) -> None:
        started.set()
        release.wait(10)
        seen.append(msg.data)

    sub = nc.subscribe("slow.cb", cb=blocked, pending_msgs_limit=5)
    nc.publish("slow.cb", b"first")
    assert started.wait(5)  # the callback holds the first message; 5 more fit the queue
    publish_many(nc, "slow.cb", 50)
    assert sub.delivered == 6
    assert sub.pending_msgs == 5
    assert sub.dropped == 45
    release.set()
    nc.flush(timeout=5)
    assert nc.is_connected
    sub.drain(timeout=5)
    assert len(seen) == sub.delivered
    nc.close()
    assert len(_slow_consumers(errors)) == 1


# --- drain -----------------------------------------------------------------------------


@pytest.mark.timeout(20)
def test_subscription_drain_keeps_buffered_messages_readable(client: nats_sync.Client) -> None:
    sub = client.subscribe("sdrain")
    sent = publish_many(client, "sdrain", 5)
    sub.drain(timeout=5)
    assert sub.is_closed
    client.publish("sdrain", b"after the drain")
    client.flush(timeout=5)
    assert [m.data for m in sub] == sent
    with pytest.raises(nats_sync.BadSubscriptionError):
        sub.next_msg(timeout=5)
    assert client.is_connected


@pytest.mark.timeout(30)
@pytest.mark.parametrize("kind", ["pull", "callback"])
def test_subscription_drain_keeps_messages_sent_before_the_unsub(
    connect: ClientFactory, kind: str
) -> None:
    # Everything the server routed to the subscription before it processed the UNSUB is
    # on its way to the client: drain must deliver it, not drop what the reader has not
    # parsed yet (unlike unsubscribe()).
    receiver, sender = connect(), connect()
    seen: list[bytes] = []

    def record(msg: nats_sync.Msg) -> None:
        seen.append(msg.data)

    sub = receiver.subscribe("sdrain.inflight", cb=record if kind == "callback" else None)
    receiver.flush(timeout=5)
    count = 20000
    for _ in range(count):
        sender.publish("sdrain.inflight", b"x" * 100)
    sender.flush(timeout=10)  # the server has routed all of them to `receiver` by now
    sub.drain(timeout=10)
    if kind == "pull":
        seen = [m.data for m in sub]
    assert len(seen) == count
    assert sub.delivered == count
    assert sub.dropped == 0


@pytest.mark.timeout(20)
def test_subscription_drain_runs_callback_for_queued_messages(client: nats_sync.Client) -> None:
    seen: list[bytes] = []

    def slow(msg: nats_sync.Msg) -> None:
        time.sleep(0.005)
        seen.append(msg.data)

    sub = client.subscribe("sdrain.cb", cb=slow)
    sent = publish_many(client, "sdrain.cb", 20)
    sub.drain(timeout=5)
    assert seen == sent
    assert sub.is_closed


@pytest.mark.timeout(20)
def test_pull_messages_stay_readable_after_client_close(connect: ClientFactory) -> None:
    nc = connect()
    sub = nc.subscribe("keep.close")
    sent = publish_many(nc, "keep.close", 3)
    nc.close()
    assert sub.pending_msgs == 3
    assert [m.data for m in collect(sub, 3)] == sent
    with pytest.raises(nats_sync.ConnectionClosedError):
        sub.next_msg(timeout=5)
    assert list(sub) == []


@pytest.mark.timeout(20)
def test_pull_messages_stay_readable_after_client_drain(connect: ClientFactory) -> None:
    nc = connect()
    sub = nc.subscribe("keep.drain")
    other = nc.subscribe("keep.drain.other")
    sent = publish_many(nc, "keep.drain", 3)
    nc.publish("keep.drain.other", b"o")
    nc.drain(timeout=5)
    assert nc.is_closed
    assert [m.data for m in collect(sub, 3)] == sent
    with pytest.raises((nats_sync.BadSubscriptionError, nats_sync.ConnectionClosedError)):
        sub.next_msg(timeout=5)
    assert [m.data for m in other] == [b"o"]


@pytest.mark.timeout(20)
def test_client_drain_runs_callbacks_for_what_arrived(connect: ClientFactory) -> None:
    nc = connect()
    seen: list[bytes] = []

    def slow(msg: nats_sync.Msg) -> None:
        time.sleep(0.002)
        seen.append(msg.data)

    nc.subscribe("cdrain.cb", cb=slow)
    sent = publish_many(nc, "cdrain.cb", 50)
    nc.drain(timeout=10)
    assert seen == sent


def test_subscribe_while_draining_raises(connect: ClientFactory) -> None:
    nc = connect()
    started = threading.Event()
    release = threading.Event()

    def blocked(msg: nats_sync.Msg) -> None:
        started.set()
        release.wait(5)

    nc.subscribe("draining.block", cb=blocked)
    nc.publish("draining.block", b"x")
    assert started.wait(5)
    drainer = threading.Thread(target=nc.drain, kwargs={"timeout": 5})
    drainer.start()
    try:
        deadline = time.monotonic() + 5
        while not nc.is_draining and time.monotonic() < deadline:
            time.sleep(0.005)
        assert nc.is_draining
        with pytest.raises(nats_sync.ConnectionDrainingError):
            nc.subscribe("draining.new")
    finally:
        release.set()
        drainer.join(5)
    assert not drainer.is_alive()
    assert nc.is_closed


@pytest.mark.timeout(20)
def test_unsubscribed_callback_subscriptions_end_their_threads(client: nats_sync.Client) -> None:
    base = {t for t in threading.enumerate() if t.name.startswith("nats_sync-")}
    subs = [client.subscribe(f"many.{index}", cb=lambda msg: None) for index in range(100)]
    for index in range(100):
        client.publish(f"many.{index}", b"x")
    client.flush(timeout=5)
    started = {t for t in threading.enumerate() if t.name.startswith("nats_sync-")} - base
    assert len(started) == 100
    for sub in subs:
        sub.unsubscribe()
    for thread in started:
        thread.join(5)
    assert not [t for t in started if t.is_alive()]
    assert all(sub.is_closed for sub in subs)

"""JetStream publishing without a server: the JetStream headers and their checks, the
ack decoder, and the publisher over a fake client (retries, the publish_async window,
ack timeouts, 503 retries, close, publish_batch's results)."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, FIRST_EXCEPTION, Future, as_completed, wait
from concurrent.futures import TimeoutError as FuturesTimeoutError
from types import SimpleNamespace
from typing import Any

import pytest

from nats_sync import errors as core
from nats_sync._core.components.port import ClientPort
from nats_sync._core.components.reply_mux import InboxRoute, RequestMux
from nats_sync._core.proto import encode_headers
from nats_sync.jetstream import JetStream
from nats_sync.jetstream import errors as js_errors
from nats_sync.jetstream._publishing import ack_future, acks
from nats_sync.jetstream._publishing.publish import JsPublisher, decode_ack
from nats_sync.jetstream._streams.wire import js_headers, publish_headers
from nats_sync.jetstream.api import PubAck
from nats_sync.msg import Msg

pytestmark = pytest.mark.timeout(20)


# --- headers ---------------------------------------------------------------------------


def test_headers_merge_and_the_keywords_win() -> None:
    assert js_headers(None) is None
    mine = {"K": "v"}
    assert js_headers(mine) is mine
    assert js_headers(
        {"K": "v", "Nats-Msg-Id": "old"},
        msg_id="new",
        expected_stream="S",
        expected_last_seq=0,
        expected_last_subject_seq=7,
        expected_last_msg_id="prev",
    ) == {
        "K": "v",
        "Nats-Msg-Id": "new",
        "Nats-Expected-Stream": "S",
        "Nats-Expected-Last-Sequence": "0",
        "Nats-Expected-Last-Subject-Sequence": "7",
        "Nats-Expected-Last-Msg-Id": "prev",
    }


@pytest.mark.parametrize(
    ("keyword", "value", "named"),
    [
        ("msg_id", "", "msg_id"),
        ("msg_id", 5, "msg_id"),
        ("expected_last_msg_id", "", "expected_last_msg_id"),
        ("expected_last_seq", -1, "expected_last_seq"),
        ("expected_last_seq", True, "expected_last_seq"),
        ("expected_last_seq", "3", "expected_last_seq"),
        ("expected_last_subject_seq", 1.0, "expected_last_subject_seq"),
        ("expected_stream", "A.B", "stream name"),
        ("expected_stream", "", "stream name"),
    ],
)
def test_bad_keyword_values_name_the_keyword(keyword: str, value: object, named: str) -> None:
    with pytest.raises(core.InvalidArgumentError) as raised:
        js_headers(None, **{keyword: value})  # type: ignore[arg-type]
    assert named in str(raised.value)
    assert isinstance(raised.value, ValueError)


def test_headers_that_are_not_a_mapping() -> None:
    with pytest.raises(core.InvalidArgumentError, match="headers must be a mapping"):
        js_headers([("K", "v")], msg_id="x")  # type: ignore[arg-type]


# --- the ack decoder -------------------------------------------------------------------


def reply(data: bytes, status: int | None = None, description: str = "") -> Msg:
    return Msg("_INBOX.x.1", data=data, status=status, description=description)


@pytest.mark.parametrize(
    ("data", "ack"),
    [
        (b'{"stream":"ORDERS","seq":6}', PubAck(stream="ORDERS", seq=6)),
        (
            b'{"stream":"ORDERS","seq":6,"duplicate": true}',
            PubAck(stream="ORDERS", seq=6, duplicate=True),
        ),
        (b'{"stream":"O","domain":"hub","seq":1}', PubAck(stream="O", seq=1, domain="hub")),
        (b'{"stream":"O", "seq": 2}', PubAck(stream="O", seq=2)),
    ],
)
def test_acks_decode(data: bytes, ack: PubAck) -> None:
    assert decode_ack(reply(data), "s") == ack


def test_unknown_ack_fields_are_kept() -> None:
    ack = decode_ack(reply(b'{"stream":"O","seq":3,"batch":"b1","count":2}'), "s")
    assert (ack.stream, ack.seq, ack.extra) == ("O", 3, {"batch": "b1", "count": 2})


def test_a_refused_publish_raises_the_mapped_error() -> None:
    data = (
        b'{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 6"},'
        b'"stream":"ORDERS","seq":0}'
    )
    with pytest.raises(js_errors.WrongLastSequenceError) as raised:
        decode_ack(reply(data), "orders.a")
    assert raised.value.description == "wrong last sequence: 6"


@pytest.mark.parametrize(
    ("msg", "error"),
    [
        (reply(b"", 503), js_errors.NoStreamResponseError),
        (reply(b"", 408, "Request Timeout"), js_errors.JetStreamError),
        (reply(b"+OK"), js_errors.JetStreamError),
        (reply(b'{"stream":"O"}'), js_errors.JetStreamError),
        (reply(b'{"stream":"O","seq":true}'), js_errors.JetStreamError),
        (reply(b"[1]"), js_errors.JetStreamError),
    ],
)
def test_replies_that_are_not_acks(msg: Msg, error: type[Exception]) -> None:
    with pytest.raises(error) as raised:
        decode_ack(msg, "orders.a")
    assert "orders.a" in str(raised.value)


# --- the publisher over a fake client --------------------------------------------------


class FakeClient:
    """The CoreClient parts the publisher uses; replies are delivered by the test."""

    def __init__(self) -> None:
        self.published: list[tuple[str, bytes, str, Any]] = []
        self.mux = RequestMux("_INBOX.fake.")
        self.requests: list[str] = []
        self.request_replies: list[Msg | BaseException] = []
        self.batch_replies: list[Msg | BaseException] = []
        self.listeners: list[Callable[[str], None]] = []
        self.is_closed = False
        self.publish_error: BaseException | None = None
        self._inboxes = 0
        # What the extensions reach through nats_sync._core.components.port.port_of
        # (not instrumented).
        self._port = ClientPort(
            add_status_listener=self.add_status_listener,
            add_error_listener=self.add_error_listener,
            inbox_route=self.inbox_route,
            publish_inbox=self.publish_inbox,
            schedule=self.schedule,
            instrument=self.instrument,
        )

    def new_inbox(self) -> str:
        self._inboxes += 1
        return f"_INBOX.fake{self._inboxes}"

    def schedule(self, deadline: float, fn: Callable[[], None]) -> None:
        raise AssertionError("the publisher never schedules")

    def instrument(self, otel: Any) -> None:
        raise AssertionError("not instrumented here")

    def inbox_route(self) -> InboxRoute:
        if self.is_closed:
            raise core.ConnectionClosedError("closed")
        return InboxRoute(self.mux, lambda fn, *args: fn(*args))

    def add_error_listener(self, listener: Any) -> Any:
        return lambda: None

    def add_status_listener(self, listener: Callable[[str], None]) -> Callable[[], None]:
        self.listeners.append(listener)
        return lambda: self.listeners.remove(listener)

    def publish_inbox(
        self, subject: str, payload: bytes, reply: bytes, headers: Any = None
    ) -> None:
        if self.publish_error is not None:
            raise self.publish_error
        self.published.append((subject, payload, reply.decode(), headers))

    def request(
        self, subject: str, payload: bytes = b"", timeout: float = 1.0, headers: Any = None
    ) -> Msg:
        self.requests.append(subject)
        answer = self.request_replies.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def request_batch(
        self,
        subject: str,
        payloads: Sequence[bytes],
        timeout: float = 1.0,
        headers: Any = None,
        max_in_flight: int = 1,
    ) -> list[Msg | BaseException]:
        return self.batch_replies

    def deliver(self, reply_subject: str, data: bytes, status: int | None = None) -> None:
        """Hands a reply to the mux on a thread of its own (as the reader thread would)."""
        thread = threading.Thread(
            target=lambda: self.mux.resolve(Msg(reply_subject, data=data, status=status)),
            name="fake-reader",
        )
        thread.start()
        thread.join(5)

    def close(self) -> None:
        self.is_closed = True
        for listener in list(self.listeners):
            listener("closed")


@pytest.fixture(params=["lean", "plain"])
def future_class(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> type[ack_future.AckFutureBase]:
    """Both implementations of the future: the lean one every Python the package
    declares uses, and the documented-API one a CPython with another ``Future`` layout
    would get (the two must agree). Every test with a publisher (``fake``) runs on each;
    the tests without one make no future and run once."""
    chosen = {"lean": ack_future.LeanAckFuture, "plain": ack_future.PlainAckFuture}[request.param]
    monkeypatch.setattr(acks, "AckFuture", chosen)
    return chosen


@pytest.fixture
def fake(future_class: type[ack_future.AckFutureBase]) -> Iterator[FakeClient]:
    client = FakeClient()
    yield client
    client.close()  # ends the publisher's timer thread
    deadline = time.monotonic() + 5
    while any(t.name == "nats_sync-js-acks" for t in threading.enumerate()):
        assert time.monotonic() < deadline, "the ack timer thread outlived the close"
        time.sleep(0.01)


def publisher(
    fake: FakeClient, max_pending_acks: int = 100, stall_wait: float = 0.2, timeout: float = 5.0
) -> JsPublisher:
    return JsPublisher(
        SimpleNamespace(client=fake, timeout=timeout),  # type: ignore[arg-type]
        max_pending_acks,
        stall_wait,
    )


def context(fake: FakeClient) -> JetStream:
    """The real context over the fake client: its ``publish`` checks and merges the
    keywords before its publisher sends."""
    return JetStream(fake, timeout=5.0)  # type: ignore[arg-type]


def test_the_window_settings_are_checked(fake: FakeClient) -> None:
    with pytest.raises(core.InvalidArgumentError, match="max_pending_acks"):
        publisher(fake, max_pending_acks=0)
    with pytest.raises(core.InvalidArgumentError, match="stall_wait"):
        publisher(fake, stall_wait=-1)


def test_publish_retries_no_responders_then_gives_up(fake: FakeClient) -> None:
    pub = context(fake)
    fake.request_replies = [core.NoRespondersError("none")] * 3
    started = time.monotonic()
    with pytest.raises(js_errors.NoStreamResponseError):
        pub.publish("s", b"x", retry_attempts=2, retry_wait=0.05)
    assert len(fake.requests) == 3 and time.monotonic() - started >= 0.1
    fake.requests.clear()
    fake.request_replies = [core.NoRespondersError("none"), reply(b'{"stream":"S","seq":1}')]
    assert pub.publish("s", b"x", retry_wait=0.0) == PubAck(stream="S", seq=1)
    assert len(fake.requests) == 2


def test_publish_timeout_is_not_retried(fake: FakeClient) -> None:
    pub = context(fake)
    fake.request_replies = [core.TimeoutError("slow")]
    with pytest.raises(js_errors.PublishAckTimeoutError):
        pub.publish("s", b"x", timeout=0.1)
    assert len(fake.requests) == 1


@pytest.mark.parametrize(
    "options",
    [
        {"timeout": 0},
        {"timeout": -1.0},
        {"retry_attempts": -1},
        {"retry_attempts": 1.5},
        {"retry_wait": -0.1},
        {"expected_last_seq": -2},
    ],
)
def test_bad_options_raise_before_anything_is_sent(
    fake: FakeClient, options: dict[str, Any]
) -> None:
    js = context(fake)
    with pytest.raises(core.InvalidArgumentError):
        js.publish("s", b"x", **options)
    with pytest.raises(core.InvalidArgumentError):
        js.publish_async("s", b"x", **options)
    assert not fake.requests and not fake.published and js.publish_async_pending() == 0


def test_async_reply_settles_its_own_future(fake: FakeClient) -> None:
    pub = publisher(fake)
    first = pub.publish_async("s.a", b"1", msg_id="m1")
    second = pub.publish_async("s.b", b"2")
    assert pub.pending() == 2
    (_, _, reply1, headers1), (_, _, reply2, headers2) = fake.published
    assert reply1 != reply2 and reply1.rsplit(".", 1)[0] == reply2.rsplit(".", 1)[0]
    assert headers1 == encode_headers({"Nats-Msg-Id": "m1"}) and headers2 is None
    fake.deliver(reply2, b'{"stream":"S","seq":2}')
    assert second.result(1) == PubAck(stream="S", seq=2) and not first.done()
    fake.deliver(reply1, b'{"error":{"code":400,"err_code":10070,"description":"x"}}')
    assert isinstance(first.exception(1), js_errors.WrongLastMsgIdError)
    pub.completed(timeout=1)
    assert pub.pending() == 0
    fake.deliver(reply1, b'{"stream":"S","seq":1}')  # a late duplicate reply: ignored


def test_async_503_is_published_again_after_retry_wait(fake: FakeClient) -> None:
    pub = publisher(fake)
    future = pub.publish_async("s.a", b"1", retry_attempts=1, retry_wait=0.1)
    reply_subject = fake.published[0][2]
    started = time.monotonic()
    fake.deliver(reply_subject, b"", status=503)
    deadline = time.monotonic() + 5
    while len(fake.published) < 2:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert time.monotonic() - started >= 0.1
    # The same message again, under a fresh reply subject of the shared inbox.
    assert fake.published[1][:2] == fake.published[0][:2]
    assert fake.published[1][3] == fake.published[0][3]
    assert fake.published[1][2] != reply_subject
    assert not future.done()
    fake.deliver(fake.published[1][2], b"", status=503)  # no attempt left
    assert isinstance(future.exception(1), js_errors.NoStreamResponseError)
    assert pub.pending() == 0


def test_a_publish_that_raises_takes_no_room(fake: FakeClient) -> None:
    pub = publisher(fake, max_pending_acks=1)
    fake.publish_error = core.BadSubjectError("bad subject")
    for _ in range(3):
        with pytest.raises(core.BadSubjectError):
            pub.publish_async("bad subject", b"")
    assert pub.pending() == 0
    fake.publish_error = None
    pub.publish_async("s", b"")
    assert pub.pending() == 1


def test_the_window_stalls_then_raises_and_an_ack_frees_it(fake: FakeClient) -> None:
    pub = publisher(fake, max_pending_acks=2, stall_wait=0.2)
    pub.publish_async("s", b"1")
    pub.publish_async("s", b"2")
    started = time.monotonic()
    with pytest.raises(js_errors.TooManyStalledMsgsError, match="max_pending_acks"):
        pub.publish_async("s", b"3")
    assert time.monotonic() - started >= 0.2
    assert len(fake.published) == 2
    stalled = publisher(fake, max_pending_acks=1, stall_wait=5.0)
    stalled.publish_async("t", b"1")
    timer = threading.Timer(
        0.2, lambda: fake.deliver(fake.published[-1][2], b'{"stream":"S","seq":1}')
    )
    timer.start()
    started = time.monotonic()
    stalled.publish_async("t", b"2")  # goes on once the ack came
    assert 0.15 <= time.monotonic() - started < 4.0
    timer.join()


def test_ack_timeouts_each_on_time(fake: FakeClient) -> None:
    pub = publisher(fake)
    started = time.monotonic()
    slow = pub.publish_async("s", b"", timeout=3.0)
    # Published later with an earlier deadline: the timer must wake for it.
    quick = pub.publish_async("s", b"", timeout=0.2)
    error = quick.exception(2)
    assert isinstance(error, js_errors.PublishAckTimeoutError)
    assert 0.2 <= time.monotonic() - started < 1.5
    assert not slow.done() and pub.pending() == 1


def test_close_fails_everything_pending_and_later_publishes(fake: FakeClient) -> None:
    pub = publisher(fake)
    futures = [pub.publish_async("s", b"") for _ in range(5)]
    fake.close()
    for future in futures:
        assert isinstance(future.exception(2), core.ConnectionClosedError)
    assert pub.pending() == 0
    with pytest.raises(core.ConnectionClosedError):
        pub.publish_async("s", b"")


def test_completed_times_out_while_acks_are_awaited(fake: FakeClient) -> None:
    pub = publisher(fake)
    pub.completed(timeout=0)  # nothing awaited
    pub.publish_async("s", b"")
    with pytest.raises(core.TimeoutError, match="1 publish acks"):
        pub.completed(timeout=0.1)
    with pytest.raises(core.InvalidArgumentError):
        pub.completed(timeout=-1)


def test_publish_batch_maps_each_result(fake: FakeClient) -> None:
    pub = publisher(fake)
    bad_type = TypeError("payload must be bytes")
    fake.batch_replies = [
        reply(b'{"stream":"S","seq":1}'),
        core.NoRespondersError("none"),
        core.TimeoutError("slow"),
        bad_type,
        reply(b'{"error":{"code":400,"err_code":10060,"description":"x"}}'),
    ]
    results = pub.publish_batch("s", [b"1", b"2", b"3", b"4", b"5"])
    assert results[0] == PubAck(stream="S", seq=1)
    assert isinstance(results[1], js_errors.NoStreamResponseError)
    assert isinstance(results[2], js_errors.PublishAckTimeoutError)
    assert results[3] is bad_type
    assert isinstance(results[4], js_errors.StreamNotMatchError)
    with pytest.raises(core.InvalidArgumentError, match="sequence of payloads"):
        pub.publish_batch("s", b"one payload")


# --- the AckFuture: a concurrent.futures.Future in every way users touch ------------------


def test_the_lean_future_is_the_one_in_use_here() -> None:
    # Every Python the package declares (3.10-3.13, free-threaded 3.13t) keeps the
    # layout; a new one that does not gets the plain future, and this test says so.
    assert ack_future.future_layout_is_known()
    assert ack_future.AckFuture is ack_future.LeanAckFuture


def test_the_layout_check_refuses_a_changed_future(monkeypatch: pytest.MonkeyPatch) -> None:
    original_init = Future.__init__

    def init_with_another_field(self: Future[Any]) -> None:
        original_init(self)
        self._cancel_reason = None  # type: ignore[attr-defined]

    monkeypatch.setattr(Future, "__init__", init_with_another_field)
    assert not ack_future.future_layout_is_known()
    monkeypatch.setattr(Future, "__init__", original_init)
    assert ack_future.future_layout_is_known()
    monkeypatch.setattr(ack_future, "_FINISHED_STATE", "")
    assert not ack_future.future_layout_is_known()


def test_the_future_names_its_state_and_refuses_to_be_set_by_users(
    fake: FakeClient,
    future_class: type[ack_future.AckFutureBase],
) -> None:
    pub = publisher(fake)
    future = pub.publish_async("s.a", b"1")
    assert isinstance(future, future_class)
    assert repr(future) == f"<{future_class.__name__} for 's.a' awaited>"
    with pytest.raises(RuntimeError, match="settled by the client only"):
        future.set_result(PubAck(stream="S", seq=1))
    with pytest.raises(RuntimeError, match="settled by the client only"):
        future.set_exception(ValueError("no"))
    assert not future.cancelled() and future.running()
    fake.deliver(fake.published[0][2], b'{"stream":"S","seq":1}')
    assert repr(future).endswith("acknowledged>") and not future.running()
    failing = pub.publish_async("s.b", b"2")
    fake.deliver(
        fake.published[1][2], b'{"error":{"code":400,"err_code":10071,"description":"wrong last"}}'
    )
    assert "raised WrongLastSequenceError" in repr(failing)


def test_wait_for_the_first_exception_sees_a_failed_future(fake: FakeClient) -> None:
    pub = publisher(fake)
    good = pub.publish_async("s.a", b"1")
    bad = pub.publish_async("s.b", b"2")
    fake.deliver(fake.published[0][2], b'{"stream":"S","seq":1}')
    timer = threading.Timer(
        0.1,
        lambda: fake.deliver(
            fake.published[1][2],
            b'{"error":{"code":400,"err_code":10071,"description":"wrong last"}}',
        ),
    )
    timer.start()
    done, not_done = wait([good, bad], timeout=5, return_when=FIRST_EXCEPTION)
    timer.join()
    assert done == {good, bad} and not_done == set()
    assert isinstance(bad.exception(), js_errors.WrongLastSequenceError)


def test_the_future_works_with_concurrent_futures_wait_and_as_completed(
    fake: FakeClient,
) -> None:
    pub = publisher(fake)
    first = pub.publish_async("s.a", b"1")
    second = pub.publish_async("s.b", b"2")
    assert isinstance(first, Future) and not first.done() and first.running()
    assert first.cancel() is False  # published: it cannot be taken back
    timer = threading.Timer(
        0.1, lambda: fake.deliver(fake.published[1][2], b'{"stream":"S","seq":2}')
    )
    timer.start()
    done, not_done = wait([first, second], timeout=5, return_when=FIRST_COMPLETED)
    timer.join()
    assert done == {second} and not_done == {first}
    fake.deliver(fake.published[0][2], b'{"stream":"S","seq":1,"duplicate":true}')
    assert [f.result(1).seq for f in as_completed([first, second], timeout=5)] in ([1, 2], [2, 1])
    assert first.result() == PubAck(stream="S", seq=1, duplicate=True)
    assert first.exception() is None and first.done()


def test_a_waiting_result_and_callbacks_see_the_ack(fake: FakeClient) -> None:
    pub = publisher(fake)
    future = pub.publish_async("s.a", b"1")
    early: list[PubAck] = []
    future.add_done_callback(lambda f: early.append(f.result()))
    timer = threading.Timer(
        0.1, lambda: fake.deliver(fake.published[0][2], b'{"stream":"S","seq":7}')
    )
    timer.start()
    assert future.result(timeout=5).seq == 7  # waited on the condition made for it
    timer.join()
    late: list[PubAck] = []
    future.add_done_callback(lambda f: late.append(f.result()))  # already done: at once
    assert early == late == [PubAck(stream="S", seq=7)]


def test_an_error_reply_and_a_timed_out_wait(fake: FakeClient) -> None:
    pub = publisher(fake)
    future = pub.publish_async("s.a", b"1")
    with pytest.raises(FuturesTimeoutError):
        future.result(timeout=0.05)
    fake.deliver(
        fake.published[0][2], b'{"error":{"code":400,"err_code":10071,"description":"wrong last"}}'
    )
    assert isinstance(future.exception(1), js_errors.WrongLastSequenceError)
    with pytest.raises(js_errors.WrongLastSequenceError):
        future.result()


def test_a_result_awaited_while_the_ack_settles_is_the_decoded_ack(fake: FakeClient) -> None:
    # Waiter and reader racing on one future, thousands of times, with the interpreter
    # switching threads as often as it can: the waiter must never see a kept ack undecoded.
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        pub = publisher(fake, max_pending_acks=10_000)
        for n in range(1, 2001):
            future = pub.publish_async("s.a", b"x")
            reply = fake.published[-1][2]
            got: list[object] = []
            waiter = threading.Thread(target=lambda f=future, into=got: into.append(f.result(5)))
            waiter.start()
            fake.mux.resolve(Msg(reply, data=b'{"stream":"S","seq":%d}' % n))
            waiter.join(5)
            assert got == [PubAck(stream="S", seq=n)]
    finally:
        sys.setswitchinterval(previous)


class _SettledAtLook(set):  # type: ignore[type-arg]
    """An in-flight set that has an ack settled on another thread right after its
    ``look``-th look (``len`` or truth): the race of a waiter's look at the window with
    the reader's settlement, made to happen every time."""

    def __init__(self, items: set[Any], settle: Callable[[], None], look: int) -> None:
        super().__init__(items)
        self._settle: Callable[[], None] | None = settle
        self._looks_left = look

    def _looked(self) -> int:
        size = set.__len__(self)
        self._looks_left -= 1
        if self._looks_left == 0 and self._settle is not None:
            settler = threading.Thread(target=self._settle)
            self._settle = None
            settler.start()
            settler.join(0.2)  # as far as it gets while the looker holds the lock
        return size

    def __len__(self) -> int:
        return self._looked()

    def __bool__(self) -> bool:
        return self._looked() > 0


def test_completed_is_woken_by_the_ack_that_lands_right_after_its_first_look(
    fake: FakeClient,
) -> None:
    pub = publisher(fake)
    pub.publish_async("s.a", b"x")
    reply = fake.published[-1][2]
    window = pub.window
    window._in_flight = _SettledAtLook(
        window._in_flight,
        lambda: fake.mux.resolve(Msg(reply, data=b'{"stream":"S","seq":1}')),
        look=1,
    )
    started = time.monotonic()
    pub.completed(timeout=3.0)
    assert time.monotonic() - started < 1.5, "completed() slept through the ack"
    assert pub.pending() == 0


def test_a_full_window_is_woken_by_the_ack_that_lands_right_after_its_look(
    fake: FakeClient,
) -> None:
    pub = publisher(fake, max_pending_acks=1, stall_wait=3.0)
    pub.publish_async("s.a", b"x")
    reply = fake.published[-1][2]
    window = pub.window
    # Look 1: publish_async sees the window full; look 2, under the lock, is the race.
    window._in_flight = _SettledAtLook(
        window._in_flight,
        lambda: fake.mux.resolve(Msg(reply, data=b'{"stream":"S","seq":1}')),
        look=2,
    )
    started = time.monotonic()
    pub.publish_async("s.a", b"y")
    assert time.monotonic() - started < 1.5, "publish_async slept through the freed room"


@pytest.mark.parametrize("msg_id", ["m-1", "orders:17", "ü-ñ", "x" * 200])
def test_the_msg_id_block_is_what_encode_headers_makes(msg_id: str) -> None:
    assert publish_headers(None, msg_id) == encode_headers({"Nats-Msg-Id": msg_id})


@pytest.mark.parametrize("msg_id", ["", "a\r\nX: y", "a\n", 17])
def test_a_bad_msg_id_is_refused_before_anything_is_sent(msg_id: Any) -> None:
    with pytest.raises(core.InvalidArgumentError, match="msg_id"):
        publish_headers(None, msg_id)


def test_publish_async_with_a_msg_id_sends_its_block(fake: FakeClient) -> None:
    pub = publisher(fake)
    pub.publish_async("s.a", b"1", msg_id="m-1")
    pub.publish_async("s.a", b"2", msg_id="m-2", headers={"K": "v"})
    (_, _, _, only_id), (_, _, _, both) = fake.published
    assert only_id == encode_headers({"Nats-Msg-Id": "m-1"})
    assert both == {"K": "v", "Nats-Msg-Id": "m-2"}

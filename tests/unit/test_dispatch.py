"""The reader's dispatch, fed parsed ops with no socket: where each op goes, what it counts."""

from __future__ import annotations

import time
from typing import Any

from nats_sync._core import proto
from nats_sync._core.components.dispatch import Dispatcher
from nats_sync._core.components.reply_mux import RequestMux
from nats_sync._core.components.subscription import Subscription
from nats_sync._core.session import Session
from nats_sync._core.threads.outbox import Outbox
from nats_sync.msg import Msg


class Owner:
    """The subscriptions' owner: nothing is asked of it here."""

    def report_error(self, error: BaseException) -> None:
        raise AssertionError(error)

    def check_process(self) -> None:
        pass

    def unsubscribe(self, sub: Subscription, limit: int = 0) -> None:
        raise AssertionError("not here")

    def drain_subscription(self, sub: Subscription, timeout: float | None) -> None:
        raise AssertionError("not here")


class Reply:
    """A request waiting in the mux."""

    def __init__(self, subject: str) -> None:
        self.subject = subject
        self.got: list[Msg] = []

    def resolve(self, msg: Msg) -> None:
        self.got.append(msg)


class Calls:
    """What the dispatcher handed back to the handler."""

    def __init__(self) -> None:
        self.pongs = 0
        self.infos: list[dict[str, Any]] = []
        self.errors: list[str] = []
        self.finished: list[Subscription] = []

    def pong(self) -> None:
        self.pongs += 1


def build() -> tuple[Dispatcher, Session[Subscription], Outbox, Calls]:
    session: Session[Subscription] = Session(strict_subjects=True)
    session.activate({})
    outbox = Outbox(1 << 20, 0.0)
    calls = Calls()
    dispatcher = Dispatcher(
        session.subscriptions,
        outbox,
        calls.pong,
        calls.infos.append,
        calls.errors.append,
        calls.finished.append,
    )
    return dispatcher, session, outbox, calls


def subscribe(session: Session[Subscription], subject: str, max_msgs: int = 0) -> Subscription:
    sid = session.subscriptions.next_sid()
    sub = Subscription(Owner(), sid, subject, "", None, max_msgs, 0, 1 << 20)
    session.subscribe(sub)
    return sub


def test_messages_go_to_their_subscription_by_sid_and_are_counted() -> None:
    dispatcher, session, _, calls = build()
    a = subscribe(session, "a")
    b = subscribe(session, "b")
    dispatcher.on_ops(
        [Msg("a", data=b"1", sid=a.sid), Msg("b", data=b"22", sid=b.sid), Msg("x", sid=99)]
    )
    assert a.next_msg(0).data == b"1"
    assert b.next_msg(0).data == b"22"
    assert (dispatcher.in_msgs, dispatcher.in_bytes) == (3, 3)  # the stray one counts too
    assert calls.finished == []


def test_the_last_message_of_an_auto_unsubscribe_finishes_it() -> None:
    dispatcher, session, _, calls = build()
    sub = subscribe(session, "a", max_msgs=2)
    dispatcher.on_ops([Msg("a", sid=sub.sid), Msg("a", sid=sub.sid)])
    assert calls.finished == [sub]


def test_replies_go_to_the_request_mux_once_it_is_routed() -> None:
    dispatcher, session, _, _ = build()
    mux = RequestMux("_INBOX.t.")
    session.open_inbox(mux.subject)
    reply = Reply("service")
    subject = mux.register(reply)
    before = Msg(subject, data=b"early", sid=session.subscriptions.inbox_sid)
    dispatcher.on_ops([before])
    assert reply.got == []  # no mux routed yet: not a subscription either
    dispatcher.inbox = mux
    answer = Msg(subject, data=b"ok", sid=session.subscriptions.inbox_sid)
    dispatcher.on_ops([answer])
    assert reply.got == [answer]


def test_ping_is_answered_and_pong_info_err_are_handed_back() -> None:
    dispatcher, _, outbox, calls = build()
    info = {"ldm": True}
    dispatcher.on_ops(
        [proto.PING_OP, proto.PONG_OP, proto.InfoOp(info), proto.ErrOp("Stale Connection")]
    )
    assert [bytes(frame) for frame in outbox.frames] == [proto.PONG]
    assert calls.pongs == 1
    assert calls.infos == [info]
    assert calls.errors == ["Stale Connection"]
    assert dispatcher.errors_received == 1


def test_the_reader_may_park_only_while_requests_alone_need_it() -> None:
    dispatcher, session, _, _ = build()
    assert not dispatcher.may_park()  # no inbox yet
    mux = RequestMux("_INBOX.p.")
    dispatcher.inbox = mux
    assert not dispatcher.may_park()  # no request made lately
    mux.last_request = time.monotonic()
    assert dispatcher.may_park()
    reply = Reply("svc")
    subject = mux.register(reply)
    assert not dispatcher.may_park()  # a reply is awaited: the reader must read it
    mux.cancel(subject)
    subscribe(session, "a")
    assert not dispatcher.may_park()  # a subscription needs the reader

"""The sans-IO session, driven as h11's state machine is: events in, frames and state out.

No socket, thread or clock: each test feeds ``Session`` the calls and server ops the
handler would, then checks the frames it returns, what it tells the caller to do and
the state it is left in.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

import nats_sync._core.session
from nats_sync._core.session import Session, judge_server_error
from nats_sync._core.state import State
from nats_sync.errors import (
    AuthorizationError,
    BadSubjectError,
    BadSubscriptionError,
    ConnectionClosedError,
    ConnectionDrainingError,
    ConnectionReconnectingError,
    NatsConnectionError,
    PermissionsViolationError,
    ServerError,
    ServerMaxPayloadError,
    StaleConnectionError,
)


@dataclass(eq=False)
class FakeSub:
    """The fields the session reads of a subscription."""

    sid: int
    subject: str
    queue: str = ""
    max_msgs: int = 0
    received: int = 0
    is_closed: bool = False


def connected() -> Session[FakeSub]:
    session: Session[FakeSub] = Session(strict_subjects=True)
    assert session.activate({}) == ([], [])
    return session


def subscribed(session: Session[FakeSub], subject: str, **fields: object) -> FakeSub:
    sub = FakeSub(session.subscriptions.next_sid(), subject, **fields)  # type: ignore[arg-type]
    session.subscribe(sub)
    return sub


# --- purity ----------------------------------------------------------------------------


def test_the_session_module_imports_no_io_thread_or_clock() -> None:
    source = Path(nats_sync._core.session.__file__).read_text(encoding="utf-8")
    imported: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.split(".")[0])
            if node.module == "nats_sync._core":
                assert [alias.name for alias in node.names] == ["proto"]
            elif node.module.startswith("nats_sync."):
                assert node.module in {"nats_sync._core.state", "nats_sync.errors"}, node.module
            elif node.module == "nats_sync":
                assert [alias.name for alias in node.names] == ["_defaults"]
    forbidden = {"socket", "ssl", "threading", "time", "select", "selectors", "os", "asyncio"}
    assert not imported & forbidden


# --- the life cycle --------------------------------------------------------------------


def test_a_new_session_is_connecting_and_activation_connects_it() -> None:
    session: Session[FakeSub] = Session(strict_subjects=True)
    assert session.state is State.CONNECTING
    assert session.activate({}) == ([], [])
    assert session.state is State.CONNECTED


def test_a_failed_first_connect_that_retries_is_reconnecting() -> None:
    session: Session[FakeSub] = Session(strict_subjects=True)
    session.retry_first_connect()
    assert session.state is State.RECONNECTING
    assert session.activate({}) == ([], [])
    assert session.state is State.CONNECTED


def test_a_lost_connection_reconnects_when_allowed() -> None:
    session = connected()
    error = NatsConnectionError("gone")
    loss = session.lose(error, reconnect_allowed=True)
    assert loss is not None and loss.reconnect and loss.reason is error
    assert session.state is State.RECONNECTING


def test_a_lost_connection_without_reconnecting_closes() -> None:
    session = connected()
    loss = session.lose(NatsConnectionError("gone"), reconnect_allowed=False)
    assert loss is not None and not loss.reconnect
    assert session.state is State.CONNECTED  # the handler's close() moves it on
    session.close()
    assert session.lose(NatsConnectionError("again"), reconnect_allowed=True) is None


def test_a_draining_session_does_not_reconnect() -> None:
    session = connected()
    session.begin_drain()
    loss = session.lose(NatsConnectionError("gone"), reconnect_allowed=True)
    assert loss is not None and not loss.reconnect
    assert session.state is State.DRAINING_SUBS


def test_a_forked_child_is_closed_and_keeps_the_registry_as_it_was() -> None:
    session = connected()
    sub = subscribed(session, "a")
    session.forked()
    assert session.state is State.CLOSED
    assert session.subscriptions.by_sid == {sub.sid: sub}


def test_activation_after_close_is_refused() -> None:
    session = connected()
    assert session.close() == (True, [])
    assert session.close() == (False, [])
    assert session.activate({}) is None
    assert session.state is State.CLOSED


# --- the sid registry ------------------------------------------------------------------


def test_sids_count_up_from_one() -> None:
    session = connected()
    assert [session.subscriptions.next_sid() for _ in range(3)] == [1, 2, 3]


def test_subscribe_registers_and_returns_sub_then_unsub_max() -> None:
    session = connected()
    plain = FakeSub(1, "a.b")
    limited = FakeSub(2, "c.*", queue="q", max_msgs=5)
    assert session.subscribe(plain) == [b"SUB a.b 1\r\n"]
    assert session.subscribe(limited) == [b"SUB c.* q 2\r\n", b"UNSUB 2 5\r\n"]
    assert session.subscriptions.by_sid == {1: plain, 2: limited}
    assert len(session.subscriptions) == 2


def test_a_bad_subject_is_refused_before_the_state_and_not_registered() -> None:
    session = connected()
    session.close()
    with pytest.raises(BadSubjectError):
        session.subscribe(FakeSub(1, "a b"))
    assert not session.subscriptions


def test_while_reconnecting_sub_and_unsub_are_kept_for_the_replay() -> None:
    session = connected()
    old = subscribed(session, "old")
    session.lose(NatsConnectionError("gone"), reconnect_allowed=True)
    new = FakeSub(session.subscriptions.next_sid(), "new")
    assert session.subscribe(new) == []
    assert session.unsubscribe(old).frames == []
    assert session.subscriptions.by_sid == {new.sid: new}


def test_unsubscribe_now_ends_and_unregisters() -> None:
    session = connected()
    sub = subscribed(session, "a")
    unsubscribed = session.unsubscribe(sub)
    assert unsubscribed.frames == [b"UNSUB 1\r\n"] and unsubscribed.ended
    assert not session.subscriptions
    with pytest.raises(BadSubscriptionError):
        session.unsubscribe(sub)


def test_unsubscribe_with_a_limit_still_due_moves_max_msgs() -> None:
    session = connected()
    sub = subscribed(session, "a", received=2)
    unsubscribed = session.unsubscribe(sub, limit=5)
    assert unsubscribed.frames == [b"UNSUB 1 5\r\n"] and not unsubscribed.ended
    assert sub.max_msgs == 5
    assert session.subscriptions.by_sid == {1: sub}


def test_unsubscribe_with_a_limit_already_reached_ends_now() -> None:
    session = connected()
    sub = subscribed(session, "a", received=5)
    unsubscribed = session.unsubscribe(sub, limit=3)
    assert unsubscribed.frames == [b"UNSUB 1\r\n"] and unsubscribed.ended


def test_an_ended_subscription_is_no_longer_held() -> None:
    session = connected()
    sub = subscribed(session, "a")
    sub.is_closed = True
    with pytest.raises(BadSubscriptionError):
        session.drain_subscription(sub)


def test_a_drained_subscription_stays_registered_until_finished() -> None:
    session = connected()
    sub = subscribed(session, "a")
    assert session.drain_subscription(sub) == [b"UNSUB 1\r\n"]
    assert session.subscriptions.by_sid == {1: sub}
    session.finished(sub)
    session.finished(sub)  # idempotent
    assert not session.subscriptions


def test_finished_leaves_another_subscription_on_the_same_sid() -> None:
    session = connected()
    first = FakeSub(1, "a")
    session.subscribe(first)
    second = FakeSub(1, "b")
    session.subscriptions.by_sid[1] = second
    session.finished(first)
    assert session.subscriptions.by_sid == {1: second}


def test_the_request_inbox_gets_a_sid_of_its_own() -> None:
    session = connected()
    subscribed(session, "a")
    assert session.open_inbox("_INBOX.x.*") == [b"SUB _INBOX.x.* 2\r\n"]
    assert session.subscriptions.inbox_sid == 2
    assert 2 not in session.subscriptions.by_sid


def test_the_by_sid_dict_is_changed_in_place_never_replaced() -> None:
    session = connected()
    by_sid = session.subscriptions.by_sid
    sub = subscribed(session, "a")
    session.close()
    assert session.subscriptions.by_sid is by_sid and not by_sid
    assert sub not in by_sid.values()


# --- the replay after a reconnect ------------------------------------------------------


def test_the_replay_resends_every_subscription_in_order_then_the_inbox() -> None:
    session = connected()
    subscribed(session, "a")
    subscribed(session, "b", queue="workers")
    session.open_inbox("_INBOX.r.*")
    session.lose(NatsConnectionError("gone"), reconnect_allowed=True)
    replay = session.activate({})
    assert replay == (
        [b"SUB a 1\r\n", b"SUB b workers 2\r\n", b"SUB _INBOX.r.* 3\r\n"],
        [],
    )
    assert session.state is State.CONNECTED


def test_the_replay_sends_the_remaining_count_of_an_auto_unsubscribe() -> None:
    session = connected()
    sub = subscribed(session, "a", max_msgs=10)
    sub.received = 4
    session.lose(NatsConnectionError("gone"), reconnect_allowed=True)
    assert session.activate({}) == ([b"SUB a 1\r\n", b"UNSUB 1 6\r\n"], [])


def test_the_replay_ends_an_auto_unsubscribe_that_got_all_its_messages() -> None:
    session = connected()
    done = subscribed(session, "done", max_msgs=3)
    done.received = 3
    live = subscribed(session, "live")
    session.lose(NatsConnectionError("gone"), reconnect_allowed=True)
    assert session.activate({}) == ([b"SUB live 2\r\n"], [done])
    assert session.subscriptions.by_sid == {live.sid: live}


def test_the_replay_takes_unsubscribes_made_while_reconnecting_into_account() -> None:
    session = connected()
    sub = subscribed(session, "a", received=1)
    gone = subscribed(session, "b")
    session.lose(NatsConnectionError("gone"), reconnect_allowed=True)
    session.unsubscribe(sub, limit=4)
    session.unsubscribe(gone)
    assert session.activate({}) == ([b"SUB a 1\r\n", b"UNSUB 1 3\r\n"], [])


# --- -ERR ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "kind", "fatal"),
    [
        ("Authorization Violation", AuthorizationError, True),
        ("Maximum Payload Violation", ServerMaxPayloadError, True),
        ("Stale Connection", ServerError, True),
        ("Unknown Protocol Operation", ServerError, True),
        ("maximum subscriptions exceeded", ServerError, False),
        ("Permissions Violation for Subscription to foo", PermissionsViolationError, False),
        ("Permissions Violation for Publish to bar", PermissionsViolationError, False),
    ],
)
def test_judge_server_error_says_which_errors_end_the_connection(
    text: str, kind: type[ServerError], fatal: bool
) -> None:
    verdict = judge_server_error(text)
    assert isinstance(verdict.error, kind)
    assert verdict.fatal is fatal


def test_judge_server_error_names_what_a_permissions_violation_refused() -> None:
    sub = judge_server_error("Permissions Violation for Subscription to foo")
    assert sub.denied_subscription and not sub.denied_publish
    pub = judge_server_error("Permissions Violation for Publish to bar")
    assert pub.denied_publish and not pub.denied_subscription
    assert not judge_server_error("Authorization Violation").denied_publish


def test_a_refused_subscription_is_unregistered_and_handed_back() -> None:
    session = connected()
    other = subscribed(session, "other")
    refused = subscribed(session, "secret")
    outcome = session.on_server_error("Permissions Violation for Subscription to secret")
    assert outcome.denied is refused
    assert session.subscriptions.by_sid == {other.sid: other}
    assert session.fatal_error is None


def test_a_refused_queue_subscription_matches_its_queue() -> None:
    session = connected()
    plain = subscribed(session, "s")
    grouped = subscribed(session, "s", queue="q")
    text = 'Permissions Violation for Subscription to "s" using queue "q"'
    outcome = session.on_server_error(text)
    assert outcome.denied is grouped
    assert session.subscriptions.by_sid == {plain.sid: plain}


def test_a_fatal_error_becomes_the_reason_for_the_loss_once() -> None:
    session = connected()
    outcome = session.on_server_error("Authorization Violation")
    assert outcome.verdict.fatal and outcome.denied is None
    loss = session.lose(NatsConnectionError("closed by the server"), reconnect_allowed=True)
    assert loss is not None and isinstance(loss.reason, AuthorizationError)
    assert session.fatal_error is None
    session.activate({})
    error = StaleConnectionError("stale")
    later = session.lose(error, reconnect_allowed=True)
    assert later is not None and later.reason is error


def test_a_fatal_error_is_forgotten_by_the_next_activation() -> None:
    session = connected()
    session.on_server_error("Unknown Protocol Operation")
    session.lose(NatsConnectionError("gone"), reconnect_allowed=True)
    session.on_server_error("Authorization Violation")  # from the old connection, late
    session.activate({})
    assert session.fatal_error is None


# --- drain -----------------------------------------------------------------------------


def test_drain_runs_its_phases_in_order() -> None:
    session = connected()
    a = subscribed(session, "a")
    b = subscribed(session, "b")
    subs, frames = session.begin_drain()
    assert subs == [a, b] and frames == [b"UNSUB 1\r\n", b"UNSUB 2\r\n"]
    assert session.state is State.DRAINING_SUBS
    session.check_can_publish()  # callbacks may still respond
    with pytest.raises(ConnectionDrainingError):
        session.check_can_start()
    session.subscriptions_drained(subs)
    assert not session.subscriptions
    assert session.begin_draining_publishes()
    assert session.state is State.DRAINING_PUBS
    with pytest.raises(ConnectionDrainingError):
        session.check_can_publish()
    session.close()
    assert session.state is State.CLOSED


def test_drain_is_refused_twice_while_reconnecting_and_once_closed() -> None:
    session = connected()
    session.begin_drain()
    with pytest.raises(ConnectionDrainingError):
        session.begin_drain()
    reconnecting = connected()
    reconnecting.lose(NatsConnectionError("gone"), reconnect_allowed=True)
    with pytest.raises(ConnectionReconnectingError):
        reconnecting.begin_drain()
    closed = connected()
    closed.close()
    with pytest.raises(ConnectionClosedError):
        closed.begin_drain()


def test_publishes_are_not_drained_once_closed_meanwhile() -> None:
    session = connected()
    session.begin_drain()
    session.close()
    assert not session.begin_draining_publishes()
    assert session.state is State.CLOSED


def test_close_hands_back_the_live_subscriptions_and_refuses_what_follows() -> None:
    session = connected()
    a = subscribed(session, "a")
    assert session.close() == (True, [a])
    for call in (session.check_can_start, session.check_can_publish, session.check_open):
        with pytest.raises(ConnectionClosedError):
            call()
    with pytest.raises(ConnectionClosedError):
        session.open_inbox("_INBOX.x.*")


# --- INFO and what a loss reports ------------------------------------------------------


def test_activation_takes_the_server_info_and_its_max_payload() -> None:
    session: Session[FakeSub] = Session(strict_subjects=True)
    assert session.max_payload == 1024 * 1024  # until a server says otherwise
    session.activate({"server_id": "a", "max_payload": 2048})
    assert session.server_info == {"server_id": "a", "max_payload": 2048}
    assert session.max_payload == 2048


def test_a_later_info_is_merged_and_says_what_changed() -> None:
    session = connected()
    session.activate({"server_id": "a", "max_payload": 2048, "version": "2.10.0"})
    quiet = session.on_info({"connect_urls": ["10.0.0.2:4222"]})
    assert quiet == (None, ["10.0.0.2:4222"], False)
    change = session.on_info({"max_payload": 4096, "ldm": True, "connect_urls": "bad"})
    assert change == (4096, [], True)
    assert session.server_info["version"] == "2.10.0"
    assert session.max_payload == 4096


def test_a_plain_socket_failure_is_not_reported_but_a_stale_connection_is() -> None:
    session = connected()
    plain = session.lose(NatsConnectionError("reset"), reconnect_allowed=True)
    assert plain is not None and not plain.report
    session.activate({})
    stale = session.lose(StaleConnectionError("stale"), reconnect_allowed=True)
    assert stale is not None and stale.report
    session.activate({})
    other = session.lose(AuthorizationError("Authorization Violation"), reconnect_allowed=True)
    assert other is not None and other.report

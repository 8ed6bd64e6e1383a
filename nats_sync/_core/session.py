"""The session: the client's protocol state, sans-IO, under the handler.

How it works: ``Session`` remembers what the protocol needs remembered and nothing that
waits: the life-cycle ``state`` (``_core.state``), the sid registry (``Subscriptions``:
subscriptions by sid, the next sid, the request inbox's sid, auto-unsubscribe counts),
the pending fatal ``-ERR``, the server's INFO, the SUB/UNSUB frames a reconnect replays
and drain's phases.
Each call takes what happened (a subscribe, an ``-ERR``, a lost connection, a drain step)
and returns the frames to send and what the caller must do; it starts no thread, takes
no lock, touches no socket and reads no clock, so it is tested by feeding it events
(``tests/unit/test_session.py``). ``judge_server_error`` classifies an ``-ERR`` on its own.

Threads: none of its own. The handler (``_core.handler``) calls it under the handler's
``_lock``, on whichever thread the event happened: user threads (subscribe, unsubscribe,
drain, close), the reader (INFO, ``-ERR``, an auto-unsubscribe's last message), the
reconnect thread (the replay when a connection is activated) and any thread that saw
the connection fail. Reads without the lock: the reader's dispatch reads
``subscriptions.by_sid`` and ``subscriptions.inbox_sid``, any thread ``state`` and
``server_info`` (a dict lookup and an attribute read are atomic); hence ``by_sid`` is
never replaced, only changed, and ``server_info`` is replaced whole, never changed.
SUB/UNSUB frames come back already filtered by state: while RECONNECTING there are
none, because ``activate`` replays every subscription ahead of the buffered publishes.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Generic, NamedTuple, Protocol, TypeVar

from nats_sync import _defaults as d
from nats_sync._core import proto
from nats_sync._core.state import DRAINING, State
from nats_sync.errors import (
    BadSubscriptionError,
    ConnectionClosedError,
    ConnectionDrainingError,
    ConnectionReconnectingError,
    Error,
    NatsConnectionError,
    PermissionsViolationError,
    ServerError,
    StaleConnectionError,
    server_error_from_description,
)


class Subscribed(Protocol):
    """What the session reads of a subscription (``components.subscription.Subscription``).

    ``max_msgs`` is the one field it writes: ``unsubscribe(limit)`` moves it.
    """

    max_msgs: int

    @property
    def sid(self) -> int:
        """The subscription id on the wire."""

    @property
    def subject(self) -> str:
        """The subject subscribed to."""

    @property
    def queue(self) -> str:
        """The queue group, or ""."""

    @property
    def received(self) -> int:
        """Messages the server sent to it so far."""

    @property
    def is_closed(self) -> bool:
        """Whether it has ended."""


Sub = TypeVar("Sub", bound=Subscribed)


# --- -ERR ------------------------------------------------------------------------------


class ServerErrorVerdict(NamedTuple):
    """What an ``-ERR`` means for the client.

    Attributes:
        error: the error the description maps to (``errors.server_error_from_description``).
        fatal: the server closes the connection after it: it becomes the loss's reason.
        denied_subscription: a subscription on ``error.subject`` (and queue) was refused.
        denied_publish: a publish to ``error.subject`` was refused; requests to it fail.
    """

    error: ServerError
    fatal: bool
    denied_subscription: bool
    denied_publish: bool


def judge_server_error(description: str) -> ServerErrorVerdict:
    """Classifies the ``-ERR`` whose text (quotes removed) is ``description``.

    A permissions violation leaves the connection open (ADR-40), as does hitting the
    maximum number of subscriptions; every other ``-ERR`` is followed by the server
    closing the connection.
    """
    error = server_error_from_description(description)
    if isinstance(error, PermissionsViolationError):
        return ServerErrorVerdict(
            error,
            fatal=False,
            denied_subscription=error.operation == "subscription",
            denied_publish=error.operation == "publish" and bool(error.subject),
        )
    fatal = "maximum subscriptions" not in description.lower()
    return ServerErrorVerdict(error, fatal, denied_subscription=False, denied_publish=False)


# --- the sid registry ------------------------------------------------------------------


class Subscriptions(Generic[Sub]):
    """The live subscriptions by sid, the sids handed out, and the request inbox's sid."""

    def __init__(self, strict_subjects: bool) -> None:
        self._strict_subjects = strict_subjects
        #: Read by the reader thread without the lock: changed in place, never replaced.
        self.by_sid: dict[int, Sub] = {}
        self._sids = itertools.count(1)
        #: The routed request inbox's sid (-1 without one) and its subject.
        self.inbox_sid = -1
        self.inbox_subject: str | None = None

    def __len__(self) -> int:
        return len(self.by_sid)

    def __bool__(self) -> bool:
        return bool(self.by_sid)

    def next_sid(self) -> int:
        """A new subscription id."""
        return next(self._sids)

    def subscribe_frames(self, sub: Sub) -> list[bytes]:
        """``sub``'s SUB, and its UNSUB max when it has one.

        Raises:
            BadSubjectError: the subject (or queue group) cannot be framed.
        """
        frames = [proto.encode_sub(sub.subject, sub.sid, sub.queue, self._strict_subjects)]
        if sub.max_msgs > 0:
            frames.append(proto.encode_unsub(sub.sid, sub.max_msgs))
        return frames

    def holds(self, sub: Sub) -> bool:
        """Whether ``sub`` is live and registered (not ended, not replaced)."""
        return not sub.is_closed and self.by_sid.get(sub.sid) is sub

    def forget(self, sub: Sub) -> None:
        """Removes ``sub`` if it is still the one registered under its sid."""
        if self.by_sid.get(sub.sid) is sub:
            del self.by_sid[sub.sid]

    def open_inbox(self, subject: str) -> list[bytes]:
        """Gives the request inbox ``subject`` a sid; returns its SUB."""
        self.inbox_sid = self.next_sid()
        self.inbox_subject = subject
        return [proto.encode_sub(subject, self.inbox_sid)]

    def denied(self, subject: str, queue: str) -> Sub | None:
        """Removes and returns the first subscription on ``subject`` (and ``queue``,
        if given) that the server refused, if any."""
        for sub in list(self.by_sid.values()):
            if sub.subject == subject and (not queue or sub.queue == queue):
                del self.by_sid[sub.sid]
                return sub
        return None

    def replay(self) -> tuple[list[bytes], list[Sub]]:
        """The SUB (and UNSUB max) frames that restore every subscription on a new
        connection, the request inbox last.

        An auto-unsubscribing subscription that got all its messages is removed instead
        and returned second: the caller ends it.
        """
        frames: list[bytes] = []
        finished: list[Sub] = []
        for sub in list(self.by_sid.values()):
            remaining = sub.max_msgs - sub.received if sub.max_msgs else 0
            if sub.max_msgs and remaining <= 0:
                del self.by_sid[sub.sid]
                finished.append(sub)
                continue
            frames.append(proto.encode_sub(sub.subject, sub.sid, sub.queue, self._strict_subjects))
            if remaining:
                frames.append(proto.encode_unsub(sub.sid, remaining))
        if self.inbox_subject is not None:
            frames.append(proto.encode_sub(self.inbox_subject, self.inbox_sid))
        return frames, finished

    def clear(self) -> list[Sub]:
        """Removes every subscription; returns them."""
        subs = list(self.by_sid.values())
        self.by_sid.clear()
        return subs


# --- what the session's calls return ---------------------------------------------------


class Unsubscribed(NamedTuple):
    """The outcome of ``Session.unsubscribe``: the frames to send, and whether the
    subscription ended now (else it ends after its ``max_msgs``)."""

    frames: list[bytes]
    ended: bool


@dataclass(frozen=True)
class ServerErrorOutcome(Generic[Sub]):
    """What the handler does about an ``-ERR``: report ``verdict.error``, end
    ``denied`` with it (already unregistered), fail the requests to ``verdict.error``'s
    subject when ``verdict.denied_publish``."""

    verdict: ServerErrorVerdict
    denied: Sub | None


class Loss(NamedTuple):
    """The outcome of ``Session.lose``: whether to reconnect (else close), the reason to
    record (a fatal ``-ERR`` the server sent before closing, if any), and whether the
    error itself goes to ``error_cb`` (a plain connection failure is only logged)."""

    reconnect: bool
    reason: Error
    report: bool


class InfoChange(NamedTuple):
    """What an INFO sent on a live connection changes.

    Attributes:
        max_payload: the new payload limit, or None when unchanged.
        connect_urls: the cluster's servers it announces (may be empty).
        lame_duck: the server is going away (lame duck mode).
    """

    max_payload: int | None
    connect_urls: list[Any]
    lame_duck: bool


def announced_servers(info: dict[str, Any]) -> list[Any]:
    """The ``connect_urls`` of an INFO, or none when absent or malformed."""
    urls = info.get("connect_urls")
    return urls if isinstance(urls, list) else []


# --- the session -----------------------------------------------------------------------


class Session(Generic[Sub]):
    """The client's protocol state: its life-cycle state and its subscriptions.

    Args:
        strict_subjects: whether SUB frames check the subject's tokens (they are always
            checked for framing).
    """

    def __init__(self, strict_subjects: bool) -> None:
        self.state = State.CONNECTING
        self.subscriptions: Subscriptions[Sub] = Subscriptions(strict_subjects)
        #: An -ERR after which the server closes the connection: the reason for the loss.
        self.fatal_error: Error | None = None
        #: The live (or last) server's INFO, updated by the INFOs it sends later.
        self.server_info: dict[str, Any] = {}

    @property
    def max_payload(self) -> int:
        """The largest payload the server takes."""
        return int(self.server_info.get("max_payload", d.DEFAULT_MAX_PAYLOAD))

    # --- the checks callers run first ---------------------------------------------------

    def check_open(self) -> None:
        """Raises ConnectionClosedError once closed."""
        if self.state is State.CLOSED:
            raise ConnectionClosedError("the client is closed")

    def check_can_start(self) -> None:
        """Raises unless a subscription may start or end, or a request start."""
        self.check_open()
        if self.state in DRAINING:
            raise ConnectionDrainingError("the client is draining")

    def check_can_publish(self) -> None:
        """Raises unless publishing is accepted (closed, or draining publishes)."""
        self.check_open()
        if self.state is State.DRAINING_PUBS:
            raise ConnectionDrainingError("the client is draining; publishing has ended")

    def _now(self, frames: list[bytes]) -> list[bytes]:
        # While reconnecting there is no connection to hold a SUB/UNSUB: ``activate``
        # replays the subscriptions as they are then.
        return [] if self.state is State.RECONNECTING else frames

    # --- subscriptions ------------------------------------------------------------------

    def subscribe(self, sub: Sub) -> list[bytes]:
        """Registers ``sub``; returns the SUB (and UNSUB max) frames to send now.

        Raises:
            BadSubjectError: the subject cannot be framed (before any state check).
        """
        frames = self.subscriptions.subscribe_frames(sub)
        self.check_can_start()
        self.subscriptions.by_sid[sub.sid] = sub
        return self._now(frames)

    def unsubscribe(self, sub: Sub, limit: int = 0) -> Unsubscribed:
        """Unsubscribes ``sub`` now, or after ``limit`` messages in all when more are due.

        Raises:
            BadSubscriptionError: ``sub`` has ended.
        """
        self._check_live(sub)
        if limit and limit > sub.received:
            sub.max_msgs = limit
            return Unsubscribed(self._now([proto.encode_unsub(sub.sid, limit)]), ended=False)
        del self.subscriptions.by_sid[sub.sid]
        return Unsubscribed(self._now([proto.encode_unsub(sub.sid)]), ended=True)

    def drain_subscription(self, sub: Sub) -> list[bytes]:
        """Starts draining ``sub``: its UNSUB. It stays registered until ``finished``,
        as what the server sent before the UNSUB must still be delivered.

        Raises:
            BadSubscriptionError: ``sub`` has ended.
        """
        self._check_live(sub)
        return self._now([proto.encode_unsub(sub.sid)])

    def finished(self, sub: Sub) -> None:
        """``sub`` ended (its last message, or its drain is over): unregisters it."""
        self.subscriptions.forget(sub)

    def _check_live(self, sub: Sub) -> None:
        self.check_can_start()
        if not self.subscriptions.holds(sub):
            raise BadSubscriptionError(f"subscription {sub.sid} on {sub.subject!r} has ended")

    def open_inbox(self, subject: str) -> list[bytes]:
        """Subscribes the request inbox ``subject``; returns the frames to send now."""
        self.check_can_start()
        return self._now(self.subscriptions.open_inbox(subject))

    # --- server ops ---------------------------------------------------------------------

    def on_info(self, info: dict[str, Any]) -> InfoChange:
        """An INFO on the live connection: merged into ``server_info``."""
        self.server_info = {**self.server_info, **info}
        return InfoChange(
            self.max_payload if "max_payload" in info else None,
            announced_servers(info),
            bool(info.get("ldm")),
        )

    def on_server_error(self, description: str) -> ServerErrorOutcome[Sub]:
        """An ``-ERR``: unregisters a refused subscription; keeps a fatal error as the
        reason the server will close the connection for."""
        verdict = judge_server_error(description)
        error = verdict.error
        denied = None
        if verdict.denied_subscription:
            assert isinstance(error, PermissionsViolationError)
            denied = self.subscriptions.denied(error.subject, error.queue)
        elif verdict.fatal:
            self.fatal_error = error
        return ServerErrorOutcome(verdict, denied)

    # --- the connection's life ----------------------------------------------------------

    def retry_first_connect(self) -> None:
        """No server answered the first pass; it goes on in the background."""
        self.state = State.RECONNECTING

    def activate(self, info: dict[str, Any]) -> tuple[list[bytes], list[Sub]] | None:
        """A handshaken connection, whose server sent ``info``, becomes the live one.

        Returns the frames that restore the subscriptions (to go ahead of anything
        buffered) and the auto-unsubscribing subscriptions that are complete (to end), or
        None when closed meanwhile.
        """
        if self.state is State.CLOSED:
            return None
        self.server_info = info
        replay = self.subscriptions.replay()
        self.state = State.CONNECTED
        self.fatal_error = None
        return replay

    def lose(self, error: Error, reconnect_allowed: bool) -> Loss | None:
        """The live connection failed with ``error``; None when already closed.

        Only a connected client reconnects: a draining one closes, as drain needs the
        server's answers.
        """
        if self.state is State.CLOSED:
            return None
        reconnect = self.state is State.CONNECTED and reconnect_allowed
        if reconnect:
            self.state = State.RECONNECTING
        reason = self.fatal_error or error
        self.fatal_error = None
        # A socket that failed is expected (it is why we reconnect); a stale connection
        # or an error of ours is worth telling the user.
        report = not isinstance(error, NatsConnectionError) or isinstance(
            error, StaleConnectionError
        )
        return Loss(reconnect, reason, report)

    # --- drain and close ----------------------------------------------------------------

    def begin_drain(self) -> tuple[list[Sub], list[bytes]]:
        """Drain's first phase: no new subscription or request; returns the subscriptions
        it ends and their UNSUBs.

        Raises:
            ConnectionClosedError: closed.
            ConnectionDrainingError: already draining.
            ConnectionReconnectingError: reconnecting (drain needs the server's answers;
                as nats.go and nats-py, refuse rather than race the reconnect).
        """
        self.check_open()
        if self.state in DRAINING:
            raise ConnectionDrainingError("the client is already draining")
        if self.state is State.RECONNECTING:
            raise ConnectionReconnectingError(
                "the client is reconnecting; drain once it is connected again"
            )
        self.state = State.DRAINING_SUBS
        subs = list(self.subscriptions.by_sid.values())
        return subs, [proto.encode_unsub(sub.sid) for sub in subs]

    def subscriptions_drained(self, subs: Iterable[Sub]) -> None:
        """The server confirmed the UNSUBs: the drained subscriptions are unregistered."""
        for sub in subs:
            self.subscriptions.by_sid.pop(sub.sid, None)

    def begin_draining_publishes(self) -> bool:
        """Drain's second phase: nothing new is published. False if the client closed
        (or was never draining) meanwhile."""
        if self.state is not State.DRAINING_SUBS:
            return False
        self.state = State.DRAINING_PUBS
        return True

    def forked(self) -> None:
        """In a forked child: closed, the registry left as the parent had it (its
        subscriptions end with the parent's close, not here)."""
        self.state = State.CLOSED

    def close(self) -> tuple[bool, list[Sub]]:
        """Closes: returns whether this is the first close, and the subscriptions that
        were live (now unregistered)."""
        first = self.state is not State.CLOSED
        self.state = State.CLOSED
        return first, self.subscriptions.clear()

"""The closer alone, on the link of tests/unit/test_link.py (a socketpair as the server)
and a stand-in host: a drain sends every subscription's UNSUB, waits for the server's
word (the host's flush), ends the subscriptions, stops taking publishes and closes,
closing even when a phase times out; a close marks the session closed, ends the socket
and the connection's threads, tells the listeners once, and a second close does
nothing."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from test_handler_states import wait_until
from test_link import Made
from test_session import FakeSub

from nats_sync._core.components.closing import Closer
from nats_sync._core.components.subscription import Deliveries
from nats_sync._core.state import State
from nats_sync.errors import ConnectionClosedError, DrainTimeoutError, FlushTimeoutError


@dataclass(eq=False)
class EndedSub(FakeSub):
    """test_session's stand-in subscription, with what the closer also uses: no
    callback, and ``_end``, which records how it was ended."""

    callback: None = None
    ends: list[BaseException | None] = field(default_factory=list)

    def _end(self, error: BaseException | None = None, stop_callbacks: bool = False) -> None:
        self.ends.append(error)
        self.is_closed = True


class CloseHost:
    """The handler's side of the closer: records its flushes and closes."""

    def __init__(self, made: Made, flush_fails: bool = False) -> None:
        self.made = made
        self.flush_fails = flush_fails
        self.calls: list[str] = []
        self.callback_thread: threading.Thread | None = None
        self.closer: Closer | None = None

    def check_process(self) -> None:
        pass

    def check_can_start(self) -> None:
        self.made.session.check_can_start()

    def flush(self, timeout: float) -> None:
        self.calls.append("flush")
        if self.flush_fails:
            raise FlushTimeoutError("no PONG")

    def close(self) -> None:
        self.calls.append("close")
        assert self.closer is not None
        self.closer.close_now()


@dataclass
class Closing:
    made: Made
    host: CloseHost
    closer: Closer


def closing(made: Made, flush_fails: bool = False) -> Closing:
    host = CloseHost(made, flush_fails)
    closer = Closer(
        made.options,
        made.lock,
        made.session,
        made.outbox,
        made.publisher,
        made.link,
        made.host.dispatcher,
        Deliveries(made.threads.start),
        made.timer,
        made.callbacks,
        made.listeners,
        made.threads,
        host,
    )
    host.closer = closer
    return Closing(made, host, closer)


@pytest.fixture
def made() -> Iterator[Made]:
    made = Made()
    yield made
    made.stop()


def subscribed(made: Made, subject: str) -> EndedSub:
    sub = EndedSub(made.session.subscriptions.next_sid(), subject)
    made.session.subscribe(sub)  # type: ignore[arg-type]
    return sub


def test_close_ends_the_session_the_socket_and_the_connection_threads_once(made: Made) -> None:
    it = closing(made)
    sub = subscribed(made, "a")
    conn_threads = list(made.link.conn_threads)
    it.closer.close_now()
    assert made.session.state is State.CLOSED
    assert not made.publisher.accepting
    assert all(not thread.is_alive() for thread in conn_threads)
    assert made.events == ["closed"]
    assert len(sub.ends) == 1 and isinstance(sub.ends[0], ConnectionClosedError)
    it.closer.close_now()
    assert made.events == ["closed"]  # told once
    assert len(sub.ends) == 1


def test_drain_unsubscribes_waits_for_the_server_ends_the_subscriptions_then_closes(
    made: Made,
) -> None:
    it = closing(made)
    subs = [subscribed(made, "a"), subscribed(made, "b")]
    it.closer.drain(5.0)
    for sub in subs:
        unsub = f"UNSUB {sub.sid}\r\n".encode()
        assert wait_until(lambda: made.peer.seen(unsub))  # noqa: B023 - awaited here
        assert sub.ends[0] is None  # ended by the drain, not failed by the close
    assert it.host.calls == ["flush", "flush", "close"]
    assert made.session.state is State.CLOSED


def test_a_drain_the_server_never_confirms_fails_naming_it_and_still_closes(made: Made) -> None:
    it = closing(made, flush_fails=True)
    subscribed(made, "a")
    with pytest.raises(DrainTimeoutError, match="did not confirm the UNSUBs"):
        it.closer.drain(1.0)
    assert it.host.calls == ["flush", "close"]
    assert made.session.state is State.CLOSED


def test_draining_one_subscription_leaves_the_client_open(made: Made) -> None:
    it = closing(made)
    kept, drained = subscribed(made, "kept"), subscribed(made, "drained")
    it.closer.drain_subscription(drained, 5.0)  # type: ignore[arg-type]
    assert drained.ends == [None]
    assert kept.ends == []
    assert made.session.state is State.CONNECTED
    assert it.host.calls == ["flush"]
    assert drained.sid not in made.session.subscriptions.by_sid

"""How a continuous JetStream reader ends: :class:`ReaderEnd`, owned by a pull
``MessageStream`` and by a ``PushMessageStream``.

How it works: such a reader is one core subscription plus a status listener on its
client. Its ``ReaderEnd`` registers the listener (held through a weak reference to the
reader, so the client keeps no reader alive), keeps the reader's state (active, then
draining, then for good ended, stopped, closed or failed, with the error that failed
it) and a finalizer that removes the listener and ends the subscription once: at
``stop()``, ``drain()``, the end, or when the reader is garbage collected. Ending the
subscription wakes a reader waiting on it. ``check()`` is what a read asks first: it
raises the end (the error, ``ConnectionClosedError`` or ``BadSubscriptionError``) or
says whether the reader is active or draining.

Threads and state: it starts no thread. The state and the error are guarded by its
own ``_lock``, held for the change of state only (never while unsubscribing or
calling out), so any thread may end the reader: the reading thread, a user's thread
calling ``stop()``, the client's threads through the reader. Other readers' locks may
be held while reading ``state`` (a plain attribute read), never while ``_lock`` is.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from nats_sync._core.components.port import port_of
from nats_sync._core.components.subscription import unsubscribe_quietly
from nats_sync.errors import BadSubscriptionError, ConnectionClosedError

if TYPE_CHECKING:
    from nats_sync._core.components.subscription import Subscription

STATE_NAMES = ("active", "draining", "ended", "stopped", "closed", "failed")
ACTIVE, DRAINING, ENDED, STOPPED, CLOSED, FAILED = range(len(STATE_NAMES))

_Reader = TypeVar("_Reader")


class ReaderEnd:
    """The end of a continuous reader: its state, its terminal error, and the release
    of its subscription and status listener.

    Args:
        reader: the reader that owns this (the release runs when it is collected).
        client: the reader's connection (its status listener is added there).
        sub: the reader's core subscription, ended by the release.
        label: how errors name the reader's consumer.
        on_event: ``on_event(reader, event)`` for each client status event while the
            reader lives (on the client's threads).

    Raises:
        TypeError: ``client`` is not a ``nats_sync`` client (``sub`` is ended).
    """

    def __init__(
        self,
        reader: _Reader,
        client: object,
        sub: Subscription,
        label: str,
        on_event: Callable[[_Reader, str], None],
    ) -> None:
        self._sub = sub
        self._label = label
        self._lock = threading.Lock()
        # Guarded by _lock (see the module docstring).
        self._state = ACTIVE
        self._error: BaseException | None = None
        me = weakref.ref(reader)

        def listener(event: str) -> None:
            alive = me()
            if alive is not None:
                on_event(alive, event)

        try:
            remove = port_of(client).add_status_listener(listener)
        except BaseException:
            unsubscribe_quietly(sub)
            raise
        # Runs once: at stop(), drain(), the end, or when the reader is collected.
        self._release = weakref.finalize(reader, unsubscribe_quietly, sub, remove)
        self._release.atexit = False

    @property
    def state(self) -> int:
        """The state now: ``ACTIVE``, ``DRAINING``, ``ENDED``, ``STOPPED``, ``CLOSED``
        or ``FAILED``."""
        return self._state

    @property
    def state_name(self) -> str:
        """The state's name, for a reader's ``repr``."""
        return STATE_NAMES[self._state]

    @property
    def error(self) -> BaseException | None:
        """The terminal error that ended the reader, or None."""
        return self._error

    @property
    def is_closed(self) -> bool:
        """Whether the reader has ended or is stopped (a draining one is not yet)."""
        return self._state not in (ACTIVE, DRAINING)

    def check(self) -> int:
        """What a read asks first: the state, ``ACTIVE`` or ``DRAINING``.

        Raises:
            Exception: the terminal error (``FAILED``), raised afresh each time.
            ConnectionClosedError: the client closed.
            BadSubscriptionError: the reader was stopped, or drained and read out.
        """
        with self._lock:
            state = self._state
            if state == FAILED:
                assert self._error is not None  # set with the state
                # Raised again at every call: a fresh traceback each time, not a growing one.
                raise self._error.with_traceback(None)
        if state == CLOSED:
            raise ConnectionClosedError(f"the client closed; {self._label} ended")
        if state in (STOPPED, ENDED):
            raise BadSubscriptionError(f"the message stream of {self._label} has ended")
        return state

    def stop(self) -> None:
        """Stops at once: the subscription ends, waiting readers wake up."""
        with self._lock:
            if self._state in (ACTIVE, DRAINING):
                self._state = STOPPED
        self._release()

    def drain(self, timeout: float | None) -> None:
        """Drains the subscription (what the server sent until it saw the unsubscribe
        is still read), then releases it; a reader not active is left as it is.

        Args:
            timeout: seconds to wait for the server to confirm (None: the client's
                ``drain_timeout``).

        Raises:
            DrainTimeoutError: the server did not confirm in time (released anyway).
        """
        with self._lock:
            if self._state != ACTIVE:
                return
            self._state = DRAINING
        try:
            self._sub.drain(timeout)
        except (BadSubscriptionError, ConnectionClosedError):
            pass  # ended already: nothing more to wait for
        finally:
            self._release()

    def end(self, state: int, error: BaseException | None) -> None:
        """Ends the reader for good in ``state`` (with ``error`` for ``FAILED``),
        unless it ended already; releases the subscription."""
        with self._lock:
            if self._state in (ACTIVE, DRAINING):
                self._state = state
                self._error = error
        self._release()

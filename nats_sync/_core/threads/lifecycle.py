"""The client's threads: how they start and are joined, and what a fork leaves of them.

How it works: every thread of a client is a daemon named ``nats_sync-<role>``
(:func:`start_thread`), so a process can exit while one is blocked, and a thread dump
names them. ``close()`` joins them with :func:`join_threads`: a budget for each, or one
shared by all (for the threads that run user code). A child made by ``os.fork()``
inherits every client of its parent but none of their threads: the hook registered
with ``os.register_at_fork`` runs :func:`_after_fork_in_child` in the child, on the
thread that forked, which refreshes :data:`current_pid` and calls ``forked()`` on
every object given to :func:`watch_fork` (the handlers), so each is closed there
without touching the parent's sockets. :func:`check_same_process` raises for a client
used after a fork.

Threads and state: ``_watched`` (weak: a collected handler leaves it) is added to by the
threads that make clients. ``current_pid``, a one-item list read on hot paths (where
``os.getpid()``, a system call, would cost), is written only in a forked child, before
any other thread runs there.
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from collections.abc import Callable
from typing import Protocol, TypeVar

from nats_sync._core.threads.waiting import Signal
from nats_sync._core.transport.greenlets import route_ctrl_c_to_main_greenlet
from nats_sync.errors import ConnectionClosedError

T = TypeVar("T")


#: What components are given to start their threads with (:func:`start_thread`'s shape).
StartThread = Callable[[Callable[[], None], str], threading.Thread]


def start_thread(target: Callable[[], None], role: str) -> threading.Thread:
    """Starts ``target`` on a daemon thread named ``nats_sync-<role>``."""
    thread = threading.Thread(target=target, name=f"nats_sync-{role}", daemon=True)
    _start(thread)
    return thread


def _start(thread: threading.Thread) -> None:
    route_ctrl_c_to_main_greenlet()  # under gevent: see _core.transport.greenlets
    try:
        thread.start()
    except RuntimeError as err:
        # Ctrl-C inside start()'s wait for the new thread (threading.Event.wait, whose
        # Condition.wait turns it into "release unlocked lock"): the thread runs; what
        # happened to the caller is the interrupt.
        if isinstance(err.__context__, KeyboardInterrupt):
            raise err.__context__ from None
        raise


class ClientThreads:
    """Every thread one client starts, recorded before it starts, so that ``close()``
    joins even those whose starter was interrupted before it kept them."""

    #: Dead threads are dropped from the record once it holds more than this.
    _PRUNE_AT = 32

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []

    def start(self, target: Callable[[], None], role: str) -> threading.Thread:
        """:func:`start_thread`, recorded."""
        thread = threading.Thread(target=target, name=f"nats_sync-{role}", daemon=True)
        with self._lock:
            if len(self._threads) > self._PRUNE_AT:
                self._threads = [t for t in self._threads if t.ident is None or t.is_alive()]
            self._threads.append(thread)
        _start(thread)
        return thread

    def alive(self) -> list[threading.Thread]:
        """The recorded threads still running."""
        with self._lock:
            return [thread for thread in self._threads if thread.is_alive()]


def join_threads(
    threads: list[threading.Thread],
    me: threading.Thread,
    timeout: float,
    shared: bool = False,
) -> None:
    """Joins ``threads`` but ``me``, ``timeout`` each, or in all when ``shared``."""
    deadline = time.monotonic() + timeout
    for thread in threads:
        if thread is not me and thread.ident is not None:
            thread.join(max(deadline - time.monotonic(), 0.0) if shared else timeout)


def run_to_completion(work: Callable[[], T], role: str) -> T:
    """Runs ``work`` to its end even when Ctrl-C interrupts the caller.

    On the main thread (the only one Python runs signal handlers on) ``work`` runs on
    a thread of its own, ``nats_sync-<role>``, while the caller waits: a
    KeyboardInterrupt then ends the wait, never the work half-done. Anywhere else it
    runs right here. What ``work`` returns or raises is the caller's either way.
    """
    if threading.current_thread() is not threading.main_thread():
        return work()
    done = Signal()
    failure: list[BaseException] = []
    result: list[T] = []

    def run() -> None:
        try:
            result.append(work())
        except BaseException as err:  # handed to the waiting caller
            failure.append(err)
        finally:
            done.set()

    try:
        thread = start_thread(run, role)
    except RuntimeError:  # no new threads at interpreter exit: here, then
        return work()
    done.wait(None)
    thread.join()  # it has only to return: callers may count the threads left
    if failure:
        raise failure[0]
    return result[0]


# --- fork ----------------------------------------------------------------------------------


class Forked(Protocol):
    """What a forked child tells each client it inherited."""

    def forked(self) -> None:
        """In the child: the client's threads are gone; it closes without I/O."""


#: This process's pid, refreshed in a forked child.
current_pid = [os.getpid()]

_watched: weakref.WeakSet[Forked] = weakref.WeakSet()


def watch_fork(client: Forked) -> None:
    """Has ``client.forked()`` called in every child forked while it lives."""
    _watched.add(client)


def _after_fork_in_child() -> None:
    """A forked child inherits clients whose threads did not survive: close them there."""
    current_pid[0] = os.getpid()
    for client in list(_watched):
        client.forked()


os.register_at_fork(after_in_child=_after_fork_in_child)


def check_same_process(created_pid: int) -> None:
    """Raises if a client made in process ``created_pid`` is used in another one.

    Raises:
        ConnectionClosedError: this is another process (a forked child).
    """
    if current_pid[0] != created_pid:
        raise ConnectionClosedError(
            f"this client was created in process {created_pid} and cannot be used in "
            f"process {os.getpid()} (after a fork); create the client after the fork"
        )


class Closable(Protocol):
    """What :func:`close_despite_interrupts` closes (the handler)."""

    def close(self) -> None:
        """Closes it; safe to call again."""


def close_despite_interrupts(closable: Closable) -> None:
    """Closes ``closable``; a second Ctrl-C meanwhile (the first is being raised) only
    makes it wait for the close again, which goes on regardless (``connect()`` failing
    half-way must leave no thread or socket behind)."""
    while True:
        try:
            closable.close()
            return
        except KeyboardInterrupt:
            continue

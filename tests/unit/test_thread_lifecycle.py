"""The client's threads (``_core.threads.lifecycle``): how they start, are recorded and
joined, run_to_completion under Ctrl-C, and what a fork leaves.

No server and no client: the helpers are driven with small targets, fake threads (to
see the join budgets with a fake clock) and, for the fork, a fake client whose
``forked()`` a real ``os.fork()`` child reports on through its exit status.
"""

from __future__ import annotations

import gc
import os
import signal
import threading
import time
from collections.abc import Callable
from functools import partial

import pytest
from interrupt_points import points, run_interrupted

from nats_sync._core.threads import lifecycle
from nats_sync._core.threads.lifecycle import (
    ClientThreads,
    check_same_process,
    join_threads,
    run_to_completion,
    start_thread,
    watch_fork,
)
from nats_sync.errors import ConnectionClosedError

pytestmark = pytest.mark.timeout(20)

LIFECYCLE = ("nats_sync/_core/threads/lifecycle.py", "nats_sync/_core/threads/waiting.py")
#: A bound on any wait a test expects to end (never reached when the code is right).
BOUND = 10.0


# --- start_thread --------------------------------------------------------------------


def test_start_thread_runs_the_target_on_a_named_daemon_thread() -> None:
    seen: list[str] = []
    thread = start_thread(lambda: seen.append(threading.current_thread().name), "worker")
    thread.join(BOUND)
    assert seen == ["nats_sync-worker"]
    assert thread.name == "nats_sync-worker"
    assert thread.daemon
    assert thread.ident is not None  # started, not just made


class StartRaises:
    """A thread whose start() fails as given."""

    def __init__(self, fail: Callable[[], None]) -> None:
        self._fail = fail

    def start(self) -> None:
        self._fail()


def test_ctrl_c_inside_thread_start_is_the_callers_interrupt() -> None:
    # Ctrl-C in Thread.start()'s wait for the new thread surfaces as "release unlocked
    # lock" with the interrupt as its context: the caller must see the interrupt.
    def interrupted_wait() -> None:
        try:
            raise KeyboardInterrupt("in start")
        except KeyboardInterrupt:
            raise RuntimeError("release unlocked lock") from None

    with pytest.raises(KeyboardInterrupt, match="in start") as raised:
        lifecycle._start(StartRaises(interrupted_wait))  # type: ignore[arg-type]
    assert raised.value.__suppress_context__  # "from None": no RuntimeError chained


def test_any_other_runtime_error_from_start_goes_through() -> None:
    def no_threads() -> None:
        raise RuntimeError("can't create new thread at interpreter shutdown")

    with pytest.raises(RuntimeError, match="interpreter shutdown"):
        lifecycle._start(StartRaises(no_threads))  # type: ignore[arg-type]


# --- ClientThreads -------------------------------------------------------------------


def test_client_threads_are_named_recorded_and_listed_while_alive() -> None:
    threads = ClientThreads()
    release = threading.Event()
    running = threads.start(lambda: release.wait(BOUND), "reader")
    done = threads.start(lambda: None, "writer")
    done.join(BOUND)
    assert running.name == "nats_sync-reader" and running.daemon
    assert done.name == "nats_sync-writer" and done.daemon
    assert threads.alive() == [running]
    release.set()
    running.join(BOUND)
    assert threads.alive() == []


def test_a_thread_is_recorded_even_when_its_starter_is_interrupted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Ctrl-C as start() returns: the thread runs, its starter never got it back;
    # close() still finds it in alive().
    release = threading.Event()

    def start_then_interrupted(thread: threading.Thread) -> None:
        thread.start()
        raise KeyboardInterrupt

    monkeypatch.setattr(lifecycle, "_start", start_then_interrupted)
    threads = ClientThreads()
    with pytest.raises(KeyboardInterrupt):
        threads.start(lambda: release.wait(BOUND), "orphan")
    alive = threads.alive()
    assert [thread.name for thread in alive] == ["nats_sync-orphan"]
    release.set()
    alive[0].join(BOUND)
    assert threads.alive() == []


def test_dead_threads_are_pruned_but_not_the_live_or_unstarted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    threads = ClientThreads()
    release = threading.Event()
    live = threads.start(lambda: release.wait(BOUND), "live")
    # One whose start never happened (interrupted before it): kept, it may yet start.
    monkeypatch.setattr(lifecycle, "_start", lambda thread: None)
    unstarted = threads.start(lambda: None, "unstarted")
    monkeypatch.undo()
    dead = []
    for i in range(ClientThreads._PRUNE_AT - 1):  # up to one past the mark: kept so far
        dead.append(threads.start(lambda: None, f"dead{i}"))
        dead[-1].join(BOUND)
    assert len(threads._threads) == ClientThreads._PRUNE_AT + 1
    newest = threads.start(lambda: None, "newest")
    newest.join(BOUND)
    assert threads._threads == [live, unstarted, newest]
    release.set()
    live.join(BOUND)


# --- join_threads --------------------------------------------------------------------


class FakeClock:
    """Stands for the ``time`` module in lifecycle: only monotonic(), moved by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


class FakeThread:
    """A thread whose join(timeout) records the timeout and lets time pass: the whole
    timeout (a thread that does not end) or ``ends_after`` seconds if sooner."""

    def __init__(
        self, clock: FakeClock, started: bool = True, ends_after: float | None = None
    ) -> None:
        self.clock = clock
        self.ident = 1 if started else None
        self.ends_after = ends_after
        self.joins: list[float | None] = []

    def join(self, timeout: float | None = None) -> None:
        self.joins.append(timeout)
        assert timeout is None or timeout >= 0, "join() with a negative timeout"
        spent = timeout if self.ends_after is None else self.ends_after
        if timeout is not None and spent is not None:
            self.clock.now += min(spent, timeout)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(lifecycle, "time", fake)
    return fake


def test_join_gives_each_thread_the_whole_timeout(clock: FakeClock) -> None:
    threads = [FakeThread(clock) for _ in range(3)]
    join_threads(threads, threading.current_thread(), 2.0)  # type: ignore[arg-type]
    assert [t.joins for t in threads] == [[2.0], [2.0], [2.0]]


def test_a_shared_timeout_is_spent_across_the_threads(clock: FakeClock) -> None:
    first = FakeThread(clock, ends_after=0.75)
    rest = [FakeThread(clock) for _ in range(3)]
    join_threads([first, *rest], threading.current_thread(), 2.0, shared=True)  # type: ignore[list-item]
    assert first.joins == [2.0]
    assert rest[0].joins == [1.25]  # what the first left
    assert rest[1].joins == [0.0]  # spent: never a negative timeout
    assert rest[2].joins == [0.0]


def test_join_skips_the_calling_thread_and_threads_never_started(clock: FakeClock) -> None:
    me = FakeThread(clock)
    unstarted = FakeThread(clock, started=False)
    other = FakeThread(clock)
    join_threads([me, unstarted, other], me, 1.0)  # type: ignore[list-item]
    assert me.joins == []  # joining oneself raises "cannot join current thread"
    assert unstarted.joins == []  # joining one never started raises too
    assert other.joins == [1.0]


def test_join_real_threads_including_the_caller_and_one_not_started() -> None:
    release = threading.Event()
    running = start_thread(lambda: release.wait(BOUND), "joined")
    never = threading.Thread(target=lambda: None)
    release.set()
    join_threads([threading.current_thread(), never, running], threading.current_thread(), BOUND)
    assert not running.is_alive()


def test_join_of_a_thread_that_does_not_end_returns_after_the_timeout() -> None:
    release = threading.Event()
    stuck = start_thread(lambda: release.wait(BOUND), "stuck")
    try:
        join_threads([stuck], threading.current_thread(), 0.01)
        assert stuck.is_alive()  # returned without it: a budget, not a wait for ever
    finally:
        release.set()
        stuck.join(BOUND)


# --- run_to_completion ---------------------------------------------------------------


def test_on_the_main_thread_work_runs_on_a_thread_of_its_role() -> None:
    assert threading.current_thread() is threading.main_thread()
    ran_on: list[threading.Thread] = []

    def work() -> str:
        ran_on.append(threading.current_thread())
        return "result"

    assert run_to_completion(work, "close") == "result"
    assert ran_on[0] is not threading.main_thread()
    assert ran_on[0].name == "nats_sync-close"
    assert not ran_on[0].is_alive()  # joined before returning


def test_what_work_returns_is_returned_even_none() -> None:
    assert run_to_completion(lambda: None, "none") is None
    value = object()
    assert run_to_completion(lambda: value, "obj") is value


class Stop(BaseException):
    """Not an Exception: run_to_completion must hand over every BaseException."""


@pytest.mark.parametrize("error", [ValueError("bad"), Stop("halt"), KeyboardInterrupt("in work")])
def test_what_work_raises_is_raised_to_the_caller(error: BaseException) -> None:
    def work() -> None:
        raise error

    with pytest.raises(type(error)) as raised:
        run_to_completion(work, "failing")
    assert raised.value is error


def test_off_the_main_thread_work_runs_right_there() -> None:
    seen: list[object] = []

    def caller() -> None:
        seen.append(run_to_completion(threading.current_thread, "here"))

    thread = threading.Thread(target=caller, name="helper", daemon=True)
    thread.start()
    thread.join(BOUND)
    assert seen == [thread]


def test_off_the_main_thread_errors_go_through_unchanged() -> None:
    seen: list[BaseException] = []
    error = ValueError("inline")

    def caller() -> None:
        try:
            run_to_completion(partial(_raise, error), "here")
        except ValueError as err:
            seen.append(err)

    thread = threading.Thread(target=caller, daemon=True)
    thread.start()
    thread.join(BOUND)
    assert seen == [error]


def _raise(error: BaseException) -> None:
    raise error


def test_with_no_new_threads_left_work_runs_on_the_caller(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # At interpreter exit threading refuses new threads with RuntimeError.
    def refuse(target: Callable[[], None], role: str) -> threading.Thread:
        raise RuntimeError("can't create new thread at interpreter shutdown")

    monkeypatch.setattr(lifecycle, "start_thread", refuse)
    assert run_to_completion(threading.current_thread, "exit") is threading.main_thread()


@pytest.mark.skipif(
    signal.getsignal(signal.SIGINT) is not signal.default_int_handler,
    reason="SIGINT is not Python's KeyboardInterrupt here",
)
def test_a_real_ctrl_c_ends_the_wait_never_the_work() -> None:
    # The work sends SIGINT to the main thread, then goes on only once the test saw
    # the interrupt: had the interrupt cut the work, "end" would never be recorded.
    steps: list[str] = []
    go_on = threading.Event()
    workers: list[threading.Thread] = []

    def work() -> str:
        workers.append(threading.current_thread())
        steps.append("begin")
        signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)
        assert go_on.wait(BOUND)
        steps.append("end")
        return "done"

    with pytest.raises(KeyboardInterrupt):
        run_to_completion(work, "interrupted")
    assert steps == ["begin"]  # the caller was freed while the work still ran
    go_on.set()
    workers[0].join(BOUND)
    assert steps == ["begin", "end"]


def test_ctrl_c_at_any_point_of_run_to_completion_never_cuts_the_work() -> None:
    runs = 0
    for at in points():
        steps: list[str] = []
        role = f"walk{at}"

        def work(steps: list[str] = steps) -> str:
            steps.append("begin")
            steps.append("end")
            return "done"

        outcome = run_interrupted(partial(run_to_completion, work, role), at, LIFECYCLE)
        runs += 1
        for thread in threading.enumerate():
            if thread.name == f"nats_sync-{role}":
                thread.join(BOUND)
                assert not thread.is_alive()
        # Never started, or run whole (and once), whatever the caller saw.
        assert steps in ([], ["begin", "end"]), outcome.hook.where
        if outcome.interrupted is None:
            assert outcome.result == "done"
            assert steps == ["begin", "end"]
            break
    assert runs > 5


# --- fork ----------------------------------------------------------------------------


class FakeClient:
    def __init__(self) -> None:
        self.forked_calls = 0

    def forked(self) -> None:
        self.forked_calls += 1


def test_check_same_process_passes_in_the_process_that_made_the_client() -> None:
    assert lifecycle.current_pid[0] == os.getpid()
    check_same_process(os.getpid())


def test_check_same_process_raises_in_another_process() -> None:
    other = os.getpid() + 1
    with pytest.raises(ConnectionClosedError) as raised:
        check_same_process(other)
    message = str(raised.value)
    assert str(other) in message and str(os.getpid()) in message
    assert "after a fork" in message


def test_watch_fork_holds_its_clients_weakly() -> None:
    gc.collect()  # handlers an earlier test left to the collector go first
    before = len(lifecycle._watched)
    client = FakeClient()
    watch_fork(client)
    watch_fork(client)  # twice: still once
    assert len(lifecycle._watched) == before + 1
    del client
    gc.collect()
    assert len(lifecycle._watched) == before


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no os.fork here")
def test_a_forked_child_tells_every_watched_client_and_refreshes_its_pid() -> None:
    client = FakeClient()
    watch_fork(client)
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:  # the child: report through the exit status only, never return
        code = 99
        try:
            code = 0
            if client.forked_calls != 1:
                code |= 1
            if lifecycle.current_pid[0] != os.getpid():
                code |= 2
            try:
                check_same_process(parent)
                code |= 4
            except ConnectionClosedError:
                pass
        finally:
            os._exit(code)
    status = _wait_child(pid)
    assert os.WIFEXITED(status)
    code = os.WEXITSTATUS(status)
    assert code & 1 == 0, "forked() was not called once in the child"
    assert code & 2 == 0, "current_pid not refreshed in the child"
    assert code & 4 == 0, "check_same_process passed in the child"
    assert code == 0
    # The parent is untouched.
    assert client.forked_calls == 0
    assert lifecycle.current_pid[0] == parent
    check_same_process(parent)


def _wait_child(pid: int) -> int:
    """The child's wait status; kills it (and fails) if it has not ended within BOUND."""
    end = time.monotonic() + BOUND
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        if time.monotonic() > end:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise AssertionError("the forked child did not end")
        time.sleep(0.005)

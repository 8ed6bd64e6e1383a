"""The callback thread on its own: order, errors, stop, and calls after it has ended."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from nats_sync._core.threads.callbacks import CallbackRunner

#: Bound on every wait for another thread.
STEP_TIMEOUT = 5.0


@contextmanager
def running(runner: CallbackRunner) -> Iterator[threading.Thread]:
    """The runner's thread, started; stopped and joined (bounded) at the end."""
    thread = threading.Thread(target=runner.run, name="callbacks", daemon=True)
    thread.start()
    try:
        yield thread
    finally:
        runner.stop()
        thread.join(STEP_TIMEOUT)
        assert not thread.is_alive(), "the callback thread did not end"


def barrier_call(runner: CallbackRunner) -> None:
    """Returns once everything submitted before it has run."""
    reached = threading.Event()
    runner.submit(reached.set)
    assert reached.wait(STEP_TIMEOUT), "the callback thread did not get there"


def test_calls_run_in_the_order_submitted_with_their_arguments() -> None:
    runner = CallbackRunner()
    calls: list[tuple[int, str]] = []
    with running(runner):
        for index in range(200):
            runner.submit(lambda i, tag: calls.append((i, tag)), index, f"#{index}")
        barrier_call(runner)
    assert calls == [(index, f"#{index}") for index in range(200)]


def test_calls_run_on_the_callback_thread() -> None:
    runner = CallbackRunner()
    ran_on: list[threading.Thread] = []
    with running(runner) as thread:
        runner.submit(lambda: ran_on.append(threading.current_thread()))
        barrier_call(runner)
    assert ran_on == [thread]


def test_a_callback_that_raises_is_logged_and_the_thread_carries_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    runner = CallbackRunner()
    after: list[str] = []

    def broken_callback() -> None:
        raise ValueError("user code failed")

    with caplog.at_level(logging.ERROR, logger="nats_sync"), running(runner) as thread:
        runner.submit(broken_callback)
        runner.submit(after.append, "still running")
        barrier_call(runner)
        assert thread.is_alive()
    assert after == ["still running"]
    [record] = [r for r in caplog.records if r.exc_info is not None]
    assert "broken_callback" in record.getMessage()
    assert record.exc_info is not None and isinstance(record.exc_info[1], ValueError)


def test_a_none_callback_is_ignored() -> None:
    runner = CallbackRunner()
    calls: list[str] = []
    with running(runner):
        runner.submit(None)
        runner.submit(None, "an argument")
        runner.submit(calls.append, "after")
        barrier_call(runner)
    assert calls == ["after"]


def test_stop_runs_everything_submitted_before_it() -> None:
    runner = CallbackRunner()
    release = threading.Event()
    started = threading.Event()
    calls: list[int] = []

    def slow_first() -> None:
        started.set()
        release.wait(STEP_TIMEOUT)
        calls.append(0)

    thread = threading.Thread(target=runner.run, daemon=True)
    thread.start()
    runner.submit(slow_first)
    assert started.wait(STEP_TIMEOUT)
    for index in range(1, 50):  # queued behind a callback still running
        runner.submit(calls.append, index)
    runner.stop()
    release.set()
    thread.join(STEP_TIMEOUT)
    assert not thread.is_alive()
    assert calls == list(range(50))


def test_stop_before_the_thread_starts_still_runs_what_was_queued() -> None:
    runner = CallbackRunner()
    calls: list[int] = []
    for index in range(10):
        runner.submit(calls.append, index)
    runner.stop()
    runner.run()  # returns: the stop marker ends it
    assert calls == list(range(10))


def test_after_the_thread_ended_a_call_runs_at_once_on_the_callers_thread(
    caplog: pytest.LogCaptureFixture,
) -> None:
    runner = CallbackRunner()
    with running(runner):
        pass
    ran_on: list[threading.Thread] = []
    runner.submit(lambda: ran_on.append(threading.current_thread()))
    assert ran_on == [threading.current_thread()]  # already ran: submit did it

    def broken_callback() -> None:
        raise ValueError("late user code failed")

    with caplog.at_level(logging.ERROR, logger="nats_sync"):
        runner.submit(broken_callback)  # logged, not raised into the caller
    assert any(
        r.exc_info is not None and isinstance(r.exc_info[1], ValueError) for r in caplog.records
    )


def test_calls_from_many_threads_each_run_once() -> None:
    runner = CallbackRunner()
    submitters, per_thread = 8, 200
    counts: dict[tuple[int, int], int] = {}
    lock = threading.Lock()

    def record(key: tuple[int, int]) -> None:
        with lock:
            counts[key] = counts.get(key, 0) + 1

    def submit_many(thread_index: int) -> None:
        for index in range(per_thread):
            runner.submit(record, (thread_index, index))

    with running(runner):
        threads = [threading.Thread(target=submit_many, args=(i,)) for i in range(submitters)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(STEP_TIMEOUT)
        barrier_call(runner)
    assert len(counts) == submitters * per_thread
    assert set(counts.values()) == {1}


def test_per_submitter_order_is_kept_across_threads() -> None:
    runner = CallbackRunner()
    seen: dict[int, list[int]] = {0: [], 1: []}

    def submit_many(thread_index: int) -> None:
        for index in range(300):
            runner.submit(seen[thread_index].append, index)

    with running(runner):
        threads = [threading.Thread(target=submit_many, args=(i,)) for i in (0, 1)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(STEP_TIMEOUT)
        barrier_call(runner)
    assert seen == {0: list(range(300)), 1: list(range(300))}


def test_a_call_submitted_while_the_stopped_thread_drains_waits_its_turn() -> None:
    runner = CallbackRunner()
    release_busy, release_draining = threading.Event(), threading.Event()
    draining = threading.Event()
    calls: list[str] = []

    def draining_call() -> None:
        calls.append("queued first")
        draining.set()
        release_draining.wait(STEP_TIMEOUT)

    thread = threading.Thread(target=runner.run, daemon=True)
    thread.start()
    runner.submit(release_busy.wait, STEP_TIMEOUT)  # keeps the thread off the marker
    runner.stop()
    runner.submit(draining_call)  # both behind the marker: run by the drain
    runner.submit(calls.append, "queued second")
    release_busy.set()
    assert draining.wait(STEP_TIMEOUT)
    runner.submit(calls.append, "submitted last")  # the thread has not ended yet
    release_draining.set()
    thread.join(STEP_TIMEOUT)
    assert not thread.is_alive()
    assert calls == ["queued first", "queued second", "submitted last"]

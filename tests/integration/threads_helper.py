"""Running a test body on many threads at once, bounded in time (shared by the thread
safety and free-threaded stress tests)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


def run_threads(
    count: int, body: Callable[[int], None], *, join_within: float = 30.0, label: str = "worker"
) -> list[BaseException]:
    """Runs ``body(index)`` on ``count`` threads released together; returns their errors.

    Fails the test when a thread is still running ``join_within`` seconds after they
    started (``label`` names them in that message).
    """
    barrier = threading.Barrier(count)
    errors: list[BaseException] = []

    def run(index: int) -> None:
        try:
            barrier.wait(10)
            body(index)
        except BaseException as err:
            errors.append(err)

    threads = [
        threading.Thread(target=run, args=(i,), name=f"{label}-{i}", daemon=True)
        for i in range(count)
    ]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + join_within
    for thread in threads:
        thread.join(max(deadline - time.monotonic(), 0.0))
    hung = [thread.name for thread in threads if thread.is_alive()]
    assert not hung, f"{label} threads hung: {hung}"
    return errors

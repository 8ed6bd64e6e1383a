"""``publish_async``'s lean futures and the garbage collector on another thread.

A done-callback added from the publishing thread made the future's lazy fields by
materializing its ``__dict__``; while a collection ran (finalizers that let other threads
run, as py4j's do in a Spark driver) CPython 3.11 crashed with a segfault in the
collector, in 2 of 2 runs of 20 s. Run in a child process, so a crash fails this test
instead of the whole run."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from nats_sync.testing import NatsServer

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

_CHILD = """
import gc, sys, threading, time
import nats_sync

class Finalized:
    def __init__(self):
        self.cycle = self
    def __del__(self):
        time.sleep(0)  # a finalizer that lets other threads run

def churn(stop):
    while not stop.is_set():
        for _ in range(20):
            Finalized()
        time.sleep(0.005)

with nats_sync.connect(sys.argv[1]) as nc:
    js = nc.jetstream()
    js.create_stream(name="GC", subjects=["gc.>"])
    stop = threading.Event()
    threading.Thread(target=churn, args=(stop,), daemon=True).start()
    gc.set_threshold(300, 10, 10)
    n, end = 0, time.monotonic() + float(sys.argv[2])
    while time.monotonic() < end:
        future = js.publish_async("gc.x", b"x", msg_id=str(n), timeout=5)
        future.add_done_callback(lambda done: None)
        n += 1
        if n % 2000 == 0:
            js.publish_async_completed(30)
    js.publish_async_completed(30)
    stop.set()
    print("published", n)
"""


def test_done_callbacks_while_the_collector_runs_do_not_crash() -> None:
    with NatsServer(jetstream=True) as server:
        done = subprocess.run(
            [sys.executable, "-X", "faulthandler", "-c", textwrap.dedent(_CHILD), server.url, "15"],
            capture_output=True,
            text=True,
            timeout=90,
            check=False,
        )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("published ")

"""Ctrl-C at any moment never leaves the client unusable (issue 24, part 1).

The fuzz tests run ``interrupt_child.py`` in a subprocess and send it SIGINT at random
0.5-10 ms intervals while it loops over one call family (catching KeyboardInterrupt and
going on); then the child makes 20 calls that must all succeed and closes the client
within its bound.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nats_sync.testing import NatsServer

#: About 5 s per family (3 s of SIGINTs, the child's start and its 20 calls): make test
#: runs them, make test-fast leaves them to the deterministic test_interrupts_traced.py.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

CHILD = Path(__file__).with_name("interrupt_child.py")
ROOT = Path(__file__).resolve().parents[2]
#: Seconds of SIGINTs per family.
STORM = float(os.environ.get("NATS_SYNC_INTERRUPT_STORM", "3"))
#: close() joins each thread within 5 s; after a storm it must not need that.
CLOSE_BOUND = 2.0


def run_storm(url: str, family: str, storm: float = STORM) -> dict[str, object]:
    """Runs the child over ``family`` with SIGINTs for ``storm`` seconds; its report."""
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    child = subprocess.Popen(
        [sys.executable, str(CHILD), family, url],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert child.stdout is not None
        ready = child.stdout.readline().strip()
        assert ready == "READY", child.stderr.read() if child.stderr else ""
        rng = random.Random()
        sent = 0
        end = time.monotonic() + storm
        while time.monotonic() < end:
            time.sleep(rng.uniform(0.0005, 0.010))
            child.send_signal(signal.SIGINT)
            sent += 1
        child.send_signal(signal.SIGUSR1)
        out, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    lines = [line for line in out.splitlines() if line.startswith("{")]
    assert lines, f"the child reported nothing (rc {child.returncode}):\n{err[-3000:]}"
    report: dict[str, object] = json.loads(lines[-1])
    report["sent"] = sent
    return report


CORE = ["request", "request_batch", "flush", "next_msg", "publish_full", "drain_close"]


@pytest.fixture(scope="module")
def server() -> object:
    with NatsServer(jetstream=True) as srv:
        yield srv


ON_TOP = ["js_publish", "js_publish_async", "js_fetch", "js_messages", "kv", "obj", "micro"]


FAMILIES = CORE + ON_TOP


@pytest.mark.parametrize("family", FAMILIES)
def test_storm_of_interrupts_leaves_the_client_usable(server: NatsServer, family: str) -> None:
    """Thousands of SIGINTs over one call family, then 20 calls all work and close()
    ends within its bound, leaving no thread."""
    report = run_storm(server.url, family)
    assert report["ok"] == 20, json.dumps(report)
    assert float(report["close_took"]) < CLOSE_BOUND, report  # type: ignore[arg-type]
    assert report["threads"] == [], report
    assert int(report["caught"]) > 0, report  # type: ignore[call-overload]

"""Ctrl-C under gevent behaves as it does with threads (``ctrl_c_child.py`` runs each case
in a child, patched by gevent or on plain threads, and this compares).

What holds: SIGINT while the main greenlet waits in a request, ``next_msg`` or a
JetStream ``fetch`` raises KeyboardInterrupt there at once, and the client works after.
Under gevent every greenlet runs on the main OS thread, where Python runs signal
handlers, so Python's default handler would raise a KeyboardInterrupt inside whichever
of the client's greenlets runs and end it; the client routes it to the main greenlet
(``_core.transport.greenlets.route_ctrl_c_to_main_greenlet``), as with threads it only
ever reaches the main thread: a Ctrl-C during a callback, and a storm of them, are the
cases that show it.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from gevent_runs import ROOT, child_env

from nats_sync.testing import NatsServer

CHILD = Path(__file__).with_name("ctrl_c_child.py")
#: The most a child may take (its server set-up, its calls, its close).
CHILD_TIMEOUT = 60.0
#: The longest a storm runs when nothing stops it earlier.
STORM = 8.0
#: The longest an interrupted wait may take to raise (a 30 s wait, interrupted at once).
RAISED_WITHIN = 2.0

pytestmark = pytest.mark.timeout(CHILD_TIMEOUT + 30)


@pytest.fixture(scope="module")
def server() -> Iterator[NatsServer]:
    with NatsServer(jetstream=True) as srv:
        yield srv


def _report(out: str, err: str, returncode: int) -> dict[str, object]:
    lines = [line for line in out.splitlines() if line.startswith("{")]
    assert lines, f"the child reported nothing (rc {returncode}):\n{out[-3000:]}\n{err[-6000:]}"
    report: dict[str, object] = json.loads(lines[-1])
    return report


def run_wait_case(mode: str, url: str) -> dict[str, object]:
    """The ``wait`` case: SIGINT a moment after each ``WAITING`` line."""
    child = subprocess.Popen(
        [sys.executable, str(CHILD), mode, "wait", url],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=child_env(),
    )
    out: list[str] = []
    try:
        assert child.stdout is not None
        deadline = time.monotonic() + CHILD_TIMEOUT
        for line in child.stdout:
            out.append(line)
            if line.startswith("WAITING"):
                time.sleep(0.3)  # inside the call by then
                child.send_signal(signal.SIGINT)
            assert time.monotonic() < deadline, "".join(out)
        child.wait(CHILD_TIMEOUT)
        err = child.stderr.read() if child.stderr else ""
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    return _report("".join(out), err, child.returncode)


def run_case(mode: str, case: str, url: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, str(CHILD), mode, case, url],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=child_env(),
        timeout=CHILD_TIMEOUT,
        check=False,
    )
    return _report(done.stdout, done.stderr, done.returncode)


def run_storm(mode: str, url: str) -> dict[str, object]:
    """The ``storm`` case: SIGINT every 1-10 ms until the child stops or ``STORM`` ends."""
    child = subprocess.Popen(
        [sys.executable, str(CHILD), mode, "storm", url],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=child_env(),
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "READY", child.stderr.read()  # type: ignore[union-attr]
        rng = random.Random()
        end = time.monotonic() + STORM
        sent = 0
        while time.monotonic() < end and child.poll() is None:
            time.sleep(rng.uniform(0.001, 0.010))
            child.send_signal(signal.SIGINT)
            sent += 1
        if child.poll() is None:
            child.send_signal(signal.SIGUSR1)
        out, err = child.communicate(timeout=CHILD_TIMEOUT)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    report = _report(out, err, child.returncode)
    report["sent"] = sent
    return report


@pytest.mark.parametrize("mode", ["threads", "gevent"])
def test_ctrl_c_while_the_main_greenlet_waits_interrupts_that_wait(
    server: NatsServer, mode: str
) -> None:
    report = run_wait_case(mode, server.url)
    interrupted = report["interrupted"]
    assert isinstance(interrupted, dict)
    assert set(interrupted) == {"request", "next_msg", "fetch"}, report
    assert all(took < RAISED_WITHIN for took in interrupted.values()), report
    assert report["works_after"] == {"request": True, "next_msg": True, "fetch": True}, report
    assert report["dead_threads"] == [], report
    assert float(report["close_took"]) < 2.0, report  # type: ignore[arg-type]


def test_ctrl_c_during_a_callback_reaches_the_main_thread_with_threads(
    server: NatsServer,
) -> None:
    report = run_case("threads", "callback", server.url)
    assert report["main_interrupted"] is True, report
    assert report["second_delivered"] is True, report
    assert report["works_after"] is True and report["dead_threads"] == [], report


def test_ctrl_c_during_a_callback_reaches_the_main_greenlet_under_gevent(
    server: NatsServer,
) -> None:
    report = run_case("gevent", "callback", server.url)
    assert report["main_interrupted"] is True, report
    assert report["second_delivered"] is True, report
    assert report["works_after"] is True and report["dead_threads"] == [], report


def test_a_storm_of_ctrl_c_leaves_the_client_usable_under_gevent(server: NatsServer) -> None:
    """As ``tests/integration/test_interrupts.py`` holds with threads (the request and
    flush families); the child stops as soon as a KeyboardInterrupt ends a thread."""
    report = run_storm("gevent", server.url)
    assert int(report["caught"]) > 0, report  # type: ignore[call-overload]
    assert report["dead_threads"] == [], report
    assert report["works_after"] is True, report

"""The child process of the Ctrl-C tests under gevent (``test_ctrl_c.py``).

Usage: ``python ctrl_c_child.py gevent|threads <case> <server url>``. With ``gevent`` it
monkey-patches itself first, as a gunicorn ``-k gevent`` worker or Locust does; with
``threads`` it runs the same case on plain threads, the behaviour to match. It prints one
JSON line at the end (the parent reads the last line starting with ``{``).

Cases:

- ``wait``: the main thread (greenlet) waits in a call (a request nobody answers, a
  subscription's ``next_msg``, a JetStream ``fetch`` of an empty consumer); before each
  it prints ``WAITING <name>`` and the parent sends SIGINT. Each call must raise
  KeyboardInterrupt at once, and the client must then answer a request and a flush.
- ``callback``: a subscription's callback sends this process SIGINT (Ctrl-C pressed while
  a callback runs). With threads, Python raises KeyboardInterrupt in the main thread,
  which is waiting; the callback thread goes on with the next message.
- ``storm``: the main thread requests and flushes in a loop, catching KeyboardInterrupt,
  while the parent sends SIGINT every 1-10 ms (as ``tests/integration/test_interrupts.py``
  does); it stops at SIGUSR1, or as soon as a KeyboardInterrupt ends one of the client's
  own threads (``threading.excepthook``), and then checks the client still works.
"""

# ruff: noqa: E402 - gevent must patch the process before the other imports (gevent mode)
from __future__ import annotations

import sys

MODE, CASE, URL = sys.argv[1], sys.argv[2], sys.argv[3]
if MODE == "gevent":
    from gevent import monkey

    monkey.patch_all()

import json
import os
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

import nats_sync

#: How long each check may take.
WITHIN = 5.0

responder = nats_sync.connect(URL, name="responder")
responder.subscribe("echo", cb=lambda msg: msg.respond(msg.data))
responder.subscribe("silent")  # never answers: requests wait their whole timeout
js_setup = responder.jetstream()
js_setup.add_stream(name="CC", subjects=["cc.>"], storage="memory")
js_setup.create_consumer("CC", durable_name="C", ack_policy="explicit")
responder.flush(WITHIN)
nc = nats_sync.connect(URL, name="interrupted")
report: dict[str, Any] = {"mode": MODE, "case": CASE}
dead_threads: list[str] = []


def on_thread_exception(args: threading.ExceptHookArgs) -> None:
    # A KeyboardInterrupt that ended one of the client's threads (greenlets): recorded
    # for the report instead of printed.
    name = args.thread.name if args.thread is not None else "?"
    dead_threads.append(f"{name}: {args.exc_type.__name__}")


threading.excepthook = on_thread_exception


def works() -> bool:
    """The client answers a request and a flush."""
    try:
        ok = nc.request("echo", b"still", timeout=WITHIN).data == b"still"
        nc.flush(WITHIN)
        return ok
    except Exception as err:
        report.setdefault("failures", []).append(repr(err))
        return False


def case_wait() -> None:
    sub = nc.subscribe("cc.nothing")
    js = nc.jetstream()
    consumer = js.consumer("CC", "C")
    waits: dict[str, Callable[[], object]] = {
        "request": lambda: nc.request("silent", b"?", timeout=30),
        "next_msg": lambda: sub.next_msg(timeout=30),
        "fetch": lambda: list(consumer.fetch(1, max_wait=30)),  # a batch is read lazily
    }
    interrupted: dict[str, float] = {}
    for name, call in waits.items():
        print(f"WAITING {name}", flush=True)
        started = time.monotonic()
        try:
            call()
        except KeyboardInterrupt:
            interrupted[name] = round(time.monotonic() - started, 3)
        report.setdefault("works_after", {})[name] = works()
    report["interrupted"] = interrupted


def case_callback() -> None:
    seen: list[bytes] = []
    second = threading.Event()

    def on_msg(msg: nats_sync.Msg) -> None:
        seen.append(msg.data)
        if msg.data == b"first":
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C while this callback runs
        else:
            second.set()

    nc.subscribe("cc.cb", cb=on_msg)
    nc.publish("cc.cb", b"first")
    main_interrupted = False
    try:
        time.sleep(WITHIN)  # waiting, as a main thread does while callbacks work
    except KeyboardInterrupt:
        main_interrupted = True
    nc.publish("cc.cb", b"second")
    report["main_interrupted"] = main_interrupted
    report["second_delivered"] = second.wait(WITHIN)
    report["seen"] = [data.decode() for data in seen]
    report["works_after"] = works()


def case_storm() -> None:
    stop = threading.Event()
    in_call = [False]

    # What a Ctrl-C does here: Python's default handler with threads, and under gevent
    # the one the client put in its place (raising in the main greenlet only).
    ctrl_c = signal.getsignal(signal.SIGINT)
    assert callable(ctrl_c)

    def on_int(signum: int, frame: Any) -> None:
        # Passed on only while a library call runs (as test_interrupts' child does): one
        # landing in this loop's own lines would end the child, which proves nothing.
        # Under gevent "while a call runs" includes the moments the client's greenlets
        # run on its behalf, as a real Ctrl-C's KeyboardInterrupt would.
        if in_call[0]:
            ctrl_c(signum, frame)

    signal.signal(signal.SIGUSR1, lambda signum, frame: stop.set())
    signal.signal(signal.SIGINT, on_int)
    print("READY", flush=True)
    caught = 0
    while not stop.is_set() and not dead_threads:
        try:
            in_call[0] = True
            nc.request("echo", b"x", timeout=2.0)
            nc.flush(2.0)
        except KeyboardInterrupt:
            caught += 1
        except nats_sync.Error:
            pass
        finally:
            in_call[0] = False
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    print("STOPPED", flush=True)  # the parent stops sending
    settled = time.monotonic() + 0.2  # signals on their way
    while time.monotonic() < settled:
        try:
            time.sleep(0.05)
        except KeyboardInterrupt:  # one the hub had yet to throw into this greenlet
            caught += 1
    report["caught"] = caught
    deadline = time.monotonic() + 10.0  # an interrupted read makes the client reconnect
    while not nc.is_connected and time.monotonic() < deadline:
        time.sleep(0.01)
    report["works_after"] = all(works() for _ in range(5))


{"wait": case_wait, "callback": case_callback, "storm": case_storm}[CASE]()
signal.signal(signal.SIGINT, signal.SIG_IGN)
report["dead_threads"] = dead_threads
started = time.monotonic()
nc.close()
responder.close()
report["close_took"] = round(time.monotonic() - started, 3)
print(json.dumps(report), flush=True)

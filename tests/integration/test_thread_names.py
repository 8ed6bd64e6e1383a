"""Every thread the library starts runs under a name of ``THREADS`` (tools/layers.py), is
started from the module given there, and every name given there is started: the picture
and the page's thread table (docs/ARCHITECTURE.md) cannot drift from the code.

One client is driven, against a real nats-server with JetStream, through every kind of
thread: connect, a callback subscription, ``publish_async`` from the main thread,
``consume(cb)``, a micro service with two workers and one whose endpoint the server
refuses, ``force_reconnect`` from the main thread, a requester reading its own reply
when the server goes away, and ``close()`` from the main thread. ``Thread.start`` is
wrapped for the test to record each thread's name and the first package module on the
stack below it (the lifecycle helpers only start what others ask for).
"""

from __future__ import annotations

import re
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType

import pytest

import nats_sync
from nats_sync import micro
from nats_sync.errors import Error
from nats_sync.testing import NatsServer

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
from layers import THREADS

pytestmark = pytest.mark.timeout(90)

#: Modules that start threads others ask for: the thread is theirs who asked.
_HELPERS = {"threading", "nats_sync._core.threads.lifecycle"}


def _starter(frame: FrameType | None) -> str:
    """The package module, relative to nats_sync, that asked for a thread."""
    while frame is not None:
        module = str(frame.f_globals.get("__name__", ""))
        if module not in _HELPERS and module.startswith("nats_sync."):
            return module.removeprefix("nats_sync.")
        frame = frame.f_back
    return "(not nats_sync)"


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, str]]]:
    """Records (name, starting module) of every ``nats_sync-`` thread started."""
    found: list[tuple[str, str]] = []
    start = threading.Thread.start

    def recording_start(thread: threading.Thread) -> None:
        if thread.name.startswith("nats_sync-"):
            found.append((thread.name, _starter(sys._getframe(1))))
        start(thread)

    monkeypatch.setattr(threading.Thread, "start", recording_start)
    yield found


def _pattern(name: str) -> re.Pattern[str]:
    """A declared name as a pattern: ``<...>`` stands for a part that varies."""
    return re.compile(
        "".join(
            ".+" if piece.startswith("<") else re.escape(piece)
            for piece in re.split(r"(<[^>]+>)", name)
        )
    )


def _wait_for(check: Callable[[], bool], what: str, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


REFUSED = (
    "authorization { users = [ {user: app, password: pw, "
    'permissions: { subscribe: { deny: ["refused"] } } } ] }'
)


def _drive_every_thread(server: NatsServer) -> None:
    url = f"nats://app:pw@127.0.0.1:{server.port}"
    nc = nats_sync.connect(url, error_cb=lambda error: None, reconnect_time_wait=0.05)
    try:
        heard: list[bytes] = []
        nc.subscribe("cb", cb=lambda msg: heard.append(msg.data))
        js = nc.jetstream()
        js.create_stream(name="THREADS", subjects=["threads.>"], storage="memory")
        js.publish_async("threads.a", b"1")  # main thread: the session opens on its own
        js.publish_async_completed(timeout=10.0)
        consumed: list[bytes] = []
        consumer = js.create_consumer("THREADS", durable_name="C", ack_policy="explicit")

        def consume(msg: object) -> None:
            consumed.append(msg.data)  # type: ignore[attr-defined]
            msg.ack()  # type: ignore[attr-defined]

        handle = consumer.consume(consume)
        _wait_for(lambda: consumed == [b"1"], "the consume thread")
        handle.stop()
        service = micro.add_service(nc, "names", "1.0.0")
        service.add_endpoint("work", lambda req: req.respond(req.data), max_workers=2)
        refused = micro.add_service(nc, "refusal", "1.0.0", error_handler=lambda s, e: None)
        refused.add_endpoint("refused", lambda req: req.respond(b""))
        _wait_for(lambda: refused.stopped, "the refused service to stop")
        nc.publish("cb", b"x")
        nc.flush()
        _wait_for(lambda: heard == [b"x"], "the delivery thread")
        reconnected = nc.stats["reconnects"] + 1
        nc.force_reconnect()  # main thread: the loss is handed over on its own thread
        _wait_for(lambda: nc.stats["reconnects"] >= reconnected and nc.is_connected, "reconnect")
    finally:
        nc.close()  # main thread: close runs on its own thread


def _lose_while_reading_own_reply(server: NatsServer) -> None:
    """A requester (the main thread) reading its own reply when the server goes: the
    loss is reported from the main thread, on a thread of its own. Leaves the server
    stopped."""
    url = f"nats://app:pw@127.0.0.1:{server.port}"
    other = nats_sync.connect(url)
    other.subscribe("echo", cb=lambda msg: msg.respond(msg.data))
    other.subscribe("silent")  # a responder that never answers: no "no responders"
    other.flush()
    nc = nats_sync.connect(url, reconnect_time_wait=0.05, error_cb=lambda error: None)
    stopper = threading.Timer(0.5, server.stop)
    try:
        # The reader steps aside for requesters only between requests made one after
        # the other (Dispatcher.may_park): one answered, then the one the loss cuts.
        assert nc.request("echo", b"1", timeout=5.0).data == b"1"
        time.sleep(0.01)  # the reader parks (well within READER_LEAD_IDLE)
        stopper.start()
        with pytest.raises(Error):
            nc.request("silent", b"", timeout=2.0)
    finally:
        stopper.join()
        nc.close()
        other.close()


def test_every_thread_is_started_under_a_declared_name_from_its_module(
    started: list[tuple[str, str]], tmp_path: Path
) -> None:
    with NatsServer(jetstream=True, config=REFUSED, store_dir=tmp_path) as server:
        _drive_every_thread(server)
        # The requester leads only if the reader stepped aside in time: on a loaded
        # machine it may not have, and then the reader reports the loss (tried again).
        for _ in range(5):
            _lose_while_reading_own_reply(server)
            if any(name == "nats_sync-lost" for name, _ in started):
                break
            server.start()
    declared = [
        (thread.name, started_as.name, started_as.module)
        for thread in THREADS
        for started_as in thread.started
    ]
    unknown = sorted(
        {
            (name, module)
            for name, module in started
            if not any(
                _pattern(pattern).fullmatch(name) and module == where
                for _, pattern, where in declared
            )
        }
    )
    assert unknown == [], f"threads THREADS (tools/layers.py) does not name: {unknown}"
    never = [
        (kind, pattern, where)
        for kind, pattern, where in declared
        if not any(
            _pattern(pattern).fullmatch(name) and module == where for name, module in started
        )
    ]
    assert never == [], f"declared in THREADS but never started here: {never}"

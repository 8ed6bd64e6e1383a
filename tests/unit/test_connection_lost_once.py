"""A connection reports its loss once, however many of its threads see it fail at the
same moment (the reader, the writer, a direct sender). The check and the set of
``finished`` are one step under a lock (issue 33's free-threading audit); this test
fails if a loss is reported per caller, but cannot force two threads into the narrow
gap between a check and a set (tried on 3.13t with the GIL off: the old code passed it
too), which is why that gap is closed by construction rather than by test."""

from __future__ import annotations

import socket
import sys
import threading

import pytest

from nats_sync._core.proto import Parser
from nats_sync._core.threads.connection import Connection
from nats_sync._core.threads.outbox import Outbox
from nats_sync._core.transport.streams import TcpStream
from nats_sync.errors import Error, NatsConnectionError

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def switch_often() -> object:
    """The GIL handed over every microsecond, so that a check-then-set race shows."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(interval)


def test_threads_failing_together_report_one_loss(switch_often: object) -> None:
    reports: list[Error] = []
    for _ in range(100):
        ours, theirs = socket.socketpair()
        conn = Connection(
            TcpStream(ours),
            Parser(),
            Outbox(1 << 20, 1.0),
            lambda ops: None,
            lambda connection, error: reports.append(error),
        )
        start = threading.Barrier(4)

        def fail(conn: Connection = conn, start: threading.Barrier = start) -> None:
            start.wait()
            conn._lost(NatsConnectionError("gone"))

        threads = [threading.Thread(target=fail) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
        theirs.close()
        ours.close()
    assert len(reports) == 100

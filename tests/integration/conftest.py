"""Shared fixtures for the integration tests: clients of a real nats-server.

Fixtures:
    client: one ``nats_sync.connect(nats_server.url)``, closed after the test.
    connect: ``connect(**kwargs)`` makes clients (to ``nats_server.url`` unless
        ``servers`` is given) and closes every one of them after the test.
    no_leaked_library_threads (autouse): fails the test when a thread the library
        started (named ``nats_sync-...``) is still alive after it.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fake_servers import FakeServer, FakeServerFactory

import nats_sync
from nats_sync.testing import NatsServer

#: Every thread the library starts is named ``nats_sync-<role>`` (see ``_core.handler``).
LIBRARY_THREAD_PREFIX = "nats_sync-"
#: How long threads get to end after a test before it counts as a leak.
THREAD_END_GRACE = 5.0

ClientFactory = Callable[..., nats_sync.Client]


def library_threads() -> list[threading.Thread]:
    """The live threads started by nats_sync."""
    return [
        thread
        for thread in threading.enumerate()
        if thread.name.startswith(LIBRARY_THREAD_PREFIX) and thread.is_alive()
    ]


def wait_for_library_threads_to_end(
    ignore: set[threading.Thread] | frozenset[threading.Thread] = frozenset(),
    grace: float = THREAD_END_GRACE,
) -> list[threading.Thread]:
    """Waits up to ``grace`` seconds; returns the library threads still alive."""
    deadline = time.monotonic() + grace
    while True:
        alive = [thread for thread in library_threads() if thread not in ignore]
        if not alive or time.monotonic() >= deadline:
            return alive
        alive[0].join(min(0.05, max(deadline - time.monotonic(), 0.0)))


#: Server fixtures torn down only after the thread check: a client left open would
#: otherwise close itself when its server goes away, and the leak would go unseen.
SERVER_FIXTURES = (
    "nats_server",
    "nats_server_factory",
    "nats_cluster",
    "jetstream_server",
    "jetstream_cluster",
)


@pytest.fixture(autouse=True)
def no_leaked_library_threads(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fails the test if a library thread it caused outlives it (5 s grace).

    Runs after the test's client fixtures are torn down, but before its servers are.
    """
    for name in SERVER_FIXTURES:
        if name in request.fixturenames:
            request.getfixturevalue(name)  # set up first, so torn down after the check
    before = set(library_threads())  # leaks of earlier tests were reported there
    yield
    leaked = wait_for_library_threads_to_end(ignore=before)
    if leaked:
        names = ", ".join(sorted(thread.name for thread in leaked))
        pytest.fail(
            f"nats_sync threads still alive {THREAD_END_GRACE}s after the test: {names}",
            pytrace=False,
        )


@pytest.fixture
def client(nats_server: NatsServer) -> Iterator[nats_sync.Client]:
    """A client connected to ``nats_server``, closed after the test."""
    nc = nats_sync.connect(nats_server.url)
    try:
        yield nc
    finally:
        nc.close()


@pytest.fixture
def connect(nats_server: NatsServer) -> Iterator[ClientFactory]:
    """``connect(**kwargs)``: a client of ``nats_server`` (or of ``servers=``).

    Every client made is closed after the test.
    """
    made: list[nats_sync.Client] = []

    def factory(**kwargs: Any) -> nats_sync.Client:
        kwargs.setdefault("servers", nats_server.url)
        nc = nats_sync.connect(**kwargs)
        made.append(nc)
        return nc

    try:
        yield factory
    finally:
        for nc in made:
            nc.close()


@pytest.fixture
def fake_server_factory() -> Iterator[FakeServerFactory]:
    """Starts fake servers running ``handle(conn)``; all are stopped after the test."""
    servers: list[FakeServer] = []

    def factory(handle: Callable[[socket.socket], None]) -> FakeServer:
        server = FakeServer(handle)
        servers.append(server)
        return server

    yield factory
    for server in servers:
        server.stop()

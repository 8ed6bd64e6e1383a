"""pytest fixtures that give each test a real nats-server.

Installed with the package and registered through the ``pytest11`` entry point, so the
fixtures are there in any project that has ``nats-sync[server]`` installed: nothing to
import. They wrap `nats_sync.testing`; each one starts its server(s) on ports of their
own and kills them, work folders included, when the test ends. A missing binary raises
`ServerBinaryNotFoundError`, so the test errors instead of skipping.

- ``nats_server``: a running `NatsServer` for one test.
- ``nats_server_factory``: ``factory(**kwargs)`` starts a `NatsServer` with those arguments.
- ``nats_cluster``: a running three-server `NatsCluster` for one test.
- ``jetstream_server``: a running `NatsServer` with JetStream (store in its work folder,
  kept across ``restart()``).
- ``jetstream_cluster``: a running three-server `NatsCluster` with JetStream.
- ``nats_client``: a `nats_sync.Client` connected to ``nats_server``, closed after the
  test.

Example:
    ```python
    def test_my_service(nats_client):
        nats_client.subscribe("greet", cb=lambda msg: msg.respond(b"hi"))
        assert nats_client.request("greet", timeout=1).data == b"hi"
    ```
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from nats_sync.client import Client, connect
from nats_sync.testing import NatsCluster, NatsServer

ServerFactory = Callable[..., NatsServer]


@pytest.fixture
def nats_server() -> Iterator[NatsServer]:
    """A running nats-server on a free port, removed after the test."""
    with NatsServer() as server:
        yield server


@pytest.fixture
def nats_server_factory() -> Iterator[ServerFactory]:
    """Starts servers with any `NatsServer` arguments; all are removed after the test."""
    started: list[NatsServer] = []

    def factory(**kwargs: Any) -> NatsServer:
        server = NatsServer(**kwargs)
        started.append(server)
        return server.start()

    try:
        yield factory
    finally:
        for server in started:
            server.cleanup()


@pytest.fixture
def nats_cluster() -> Iterator[NatsCluster]:
    """A running three-server cluster with a full mesh, removed after the test."""
    with NatsCluster(3) as cluster:
        yield cluster


@pytest.fixture
def jetstream_server() -> Iterator[NatsServer]:
    """A running nats-server with JetStream, its store removed after the test."""
    with NatsServer(jetstream=True) as server:
        yield server


@pytest.fixture
def jetstream_cluster() -> Iterator[NatsCluster]:
    """A running three-server JetStream cluster (meta leader elected), removed after."""
    with NatsCluster(3, jetstream=True) as cluster:
        yield cluster


@pytest.fixture
def nats_client(nats_server: NatsServer) -> Iterator[Client]:
    """A client connected to the ``nats_server`` of this test, closed afterwards."""
    with connect(nats_server.url) as client:
        yield client

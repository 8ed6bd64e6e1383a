"""``nats_sync.testing``: real nats-server processes and clusters for tests."""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

import pytest

import nats_sync
from nats_sync._core import proto
from nats_sync.pytest_plugin import ServerFactory
from nats_sync.testing import (
    NatsCluster,
    NatsServer,
    ServerBinaryNotFoundError,
    find_server_binary,
)


def _read_op(sock: socket.socket, parser: proto.Parser) -> proto.ServerOp | None:
    """The next op from ``sock``; None once the server closed the connection."""
    while (op := parser.next_op()) is None:
        data = sock.recv(65536)
        if not data:
            return None
        parser.feed(data)
    return op


def _raw_client(server: NatsServer) -> tuple[socket.socket, proto.Parser, dict[str, object]]:
    """A raw socket that has done the CONNECT/PING/PONG handshake; returns its INFO too."""
    sock = socket.create_connection((server.host, server.port), timeout=5)
    parser = proto.Parser()
    info = _read_op(sock, parser)
    assert isinstance(info, proto.InfoOp)
    sock.sendall(proto.encode_connect(proto.connect_fields(version="raw")) + proto.PING)
    while (op := _read_op(sock, parser)) is not proto.PONG_OP:
        assert op is not None, "the server closed the connection during the handshake"
    return sock, parser, info.info


def _can_use(url: str) -> bool:
    with nats_sync.connect(url, allow_reconnect=False) as nc:
        nc.flush(5)
        return nc.is_connected


def _alive(server: NatsServer) -> bool:
    return server.is_running  # a call, so that type checkers do not narrow the property


def _wait_until_stopped(server: NatsServer, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while server.is_running:
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.mark.timeout(30)
def test_servers_start_on_ports_of_their_own(nats_server_factory: ServerFactory) -> None:
    first = nats_server_factory()
    second = nats_server_factory()

    assert first.is_running and second.is_running
    assert first.port != second.port
    for server in (first, second):
        sock, _, info = _raw_client(server)
        sock.close()
        assert info["port"] == server.port
        assert server.url == f"nats://127.0.0.1:{server.port}"
        assert _can_use(server.url)


@pytest.mark.timeout(30)
def test_restart_keeps_the_port_and_accepts_clients_again(nats_server: NatsServer) -> None:
    port = nats_server.port
    pid = nats_server.pid
    assert _can_use(nats_server.url)

    assert nats_server.restart() is nats_server

    assert nats_server.is_running
    assert nats_server.port == port
    assert nats_server.pid != pid
    assert _can_use(nats_server.url)


@pytest.mark.timeout(30)
def test_stop_and_kill_end_the_process(nats_server: NatsServer) -> None:
    port = nats_server.port

    nats_server.stop()
    assert not _alive(nats_server)
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()

    nats_server.start()
    assert _alive(nats_server)
    assert nats_server.port == port
    nats_server.kill()
    assert not _alive(nats_server)
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()


@pytest.mark.timeout(30)
def test_pause_freezes_the_server_and_resume_wakes_it(nats_server: NatsServer) -> None:
    nats_server.pause()
    try:
        assert nats_server.is_running, "a paused server still counts as running"
        # The kernel accepts the connection, but the frozen server never greets it.
        with socket.create_connection(("127.0.0.1", nats_server.port), timeout=5) as sock:
            sock.settimeout(0.3)
            with pytest.raises(TimeoutError):
                sock.recv(4)
            nats_server.resume()
            sock.settimeout(5)
            assert sock.recv(4) == b"INFO"
    finally:
        nats_server.resume()
    assert _can_use(nats_server.url)


@pytest.mark.timeout(30)
def test_config_text_is_applied(nats_server_factory: ServerFactory) -> None:
    server = nats_server_factory(config="max_payload: 2048\n")

    sock, _, info = _raw_client(server)
    sock.close()
    assert info["max_payload"] == 2048
    with nats_sync.connect(server.url) as nc:
        assert nc.max_payload == 2048
        with pytest.raises(nats_sync.MaxPayloadError):
            nc.publish("too.big", b"x" * 4096)


@pytest.mark.timeout(30)
def test_lame_duck_signal_announces_ldm_then_exits(nats_server_factory: ServerFactory) -> None:
    server = nats_server_factory(config='lame_duck_grace_period: "200ms"\n')
    sock, parser, _ = _raw_client(server)
    with sock:
        server.signal_lame_duck()

        ops: list[proto.ServerOp] = []
        while (op := _read_op(sock, parser)) is not None:
            ops.append(op)
            if isinstance(op, proto.InfoOp) and op.info.get("ldm"):
                break
        assert any(isinstance(op, proto.InfoOp) and op.info.get("ldm") is True for op in ops), ops
        while _read_op(sock, parser) is not None:
            pass  # the server closes every client once the grace period ends

    assert _wait_until_stopped(server, 10), "the server did not exit in lame duck mode"


@pytest.mark.timeout(60)
def test_cluster_is_a_full_mesh_that_routes_messages(nats_cluster: NatsCluster) -> None:
    servers = nats_cluster.servers
    assert len(servers) == 3
    assert all(server.is_running for server in servers)
    assert len({server.port for server in servers}) == 3
    assert nats_cluster.urls == [server.url for server in servers]
    names = {server.name for server in servers}
    for server in servers:
        routez = server.monitor("routez")
        remotes = {route["remote_name"] for route in routez["routes"]}
        # Route pooling opens several connections per peer: count peers, not sockets.
        assert remotes == names - {server.name}

    with nats_sync.connect(servers[0].url) as pub, nats_sync.connect(servers[2].url) as sub_nc:
        sub = sub_nc.subscribe("cluster.hello")
        sub_nc.flush(5)
        received: bytes | None = None
        deadline = time.monotonic() + 10
        while received is None and time.monotonic() < deadline:
            pub.publish("cluster.hello", b"across the mesh")
            pub.flush(5)
            try:
                received = sub.next_msg(0.1).data
            except nats_sync.TimeoutError:
                continue  # interest has not reached server 0 yet
        assert received == b"across the mesh"


def test_find_server_binary_honours_the_environment_variable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    real = find_server_binary()
    assert os.access(real, os.X_OK)

    monkeypatch.setenv("NATS_SERVER_BIN", real)
    assert find_server_binary() == os.path.abspath(real)

    not_executable = tmp_path / "nats-server"
    not_executable.write_text("#!/bin/sh\n")
    not_executable.chmod(0o644)
    monkeypatch.setenv("NATS_SERVER_BIN", str(not_executable))
    with pytest.raises(ServerBinaryNotFoundError) as info:
        find_server_binary()
    assert "NATS_SERVER_BIN" in str(info.value)
    assert isinstance(info.value, FileNotFoundError)
    with pytest.raises(ServerBinaryNotFoundError):
        NatsServer()

    monkeypatch.setenv("NATS_SERVER_BIN", str(tmp_path / "missing"))
    with pytest.raises(ServerBinaryNotFoundError):
        find_server_binary()


@pytest.mark.timeout(30)
def test_a_jetstream_server_keeps_its_store_across_a_restart(jetstream_server: NatsServer) -> None:
    with nats_sync.connect(jetstream_server.url) as nc:
        created = json.loads(
            nc.request(
                "$JS.API.STREAM.CREATE.KEEP", b'{"name":"KEEP","subjects":["keep.>"]}', timeout=5
            ).data
        )
        assert "error" not in created, created
        nc.request("keep.one", b"stored", timeout=5)
    port = jetstream_server.port
    assert jetstream_server.store_dir.is_dir()
    jetstream_server.restart()
    assert jetstream_server.port == port
    with nats_sync.connect(jetstream_server.url) as nc:
        info = json.loads(nc.request("$JS.API.STREAM.INFO.KEEP", b"", timeout=5).data)
    assert info["state"]["messages"] == 1


@pytest.mark.timeout(60)
def test_a_jetstream_cluster_places_a_three_replica_stream(
    jetstream_cluster: NatsCluster,
) -> None:
    with nats_sync.connect(jetstream_cluster.urls) as nc:
        created = json.loads(
            nc.request(
                "$JS.API.STREAM.CREATE.R3",
                b'{"name":"R3","subjects":["r3.>"],"num_replicas":3}',
                timeout=10,
            ).data
        )
    assert "error" not in created, created
    cluster = created["cluster"]
    names = {cluster["leader"], *(replica["name"] for replica in cluster["replicas"])}
    assert names == {server.name for server in jetstream_cluster.servers}

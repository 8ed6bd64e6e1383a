"""connect(): what INFO tells the client, failures to connect, options, life cycle."""

from __future__ import annotations

import json
import os
import pickle
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from fake_servers import FakeServerFactory, _info_line, _read_until

import nats_sync
from nats_sync.testing import NatsServer

ServerFactory = Callable[..., NatsServer]
ClientFactory = Callable[..., nats_sync.Client]

AUTH_CONFIG = "authorization { user: a, password: b }"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# --- what INFO tells the client --------------------------------------------------------


def test_properties_come_from_info(client: nats_sync.Client, nats_server: NatsServer) -> None:
    info = client.server_info
    assert info["port"] == nats_server.port
    assert info["server_id"]
    assert client.max_payload == info["max_payload"] == 1024 * 1024
    assert client.client_id == info["client_id"]
    assert isinstance(client.client_id, int) and client.client_id > 0
    assert client.connected_server_version == info["version"]
    assert client.connected_server_version.count(".") >= 2
    assert client.connected_url == nats_server.url
    assert client.is_connected is True
    assert client.is_closed is False


def test_server_info_is_a_copy(client: nats_sync.Client) -> None:
    client.server_info["port"] = -1
    assert client.server_info["port"] != -1


def test_max_payload_follows_the_server_config(nats_server_factory: ServerFactory) -> None:
    server = nats_server_factory(config="max_payload: 1024")
    with nats_sync.connect(server.url) as nc:
        assert nc.max_payload == 1024
        assert nc.server_info["max_payload"] == 1024


def test_two_clients_get_different_client_ids(connect: ClientFactory) -> None:
    first, second = connect(), connect()
    assert first.client_id != second.client_id


def test_close_changes_state_and_is_idempotent(connect: ClientFactory) -> None:
    nc = connect()
    nc.close()
    assert nc.is_closed is True
    assert nc.is_connected is False
    assert nc.connected_url is None
    nc.close()
    assert nc.is_closed is True


def test_context_manager_closes(nats_server: NatsServer) -> None:
    with nats_sync.connect(nats_server.url) as nc:
        assert nc.is_connected
        nc.flush(timeout=5)
    assert (nc.is_closed, nc.is_connected) == (True, False)
    with pytest.raises(nats_sync.ConnectionClosedError):
        nc.publish("after.with", b"x")


def test_context_manager_closes_when_the_block_raises(nats_server: NatsServer) -> None:
    with pytest.raises(RuntimeError, match="inside"), nats_sync.connect(nats_server.url) as nc:
        raise RuntimeError("inside")
    assert nc.is_closed


def test_name_is_sent_in_connect(nats_server_factory: ServerFactory) -> None:
    server = nats_server_factory(monitoring=True)
    with nats_sync.connect(server.url, name="my-test-client") as nc:
        nc.flush(timeout=5)
        connz = server.monitor("connz")
        names = [conn.get("name") for conn in connz["connections"]]
        assert "my-test-client" in names
        cids = [conn.get("cid") for conn in connz["connections"]]
        assert nc.client_id in cids


def test_servers_list_with_a_dead_server_first(nats_server: NatsServer) -> None:
    dead = f"nats://127.0.0.1:{_free_port()}"
    with nats_sync.connect([dead, nats_server.url], dont_randomize=True) as nc:
        assert nc.connected_url == nats_server.url
        assert nc.servers == [dead, nats_server.url]


# --- failing to connect ----------------------------------------------------------------


@pytest.mark.timeout(15)
def test_nothing_listening_raises_no_servers_error_with_cause() -> None:
    url = f"nats://127.0.0.1:{_free_port()}"
    with pytest.raises(nats_sync.NoServersError) as caught:
        nats_sync.connect(url, connect_timeout=1.0)
    assert caught.value.__cause__ is not None
    assert isinstance(caught.value.__cause__, nats_sync.Error)
    assert isinstance(caught.value, nats_sync.NatsConnectionError)
    assert str(caught.value).startswith("nats: ")


@pytest.mark.timeout(15)
def test_connect_timeout_against_a_silent_server(
    fake_server_factory: FakeServerFactory,
) -> None:
    # Accepts the TCP connection and never sends INFO: only connect_timeout ends the wait.
    silent = fake_server_factory(lambda conn: None)
    with pytest.raises(nats_sync.NoServersError) as caught:
        nats_sync.connect(silent.url, connect_timeout=0.5)
    assert isinstance(caught.value.__cause__, nats_sync.TimeoutError)
    assert isinstance(caught.value.__cause__, TimeoutError)
    assert silent.connections == 1


@pytest.mark.timeout(15)
def test_fake_server_authorization_violation_raises_authorization_error(
    fake_server_factory: FakeServerFactory,
) -> None:
    received: list[bytes] = []

    def refuse(conn: socket.socket) -> None:
        conn.sendall(_info_line(auth_required=True))
        received.append(_read_until(conn, b"PING\r\n"))
        conn.sendall(b"-ERR 'Authorization Violation'\r\n")

    server = fake_server_factory(refuse)
    with pytest.raises(nats_sync.AuthorizationError) as caught:
        nats_sync.connect(server.url, connect_timeout=3.0, user="u", password="secret")
    assert "authorization violation" in str(caught.value).lower()
    assert "secret" not in str(caught.value)
    assert received and received[0].startswith(b"CONNECT ")
    connect_json = json.loads(received[0].split(b"\r\n")[0][len(b"CONNECT ") :])
    assert connect_json["user"] == "u"
    assert connect_json["pass"] == "secret"


@pytest.mark.timeout(15)
def test_fake_server_that_does_not_send_info_first(
    fake_server_factory: FakeServerFactory,
) -> None:
    server = fake_server_factory(lambda conn: conn.sendall(b"PONG\r\n"))
    with pytest.raises(nats_sync.ProtocolError):
        nats_sync.connect(server.url, connect_timeout=3.0)


@pytest.mark.timeout(15)
def test_fake_server_closing_during_handshake(
    fake_server_factory: FakeServerFactory,
) -> None:
    def hang_up(conn: socket.socket) -> None:
        conn.sendall(_info_line())
        _read_until(conn, b"PING\r\n")
        conn.shutdown(socket.SHUT_RDWR)

    server = fake_server_factory(hang_up)
    with pytest.raises(nats_sync.NoServersError) as caught:
        nats_sync.connect(server.url, connect_timeout=3.0)
    assert isinstance(caught.value.__cause__, nats_sync.NatsConnectionError)


@pytest.fixture
def auth_server(nats_server_factory: ServerFactory) -> NatsServer:
    return nats_server_factory(config=AUTH_CONFIG)


@pytest.mark.timeout(20)
@pytest.mark.parametrize(
    "credentials",
    [
        {},
        {"user": "a", "password": "wrong"},
        {"user": "nobody", "password": "b"},
        {"token": "b"},
    ],
    ids=["none", "wrong-password", "wrong-user", "token-instead"],
)
def test_real_server_refuses_bad_credentials(
    auth_server: NatsServer, credentials: dict[str, Any]
) -> None:
    with pytest.raises(nats_sync.AuthorizationError) as caught:
        nats_sync.connect(auth_server.url, connect_timeout=3.0, **credentials)
    assert "wrong" not in str(caught.value)


def test_real_server_accepts_good_credentials(auth_server: NatsServer) -> None:
    with nats_sync.connect(auth_server.url, user="a", password="b") as nc:
        sub = nc.subscribe("auth.ok")
        nc.publish("auth.ok", b"in")
        assert sub.next_msg(timeout=5).data == b"in"


def test_credentials_in_url_are_used_and_redacted(auth_server: NatsServer) -> None:
    url = f"nats://a:b@127.0.0.1:{auth_server.port}"
    with nats_sync.connect(url) as nc:
        nc.flush(timeout=5)
        assert nc.connected_url == f"nats://a:***@127.0.0.1:{auth_server.port}"
        assert nc.servers == [f"nats://a:***@127.0.0.1:{auth_server.port}"]
        assert ":b@" not in repr(nc)


# --- option validation ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"ping_interval": -1}, "ping_interval"),
        ({"ping_interval": 0}, "ping_interval"),
        ({"ping_interval": "often"}, "ping_interval"),
        ({"connect_timeout": 0}, "connect_timeout"),
        ({"drain_timeout": -5}, "drain_timeout"),
        ({"reconnect_time_wait": -0.1}, "reconnect_time_wait"),
        ({"pending_size": -1}, "pending_size"),
        ({"flush_timeout": 0}, "flush_timeout"),
        ({"max_outstanding_pings": 0}, "max_outstanding_pings"),
        ({"inbox_prefix": ""}, "inbox_prefix"),
        ({"inbox_prefix": "_INBOX.*"}, "inbox_prefix"),
        ({"error_cb": "not callable"}, "error_cb"),
        ({"closed_cb": 42}, "closed_cb"),
        ({"tls": "not a context"}, "tls"),
    ],
)
def test_bad_option_values_raise_naming_the_option(
    nats_server: NatsServer, options: dict[str, Any], named: str
) -> None:
    with pytest.raises(nats_sync.Error) as caught:
        nats_sync.connect(nats_server.url, **options)
    assert named in str(caught.value)
    assert not isinstance(caught.value, nats_sync.NatsConnectionError)


@pytest.mark.parametrize("servers", ["", " , ", []], ids=["empty", "commas", "empty-list"])
def test_no_servers_given_raises(servers: Any) -> None:
    with pytest.raises(nats_sync.Error, match="server"):
        nats_sync.connect(servers)


@pytest.mark.parametrize("url", ["nats://127.0.0.1:notaport", "gopher://127.0.0.1:4222", "nats://"])
def test_bad_server_urls_raise(url: str) -> None:
    with pytest.raises(nats_sync.Error) as caught:
        nats_sync.connect(url)
    assert not isinstance(caught.value, nats_sync.NoServersError)


def test_unknown_keyword_is_a_type_error(nats_server: NatsServer) -> None:
    with pytest.raises(TypeError, match="no_such_option"):
        nats_sync.connect(nats_server.url, no_such_option=True)  # type: ignore[call-arg]


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"nkeys_seed": "/nonexistent/seed.nk"}, "nkey seed file '/nonexistent/seed.nk'"),
        ({"user_credentials": "/nonexistent/user.creds"}, ".creds file '/nonexistent/user.creds'"),
    ],
)
def test_missing_credential_files_fail_before_connecting(
    nats_server: NatsServer, options: dict[str, Any], words: str
) -> None:
    with pytest.raises(nats_sync.BadCredentialsError) as caught:
        nats_sync.connect(nats_server.url, **options)
    assert words in str(caught.value)
    assert isinstance(caught.value, ValueError)


# --- life cycle ------------------------------------------------------------------------


def test_client_refuses_pickle(client: nats_sync.Client) -> None:
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(client)
    assert client.is_connected


def test_server_loss_without_reconnect_calls_disconnected_and_closed_cb(
    nats_server: NatsServer,
) -> None:
    closed = threading.Event()
    disconnected = threading.Event()
    nc = nats_sync.connect(
        nats_server.url,
        allow_reconnect=False,
        closed_cb=closed.set,
        disconnected_cb=disconnected.set,
    )
    try:
        nc.flush(timeout=5)
        nats_server.kill()
        assert disconnected.wait(5), "disconnected_cb was not called"
        assert closed.wait(5), "closed_cb was not called"
        assert not nc.is_connected
        assert nc.is_closed
    finally:
        nc.close()


def test_closed_cb_runs_once_on_close(connect: ClientFactory) -> None:
    calls: list[str] = []
    nc = connect(closed_cb=lambda: calls.append(threading.current_thread().name))
    nc.close()
    nc.close()
    assert len(calls) == 1
    assert calls[0].startswith("nats_sync-")


def library_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("nats_sync-") and t.is_alive()]


def wait_for_library_threads_to_end(
    ignore: set[threading.Thread] | frozenset[threading.Thread] = frozenset(),
) -> list[threading.Thread]:
    deadline = time.monotonic() + 5.0
    while True:
        alive = [thread for thread in library_threads() if thread not in ignore]
        if not alive or time.monotonic() >= deadline:
            return alive
        alive[0].join(0.05)


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _wait_for_fds(at_most: int, tries: int = 50) -> int:
    count = _open_fds()
    for _ in range(tries):
        if count <= at_most:
            break
        time.sleep(0.05)
        count = _open_fds()
    return count


@pytest.mark.timeout(20)
def test_close_releases_threads_and_file_descriptors(nats_server: NatsServer) -> None:
    before_threads = set(library_threads())
    before_fds = _open_fds()
    nc = nats_sync.connect(nats_server.url)
    got = threading.Event()
    nc.subscribe("fd.cb", cb=lambda msg: got.set())
    pull = nc.subscribe("fd.pull")
    nc.subscribe("fd.svc", cb=lambda msg: msg.respond(b"pong"))
    nc.publish("fd.cb", b"x")
    nc.publish("fd.pull", b"y")
    assert nc.request("fd.svc", b"ping", timeout=5).data == b"pong"
    assert got.wait(5)
    assert pull.next_msg(timeout=5).data == b"y"
    assert _open_fds() > before_fds
    assert set(library_threads()) - before_threads
    nc.close()
    leaked = wait_for_library_threads_to_end(ignore=before_threads)
    assert leaked == [], f"threads alive after close(): {leaked}"
    assert _wait_for_fds(before_fds) <= before_fds


@pytest.mark.timeout(20)
def test_drain_releases_threads_and_file_descriptors(nats_server: NatsServer) -> None:
    before_fds = _open_fds()
    nc = nats_sync.connect(nats_server.url)
    nc.subscribe("fd.drain", cb=lambda msg: None)
    nc.publish("fd.drain", b"x")
    nc.drain(timeout=5)
    assert nc.is_closed
    assert wait_for_library_threads_to_end() == []
    assert _wait_for_fds(before_fds) <= before_fds


@pytest.mark.timeout(20)
def test_failed_connects_leak_no_file_descriptors(
    fake_server_factory: FakeServerFactory,
) -> None:
    def refuse(conn: socket.socket) -> None:
        conn.sendall(_info_line())
        _read_until(conn, b"PING\r\n")
        conn.sendall(b"-ERR 'Authorization Violation'\r\n")
        conn.close()

    server = fake_server_factory(refuse)
    with pytest.raises(nats_sync.AuthorizationError):
        nats_sync.connect(server.url, connect_timeout=3.0)
    before_fds = _open_fds()
    dead = f"nats://127.0.0.1:{_free_port()}"
    for _ in range(5):
        with pytest.raises(nats_sync.AuthorizationError):
            nats_sync.connect(server.url, connect_timeout=3.0)
        with pytest.raises(nats_sync.NoServersError):
            nats_sync.connect(dead, connect_timeout=1.0)
    assert _wait_for_fds(before_fds) <= before_fds


@pytest.mark.parametrize(
    "options",
    [{"verbose": True}, {"pedantic": True}, {"verbose": True, "pedantic": True}],
    ids=["verbose", "pedantic", "both"],
)
def test_verbose_and_pedantic_connections_work(
    connect: ClientFactory, options: dict[str, bool]
) -> None:
    errors: list[BaseException] = []
    nc = connect(error_cb=errors.append, **options)
    sub = nc.subscribe("modes.x")
    nc.publish("modes.x", b"1", headers={"K": "v"})
    assert sub.next_msg(timeout=5).data == b"1"
    nc.flush(timeout=5)
    assert nc.is_connected
    nc.close()
    assert errors == []


def test_comma_separated_servers_string(nats_server: NatsServer) -> None:
    dead = f"nats://127.0.0.1:{_free_port()}"
    with nats_sync.connect(f"{dead}, {nats_server.url}", dont_randomize=True) as nc:
        assert nc.servers == [dead, nats_server.url]
        assert nc.connected_url == nats_server.url


def test_token_authentication_and_redaction(nats_server_factory: ServerFactory) -> None:
    server = nats_server_factory(config="authorization { token: s3cr3t }")
    with pytest.raises(nats_sync.AuthorizationError):
        nats_sync.connect(server.url, token="wrong", connect_timeout=3.0)
    with nats_sync.connect(server.url, token="s3cr3t") as nc:
        nc.flush(timeout=5)
        assert nc.connected_url == server.url
    url = f"nats://s3cr3t@127.0.0.1:{server.port}"
    with nats_sync.connect(url) as nc:
        nc.flush(timeout=5)
        assert nc.connected_url == f"nats://***@127.0.0.1:{server.port}"
        assert "s3cr3t" not in repr(nc)
        assert all("s3cr3t" not in shown for shown in nc.servers)

"""nats-py's connect options and client names that nats_sync took over (issue 19), on
real servers: the seed as a string, headers on the WebSocket upgrade, a handler that
picks the server on reconnect, skipping subject validation, replacing the server pool,
and the client's state and address names."""

from __future__ import annotations

import os
import socket
import ssl
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nkeys
import pytest
import trustme
from fake_servers import RecordingProxy

import nats_sync
from nats_sync.client import Server
from nats_sync.testing import NatsServer

ClientFactory = Callable[..., nats_sync.Client]
ServerFactory = Callable[..., NatsServer]

pytestmark = pytest.mark.timeout(60)


def new_user_seed() -> tuple[str, str]:
    seed: bytes = nkeys.encode_seed(os.urandom(32), nkeys.PREFIX_BYTE_USER)
    return seed.decode(), nkeys.from_seed(seed).public_key.decode()


def wait_until(condition: Callable[[], object], what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def round_trip(nc: nats_sync.Client, subject: str) -> None:
    sub = nc.subscribe(subject)
    nc.publish(subject, b"ping")
    assert sub.next_msg(5).data == b"ping"
    sub.unsubscribe()


# --- nkeys_seed_str --------------------------------------------------------------------


def test_a_seed_string_authenticates_like_a_seed_file(
    tmp_path: Path, nats_server_factory: ServerFactory, connect: ClientFactory
) -> None:
    seed, public = new_user_seed()
    server = nats_server_factory(config=f'authorization {{ users = [ {{nkey: "{public}"}} ] }}')
    seed_file = tmp_path / "user.nk"
    seed_file.write_text(seed)
    from_file = connect(servers=server.url, nkeys_seed=str(seed_file))
    # As an environment variable holds it: surrounding whitespace and a final newline.
    from_string = connect(servers=server.url, nkeys_seed_str=f"  {seed}\n")
    for nc in (from_file, from_string):
        round_trip(nc, "nk.seed")
    from_string.force_reconnect()  # signs the new server nonce with the same string
    wait_until(lambda: from_string.stats["reconnects"] == 1, "the reconnect")
    round_trip(from_string, "nk.again")
    assert seed not in repr(from_string.options) and from_string.options["nkeys_seed_str"] == "***"

    other, _ = new_user_seed()
    with pytest.raises(nats_sync.AuthorizationError):
        nats_sync.connect(server.url, nkeys_seed_str=other)


def test_a_bad_seed_string_fails_before_connecting_without_showing_it(tmp_path: Path) -> None:
    seed, _ = new_user_seed()
    account: bytes = nkeys.encode_seed(os.urandom(32), nkeys.PREFIX_BYTE_ACCOUNT)
    cases: list[tuple[dict[str, Any], str]] = [
        ({"nkeys_seed_str": "not a seed"}, "nkeys_seed_str holds no nkey seed"),
        ({"nkeys_seed_str": account.decode()}, "nkeys_seed_str holds an account seed"),
        ({"nkeys_seed_str": seed[:-3] + "AAA"}, "nkeys_seed_str holds a malformed"),
        ({"nkeys_seed_str": seed, "nkeys_seed": str(tmp_path / "x.nk")}, "give the nkey seed once"),
    ]
    for options, message in cases:
        with pytest.raises(nats_sync.BadCredentialsError, match=message) as caught:
            nats_sync.connect("nats://127.0.0.1:1", **options)
        assert seed[5:] not in str(caught.value) and account.decode()[5:] not in str(caught.value)
    with pytest.raises(nats_sync.InvalidArgumentError, match="nkeys_seed_str must be the seed"):
        nats_sync.connect("nats://127.0.0.1:1", nkeys_seed_str=seed.encode())  # type: ignore[arg-type]


# --- ws_connection_headers -------------------------------------------------------------


def websocket_server(factory: ServerFactory) -> NatsServer:
    return factory(config="websocket {\n  host: 127.0.0.1\n  port: -1\n  no_tls: true\n}\n")


def header_lines(head: bytes) -> list[str]:
    return head.decode().split("\r\n")[1:]


def test_ws_headers_reach_the_server_on_every_upgrade(
    nats_server_factory: ServerFactory, connect: ClientFactory
) -> None:
    server = websocket_server(nats_server_factory)
    proxy = RecordingProxy(server.websocket_port)
    try:
        nc = connect(
            servers=f"ws://127.0.0.1:{proxy.port}",
            ws_connection_headers={"Authorization": "Bearer t0ken", "X-Tags": ["a", "b"]},
        )
        round_trip(nc, "ws.headers")
        nc.force_reconnect()
        wait_until(lambda: nc.stats["reconnects"] == 1, "the reconnect")
        round_trip(nc, "ws.headers.again")
        assert len(proxy.requests) == 2
        for head in proxy.requests:
            lines = header_lines(head)
            assert "Authorization: Bearer t0ken" in lines
            assert [line for line in lines if line.startswith("X-Tags:")] == [
                "X-Tags: a",
                "X-Tags: b",
            ]
            assert sum(line.lower().startswith("host:") for line in lines) == 1
        assert "t0ken" not in repr(nc.options)
    finally:
        proxy.stop()


def test_an_authenticating_proxy_refuses_an_upgrade_without_the_header(
    nats_server_factory: ServerFactory, connect: ClientFactory
) -> None:
    server = websocket_server(nats_server_factory)
    proxy = RecordingProxy(server.websocket_port, require=b"x-api-key: k3y")
    try:
        url = f"ws://127.0.0.1:{proxy.port}"
        with pytest.raises(nats_sync.NoServersError) as caught:
            nats_sync.connect(url, connect_timeout=2)
        assert "HTTP 401" in str(caught.value.__cause__)
        round_trip(connect(servers=url, ws_connection_headers={"X-Api-Key": "k3y"}), "ws.key")
    finally:
        proxy.stop()


# --- reconnect_to_server_handler -------------------------------------------------------


def two_servers(factory: ServerFactory) -> tuple[NatsServer, NatsServer]:
    return factory(), factory()


def port_of(nc: nats_sync.Client) -> int:
    assert nc.connected_url is not None
    return int(nc.connected_url.rsplit(":", 1)[1])


def test_the_handler_picks_the_server_to_reconnect_to(
    nats_server_factory: ServerFactory, connect: ClientFactory
) -> None:
    first, second = two_servers(nats_server_factory)
    calls: list[tuple[list[Server], dict[str, Any]]] = []

    def back_to_the_same(servers: list[Server], info: dict[str, Any]) -> tuple[Server, float]:
        calls.append((servers, info))
        # The default would try the other server first: the one just lost comes last.
        return servers[-1], 0.0

    nc = connect(
        servers=[first.url, second.url],
        dont_randomize=True,
        reconnect_to_server_handler=back_to_the_same,
    )
    assert port_of(nc) == first.port
    for reconnects in (1, 2):
        nc.force_reconnect()
        wait_until(lambda n=reconnects: nc.stats["reconnects"] == n, "the reconnect")  # type: ignore[misc]
        assert port_of(nc) == first.port
    servers, info = calls[0]
    assert [server.uri.port for server in servers] == [second.port, first.port]
    assert all(server.reconnects == 0 for server in servers)
    assert info["port"] == first.port and info["server_id"]
    round_trip(nc, "chosen")


def test_the_handler_may_name_a_url_and_a_delay(
    nats_server_factory: ServerFactory, connect: ClientFactory
) -> None:
    first, second = two_servers(nats_server_factory)
    nc = connect(
        servers=[first.url, second.url],
        dont_randomize=True,
        reconnect_to_server_handler=lambda servers, info: (second.url, 0.4),
    )
    started = time.monotonic()
    nc.force_reconnect()
    wait_until(lambda: nc.stats["reconnects"] == 1, "the reconnect")
    assert time.monotonic() - started >= 0.4
    assert port_of(nc) == second.port


def test_the_handler_returning_none_gets_the_pools_next_server(
    nats_server_factory: ServerFactory, connect: ClientFactory
) -> None:
    first, second = two_servers(nats_server_factory)
    errors: list[BaseException] = []
    nc = connect(
        servers=[first.url, second.url],
        dont_randomize=True,
        error_cb=errors.append,
        reconnect_to_server_handler=lambda servers, info: (None, 0),
    )
    nc.force_reconnect()
    wait_until(lambda: nc.stats["reconnects"] == 1, "the reconnect")
    assert port_of(nc) == second.port and errors == []


@pytest.mark.parametrize(
    ("handler", "message"),
    [
        (lambda servers, info: 1 / 0, "division by zero"),
        (lambda servers, info: servers[0], "must return (server or None, delay in seconds)"),
        (lambda servers, info: ("nats://127.0.0.1:1", 0), "not in the server pool"),
        (lambda servers, info: (servers[0], -1), "delay of -1"),
        (lambda servers, info: (servers[0], float("nan")), "delay of nan"),
    ],
    ids=["raises", "no-tuple", "not-in-pool", "negative-delay", "nan-delay"],
)
def test_a_broken_handler_is_reported_and_the_pool_order_used(
    nats_server_factory: ServerFactory,
    connect: ClientFactory,
    handler: Callable[[list[Server], dict[str, Any]], Any],
    message: str,
) -> None:
    first, second = two_servers(nats_server_factory)
    errors: list[BaseException] = []
    nc = connect(
        servers=[first.url, second.url],
        dont_randomize=True,
        error_cb=errors.append,
        reconnect_time_wait=0.05,
        reconnect_to_server_handler=handler,
    )
    nc.force_reconnect()
    wait_until(lambda: nc.stats["reconnects"] == 1, "the reconnect")
    assert port_of(nc) == second.port  # the pool's next server: the lost one comes last
    wait_until(lambda: errors, "the handler's error in error_cb")
    assert message in str(errors[0])
    round_trip(nc, "fallback")


def test_the_handler_gives_up_when_the_pool_is_exhausted(
    nats_server_factory: ServerFactory, connect: ClientFactory
) -> None:
    server = nats_server_factory()
    closed = threading.Event()
    chosen: list[int] = []

    def choose(servers: list[Server], info: dict[str, Any]) -> tuple[Server, float]:
        chosen.append(servers[0].reconnects)
        return servers[0], 0.01

    nc = connect(
        servers=server.url,
        max_reconnect_attempts=3,
        closed_cb=closed.set,
        reconnect_to_server_handler=choose,
    )
    server.stop()
    assert closed.wait(20), "the client never gave up"
    assert nc.is_closed and isinstance(nc.last_error, nats_sync.NoServersError)
    assert chosen == [0, 1, 2]


# --- skip_subject_validation -----------------------------------------------------------


def test_skipping_validation_lets_the_server_decide(connect: ClientFactory) -> None:
    strict = connect()
    errors: list[BaseException] = []
    lenient = connect(skip_subject_validation=True, error_cb=errors.append)
    everything = strict.subscribe(">")
    strict.flush()
    with pytest.raises(nats_sync.BadSubjectError):
        strict.publish("odd.*", b"")
    with pytest.raises(nats_sync.BadSubjectError):
        strict.subscribe("odd.>.tail")
    lenient.publish("odd.*", b"wildcard")  # the server takes it as a literal subject
    lenient.request_batch("odd.*.batch", [b"x"], timeout=0.2)
    lenient.flush()
    got = [everything.next_msg(5) for _ in range(2)]
    assert [(msg.subject, msg.data) for msg in got] == [
        ("odd.*", b"wildcard"),
        ("odd.*.batch", b"x"),
    ]
    lenient.subscribe("odd.>.tail")  # the server refuses it, and says so
    wait_until(lambda: errors, "the server's -ERR")
    assert "Invalid Subject" in str(errors[0]) and lenient.is_connected
    # What keeps the protocol line whole is still checked.
    for subject in ("a b", "a\r\nPUB x 1", ""):
        with pytest.raises(nats_sync.BadSubjectError):
            lenient.publish(subject, b"")


# --- server pool, state and address names ----------------------------------------------


def test_set_server_pool_is_used_on_the_next_reconnect(
    nats_server_factory: ServerFactory, connect: ClientFactory
) -> None:
    first, second = two_servers(nats_server_factory)
    nc = connect(servers=first.url)
    assert [(s.uri.port, s.reconnects) for s in nc.server_pool] == [(first.port, 0)]
    with pytest.raises(nats_sync.InvalidArgumentError, match="unknown scheme"):
        nc.set_server_pool(["http://127.0.0.1:1"])
    assert [s.uri.port for s in nc.server_pool] == [first.port]  # unchanged
    nc.set_server_pool([f"nats://user:s3cret@127.0.0.1:{second.port}"])
    assert port_of(nc) == first.port  # the connection stays until the next reconnect
    assert [str(s.uri.geturl()) for s in nc.server_pool] == [
        f"nats://user:***@127.0.0.1:{second.port}"
    ]
    nc.force_reconnect()
    wait_until(lambda: nc.stats["reconnects"] == 1, "the reconnect")
    assert port_of(nc) == second.port
    nc.close()
    with pytest.raises(nats_sync.ConnectionClosedError):
        nc.set_server_pool([first.url])


def test_state_names_client_ip_and_ssl_context(
    tmp_path: Path, nats_server_factory: ServerFactory, connect: ClientFactory
) -> None:
    nc = connect()
    assert nc.status is nats_sync.Client.CONNECTED
    assert not nc.is_connecting and not nc.is_draining_pubs
    assert nc.client_ip == "127.0.0.1"
    default = nc.ssl_context  # what a TLS server without tls= is verified with
    assert isinstance(default, ssl.SSLContext) and default.verify_mode is ssl.CERT_REQUIRED

    ca = trustme.CA()
    leaf = ca.issue_cert("127.0.0.1")
    cert, key = tmp_path / "server.pem", tmp_path / "server.key"
    leaf.cert_chain_pems[0].write_to_path(str(cert))
    leaf.private_key_pem.write_to_path(str(key))
    server = nats_server_factory(config=f'tls {{ cert_file: "{cert}"\n key_file: "{key}" }}')
    context = ssl.create_default_context()
    ca.configure_trust(context)
    secure = connect(servers=f"tls://127.0.0.1:{server.port}", tls=context)
    assert secure.ssl_context is context
    round_trip(secure, "tls.context")

    draining = threading.Event()
    seen: list[bool] = []

    def slow(msg: nats_sync.Msg) -> None:
        draining.wait(5)
        seen.append(nc.is_draining and not nc.is_draining_pubs)

    nc.subscribe("slow", cb=slow)
    nc.publish("slow", b"")
    nc.flush()
    drainer = threading.Thread(target=nc.drain)
    drainer.start()
    wait_until(lambda: nc.status is nats_sync.Client.DRAINING_SUBS, "draining subscriptions")
    draining.set()
    drainer.join(10)
    assert seen == [True]
    assert nc.status is nats_sync.Client.CLOSED and nc.is_closed


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_is_connecting_until_the_first_connection(connect: ClientFactory) -> None:
    port = free_port()
    nc = connect(
        servers=f"nats://127.0.0.1:{port}",
        retry_on_failed_connect=True,
        reconnect_delay_cb=lambda attempt: 0.05,
        max_reconnect_attempts=-1,
    )
    assert nc.is_connecting and nc.is_reconnecting and nc.status is nats_sync.Client.RECONNECTING
    with NatsServer(port=port):
        wait_until(lambda: nc.is_connected, "the first connection")
        assert not nc.is_connecting
        nc.close()

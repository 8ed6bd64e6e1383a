"""TLS against real nats-servers, with certificates made by trustme for each test."""

from __future__ import annotations

import datetime
import socket
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import trustme

import nats_sync
from nats_sync.testing import NatsServer

ClientFactory = Callable[..., nats_sync.Client]
ServerFactory = Callable[..., NatsServer]

pytestmark = pytest.mark.timeout(30)


@dataclass
class Pki:
    ca: trustme.CA
    cert: Path
    key: Path
    ca_file: Path

    def client_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context()
        self.ca.configure_trust(context)
        return context


def make_pki(directory: Path, *, expired: bool = False) -> Pki:
    ca = trustme.CA()
    if expired:
        now = datetime.datetime.now(datetime.timezone.utc)
        leaf = ca.issue_cert(
            "localhost",
            "127.0.0.1",
            not_before=now - datetime.timedelta(days=30),
            not_after=now - datetime.timedelta(days=1),
        )
    else:
        leaf = ca.issue_cert("localhost", "127.0.0.1")
    cert, key, ca_file = directory / "server.pem", directory / "server.key", directory / "ca.pem"
    leaf.cert_chain_pems[0].write_to_path(str(cert))
    leaf.private_key_pem.write_to_path(str(key))
    ca.cert_pem.write_to_path(str(ca_file))
    return Pki(ca, cert, key, ca_file)


def tls_block(pki: Pki, extra: str = "") -> str:
    return f'tls {{\n  cert_file: "{pki.cert}"\n  key_file: "{pki.key}"\n  timeout: 2\n{extra}}}\n'


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return make_pki(tmp_path)


def test_tls_url_verifies_the_server_and_works(
    pki: Pki, nats_server_factory: ServerFactory, connect: ClientFactory
) -> None:
    server = nats_server_factory(config=tls_block(pki))
    nc = connect(
        servers=f"tls://127.0.0.1:{server.port}", tls=pki.client_context(), tls_hostname="localhost"
    )
    assert nc.server_info.get("tls_required") is True
    sub = nc.subscribe("tls.echo", cb=lambda msg: msg.respond(msg.data[::-1]))
    nc.flush()
    assert nc.request("tls.echo", b"abc" * 10_000, timeout=5).data == b"cba" * 10_000
    plain = nc.subscribe("tls.many")
    for n in range(2_000):
        nc.publish("tls.many", b"%d" % n)
    nc.flush()
    assert [int(plain.next_msg(5).data) for _ in range(2_000)] == list(range(2_000))
    sub.unsubscribe()


def test_a_server_requiring_tls_is_upgraded_to_with_the_given_context(
    pki: Pki, nats_server_factory: ServerFactory, connect: ClientFactory
) -> None:
    server = nats_server_factory(config=tls_block(pki))
    nc = connect(servers=server.url, tls=pki.client_context(), tls_hostname="localhost")
    nc.publish("tls.x", b"y")
    nc.flush()
    assert nc.is_connected


def test_an_untrusted_certificate_fails_promptly_with_the_reason(
    pki: Pki, nats_server_factory: ServerFactory
) -> None:
    server = nats_server_factory(config=tls_block(pki))
    started = time.monotonic()
    with pytest.raises(nats_sync.NoServersError) as caught:
        nats_sync.connect(f"tls://127.0.0.1:{server.port}", connect_timeout=2.0)
    assert time.monotonic() - started < 10
    cause = caught.value.__cause__
    assert isinstance(cause, nats_sync.SecureConnFailedError)
    assert "certificate" in str(cause).lower()


def test_a_wrong_host_name_is_refused(pki: Pki, nats_server_factory: ServerFactory) -> None:
    server = nats_server_factory(config=tls_block(pki))
    with pytest.raises(nats_sync.NoServersError) as caught:
        nats_sync.connect(server.url, tls=pki.client_context(), tls_hostname="not-the-server")
    assert isinstance(caught.value.__cause__, nats_sync.SecureConnFailedError)
    assert "not-the-server" in str(caught.value.__cause__)


def test_an_expired_certificate_is_refused(
    tmp_path: Path, nats_server_factory: ServerFactory
) -> None:
    expired = make_pki(tmp_path, expired=True)
    server = nats_server_factory(config=tls_block(expired))
    with pytest.raises(nats_sync.NoServersError) as caught:
        nats_sync.connect(server.url, tls=expired.client_context(), tls_hostname="localhost")
    assert isinstance(caught.value.__cause__, nats_sync.SecureConnFailedError)
    assert "expired" in str(caught.value.__cause__).lower()


def test_a_client_demanding_tls_from_a_plain_server_gets_a_clear_error(
    nats_server: NatsServer,
) -> None:
    with pytest.raises(nats_sync.NoServersError) as caught:
        nats_sync.connect(f"tls://127.0.0.1:{nats_server.port}")
    assert isinstance(caught.value.__cause__, nats_sync.SecureConnRequiredError)
    assert "does not offer" in str(caught.value.__cause__)


def test_tls_first_handshake(
    pki: Pki, nats_server_factory: ServerFactory, connect: ClientFactory
) -> None:
    server = nats_server_factory(config=tls_block(pki, "  handshake_first: true\n"))
    nc = connect(
        servers=server.url,
        tls=pki.client_context(),
        tls_hostname="localhost",
        tls_handshake_first=True,
    )
    sub = nc.subscribe("first.x")
    nc.publish("first.x", b"ok")
    assert sub.next_msg(5).data == b"ok"


def test_mutual_tls_needs_the_client_certificate(
    pki: Pki, nats_server_factory: ServerFactory, connect: ClientFactory
) -> None:
    server = nats_server_factory(
        config=tls_block(pki, f'  ca_file: "{pki.ca_file}"\n  verify: true\n')
    )
    with pytest.raises(nats_sync.NoServersError):
        nats_sync.connect(
            server.url, tls=pki.client_context(), tls_hostname="localhost", connect_timeout=2.0
        )
    context = pki.client_context()
    pki.ca.issue_cert("client.example").configure_cert(context)
    nc = connect(servers=server.url, tls=context, tls_hostname="localhost")
    nc.flush()
    assert nc.is_connected


def test_mutual_tls_maps_the_certificate_to_a_user(
    pki: Pki, nats_server_factory: ServerFactory, connect: ClientFactory
) -> None:
    config = tls_block(pki, f'  ca_file: "{pki.ca_file}"\n  verify_and_map: true\n')
    config += """
authorization {
  users = [
    {user: "client.example", permissions: {publish: ["mapped.>"], subscribe: ["mapped.>"]}}
  ]
}
"""
    server = nats_server_factory(config=config)
    context = pki.client_context()
    pki.ca.issue_cert("client.example").configure_cert(context)
    errors: list[BaseException] = []
    nc = connect(servers=server.url, tls=context, tls_hostname="localhost", error_cb=errors.append)
    sub = nc.subscribe("mapped.ok")
    nc.publish("mapped.ok", b"as client.example")
    assert sub.next_msg(5).data == b"as client.example"
    nc.publish("elsewhere", b"not allowed for this user")
    nc.flush()
    deadline = time.monotonic() + 5
    while not errors:
        assert time.monotonic() < deadline, "the mapped user's permissions were not applied"
        time.sleep(0.01)
    assert isinstance(errors[0], nats_sync.PermissionsViolationError)

    other = pki.client_context()
    pki.ca.issue_cert("stranger.example").configure_cert(other)
    with pytest.raises((nats_sync.AuthorizationError, nats_sync.NoServersError)):
        nats_sync.connect(server.url, tls=other, tls_hostname="localhost", connect_timeout=2.0)


def test_reconnect_over_tls_keeps_working(
    pki: Pki, nats_server_factory: ServerFactory, connect: ClientFactory
) -> None:
    server = nats_server_factory(config=tls_block(pki))
    reconnected = threading.Event()
    nc = connect(
        servers=server.url,
        tls=pki.client_context(),
        tls_hostname="localhost",
        reconnected_cb=reconnected.set,
        reconnect_delay_cb=lambda attempt: 0.05,
    )
    sub = nc.subscribe("tls.again")
    nc.flush()
    server.kill()
    server.start()
    assert reconnected.wait(15)
    nc.publish("tls.again", b"over the new TLS session")
    assert sub.next_msg(5).data == b"over the new TLS session"


def test_a_server_that_speaks_tls_on_a_plain_url_does_not_hang(
    pki: Pki, nats_server_factory: ServerFactory
) -> None:
    server = nats_server_factory(config=tls_block(pki, "  handshake_first: true\n"))
    started = time.monotonic()
    with pytest.raises(nats_sync.NoServersError):
        nats_sync.connect(server.url, connect_timeout=1.0)  # no TLS: the server waits
    assert time.monotonic() - started < 10


def test_a_fake_server_sending_garbage_during_the_tls_handshake_fails_cleanly() -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.sendall(b'INFO {"tls_required":true,"max_payload":1048576}\r\n')
            conn.recv(4096)  # the ClientHello
            conn.sendall(b"this is not TLS\r\n" * 10)
            time.sleep(0.5)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        with pytest.raises(nats_sync.NoServersError) as caught:
            nats_sync.connect(f"nats://127.0.0.1:{port}", connect_timeout=2.0)
        assert isinstance(caught.value.__cause__, nats_sync.SecureConnFailedError)
    finally:
        thread.join(5)
        listener.close()

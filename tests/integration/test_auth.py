"""nkey and JWT (.creds) authentication against real servers, and secret redaction."""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nkeys
import pytest

import nats_sync
from nats_sync._core.transport.auth import sign
from nats_sync.testing import NatsServer

ClientFactory = Callable[..., nats_sync.Client]
ServerFactory = Callable[..., NatsServer]

pytestmark = pytest.mark.timeout(30)


def new_keys(prefix: int) -> tuple[bytes, str]:
    seed: bytes = nkeys.encode_seed(os.urandom(32), prefix)
    return seed, nkeys.from_seed(seed).public_key.decode()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def make_jwt(issuer_seed: bytes, subject: str, name: str, nats: dict[str, Any]) -> str:
    """A NATS JWT v2: header.claims.signature, signed by the issuer's nkey."""
    issuer = nkeys.from_seed(issuer_seed).public_key.decode()
    claims: dict[str, Any] = {
        "iat": int(time.time()),
        "iss": issuer,
        "name": name,
        "sub": subject,
        "nats": {**nats, "version": 2},
    }
    claims["jti"] = (
        base64.b32encode(hashlib.sha256(json.dumps(claims, sort_keys=True).encode()).digest())
        .decode()
        .rstrip("=")
    )
    header = _b64(json.dumps({"typ": "JWT", "alg": "ed25519-nkey"}).encode())
    body = _b64(json.dumps(claims).encode())
    signature = nkeys.from_seed(issuer_seed).sign(f"{header}.{body}".encode())
    return f"{header}.{body}.{_b64(signature)}"


def write_creds(path: Path, jwt: str, seed: bytes) -> str:
    path.write_text(
        f"-----BEGIN NATS USER JWT-----\n{jwt}\n------END NATS USER JWT------\n\n"
        f"-----BEGIN USER NKEY SEED-----\n{seed.decode()}\n------END USER NKEY SEED------\n"
    )
    return str(path)


def test_nkey_authentication(
    tmp_path: Path, nats_server_factory: ServerFactory, connect: ClientFactory
) -> None:
    seed, public = new_keys(nkeys.PREFIX_BYTE_USER)
    server = nats_server_factory(config=f'authorization {{ users = [ {{nkey: "{public}"}} ] }}')
    seed_file = tmp_path / "user.nk"
    seed_file.write_text(seed.decode())
    nc = connect(servers=server.url, nkeys_seed=str(seed_file))
    sub = nc.subscribe("nk.x")
    nc.publish("nk.x", b"signed in with an nkey")
    assert sub.next_msg(5).data == b"signed in with an nkey"

    other_seed, _ = new_keys(nkeys.PREFIX_BYTE_USER)
    other = tmp_path / "other.nk"
    other.write_text(other_seed.decode())
    with pytest.raises(nats_sync.AuthorizationError):
        nats_sync.connect(server.url, nkeys_seed=str(other))


def test_a_bad_seed_file_fails_before_connecting(tmp_path: Path) -> None:
    path = tmp_path / "garbage.nk"
    path.write_text("not a seed at all")
    with pytest.raises(nats_sync.BadCredentialsError, match="no nkey seed"):
        nats_sync.connect("nats://127.0.0.1:1", nkeys_seed=str(path))


@pytest.fixture
def operator_server(
    tmp_path: Path, nats_server_factory: ServerFactory
) -> tuple[NatsServer, bytes, bytes]:
    """An operator-mode server with one account preloaded; returns it and the account's
    and the operator's seeds."""
    operator_seed, operator_public = new_keys(nkeys.PREFIX_BYTE_OPERATOR)
    account_seed, account_public = new_keys(nkeys.PREFIX_BYTE_ACCOUNT)
    operator_jwt = make_jwt(operator_seed, operator_public, "op", {"type": "operator"})
    account_jwt = make_jwt(
        operator_seed,
        account_public,
        "acct",
        {
            "type": "account",
            "limits": {
                "subs": -1,
                "data": -1,
                "payload": -1,
                "imports": -1,
                "exports": -1,
                "wildcards": True,
                "conn": -1,
                "leaf": -1,
            },
        },
    )
    (tmp_path / "op.jwt").write_text(operator_jwt)
    config = (
        f'operator: "{tmp_path / "op.jwt"}"\nresolver: MEMORY\n'
        f"resolver_preload: {{\n  {account_public}: {account_jwt}\n}}\n"
    )
    return nats_server_factory(config=config), account_seed, operator_seed


def user_creds(tmp_path: Path, account_seed: bytes, name: str) -> tuple[str, str, bytes]:
    user_seed, user_public = new_keys(nkeys.PREFIX_BYTE_USER)
    jwt = make_jwt(
        account_seed,
        user_public,
        name,
        {
            "type": "user",
            "pub": {},
            "sub": {},
            "subs": -1,
            "data": -1,
            "payload": -1,
        },
    )
    return write_creds(tmp_path / f"{name}.creds", jwt, user_seed), jwt, user_seed


def test_creds_login_in_operator_mode(
    tmp_path: Path, operator_server: tuple[NatsServer, bytes, bytes], connect: ClientFactory
) -> None:
    server, account_seed, _ = operator_server
    creds, jwt, user_seed = user_creds(tmp_path, account_seed, "alice")
    nc = connect(servers=server.url, user_credentials=creds)
    sub = nc.subscribe("jwt.x")
    nc.publish("jwt.x", b"operator mode works")
    assert sub.next_msg(5).data == b"operator mode works"

    vault = connect(
        servers=server.url,
        user_jwt_cb=lambda: jwt,
        signature_cb=lambda nonce: sign(user_seed, nonce),
    )
    vault.publish("jwt.x", b"from the vault user")
    assert sub.next_msg(5).data == b"from the vault user"


def test_a_user_signed_by_an_unknown_account_is_refused(
    tmp_path: Path, operator_server: tuple[NatsServer, bytes, bytes]
) -> None:
    server, _, _ = operator_server
    stranger_account, _ = new_keys(nkeys.PREFIX_BYTE_ACCOUNT)
    creds, _, _ = user_creds(tmp_path, stranger_account, "mallory")
    with pytest.raises(nats_sync.AuthorizationError):
        nats_sync.connect(server.url, user_credentials=creds)


def test_wrong_credentials_with_retry_go_to_error_cb_and_close(
    nats_server_factory: ServerFactory,
) -> None:
    server = nats_server_factory(config="authorization { user: app, password: right }")
    errors: list[BaseException] = []
    closed = []
    nc = nats_sync.connect(
        server.url,
        user="app",
        password="wrong",
        retry_on_failed_connect=True,
        reconnect_delay_cb=lambda n: 0.01,
        error_cb=errors.append,
        closed_cb=lambda: closed.append(1),
    )
    deadline = time.monotonic() + 15
    while not nc.is_closed:
        assert time.monotonic() < deadline, "the client kept retrying refused credentials"
        time.sleep(0.02)
    assert any(isinstance(e, nats_sync.AuthorizationError) for e in errors)
    assert isinstance(nc.last_error, nats_sync.AuthorizationError)


def test_secrets_never_appear_in_reprs_errors_or_logs(
    tmp_path: Path,
    nats_server_factory: ServerFactory,
    connect: ClientFactory,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="nats_sync")
    password, token = "pa55-w0rd-secret", "t0ken-secret"
    seed, public = new_keys(nkeys.PREFIX_BYTE_USER)
    server = nats_server_factory(
        config=(
            "authorization { users = [ "
            f'{{user: app, password: "{password}"}}, {{nkey: "{public}"}} ] }}'
        )
    )
    seed_file = tmp_path / "user.nk"
    seed_file.write_text(seed.decode())
    shown: list[str] = []
    with_password = connect(servers=f"nats://app:{password}@127.0.0.1:{server.port}")
    with_nkey = connect(servers=server.url, nkeys_seed=str(seed_file))
    for nc in (with_password, with_nkey):
        shown += [
            repr(nc),
            str(nc),
            repr(nc._handler.options),
            str(nc.connected_url),
            repr(nc.servers),
        ]
    for bad in ({"user": "app", "password": password + "x"}, {"token": token}):
        with pytest.raises(nats_sync.Error) as caught:
            nats_sync.connect(server.url, **bad)
        shown += [str(caught.value), repr(caught.value), str(caught.value.__cause__)]
    shown += [record.getMessage() for record in caplog.records]
    text = "\n".join(shown)
    for secret in (password, token, seed.decode()):
        assert secret not in text
    assert "app:***@" in text


def wait_until(condition: Callable[[], object], what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.02)


def test_a_rotated_seed_file_is_read_again_on_reconnect(
    tmp_path: Path, nats_server_factory: ServerFactory, connect: ClientFactory
) -> None:
    first, first_public = new_keys(nkeys.PREFIX_BYTE_USER)
    second, second_public = new_keys(nkeys.PREFIX_BYTE_USER)
    stranger, _ = new_keys(nkeys.PREFIX_BYTE_USER)
    server = nats_server_factory(
        config=(
            f'authorization {{ users = [ {{nkey: "{first_public}"}}, '
            f'{{nkey: "{second_public}"}} ] }}'
        )
    )
    seed_file = tmp_path / "user.nk"
    seed_file.write_text(first.decode())
    errors: list[BaseException] = []
    reconnected: list[int] = []
    nc = connect(
        servers=server.url,
        nkeys_seed=str(seed_file),
        error_cb=errors.append,
        reconnect_delay_cb=lambda n: 0.02,
        reconnected_cb=lambda: reconnected.append(1),
    )

    seed_file.write_text(second.decode())  # rotated: the next handshake signs with it
    nc.force_reconnect()
    wait_until(lambda: reconnected, "the client reconnected with the rotated seed")
    nc.flush(5)

    seed_file.write_text(stranger.decode())  # proves the file is read again each time
    nc.force_reconnect()
    wait_until(lambda: nc.is_closed, "the client gave up on the refused seed")
    assert any(isinstance(e, nats_sync.AuthorizationError) for e in errors)
    assert isinstance(nc.last_error, nats_sync.AuthorizationError)


def test_a_failing_vault_callback_fails_attempts_not_the_reconnect_thread(
    tmp_path: Path,
    operator_server: tuple[NatsServer, bytes, bytes],
    connect: ClientFactory,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="nats_sync")
    server, account_seed, _ = operator_server
    _, jwt, user_seed = user_creds(tmp_path, account_seed, "vaulted")
    vault = {"up": True, "calls": 0}

    def fetch_jwt() -> str:
        vault["calls"] += 1
        if not vault["up"]:
            raise ConnectionError("vault unreachable")
        return jwt

    reconnected: list[int] = []
    errors: list[BaseException] = []
    nc = connect(
        servers=server.url,
        user_jwt_cb=fetch_jwt,
        signature_cb=lambda nonce: sign(user_seed, nonce),
        error_cb=errors.append,
        reconnect_delay_cb=lambda n: 0.02,
        reconnected_cb=lambda: reconnected.append(1),
    )
    sub = nc.subscribe("vault.x")
    nc.flush(5)
    vault["up"] = False
    calls = vault["calls"]
    nc.force_reconnect()
    wait_until(lambda: vault["calls"] >= calls + 3, "the reconnect loop kept trying")
    assert nc.is_reconnecting
    vault["up"] = True
    wait_until(lambda: reconnected, "the client reconnected once the vault was back")
    nc.publish("vault.x", b"back")
    assert sub.next_msg(5).data == b"back"
    assert any("user_jwt_cb raised ConnectionError" in r.getMessage() for r in caplog.records)
    # error_cb hears of it once, not once per failed attempt
    reported = [e for e in errors if isinstance(e, nats_sync.BadCredentialsError)]
    assert len(reported) == 1 and "user_jwt_cb raised ConnectionError" in str(reported[0])
    assert isinstance(reported[0].__cause__, ConnectionError)


def test_a_failing_vault_callback_on_first_connect_is_that_error(
    operator_server: tuple[NatsServer, bytes, bytes],
) -> None:
    server, _, _ = operator_server

    def vault_down() -> str:
        raise ConnectionError("vault unreachable")

    with pytest.raises(nats_sync.BadCredentialsError, match="user_jwt_cb raised") as caught:
        nats_sync.connect(
            server.url,
            user_jwt_cb=vault_down,
            signature_cb=lambda nonce: b"\0" * 64,
            connect_timeout=2,
        )
    assert isinstance(caught.value.__cause__, ConnectionError)


def test_token_creds_and_nkey_secrets_never_appear(
    tmp_path: Path,
    nats_server_factory: ServerFactory,
    connect: ClientFactory,
    operator_server: tuple[NatsServer, bytes, bytes],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The other half of the redaction scan: token, .creds (JWT and seed), vault
    callbacks, a refused nkey and a refused user retried in the background."""
    caplog.set_level(logging.DEBUG, logger="nats_sync")
    token, password = "t0ken-very-secret", "pa55-retry-secret"
    token_server = nats_server_factory(config=f'authorization {{ token: "{token}" }}')
    jwt_server, account_seed, operator_seed = operator_server
    creds, jwt, user_seed = user_creds(tmp_path, account_seed, "carol")
    stranger_account, _ = new_keys(nkeys.PREFIX_BYTE_ACCOUNT)
    stranger_creds, stranger_jwt, stranger_seed = user_creds(tmp_path, stranger_account, "eve")
    nkey_seed, nkey_public = new_keys(nkeys.PREFIX_BYTE_USER)
    wrong_seed, _ = new_keys(nkeys.PREFIX_BYTE_USER)
    nkey_server = nats_server_factory(
        config=f'authorization {{ users = [ {{nkey: "{nkey_public}"}} ] }}'
    )
    password_server = nats_server_factory(config="authorization { user: app, password: right }")
    (tmp_path / "wrong.nk").write_text(wrong_seed.decode())
    secrets = [
        token,
        password,
        jwt,
        user_seed.decode(),
        stranger_jwt,
        stranger_seed.decode(),
        nkey_seed.decode(),
        wrong_seed.decode(),
        account_seed.decode(),
        operator_seed.decode(),
    ]

    clients = [
        connect(servers=token_server.url, token=token),
        connect(servers=f"nats://{token}@127.0.0.1:{token_server.port}"),
        connect(servers=jwt_server.url, user_credentials=creds),
        connect(
            servers=jwt_server.url,
            user_jwt_cb=lambda: jwt,
            signature_cb=lambda nonce: sign(user_seed, nonce),
        ),
    ]
    shown: list[str] = []
    for nc in clients:
        nc.flush(5)
        shown += [
            repr(nc),
            str(nc),
            repr(nc._handler.options),
            str(nc.connected_url),
            repr(nc.servers),
        ]
    refused: list[tuple[str, dict[str, Any]]] = [
        (token_server.url, {"token": token + "x"}),
        (jwt_server.url, {"user_credentials": stranger_creds}),
        (nkey_server.url, {"nkeys_seed": str(tmp_path / "wrong.nk")}),
        (nkey_server.url, {"nkeys_seed": nkey_seed.decode()}),  # the seed, not its path
        (jwt_server.url, {"user_credentials": Path(creds).read_text()}),  # content, not path
    ]
    for url, bad in refused:
        with pytest.raises(nats_sync.Error) as caught:
            nats_sync.connect(url, connect_timeout=3.0, **bad)
        shown += [str(caught.value), repr(caught.value), str(caught.value.__cause__)]
    errors: list[BaseException] = []
    retrying = nats_sync.connect(
        password_server.url,
        user="app",
        password=password,
        retry_on_failed_connect=True,
        reconnect_delay_cb=lambda n: 0.01,
        error_cb=errors.append,
    )
    wait_until(lambda: retrying.is_closed, "the retrying client gave up")
    shown += [repr(retrying), repr(retrying._handler.options), repr(retrying.last_error)]
    shown += [f"{e} {e!r}" for e in errors]
    shown += [record.getMessage() for record in caplog.records]
    shown += [str(record.exc_info[1]) for record in caplog.records if record.exc_info]
    text = "\n".join(shown)
    assert len(errors) >= 2 and "***@127.0.0.1" in text
    for secret in secrets:
        assert secret not in text

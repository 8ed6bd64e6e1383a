"""Credentials given as callables (called at every connect and reconnect, as nats.go's
``UserInfoHandler``/``TokenHandler``) and a host name's addresses tried in random order
(ADR-11), against real nats-servers."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import Any

import pytest

import nats_sync
from nats_sync._core.transport import streams
from nats_sync.errors import BadCredentialsError, InvalidArgumentError, NoServersError
from nats_sync.testing import NatsServer

pytestmark = pytest.mark.timeout(60)

ServerFactory = Callable[..., NatsServer]


def _reconnected(nc: nats_sync.Client, before: int) -> None:
    deadline = time.monotonic() + 10
    while nc.stats["reconnects"] <= before or not nc.is_connected:
        assert time.monotonic() < deadline, "no reconnect"
        time.sleep(0.02)


def test_a_token_callable_is_asked_again_at_each_reconnect(
    nats_server_factory: ServerFactory,
) -> None:
    server = nats_server_factory(config="authorization { token: first }")
    current = {"token": "first"}
    asked: list[str] = []

    def token() -> str:
        asked.append(current["token"])
        return current["token"]

    with nats_sync.connect(server.url, token=token, reconnect_time_wait=0.1) as nc:
        nc.flush(timeout=5)
        assert asked == ["first"]
        # The token rotates: the server takes only the new one, the callable gives it.
        current["token"] = "second"
        server.reload(config="authorization { token: second }")
        before = nc.stats["reconnects"]
        nc.force_reconnect()
        _reconnected(nc, before)
        assert asked[-1] == "second" and len(asked) >= 2
        sub = nc.subscribe("after.rotation")
        nc.publish("after.rotation", b"still here")
        assert sub.next_msg(timeout=5).data == b"still here"


def test_user_and_password_callables(nats_server_factory: ServerFactory) -> None:
    server = nats_server_factory(config="authorization { user: app, password: s3cret }")
    calls = {"user": 0, "password": 0}

    def user() -> str:
        calls["user"] += 1
        return "app"

    def password() -> str:
        calls["password"] += 1
        return "s3cret"

    with nats_sync.connect(server.url, user=user, password=password) as nc:
        nc.flush(timeout=5)
        before = nc.stats["reconnects"]
        nc.force_reconnect()
        _reconnected(nc, before)
    assert calls["user"] >= 2 and calls["password"] >= 2


def test_a_callable_that_raises_or_returns_no_str_fails_the_connect_saying_which(
    nats_server_factory: ServerFactory,
) -> None:
    server = nats_server_factory(config="authorization { token: first }")

    def broken() -> str:
        raise LookupError("the vault is sealed")

    with pytest.raises((BadCredentialsError, NoServersError)) as failed:
        nats_sync.connect(server.url, token=broken, allow_reconnect=False)
    cause = (
        failed.value if isinstance(failed.value, BadCredentialsError) else failed.value.__cause__
    )
    assert isinstance(cause, BadCredentialsError)
    assert "token callable raised LookupError" in str(cause)
    assert "vault" not in str(cause)  # what a secret store says stays out of the message
    with pytest.raises((BadCredentialsError, NoServersError), match="must return a str"):
        nats_sync.connect(server.url, token=lambda: 42, allow_reconnect=False)  # type: ignore[arg-type,return-value]


def test_a_credential_that_is_neither_text_nor_callable_is_refused_before_connecting() -> None:
    with pytest.raises(InvalidArgumentError, match="password must be a str or a callable"):
        nats_sync.connect("nats://127.0.0.1:1", user="u", password=1234)  # type: ignore[arg-type]


def test_a_host_names_addresses_are_tried_in_random_order_unless_told_not_to(
    nats_server_factory: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A name standing for two servers (as DNS round robin does): shuffled, clients land
    on both; with dont_randomize or no_randomize, always on the resolver's first."""
    first, second = nats_server_factory(), nats_server_factory()
    resolved = [
        (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", first.port)),
        (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", second.port)),
    ]
    real = socket.getaddrinfo

    def resolve(host: str, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host == "nats.example.internal":
            return list(resolved)
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(streams.socket, "getaddrinfo", resolve)

    def landed_on(**options: Any) -> set[str]:
        ids = set()
        for _ in range(16):
            with nats_sync.connect(
                "nats://nats.example.internal:4222", ignore_discovered_servers=True, **options
            ) as nc:
                ids.add(nc.server_info["server_id"])
        return ids

    # 16 connects all on one of two addresses: 1 chance in 2**15 with a fair shuffle.
    assert len(landed_on()) == 2, "16 connects all landed on one of two addresses"
    assert len(landed_on(dont_randomize=True)) == 1
    assert len(landed_on(no_randomize=True)) == 1

"""``nats`` CLI contexts (ADR-21) against real servers: connect() with no servers, or
with ``context=``, takes the servers, credentials, TLS files, inbox prefix and
JetStream domain a context file holds; the CLI does the same without ``--server``.

Each test gets its own home and config folders (``HOME``/``XDG_CONFIG_HOME``) and no
``$NATS_URL``/``$NATS_CONTEXT``, so nothing of the machine's own contexts leaks in.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nkeys
import pytest
import trustme
from test_auth import make_jwt, new_keys, write_creds

import nats_sync
from nats_sync.cli import main
from nats_sync.testing import NatsServer

ServerFactory = Callable[..., NatsServer]

pytestmark = pytest.mark.timeout(30)

#: Nothing listens here: a client sent there fails at once.
UNREACHABLE = "nats://127.0.0.1:1"
#: Every key ``nats context save`` writes (it writes them all, empty when unset).
CLI_KEYS = (
    "description",
    "url",
    "socks_proxy",
    "token",
    "user",
    "password",
    "creds",
    "nkey",
    "cert",
    "key",
    "ca",
    "nsc",
    "jetstream_domain",
    "jetstream_api_prefix",
    "jetstream_event_prefix",
    "inbox_prefix",
    "user_jwt",
    "color_scheme",
)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh ``$HOME`` (contexts in its ``.config``), with no NATS variables set."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in ("XDG_CONFIG_HOME", "NATS_URL", "NATS_CONTEXT"):
        monkeypatch.delenv(name, raising=False)
    return home


def save_context(config: Path, name: str, **values: Any) -> Path:
    """Writes a context as ``nats context save`` does (every key, "" when unset)."""
    path = config / "nats" / "context" / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    data: dict[str, Any] = dict.fromkeys(CLI_KEYS, "")
    data.update(values)
    path.write_text(json.dumps(data, indent=2))
    return path


def select(config: Path, name: str) -> None:
    """What ``nats context select NAME`` writes."""
    (config / "nats").mkdir(parents=True, exist_ok=True)
    (config / "nats" / "context.txt").write_text(name)


def round_trip(nc: nats_sync.Client, subject: str = "ctx.check") -> None:
    sub = nc.subscribe(subject)
    nc.publish(subject, b"through the context")
    assert sub.next_msg(5).data == b"through the context"


# --- which context, which servers ---------------------------------------------------


def test_the_selected_context_supplies_the_server(home: Path, nats_server: NatsServer) -> None:
    save_context(home / ".config", "local", url=nats_server.url, description="dev box")
    select(home / ".config", "local")
    with nats_sync.connect(connect_timeout=2) as nc:
        assert nc.connected_url == nats_server.url
        assert nc.options["context"] == "local"
        round_trip(nc)


def test_nats_context_names_another_than_the_selected_one(
    home: Path, nats_server: NatsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = home / ".config"
    save_context(config, "elsewhere", url=UNREACHABLE)
    save_context(config, "here", url=nats_server.url)
    select(config, "elsewhere")
    monkeypatch.setenv("NATS_CONTEXT", "here")
    with nats_sync.connect(connect_timeout=2) as nc:
        assert nc.options["context"] == "here"
        round_trip(nc)


def test_xdg_config_home_is_where_contexts_live(
    home: Path, tmp_path: Path, nats_server: NatsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    save_context(home / ".config", "local", url=UNREACHABLE)  # not read: XDG wins
    select(home / ".config", "local")
    xdg = tmp_path / "xdg"
    save_context(xdg, "local", url=nats_server.url)
    select(xdg, "local")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(xdg))
    with nats_sync.connect(connect_timeout=2) as nc:
        round_trip(nc)


def test_connect_context_picks_one_explicitly(home: Path, nats_server: NatsServer) -> None:
    config = home / ".config"
    save_context(config, "elsewhere", url=UNREACHABLE)
    save_context(config, "here", url=nats_server.url)
    select(config, "elsewhere")
    with nats_sync.connect(context="here", connect_timeout=2) as nc:
        assert nc.options["context"] == "here"
        round_trip(nc)


def test_nats_url_comes_before_any_context(
    home: Path, nats_server: NatsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = home / ".config"
    save_context(config, "elsewhere", url=UNREACHABLE, inbox_prefix="_NOT_READ")
    select(config, "elsewhere")
    monkeypatch.setenv("NATS_URL", nats_server.url)
    with nats_sync.connect(connect_timeout=2) as nc:
        assert nc.connected_url == nats_server.url
        assert nc.options["context"] is None
        assert nc.options["inbox_prefix"] == "_INBOX"
    # A context named in the call is read all the same, and its url beats $NATS_URL.
    monkeypatch.setenv("NATS_URL", UNREACHABLE)
    save_context(config, "here", url=nats_server.url)
    with nats_sync.connect(context="here", connect_timeout=2) as nc:
        round_trip(nc)


def test_no_environment_and_no_context_keep_the_default_url(home: Path) -> None:
    from nats_sync._core.transport.options import build_options

    options = build_options(None)
    assert options.servers == ("nats://127.0.0.1:4222",) and options.context is None


# --- errors name the file ------------------------------------------------------------


def test_an_unknown_context_names_the_file_looked_for(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = home / ".config" / "nats" / "context" / "nope.json"
    with pytest.raises(nats_sync.InvalidArgumentError, match="unknown nats context") as caught:
        nats_sync.connect(context="nope")
    assert str(expected) in str(caught.value)
    monkeypatch.setenv("NATS_CONTEXT", "nope")
    with pytest.raises(nats_sync.InvalidArgumentError, match=re.escape(str(expected))):
        nats_sync.connect()
    monkeypatch.delenv("NATS_CONTEXT")
    select(home / ".config", "gone")  # context.txt pointing at a deleted context
    with pytest.raises(nats_sync.InvalidArgumentError, match=re.escape("gone.json")):
        nats_sync.connect()


def test_a_malformed_context_file_names_its_path(home: Path) -> None:
    path = save_context(home / ".config", "broken")
    path.write_text('{"url": "nats://127.0.0.1:4222",')
    with pytest.raises(nats_sync.InvalidArgumentError, match="not valid JSON") as caught:
        nats_sync.connect(context="broken")
    assert str(path) in str(caught.value)
    path.write_text('["a list"]')
    with pytest.raises(nats_sync.InvalidArgumentError, match="must hold a JSON object"):
        nats_sync.connect(context="broken")
    path.write_text('{"url": 4222}')
    with pytest.raises(nats_sync.InvalidArgumentError, match="url must be a string"):
        nats_sync.connect(context="broken")


# --- credentials ----------------------------------------------------------------------


def test_user_and_password_from_the_context(home: Path, nats_server_factory: ServerFactory) -> None:
    server = nats_server_factory(config="authorization { user: app, password: s3cret }")
    config = home / ".config"
    save_context(config, "good", url=server.url, user="app", password="s3cret")
    save_context(config, "bad", url=server.url, user="app", password="wrong")
    select(config, "good")
    with nats_sync.connect(connect_timeout=2) as nc:
        round_trip(nc)
        assert nc.options["password"] == "***"
    with pytest.raises(nats_sync.AuthorizationError):
        nats_sync.connect(context="bad", connect_timeout=2, allow_reconnect=False)


def test_explicit_arguments_override_the_context(
    home: Path, nats_server_factory: ServerFactory
) -> None:
    server = nats_server_factory(config="authorization { user: app, password: s3cret }")
    other = nats_server_factory()
    save_context(
        home / ".config", "bad", url=other.url, user="app", password="wrong", inbox_prefix="_CTX"
    )
    # Given credentials leave all of the context's aside; given servers its url.
    with nats_sync.connect(
        server.url,
        context="bad",
        user="app",
        password="s3cret",
        inbox_prefix="_MINE",
        connect_timeout=2,
    ) as nc:
        assert nc.connected_url is not None and f":{server.port}" in nc.connected_url
        assert nc.new_inbox().startswith("_MINE.")
        round_trip(nc)
    with nats_sync.connect(context="bad", connect_timeout=2) as nc:  # other has no auth
        assert f":{other.port}" in (nc.connected_url or "")
        assert nc.new_inbox().startswith("_CTX.")


def test_a_token_context(home: Path, nats_server_factory: ServerFactory) -> None:
    server = nats_server_factory(config='authorization { token: "t0k3n" }')
    save_context(home / ".config", "tok", url=server.url, token="t0k3n")
    with nats_sync.connect(context="tok", connect_timeout=2) as nc:
        round_trip(nc)
    save_context(home / ".config", "notok", url=server.url)
    with pytest.raises(nats_sync.AuthorizationError):
        nats_sync.connect(context="notok", connect_timeout=2, allow_reconnect=False)


def test_an_nkey_context_with_a_home_relative_seed_file(
    home: Path, nats_server_factory: ServerFactory
) -> None:
    seed, public = new_keys(nkeys.PREFIX_BYTE_USER)
    server = nats_server_factory(config=f'authorization {{ users = [ {{nkey: "{public}"}} ] }}')
    (home / "keys").mkdir()
    (home / "keys" / "user.nk").write_text(seed.decode())
    save_context(home / ".config", "nk", url=server.url, nkey="~/keys/user.nk")
    with nats_sync.connect(context="nk", connect_timeout=2) as nc:
        round_trip(nc)


@pytest.fixture
def operator_server(nats_server_factory: ServerFactory, tmp_path: Path) -> tuple[NatsServer, bytes]:
    """An operator-mode server with one account; returns it and the account's seed."""
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
    return nats_server_factory(config=config), account_seed


def new_user(account_seed: bytes) -> tuple[str, bytes]:
    user_seed, user_public = new_keys(nkeys.PREFIX_BYTE_USER)
    jwt = make_jwt(
        account_seed,
        user_public,
        "ctx-user",
        {
            "type": "user",
            "pub": {},
            "sub": {},
            "subs": -1,
            "data": -1,
            "payload": -1,
        },
    )
    return jwt, user_seed


def test_a_creds_context_in_operator_mode(
    home: Path, operator_server: tuple[NatsServer, bytes]
) -> None:
    server, account_seed = operator_server
    jwt, seed = new_user(account_seed)
    write_creds(home / "user.creds", jwt, seed)
    save_context(home / ".config", "ngs", url=server.url, creds="~/user.creds")
    select(home / ".config", "ngs")
    with nats_sync.connect(connect_timeout=2) as nc:
        round_trip(nc)
    save_context(home / ".config", "anon", url=server.url)
    with pytest.raises(nats_sync.AuthorizationError):
        nats_sync.connect(context="anon", connect_timeout=2, allow_reconnect=False)


def test_a_user_jwt_context_signs_with_its_nkey_seed(
    home: Path, operator_server: tuple[NatsServer, bytes]
) -> None:
    server, account_seed = operator_server
    jwt, seed = new_user(account_seed)
    (home / "user.nk").write_text(seed.decode())
    save_context(home / ".config", "jwt", url=server.url, user_jwt=jwt, nkey="~/user.nk")
    with nats_sync.connect(context="jwt", connect_timeout=2) as nc:
        round_trip(nc)
    save_context(home / ".config", "half", url=server.url, user_jwt=jwt)
    with pytest.raises(nats_sync.BadCredentialsError, match="user_jwt needs nkey"):
        nats_sync.connect(context="half")


# --- TLS, inbox prefix, JetStream ------------------------------------------------------


def test_tls_files_from_the_context_with_a_client_certificate_and_tls_first(
    home: Path, nats_server_factory: ServerFactory
) -> None:
    ca = trustme.CA()
    pki = home / "pki"
    pki.mkdir()
    leaf = ca.issue_cert("localhost", "127.0.0.1")
    leaf.cert_chain_pems[0].write_to_path(str(pki / "server.pem"))
    leaf.private_key_pem.write_to_path(str(pki / "server.key"))
    ca.cert_pem.write_to_path(str(pki / "ca.pem"))
    client = ca.issue_cert("client.example")
    client.cert_chain_pems[0].write_to_path(str(pki / "client.pem"))
    client.private_key_pem.write_to_path(str(pki / "client.key"))
    server = nats_server_factory(
        config=(
            f'tls {{\n  cert_file: "{pki / "server.pem"}"\n  key_file: "{pki / "server.key"}"\n'
            f'  ca_file: "{pki / "ca.pem"}"\n  verify: true\n  timeout: 2\n'
            "  handshake_first: true\n}\n"
        )
    )
    url = f"tls://127.0.0.1:{server.port}"
    save_context(
        home / ".config",
        "mtls",
        url=url,
        ca="~/pki/ca.pem",
        cert="~/pki/client.pem",
        key="~/pki/client.key",
        tls_first=True,
    )
    with nats_sync.connect(context="mtls", connect_timeout=2) as nc:
        assert nc.options["tls_handshake_first"] is True
        round_trip(nc)
    # Without the client certificate the server refuses: the context's cert was used.
    save_context(home / ".config", "nocert", url=url, ca="~/pki/ca.pem", tls_first=True)
    with pytest.raises(nats_sync.NoServersError):
        nats_sync.connect(context="nocert", connect_timeout=2, allow_reconnect=False)
    save_context(home / ".config", "badca", url=url, ca="~/pki/missing.pem")
    with pytest.raises(nats_sync.InvalidArgumentError, match="cannot load ca") as caught:
        nats_sync.connect(context="badca")
    assert "badca.json" in str(caught.value)


def test_the_inbox_prefix_is_used_by_requests(home: Path, nats_server: NatsServer) -> None:
    save_context(home / ".config", "boxed", url=nats_server.url, inbox_prefix="_BOXED")
    replies: list[str] = []

    with (
        nats_sync.connect(nats_server.url) as responder,
        nats_sync.connect(context="boxed", connect_timeout=2) as nc,
    ):

        def answer(msg: nats_sync.Msg) -> None:
            replies.append(msg.reply)
            msg.respond(b"pong")

        responder.subscribe("ctx.ping", cb=answer)
        responder.flush()
        assert nc.request("ctx.ping", b"ping", timeout=5).data == b"pong"
    assert replies and replies[0].startswith("_BOXED.")


@pytest.fixture
def domain_server(nats_server_factory: ServerFactory, tmp_path: Path) -> NatsServer:
    store = tmp_path / "js"
    return nats_server_factory(config=f'jetstream {{ domain: hub, store_dir: "{store}" }}\n')


def test_the_jetstream_domain_and_api_prefix_go_to_jetstream(
    home: Path, domain_server: NatsServer
) -> None:
    config = home / ".config"
    save_context(config, "hub", url=domain_server.url, jetstream_domain="hub")
    save_context(config, "prefixed", url=domain_server.url, jetstream_api_prefix="$JS.hub.API")
    for name in ("hub", "prefixed"):
        with nats_sync.connect(context=name, connect_timeout=2) as nc:
            js = nc.jetstream()
            assert js.api.prefix == "$JS.hub.API"
            js.add_stream(name=f"CTX_{name.upper()}", subjects=[f"ctx.{name}"])
            assert js.publish(f"ctx.{name}", b"x").seq == 1
            # Arguments of jetstream() still win over the context's.
            assert nc.jetstream(api_prefix="$JS.other.API").api.prefix == "$JS.other.API"
    with nats_sync.connect(domain_server.url) as nc:  # no context: the plain API
        assert nc.jetstream().api.prefix == "$JS.API"


# --- the CLI --------------------------------------------------------------------------


def test_the_cli_without_server_uses_the_context(
    home: Path, nats_server_factory: ServerFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    server = nats_server_factory(config="authorization { user: app, password: s3cret }")
    config = home / ".config"
    save_context(config, "cli", url=server.url, user="app", password="s3cret")
    save_context(config, "other", url=UNREACHABLE)
    select(config, "cli")
    with nats_sync.connect(server.url, user="app", password="s3cret") as watcher:
        sub = watcher.subscribe("ctx.cli.>")
        watcher.flush()
        assert main(["pub", "ctx.cli.selected", "hello"]) == 0
        assert sub.next_msg(5).data == b"hello"
        select(config, "other")
        assert main(["--context", "cli", "pub", "ctx.cli.named", "again"]) == 0
        assert sub.next_msg(5).data == b"again"
        assert main(["pub", "ctx.cli.x", "y", "--context", "nope", "--timeout", "1"]) == 1
    assert "nope.json" in capsys.readouterr().err

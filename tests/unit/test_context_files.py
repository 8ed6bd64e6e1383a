"""``_core.transport.contexts``: where contexts are looked for, the order of the sources
of servers, and what a context file may hold. Environments are given as dicts, never the
real one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import nats_sync
from nats_sync._core.transport.contexts import (
    apply_context,
    config_dir,
    load,
    resolve,
    selected_name,
)
from nats_sync._core.transport.options import build_options

DEFAULT = "nats://127.0.0.1:4222"


def save(config: Path, name: str, **values: Any) -> Path:
    path = config / "nats" / "context" / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(values))
    return path


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """An environment whose config home is a fresh folder."""
    return {"XDG_CONFIG_HOME": str(tmp_path / "config"), "HOME": str(tmp_path / "home")}


def test_config_dir_is_xdg_else_home_dot_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert config_dir({"XDG_CONFIG_HOME": "/x"}) == Path("/x/nats")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert config_dir({}) == tmp_path / ".config" / "nats"


def test_selected_name_env_first_then_context_txt(env: dict[str, str]) -> None:
    assert selected_name(env) is None
    config = Path(env["XDG_CONFIG_HOME"]) / "nats"
    config.mkdir(parents=True)
    (config / "context.txt").write_text("  ngs\n")
    assert selected_name(env) == "ngs"
    assert selected_name({**env, "NATS_CONTEXT": "orders"}) == "orders"
    (config / "context.txt").write_text("\n")
    assert selected_name(env) is None


@pytest.mark.parametrize(
    ("servers", "context", "extra", "expected", "read"),
    [
        (None, None, {}, DEFAULT, None),  # nothing at all
        (None, None, {"NATS_URL": "nats://env:1"}, "nats://env:1", None),  # $NATS_URL first
        (None, None, {"NATS_CONTEXT": "a"}, "nats://a:1", "a"),  # then the context
        (None, "a", {"NATS_URL": "nats://env:1"}, "nats://a:1", "a"),  # named beats env
        (None, "empty", {"NATS_URL": "nats://env:1"}, "nats://env:1", "empty"),  # no url
        (None, "empty", {}, DEFAULT, "empty"),
        ("nats://given:1", "a", {"NATS_URL": "nats://env:1"}, "nats://given:1", "a"),
        ("nats://given:1", None, {"NATS_CONTEXT": "missing"}, "nats://given:1", None),
    ],
)
def test_the_order_of_the_sources_of_servers(
    env: dict[str, str],
    servers: str | None,
    context: str | None,
    extra: dict[str, str],
    expected: str,
    read: str | None,
) -> None:
    config = Path(env["XDG_CONFIG_HOME"])
    save(config, "a", url="nats://a:1")
    save(config, "empty", url="")
    chosen, found = resolve(servers, context, {**env, **extra})
    assert chosen == expected
    assert (found.name if found is not None else None) == read


def test_nats_url_set_means_the_selected_context_is_not_read(env: dict[str, str]) -> None:
    config = Path(env["XDG_CONFIG_HOME"])
    (config / "nats").mkdir(parents=True)
    (config / "nats" / "context.txt").write_text("broken")
    save(config, "broken").write_text("{")
    assert resolve(None, None, {**env, "NATS_URL": "nats://env:1"}) == ("nats://env:1", None)
    with pytest.raises(nats_sync.InvalidArgumentError, match=r"broken\.json"):
        resolve(None, None, env)


@pytest.mark.parametrize("name", ["", "../x", "a/b", ".hidden"])
def test_names_that_are_not_plain_file_names_are_refused(env: dict[str, str], name: str) -> None:
    with pytest.raises(nats_sync.InvalidArgumentError, match="plain name"):
        load(name, env)


def test_fields_the_cli_writes_empty_or_we_do_not_use_are_ignored(env: dict[str, str]) -> None:
    save(
        Path(env["XDG_CONFIG_HOME"]),
        "full",
        description="x",
        url="nats://h:1",
        token="",
        socks_proxy="",
        color_scheme="dark",
        jetstream_event_prefix="$JS.EVENT",
        windows_cert_store="",
        tls_first=False,
        nsc="",
    )
    context = load("full", env)
    assert context.url == "nats://h:1" and context.token is None and context.nsc is None


def test_a_socks_proxy_is_refused_naming_it_and_the_file(env: dict[str, str]) -> None:
    """Connecting straight to the servers instead would reach another network than the
    context says: refused, not ignored."""
    save(Path(env["XDG_CONFIG_HOME"]), "proxied", url="nats://h:1", socks_proxy="socks5://p:1")
    with pytest.raises(nats_sync.NotSupportedError) as refused:
        load("proxied", env)
    assert "socks5://p:1" in str(refused.value) and "proxied.json" in str(refused.value)


def test_paths_expand_the_home_folder(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", env["HOME"])
    save(Path(env["XDG_CONFIG_HOME"]), "p", creds="~/a.creds", nkey="~/u.nk", ca="~/ca.pem")
    context = load("p", env)
    assert context.creds == f"{env['HOME']}/a.creds" and context.nkey == f"{env['HOME']}/u.nk"
    assert context.ca == f"{env['HOME']}/ca.pem"


def test_nsc_is_refused_unless_url_and_creds_replace_it(env: dict[str, str]) -> None:
    config = Path(env["XDG_CONFIG_HOME"])
    save(config, "nsc", nsc="nsc://op/acct/user")
    with pytest.raises(nats_sync.NotSupportedError, match=r"nsc\.json.*nsc"):
        load("nsc", env)
    save(config, "nsc2", nsc="nsc://op/acct/user", url="nats://h:1", creds="/c.creds")
    assert load("nsc2", env).creds == "/c.creds"


def test_tls_first_must_be_a_bool(env: dict[str, str]) -> None:
    save(Path(env["XDG_CONFIG_HOME"]), "t", tls_first="yes")
    with pytest.raises(nats_sync.InvalidArgumentError, match=r"t\.json.*tls_first"):
        load("t", env)


def test_one_credential_is_taken_user_first(env: dict[str, str]) -> None:
    config = Path(env["XDG_CONFIG_HOME"])
    save(config, "both", user="u", password="p", token="t")
    keywords: dict[str, Any] = {}
    defaults = {
        name: None
        for name in (
            "user",
            "password",
            "token",
            "user_credentials",
            "nkeys_seed",
            "nkeys_seed_str",
            "user_jwt_cb",
            "signature_cb",
            "tls",
        )
    }
    defaults |= {"inbox_prefix": "_INBOX", "tls_handshake_first": False}
    apply_context(load("both", env), keywords, defaults)
    assert keywords == {"user": "u", "password": "p"}
    keywords = {"token": "mine"}
    apply_context(load("both", env), keywords, defaults)
    assert keywords == {"token": "mine"}


def test_a_key_without_a_cert_is_refused(env: dict[str, str]) -> None:
    save(Path(env["XDG_CONFIG_HOME"]), "k", key="/k.pem")
    keywords: dict[str, Any] = {}
    with pytest.raises(nats_sync.InvalidArgumentError, match=r"k\.json.*key is set without"):
        apply_context(
            load("k", env),
            keywords,
            {"tls": None, "inbox_prefix": "_INBOX", "tls_handshake_first": False},
        )


def test_context_must_be_a_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NATS_URL", raising=False)
    with pytest.raises(nats_sync.InvalidArgumentError, match="context must be a context name"):
        build_options(None, context=3)

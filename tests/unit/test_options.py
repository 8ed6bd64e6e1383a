"""connect()'s signature and the Options dataclass list the same options.

``connect()`` passes ``locals()`` to ``build_options``, so its signature is the one list
of connect options a caller sees; these tests keep ``Options`` equal to it (names, order,
defaults, types) and its docstring covering every option.
"""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path

import pytest

import nats_sync
from nats_sync._core.transport.options import Options, build_options

PARAMETERS = inspect.signature(nats_sync.connect).parameters
FIELDS = {item.name: item for item in dataclasses.fields(Options)}


@pytest.fixture(autouse=True)
def no_nats_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """build_options(None) reads $NATS_URL and the nats contexts: none here."""
    monkeypatch.delenv("NATS_URL", raising=False)
    monkeypatch.delenv("NATS_CONTEXT", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))


def test_same_names_in_the_same_order() -> None:
    assert list(PARAMETERS) == list(FIELDS)


def test_every_option_but_servers_is_keyword_only() -> None:
    kinds = {name: parameter.kind for name, parameter in PARAMETERS.items()}
    assert kinds.pop("servers") is inspect.Parameter.POSITIONAL_OR_KEYWORD
    assert set(kinds.values()) == {inspect.Parameter.KEYWORD_ONLY}


@pytest.mark.parametrize("name", [name for name in FIELDS if name != "servers"])
def test_same_default_and_type(name: str) -> None:
    parameter = PARAMETERS[name]
    assert parameter.default == FIELDS[name].default
    # Both modules use ``from __future__ import annotations``: the types are their text.
    assert parameter.annotation == FIELDS[name].type


def test_connect_defaults_build_the_default_options() -> None:
    # servers differs in form only: connect takes a URL, Options holds the parsed tuple.
    defaults = {name: parameter.default for name, parameter in PARAMETERS.items()}
    assert build_options(**defaults) == Options()


@pytest.mark.parametrize("name", list(PARAMETERS))
def test_every_option_is_documented(name: str) -> None:
    # inspect.getdoc, not __doc__: Python 3.13 strips docstrings' common indentation at
    # compile time, so the raw text is indented 8 spaces before 3.13 and 4 from it on;
    # getdoc cleans both to the same text (the Args entries 4 spaces in).
    assert f"\n    {name}: " in (inspect.getdoc(nats_sync.connect) or "")


def test_unknown_option_is_refused_by_name() -> None:
    with pytest.raises(nats_sync.InvalidArgumentError, match=r"unknown connect option.*bogus"):
        build_options(None, bogus=1)


# --- options taken over from nats-py (issue 19) ------------------------------------------


def test_flusher_queue_size_is_accepted_and_ignored() -> None:
    assert build_options(None, flusher_queue_size=8).flusher_queue_size == 8
    with pytest.raises(nats_sync.InvalidArgumentError, match="flusher_queue_size"):
        build_options(None, flusher_queue_size="big")


def test_ws_headers_are_copied_with_every_value_a_list() -> None:
    given = {"Authorization": "Bearer x", "X-Tags": ["a", "b"]}
    options = build_options("ws://127.0.0.1:1", ws_connection_headers=given)
    given["X-Tags"].append("c")  # type: ignore[union-attr]
    assert options.ws_connection_headers == {"Authorization": ["Bearer x"], "X-Tags": ["a", "b"]}
    assert options.ws_header_pairs == [
        ("Authorization", "Bearer x"),
        ("X-Tags", "a"),
        ("X-Tags", "b"),
    ]
    assert "Bearer" not in repr(options) and "Authorization" in repr(options)


@pytest.mark.parametrize(
    ("headers", "message"),
    [
        ({"Host": "evil"}, "must not set Host"),
        ({"sec-websocket-key": "x"}, "must not set sec-websocket-key"),
        ({"Bad Name": "x"}, "not a valid HTTP header name"),
        ({"X-Ok": "a\r\nX-Injected: b"}, "line break or a control character"),
        ({"X-Ok": 5}, "must be a str or a list of str"),
        (["X-Ok", "a"], "must map header names"),
    ],
)
def test_ws_headers_that_would_break_the_upgrade_are_refused(headers: object, message: str) -> None:
    with pytest.raises(nats_sync.InvalidArgumentError, match=message) as caught:
        build_options(None, ws_connection_headers=headers)
    assert "X-Injected" not in str(caught.value)


def test_skip_subject_validation_and_the_reconnect_handler_are_checked() -> None:
    with pytest.raises(nats_sync.InvalidArgumentError, match="skip_subject_validation"):
        build_options(None, skip_subject_validation="yes")
    with pytest.raises(nats_sync.InvalidArgumentError, match="reconnect_to_server_handler"):
        build_options(None, reconnect_to_server_handler="next")


def test_secret_options_are_never_shown() -> None:
    options = build_options("nats://u:pw@127.0.0.1:1", password="p4ss", token="t0k")
    shown = options.shown()
    assert shown["password"] == shown["token"] == "***"
    assert shown["servers"] == ("nats://u:***@127.0.0.1:1",)
    assert "p4ss" not in repr(options) and "t0k" not in repr(options)

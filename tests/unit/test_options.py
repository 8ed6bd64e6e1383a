"""connect()'s signature and the Options dataclass list the same options.

``connect()`` passes ``locals()`` to ``build_options``, so its signature is the one list
of connect options a caller sees; these tests keep ``Options`` equal to it (names, order,
defaults, types) and its docstring covering every option.
"""

from __future__ import annotations

import dataclasses
import inspect

import pytest

import nats_sync
from nats_sync._options import Options, build_options

PARAMETERS = inspect.signature(nats_sync.connect).parameters
FIELDS = {item.name: item for item in dataclasses.fields(Options)}


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
    assert f"\n        {name}: " in (nats_sync.connect.__doc__ or "")


def test_unknown_option_is_refused_by_name() -> None:
    with pytest.raises(nats_sync.InvalidArgumentError, match=r"unknown connect option.*bogus"):
        build_options(None, bogus=1)

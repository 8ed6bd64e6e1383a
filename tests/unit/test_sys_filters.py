"""nats_sync.sys's request bodies: keyword filters become the server's option names and
JSON types (server/monitor.go, events.go), checked before anything is sent."""

from __future__ import annotations

import json
from typing import Any

import pytest

from nats_sync.errors import InvalidArgumentError
from nats_sync.sys import _encode_filters, endpoint_filters


def _body(endpoint: str, **filters: Any) -> Any:
    return json.loads(_encode_filters(endpoint, filters))


def test_no_filters_send_an_empty_body() -> None:
    assert _encode_filters("VARZ", {}) == b""
    assert _encode_filters("CONNZ", {"acc": None, "limit": None}) == b""  # None: not given


def test_connz_options_keep_the_server_names_and_state_becomes_its_number() -> None:
    assert _body("CONNZ", acc="APP", state="closed", limit=5, auth=True, sort="cid") == {
        "acc": "APP",
        "state": 1,
        "limit": 5,
        "auth": True,
        "sort": "cid",
    }
    assert _body("CONNZ", state="open") == {"state": 0}
    assert _body("CONNZ", state="all") == {"state": 2}


def test_healthz_options_are_spelled_with_hyphens() -> None:
    assert _body("HEALTHZ", js_enabled_only=True, js_server_only=False, details=True) == {
        "js-enabled-only": True,
        "js-server-only": False,
        "details": True,
    }


def test_server_picking_filters_go_with_every_endpoint() -> None:
    for endpoint in ("VARZ", "STATSZ", "JSZ", "HEALTHZ"):
        assert _body(endpoint, server_name="n1", exact_match=True, tags=("a", "b")) == {
            "server_name": "n1",
            "exact_match": True,
            "tags": ["a", "b"],
        }


def test_every_endpoint_lists_its_filters() -> None:
    assert set(endpoint_filters("ROUTEZ")) == {
        "subscriptions",
        "subscriptions_detail",
        "server_name",
        "cluster",
        "host",
        "exact_match",
        "tags",
        "domain",
    }
    with pytest.raises(InvalidArgumentError, match="no monitoring endpoint 'NOPEZ'"):
        endpoint_filters("NOPEZ")


@pytest.mark.parametrize(
    ("endpoint", "filters", "message"),
    [
        ("VARZ", {"limit": 1}, "varz\\(\\) takes no filter 'limit'; its filters: none of its own"),
        ("SUBSZ", {"acc": "A"}, "subsz\\(\\) takes no filter 'acc'; its filters: offset, limit"),
        ("JSZ", {"streams": 1}, "filter streams takes True or False"),
        ("CONNZ", {"cid": True}, "filter cid must be an int >= 0"),
        ("LEAFZ", {"account": 3}, "filter account takes a str"),
        ("VARZ", {"tags": ["a", 1]}, "filter tags takes a list of str"),
        ("CONNZ", {"state": ["open"]}, "filter state takes one of"),
    ],
)
def test_wrong_filters_are_named(endpoint: str, filters: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        _encode_filters(endpoint, filters)

"""How ``Client.trace`` knows a path is complete, and the order it puts reports in, on
reports shaped as nats-server sends them (ADR-41): hop ids, ``hops`` counts, egresses."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import pytest

from nats_sync import MessageTrace, NotSupportedError
from nats_sync._cli.trace import describe
from nats_sync._trace import _check_server_version, _missing_hops


def report(
    server: str, hop: str = "", hops: int = 0, egresses: Sequence[dict[str, Any]] = ()
) -> dict[str, Any]:
    header = {"Nats-Trace-Dest": ["_INBOX.x"]}
    if hop:
        header["Nats-Trace-Hop"] = [hop]
    made: dict[str, Any] = {
        "server": {"name": server},
        "request": {"header": header},
        "events": [{"type": "in", "kind": 1 if hop else 0}, *egresses],
    }
    if hops:
        made["hops"] = hops
    return made


def route(hop: str, error: str = "") -> dict[str, Any]:
    egress = {"type": "eg", "kind": 1, "hop": hop}
    if error:
        egress["error"] = error
    return egress


def test_the_origin_report_is_awaited_first() -> None:
    assert _missing_hops([]) == {""}
    assert _missing_hops([report("b", hop="1")]) == {""}


def test_every_forward_announced_is_awaited_down_the_tree() -> None:
    origin = report("a", hops=2, egresses=[route("1"), route("2")])
    assert _missing_hops([origin]) == {"1", "2"}
    first = report("b", hop="1", hops=1, egresses=[route("1.1")])
    assert _missing_hops([origin, first]) == {"2", "1.1"}
    assert _missing_hops([origin, first, report("c", hop="2")]) == {"1.1"}
    assert _missing_hops([origin, first, report("c", hop="2"), report("d", hop="1.1")]) == set()


def test_a_forward_with_an_error_sends_no_report() -> None:
    origin = report(
        "a",
        hops=2,
        egresses=[
            route("1"),
            route("2", "Not delivered because remote does not support message tracing"),
        ],
    )
    assert _missing_hops([origin]) == {"1"}


def test_reports_are_put_in_path_order_with_their_events() -> None:
    trace = MessageTrace(
        "s",
        [
            report("d", hop="1.1"),
            report("c", hop="2"),
            report("b", hop="1", hops=1),
            report("a", hops=2),
        ],
        True,
    )
    assert [r["server"]["name"] for r in trace.reports] == ["a", "b", "d", "c"]
    assert [event["server"] for event in trace.events] == ["a", "b", "d", "c"]
    assert all(event["type"] == "in" for event in trace.events)
    assert "reports=4" in repr(trace)


@pytest.mark.parametrize("version", ["2.10.22", "2.9.0", "v2.10.0-beta"])
def test_a_server_before_2_11_is_refused(version: str) -> None:
    with pytest.raises(NotSupportedError, match=rf"2\.11 or later.*{re.escape(version)}"):
        _check_server_version(version)


@pytest.mark.parametrize("version", ["2.11.0", "2.15.1", "3.0.0-dev", ""])
def test_a_server_from_2_11_or_unknown_is_tried(version: str) -> None:
    _check_server_version(version)


def test_the_cli_describes_every_kind_of_event() -> None:
    events: list[dict[str, Any]] = [
        {"type": "sm", "to": "new.x"},
        {"type": "se", "acc": "APP", "to": "ticks.x"},
        {"type": "si", "acc": "SVC", "from": "app.svc.add", "to": "svc.add"},
        {"type": "js", "stream": "S", "subject": "a", "nointerest": True},
        {
            "type": "eg",
            "kind": 2,
            "cid": 3,
            "name": "east",
            "hop": "2",
            "error": "Not delivered because remote does not support message tracing",
        },
        {"type": "eg", "kind": 4, "cid": 4, "name": "leaf1", "hop": "1.1"},
    ]
    lines = [describe(event) for event in events]
    assert lines == [
        "subject mapped to new.x",
        "stream export to account APP as ticks.x",
        "service import into account SVC: app.svc.add -> svc.add",
        "JetStream stream S, subject a, not stored: no interest",
        'egress to gateway "east" (cid 3), hop 2; error: Not delivered because remote '
        "does not support message tracing",
        'egress to leaf "leaf1" (cid 4), hop 1.1',
    ]

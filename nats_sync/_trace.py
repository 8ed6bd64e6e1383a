"""Message tracing (ADR-41, nats-server 2.11+): :class:`MessageTrace` and the
``Client.trace`` call that makes it.

How it works: ``trace`` subscribes to a fresh inbox and publishes the message with
``Nats-Trace-Dest: <inbox>`` (and ``Nats-Trace-Only: true`` unless delivering). Every
server the message passes sends one JSON report to that inbox. The origin server's report
has no ``Nats-Trace-Hop`` header in its ``request``; when a server forwards the message
over a route, gateway or leafnode it counts the forward in its report's ``hops`` and
stamps the copy with hop id ``<its own hop>.<n>`` (``1``, ``2`` from the origin, ``1.1``
from hop ``1``), which the next server's report carries. So the reports received say
which hop ids are still to come: ``1..hops`` under each report's own id, minus the
forwards whose egress event has an ``error`` (the remote does not trace, or the message
was not sent). The wait ends when none is missing, or at the timeout. Only the client's
public API is used.
"""

from __future__ import annotations

import gzip
import json
import re
import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from nats_sync import _defaults as d
from nats_sync._core.components.publishing import HeadersArg
from nats_sync._core.proto.encoder import publish_subject
from nats_sync._core.validate import check_timeout
from nats_sync.errors import (
    BadHeaderError,
    BadSubjectError,
    NotSupportedError,
    ProtocolError,
    TimeoutError,
)

if TYPE_CHECKING:
    from nats_sync._core.components.subscription import Subscription
    from nats_sync.msg import Msg

TRACE_DEST_HEADER = "Nats-Trace-Dest"
TRACE_ONLY_HEADER = "Nats-Trace-Only"
TRACE_HOP_HEADER = "Nats-Trace-Hop"
#: Every header the server reads or writes for tracing starts so; the call sets its own.
_TRACE_HEADER_PREFIX = "nats-trace-"
#: The ``kind`` of an ingress or egress: the server's connection kinds.
KIND_NAMES = {
    0: "client",
    1: "route",
    2: "gateway",
    3: "system",
    4: "leaf",
    5: "jetstream",
    6: "account",
}
#: Kinds that forward to another server, which then sends a report of its own.
_REMOTE_KINDS = frozenset({1, 2, 4})
_VERSION = re.compile(r"^v?(\d+)\.(\d+)")


class MessageTrace:
    """The path one traced message took: what every server on it reported.

    Made by :meth:`Client.trace`.

    Attributes:
        subject: the subject the message was published to.
        reports: each server's JSON report, decoded, as the server sent it (keys
            ``"server"``, ``"request"``, ``"hops"`` when it forwarded the message,
            ``"events"``), the origin server's first, then the others in the order of
            their ``Nats-Trace-Hop`` (``1``, ``1.1``, ``2`` ...).
        events: every report's events in that order, each a copy of the server's
            event dict with its ``"type"`` (``"in"`` ingress, ``"sm"`` subject mapping,
            ``"se"`` stream export, ``"si"`` service import, ``"js"`` JetStream,
            ``"eg"`` egress) plus a ``"server"`` key: the reporting server's name.
        complete: True when every report the path announced arrived before the timeout
            (the origin server's, and one per hop it and the others forwarded to); False
            when the call waited ``timeout`` seconds and some are missing.
    """

    __slots__ = ("complete", "events", "reports", "subject")

    def __init__(self, subject: str, reports: Iterable[dict[str, Any]], complete: bool) -> None:
        self.subject = subject
        self.reports: list[dict[str, Any]] = sorted(reports, key=_path_order)
        self.complete = complete
        self.events: list[dict[str, Any]] = [
            {**event, "server": _server_name(report)}
            for report in self.reports
            for event in report.get("events") or ()
        ]

    def __repr__(self) -> str:
        return (
            f"MessageTrace(subject={self.subject!r}, reports={len(self.reports)}, "
            f"events={len(self.events)}, complete={self.complete})"
        )


class TracingClient(Protocol):
    """What a trace uses of its client (a :class:`nats_sync.Client`)."""

    @property
    def connected_server_version(self) -> str:
        """The version the server gave in its INFO."""
        ...

    def new_inbox(self) -> str:
        """A unique inbox subject."""
        ...

    def subscribe(self, subject: str) -> Subscription:
        """A subscription to read the reports from."""
        ...

    def publish(
        self, subject: str, payload: bytes = b"", reply: str = "", headers: HeadersArg = None
    ) -> None:
        """Publishes the traced message."""


def trace(
    nc: TracingClient,
    subject: str,
    payload: bytes = b"",
    *,
    headers: HeadersArg = None,
    deliver: bool = False,
    timeout: float = d.DEFAULT_TRACE_TIMEOUT,
) -> MessageTrace:
    """Publishes ``payload`` to ``subject`` traced and gathers the servers' reports.

    See ``Client.trace``, which calls this.
    """
    _check_subject(subject)
    check_timeout(timeout)
    if not isinstance(deliver, bool):
        raise TypeError(f"deliver must be a bool, got {deliver!r}")
    traced_headers = _traced_headers(headers, deliver)
    _check_server_version(nc.connected_server_version)
    inbox = nc.new_inbox()
    sub = nc.subscribe(inbox)
    try:
        traced_headers[TRACE_DEST_HEADER] = inbox
        nc.publish(subject, payload, headers=traced_headers)
        reports = _gather(sub, time.monotonic() + timeout)
    finally:
        sub.unsubscribe()
    return MessageTrace(subject, reports, _missing_hops(reports) == set())


def _check_subject(subject: object) -> None:
    if isinstance(subject, str) and any(token in {"*", ">"} for token in subject.split(".")):
        raise BadSubjectError(
            f"trace subject {subject!r} has a wildcard: a message is published to one subject"
        )
    if isinstance(subject, str) and not subject:
        raise BadSubjectError("trace subject is empty")
    publish_subject(subject)  # type: ignore[arg-type]  # raises for the rest


def _traced_headers(headers: HeadersArg, deliver: bool) -> dict[str, Any]:
    given: dict[Any, Any] = dict(headers or {})
    for name, value in given.items():
        if not isinstance(name, str):
            continue  # publish names what is wrong with it
        if name.lower().startswith(_TRACE_HEADER_PREFIX):
            raise BadHeaderError(
                f"header {name!r}: trace() sets the Nats-Trace-* headers itself "
                "(use deliver=True to have the message delivered)"
            )
        if name.lower() == "accept-encoding" and re.search(r"snappy|s2", str(value), re.I):
            raise BadHeaderError(
                f"header {name!r}: {value!r} asks for snappy-compressed reports, which "
                "nats_sync cannot read; leave it out or ask for gzip"
            )
    if not deliver:
        given[TRACE_ONLY_HEADER] = "true"
    return given


def _check_server_version(version: str) -> None:
    """Refuses a server known to predate tracing: it would ignore the headers and
    deliver the message even when only a trace was asked for."""
    match = _VERSION.match(version)
    if match and (int(match[1]), int(match[2])) < d.TRACE_MIN_SERVER_VERSION:
        raise NotSupportedError(
            f"message tracing needs nats-server 2.11 or later; the connected server is "
            f"{version} (the message was not published)"
        )


def _gather(sub: Any, deadline: float) -> list[dict[str, Any]]:
    reports: list[dict[str, Any]] = []
    while _missing_hops(reports):
        left = deadline - time.monotonic()
        if left <= 0:
            break
        try:
            msg = sub.next_msg(timeout=left)
        except TimeoutError:
            break
        reports.append(_decode(msg))
    return reports


def _decode(msg: Msg) -> dict[str, Any]:
    data = msg.data
    encoding = _header(msg.headers, "Content-Encoding")
    try:
        if encoding and encoding.lower() == "gzip":
            data = gzip.decompress(data)
        report = json.loads(data)
    except (OSError, EOFError, ValueError) as err:
        raise ProtocolError(f"a message trace report could not be decoded: {err}") from err
    if not isinstance(report, dict):
        raise ProtocolError(f"a message trace report is not a JSON object: {report!r:.200}")
    return report


def _header(headers: Mapping[str, Any] | None, name: str) -> str | None:
    for key, value in (headers or {}).items():
        if key.lower() == name.lower():
            return str(value[0] if isinstance(value, list) else value)
    return None


def _hop_id(report: Mapping[str, Any]) -> str:
    """The report's ``Nats-Trace-Hop`` ("" for the origin server's report)."""
    request_headers = (report.get("request") or {}).get("header") or {}
    value = request_headers.get(TRACE_HOP_HEADER) or [""]
    return str(value[0] if isinstance(value, list) else value)


def _missing_hops(reports: Iterable[Mapping[str, Any]]) -> set[str]:
    """The hop ids whose report is announced (or, for the origin's, "") but not here."""
    received: set[str] = set()
    expected = {""}
    for report in reports:
        hop = _hop_id(report)
        received.add(hop)
        forwards = report.get("hops") or 0
        children = {f"{hop}.{n}" if hop else str(n) for n in range(1, forwards + 1)}
        # A forward that failed, or went to a server that does not trace, sends nothing.
        children -= {
            str(event.get("hop"))
            for event in report.get("events") or ()
            if event.get("type") == "eg"
            and event.get("kind") in _REMOTE_KINDS
            and event.get("error")
        }
        expected |= children
    return expected - received


def _path_order(report: Mapping[str, Any]) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in _hop_id(report).split(".") if part)
    except ValueError:
        return (1 << 30,)


def _server_name(report: Mapping[str, Any]) -> str:
    server = report.get("server") or {}
    return str(server.get("name") or server.get("id") or "")

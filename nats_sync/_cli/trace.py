"""The command line's ``trace SUBJECT [PAYLOAD] [--deliver]``: the path a message takes.

How it works: ``cli`` adds this parser (before it puts the connection options on every
command, so ``--timeout`` is the shared one: here also the most seconds to gather the
servers' reports) and its handler. The handler connects one client on the main thread,
calls ``Client.trace`` and prints one line per event, in path order, each starting with
the reporting server's name. A path that stayed incomplete adds a line on stderr.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from typing import Any, TextIO

from nats_sync._cli import Connect, Handler
from nats_sync._trace import KIND_NAMES


def add_parser(commands: Any) -> None:
    """Adds ``trace`` to the command parsers."""
    trace = commands.add_parser(
        "trace",
        help="trace a message's path through the servers (nats-server 2.11+)",
        description="Publishes a traced message (ADR-41) and prints what each server on "
        "its path reports, one event a line: ingress, subject mappings, "
        "stream exports and service imports, JetStream, egresses. Unless "
        "--deliver, nothing is delivered or stored. --timeout is also the "
        "most seconds to wait for the reports.",
    )
    trace.add_argument("subject")
    trace.add_argument("data", nargs="?", default="", metavar="payload")
    trace.add_argument(
        "--deliver",
        action="store_true",
        help="deliver (and store) the message too (default: only trace it)",
    )


def handlers(connect: Connect) -> dict[str, Handler]:
    """The handler of ``trace``, connecting with ``connect(args)``."""

    def trace_command(args: argparse.Namespace, out: TextIO) -> None:
        with connect(args) as nc:
            trace = nc.trace(
                args.subject, args.data.encode(), deliver=args.deliver, timeout=args.timeout
            )
        for event in trace.events:
            out.write(f"{event['server']}: {describe(event)}\n")
        if not trace.complete:
            sys.stderr.write(
                f"nats-sync: the trace is incomplete: not every server on the path reported "
                f"within {args.timeout:g} s\n"
            )

    return {"trace": trace_command}


def describe(event: Mapping[str, Any]) -> str:
    """One line of text for one trace event (without the server's name)."""
    kind = event.get("type")
    if kind == "in":
        text = (
            f"ingress from {_connection(event)}, account {event.get('acc')}, "
            f"subject {event.get('subj')}"
        )
    elif kind == "sm":
        text = f"subject mapped to {event.get('to')}"
    elif kind == "se":
        text = f"stream export to account {event.get('acc')} as {event.get('to')}"
    elif kind == "si":
        text = (
            f"service import into account {event.get('acc')}: "
            f"{event.get('from')} -> {event.get('to')}"
        )
    elif kind == "js":
        text = f"JetStream stream {event.get('stream')}"
        if event.get("subject"):
            text += f", subject {event['subject']}"
        if event.get("nointerest"):
            text += ", not stored: no interest"
    elif kind == "eg":
        text = f"egress to {_connection(event)}"
        for key, label in (
            ("sub", "subscription"),
            ("queue", "queue"),
            ("acc", "account"),
            ("hop", "hop"),
        ):
            if event.get(key):
                text += f", {label} {event[key]}"
    else:
        text = f"event {kind!r}"
    if event.get("error"):
        text += f"; error: {event['error']}"
    return text


def _connection(event: Mapping[str, Any]) -> str:
    kind = KIND_NAMES.get(event.get("kind", -1), f"kind {event.get('kind')}")
    name = f' "{event["name"]}"' if event.get("name") else ""
    return f"{kind}{name} (cid {event.get('cid')})"

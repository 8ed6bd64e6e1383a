"""The command line's counter commands (ADR-49): ``counter add|get``; and the
``--ttl`` value of ``pub --js``.

How it works: ``_cli.jetstream`` adds these parsers (with the connection options on
each) and the handler; the handler connects one client on the main thread, binds the
stream's counters with ``js.counter`` and prints ``<subject>\\t<value>`` lines. Values
are Python ints, exact at any size. Errors are raised as ``nats_sync.Error`` and
printed by ``cli.main``.
"""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from nats_sync._cli import AddOptions, Connect, Handler
from nats_sync.jetstream import CounterNotFoundError, JetStream


def add_parsers(commands: Any, add_options: AddOptions) -> None:
    """Adds ``counter`` (and its actions) to the command parsers."""
    counter = commands.add_parser(
        "counter", help="add to and read counters (a stream with allow_msg_counter)"
    )
    actions = counter.add_subparsers(dest="action", required=True, metavar="ACTION")
    add = actions.add_parser("add", help="add N (negative subtracts); print the new value")
    add.add_argument("stream")
    add.add_argument("subject")
    add.add_argument("value", type=_integer, metavar="N", help="an integer, any size")
    get = actions.add_parser("get", help="print counters' values (wildcards allowed)")
    get.add_argument("stream")
    get.add_argument("subjects", nargs="+", metavar="SUBJECT")
    for parser in (counter, *actions.choices.values()):
        add_options(parser)


def handlers(connect: Connect) -> dict[str, Handler]:
    """The handler of ``counter``, connecting with ``connect(args)``."""

    def counter_command(args: argparse.Namespace, out: TextIO) -> None:
        with connect(args) as nc:
            run(nc.jetstream(timeout=args.timeout), args, out)

    return {"counter": counter_command}


def run(js: JetStream, args: argparse.Namespace, out: TextIO) -> None:
    """Runs one ``counter`` action.

    Raises:
        CounterNotFoundError: ``get`` named a subject (without wildcards) never set.
    """
    counter = js.counter(args.stream)
    if args.action == "add":
        out.write(f"{args.subject}\t{counter.add(args.subject, args.value)}\n")
        return
    values = counter.get_many(args.subjects)
    missing = [
        subject for subject in args.subjects if not _has_wildcard(subject) and subject not in values
    ]
    if missing:
        raise CounterNotFoundError(
            f"no counter {', '.join(map(repr, missing))} in stream {args.stream!r}"
        )
    for subject in sorted(values):
        out.write(f"{subject}\t{values[subject]}\n")


def parse_ttl(text: str) -> float | str:
    """``pub --ttl``'s value (an argparse type): ``never`` or seconds; the library
    checks the range before sending.

    Raises:
        argparse.ArgumentTypeError: neither.
    """
    if text == "never":
        return text
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f'takes seconds (>= 1) or "never", got {text!r}') from None


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None


def _has_wildcard(subject: str) -> bool:
    return any(token in ("*", ">") for token in subject.split("."))

"""The command line's ``service ls|info|stats [name [id]]``: what ``$SRV`` discovery finds.

How it works: ``cli`` adds this parser (with its connection options) and its handler;
the handler connects one client on the main thread, asks with
``nats_sync.micro.info``/``stats`` (which gather every instance's answer until the
answers stop coming) and prints a line per instance or endpoint. No threads of its own.
"""

from __future__ import annotations

import argparse
import json
from typing import Any, TextIO

from nats_sync import micro
from nats_sync._cli import AddOptions, Connect, Handler


def add_parsers(commands: Any, add_options: AddOptions) -> None:
    """Adds ``service`` and its actions to the command parsers."""
    service = commands.add_parser("service", help="find services and read their statistics")
    actions = service.add_subparsers(dest="action", required=True, metavar="ACTION")
    helps = {
        "ls": "the running service instances (name, version, id, endpoints, description)",
        "info": "each instance's info answer (one JSON object a line)",
        "stats": "each endpoint's requests, errors and processing time",
    }
    for action, text in helps.items():
        parser = actions.add_parser(action, help=text)
        parser.add_argument("name", nargs="?", default=None, help="only this service")
        parser.add_argument("id", nargs="?", default=None, help="only this instance")
        add_options(parser)
    add_options(service)


def handlers(connect: Connect) -> dict[str, Handler]:
    """The handler of ``service``, connecting with ``connect(args)``."""

    def service(args: argparse.Namespace, out: TextIO) -> None:
        with connect(args) as nc:
            if args.action == "stats":
                found_stats = micro.stats(nc, args.name, args.id, timeout=args.timeout)
                for record in found_stats:
                    for endpoint in record.endpoints:
                        out.write(_stats_line(record, endpoint) + "\n")
                found = bool(found_stats)
            else:
                infos = micro.info(nc, args.name, args.id, timeout=args.timeout)
                for info in infos:
                    if args.action == "ls":
                        out.write(
                            f"{info.name}\t{info.version}\t{info.id}\t"
                            f"{len(info.endpoints)} endpoints\t{info.description}\n"
                        )
                    else:
                        out.write(json.dumps(info.to_dict()) + "\n")
                found = bool(infos)
            if not found:
                out.write("no services found\n")

    return {"service": service}


def _stats_line(record: micro.ServiceStats, endpoint: micro.EndpointStats) -> str:
    average_ms = endpoint.average_processing_time / 1e6
    line = (
        f"{record.name}\t{record.id}\t{endpoint.name}\t{endpoint.subject}\t"
        f"{endpoint.num_requests} requests\t{endpoint.num_errors} errors\t"
        f"average {average_ms:.3f} ms"
    )
    if endpoint.last_error:
        line += f"\tlast error {endpoint.last_error}"
    return line

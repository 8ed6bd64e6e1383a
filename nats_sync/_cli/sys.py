"""The command line's ``server-info``: servers' monitoring data over NATS (``nats_sync.sys``).

How it works: the handler connects one client on the main thread (a user of the system
account), asks one server (``--server-id``) or every server through
:class:`nats_sync.sys.SystemClient`, and prints a few lines per server, or the replies
as the servers sent them (``--json``: one object with ``--server-id``, else a list).
``--filter KEY=VALUE`` values are read by the kind of the filter (true/false, an integer,
a comma-separated list for ``tags``). Errors are raised as ``nats_sync.Error`` and
printed by ``cli.main``.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any, TextIO

from nats_sync._cli import AddOptions, Connect, Handler
from nats_sync.errors import InvalidArgumentError, TimeoutError
from nats_sync.sys import Reply, SystemClient, endpoint_filters

ENDPOINTS = (
    "varz",
    "statsz",
    "connz",
    "routez",
    "gatewayz",
    "leafz",
    "subsz",
    "jsz",
    "accountz",
    "healthz",
)
_TRUE, _FALSE = ("true", "yes", "1", "on"), ("false", "no", "0", "off")


def add_parsers(commands: Any, add_options: AddOptions) -> None:
    """Adds ``server-info`` to the command parsers."""
    info = commands.add_parser(
        "server-info",
        help="servers' monitoring data over NATS (a system account user)",
        description="Asks every server (or --server-id) for one monitoring endpoint over "
        "NATS ($SYS.REQ.SERVER...); needs a user of the system account.",
    )
    info.add_argument(
        "endpoint",
        nargs="?",
        default="varz",
        choices=ENDPOINTS,
        help="what to ask for (default: varz)",
    )
    info.add_argument("--server-id", help="ask this server only (default: every server)")
    info.add_argument(
        "--filter",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an option of the endpoint, e.g. acc=APP, subscriptions=true, "
        "server_name=n1 (repeat for more)",
    )
    info.add_argument(
        "--json", action="store_true", help="print the replies as the servers sent them"
    )
    info.add_argument(
        "--stall",
        type=float,
        default=None,
        metavar="S",
        help="asking every server: stop S seconds after the last reply",
    )
    add_options(info)


def handlers(connect: Connect) -> dict[str, Handler]:
    """The handler of ``server-info``, connecting with ``connect(args)``."""

    def server_info(args: argparse.Namespace, out: TextIO) -> None:
        filters = parse_filters(args.endpoint, args.filter)
        with connect(args) as nc:
            options: dict[str, Any] = {"timeout": args.timeout}
            if args.stall is not None:
                options["stall"] = args.stall
            ask = getattr(SystemClient(nc, **options), args.endpoint)
            if args.server_id is not None:
                replies: list[Reply] = [ask(server_id=args.server_id, **filters)]
            else:
                replies = ask(**filters)
        if not replies:
            raise TimeoutError(
                f"no server answered {args.endpoint} within {args.timeout}s"
                " (do the filters leave every server out?)"
            )
        if args.json:
            document = replies[0] if args.server_id is not None else replies
            out.write(json.dumps(document, indent=2) + "\n")
            return
        for reply in replies:
            write_summary(args.endpoint, reply, out)

    return {"server-info": server_info}


def parse_filters(endpoint: str, pairs: list[str]) -> dict[str, Any]:
    """``--filter`` values, typed by what the endpoint's filter takes.

    Raises:
        InvalidArgumentError: not KEY=VALUE, a filter the endpoint does not take, or a
            value that is not of its kind.
    """
    kinds = endpoint_filters(endpoint.upper())
    filters: dict[str, Any] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key:
            raise InvalidArgumentError(f"--filter takes KEY=VALUE, got {pair!r}")
        kind = kinds.get(key)
        if kind is None:
            raise InvalidArgumentError(
                f"{endpoint} takes no filter {key!r}; it takes: {', '.join(kinds)}"
            )
        filters[key] = _typed(key, kind, text)
    return filters


def _typed(key: str, kind: str, text: str) -> object:
    if kind == "bool":
        if text.lower() in _TRUE:
            return True
        if text.lower() in _FALSE:
            return False
        raise InvalidArgumentError(f"--filter {key} takes true or false, got {text!r}")
    if kind == "int":
        try:
            return int(text)
        except ValueError:
            raise InvalidArgumentError(f"--filter {key} takes an integer, got {text!r}") from None
    if kind == "tags":
        return [tag.strip() for tag in text.split(",") if tag.strip()]
    return text


def write_summary(endpoint: str, reply: Reply, out: TextIO) -> None:
    """A few lines about one server's reply: who answered, then the endpoint's figures."""
    server = reply.get("server") or {}
    cluster = f", cluster {server['cluster']}" if server.get("cluster") else ""
    out.write(
        f"{server.get('name', '?')} ({server.get('id', '?')}) v{server.get('ver', '?')}{cluster}\n"
    )
    data = reply.get("statsz" if endpoint == "statsz" else "data") or {}
    for line in _SUMMARIES[endpoint](data):
        out.write(f"  {line}\n")


def _varz(data: dict[str, Any]) -> list[str]:
    return [
        f"up {data.get('uptime', '?')}, {data.get('connections', 0)} connections, "
        f"{data.get('subscriptions', 0)} subscriptions, {data.get('routes', 0)} routes, "
        f"{data.get('leafnodes', 0)} leaf nodes",
        f"messages in {data.get('in_msgs', 0)}, out {data.get('out_msgs', 0)}; "
        f"memory {data.get('mem', 0)} B, cpu {data.get('cpu', 0)}%; "
        f"JetStream {'on' if data.get('jetstream', {}).get('config') else 'off'}",
    ]


def _statsz(data: dict[str, Any]) -> list[str]:
    sent, received = data.get("sent") or {}, data.get("received") or {}
    return [
        f"{data.get('connections', 0)} connections, {data.get('subscriptions', 0)} "
        f"subscriptions, {data.get('active_accounts', 0)} active accounts, "
        f"{data.get('active_servers', 0)} servers known",
        f"messages in {received.get('msgs', 0)}, out {sent.get('msgs', 0)}; "
        f"memory {data.get('mem', 0)} B, cpu {data.get('cpu', 0)}%",
    ]


def _connz(data: dict[str, Any]) -> list[str]:
    lines = [f"{data.get('num_connections', 0)} of {data.get('total', 0)} connections"]
    for conn in data.get("connections") or []:
        lines.append(
            f"cid {conn.get('cid')} {conn.get('ip')}:{conn.get('port')} "
            f"name {conn.get('name') or '-'} account {conn.get('account') or '-'} "
            f"subs {conn.get('subscriptions', 0)} in {conn.get('in_msgs', 0)} "
            f"out {conn.get('out_msgs', 0)}"
        )
    return lines


def _routez(data: dict[str, Any]) -> list[str]:
    lines = [f"{data.get('num_routes', 0)} routes"]
    for route in data.get("routes") or []:
        lines.append(
            f"rid {route.get('rid')} to {route.get('remote_name') or '?'} "
            f"({route.get('remote_id', '?')}) {route.get('ip')}:{route.get('port')}"
        )
    return lines


def _gatewayz(data: dict[str, Any]) -> list[str]:
    name = data.get("name") or "-"
    return [
        f"gateway {name}: {len(data.get('outbound_gateways') or {})} outbound, "
        f"{len(data.get('inbound_gateways') or {})} inbound"
    ]


def _leafz(data: dict[str, Any]) -> list[str]:
    lines = [f"{data.get('leafnodes', 0)} leaf node connections"]
    for leaf in data.get("leafs") or []:
        lines.append(
            f"{leaf.get('name') or '-'} account {leaf.get('account') or '-'} "
            f"{leaf.get('ip')}:{leaf.get('port')}"
        )
    return lines


def _subsz(data: dict[str, Any]) -> list[str]:
    lines = [
        f"{data.get('num_subscriptions', 0)} subscriptions, {data.get('num_cache', 0)} "
        f"subjects cached, {data.get('num_matches', 0)} matches"
    ]
    for sub in data.get("subscriptions_list") or []:
        queue = f" queue {sub['qgroup']}" if sub.get("qgroup") else ""
        lines.append(f"{sub.get('subject')}{queue} account {sub.get('account') or '-'}")
    return lines


def _jsz(data: dict[str, Any]) -> list[str]:
    lines = [
        f"{data.get('streams', 0)} streams, {data.get('consumers', 0)} consumers, "
        f"{data.get('messages', 0)} messages, {data.get('bytes', 0)} bytes; memory "
        f"{data.get('memory', 0)} B, storage {data.get('storage', 0)} B"
    ]
    meta = data.get("meta_cluster") or {}
    if meta:
        lines.append(
            f"meta leader {meta.get('leader') or '-'}, cluster size {meta.get('cluster_size', '?')}"
        )
    return lines


def _accountz(data: dict[str, Any]) -> list[str]:
    detail = data.get("account_detail")
    if detail:
        return [
            f"account {detail.get('account_name')}: jetstream "
            f"{'on' if detail.get('jetstream_enabled') else 'off'}, "
            f"{len(detail.get('exports') or [])} exports, "
            f"{len(detail.get('imports') or [])} imports"
        ]
    accounts = data.get("accounts") or []
    return [f"{len(accounts)} accounts: {', '.join(sorted(accounts))}"]


def _healthz(data: dict[str, Any]) -> list[str]:
    error = f": {data['error']}" if data.get("error") else ""
    return [f"status {data.get('status', '?')}{error}"]


_SUMMARIES: dict[str, Callable[[dict[str, Any]], list[str]]] = {
    "varz": _varz,
    "statsz": _statsz,
    "connz": _connz,
    "routez": _routez,
    "gatewayz": _gatewayz,
    "leafz": _leafz,
    "subsz": _subsz,
    "jsz": _jsz,
    "accountz": _accountz,
    "healthz": _healthz,
}

"""The command line's partitioned consumer groups, as orbit.go's ``cg``:
``cg static|elastic create|consume|add|drop|map|unmap|ls|rm|step-down``.

How it works: ``cli`` adds these parsers (with the connection options on each) and the
handler; the handler connects one client on the main thread and calls
``nats_sync.jetstream.pcgroups``. ``consume`` joins as a member and prints
``<member>\\t<subject>\\t<stream seq>\\t<data>`` for each message, acked with a
confirmed ack, on the group's thread; the main thread waits until ``--count`` messages,
the group's end, or Ctrl-C, then leaves. Errors are raised as ``nats_sync.Error`` and
printed by ``cli.main``.
"""

from __future__ import annotations

import argparse
import threading
from typing import Any, TextIO

from nats_sync._cli import AddOptions, Connect, Handler
from nats_sync.jetstream import ConsumerConfig, JetStream, JsMsg
from nats_sync.jetstream import pcgroups as pcg


def add_parsers(commands: Any, add_options: AddOptions) -> None:
    """Adds ``cg`` (its two kinds and their actions) to the command parsers."""
    cg = commands.add_parser(
        "cg", help="partitioned consumer groups (orbit.go's pcgroups, interoperable)"
    )
    kinds = cg.add_subparsers(dest="kind", required=True, metavar="KIND")
    parsers: list[argparse.ArgumentParser] = [cg]
    for kind in ("static", "elastic"):
        parser = kinds.add_parser(kind, help=f"{kind} groups")
        actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
        create = actions.add_parser("create", help="create a group")
        _stream_group(create)
        create.add_argument(
            "max_members", type=int, metavar="MAX_MEMBERS", help="the number of partitions"
        )
        create.add_argument(
            "--filter",
            action="append",
            default=[],
            help="subject filter (without the partition number)"
            + ("; repeatable" if kind == "static" else ""),
        )
        if kind == "static":
            create.add_argument("members", nargs="*", metavar="MEMBER")
            create.add_argument(
                "--mapping",
                action="append",
                default=[],
                metavar="MEMBER:P1,P2",
                help="partitions by hand; repeatable",
            )
        else:
            create.add_argument(
                "--wildcard",
                action="append",
                type=int,
                default=[],
                metavar="N",
                help="the filter's Nth * is the key; repeatable",
            )
            create.add_argument("--max-buffered-msgs", type=int, default=0)
            create.add_argument("--max-buffered-bytes", type=int, default=0)
            for name, text in (("add", "add members"), ("drop", "drop members")):
                members = actions.add_parser(name, help=text)
                _stream_group(members)
                members.add_argument("members", nargs="+", metavar="MEMBER")
            mapping = actions.add_parser("map", help="give partitions to members by hand")
            _stream_group(mapping)
            mapping.add_argument("mappings", nargs="+", metavar="MEMBER:P1,P2")
            _stream_group(actions.add_parser("unmap", help="remove the member mappings"))
        consume = actions.add_parser("consume", help="join as a member; print and ack")
        _stream_group(consume)
        consume.add_argument("member")
        consume.add_argument("--count", type=int, default=0, help="leave after N messages")
        consume.add_argument(
            "--ack-wait",
            type=float,
            default=2.0,
            help="seconds (default 2): also the standby's take-over time",
        )
        ls = actions.add_parser("ls", help="the groups of a stream, or one group's config")
        ls.add_argument("stream")
        ls.add_argument("group", nargs="?", default=None)
        _stream_group(actions.add_parser("rm", help="delete a group"))
        step_down = actions.add_parser(
            "step-down", help="make a member's active instance step down"
        )
        _stream_group(step_down)
        step_down.add_argument("member")
        parsers += [parser, *actions.choices.values()]
    for parser in parsers:
        add_options(parser)


def _stream_group(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("stream")
    parser.add_argument("group")


def handlers(connect: Connect) -> dict[str, Handler]:
    """The handler of ``cg``, connecting with ``connect(args)``."""

    def cg_command(args: argparse.Namespace, out: TextIO) -> None:
        with connect(args) as nc:
            run(nc.jetstream(timeout=args.timeout), args, out)

    return {"cg": cg_command}


def _mappings(texts: list[str]) -> dict[str, list[int]]:
    mappings: dict[str, list[int]] = {}
    for text in texts:
        member, colon, partitions = text.partition(":")
        try:
            numbers = [int(p) for p in partitions.split(",")]
        except ValueError:
            numbers = []
        if not colon or not member or not numbers:
            raise pcg.ConsumerGroupConfigError(
                f"a mapping is MEMBER:P1,P2,... (partition numbers), got {text!r}"
            )
        mappings[member] = numbers
    return mappings


def run(js: JetStream, args: argparse.Namespace, out: TextIO) -> None:
    """Runs one ``cg`` action."""
    static = args.kind == "static"
    action = args.action
    if action == "create":
        if static:
            pcg.create_static(
                js,
                args.stream,
                args.group,
                args.max_members,
                args.filter,
                args.members,
                _mappings(args.mapping),
            )
        else:
            if len(args.filter) > 1:
                raise pcg.ConsumerGroupConfigError("an elastic group takes one --filter")
            pcg.create_elastic(
                js,
                args.stream,
                args.group,
                args.max_members,
                args.filter[0] if args.filter else None,
                args.wildcard,
                max_buffered_msgs=args.max_buffered_msgs,
                max_buffered_bytes=args.max_buffered_bytes,
            )
        out.write(f"created {args.kind} group {args.group} on {args.stream}\n")
    elif action in ("add", "drop"):
        change = pcg.add_members if action == "add" else pcg.delete_members
        members = change(js, args.stream, args.group, args.members)
        out.write(f"members: {' '.join(members) or '(none)'}\n")
    elif action == "map":
        pcg.set_member_mappings(js, args.stream, args.group, _mappings(args.mappings))
        out.write(f"members: {' '.join(pcg.list_members(js, args.stream, args.group))}\n")
    elif action == "unmap":
        pcg.delete_member_mappings(js, args.stream, args.group)
        out.write("member mappings removed: the group has no members\n")
    elif action == "ls":
        _ls(js, args, static, out)
    elif action == "rm":
        (pcg.delete_static if static else pcg.delete_elastic)(js, args.stream, args.group)
        out.write(f"deleted {args.kind} group {args.group} on {args.stream}\n")
    elif action == "step-down":
        step_down = pcg.static_member_step_down if static else pcg.elastic_member_step_down
        step_down(js, args.stream, args.group, args.member)
        out.write(f"member {args.member} stepped down\n")
    else:
        _consume(js, args, static, out)


def _ls(js: JetStream, args: argparse.Namespace, static: bool, out: TextIO) -> None:
    if args.group is None:
        groups = (pcg.list_static if static else pcg.list_elastic)(js, args.stream)
        for group in groups:
            out.write(f"{group}\n")
        if not groups:
            out.write(f"no {args.kind} groups on {args.stream}\n")
        return
    config: pcg.StaticConfig | pcg.ElasticConfig
    config = (pcg.get_static if static else pcg.get_elastic)(js, args.stream, args.group)
    out.write(f"max members: {config.max_members}\n")
    if isinstance(config, pcg.StaticConfig):
        out.write(f"filters: {' '.join(config.filters) or '>'}\n")
    else:
        for pf in config.partitioning_filters or ():
            out.write(f"filter: {pf.filter} wildcards {list(pf.partitioning_wildcards)}\n")
    for mapping in config.member_mappings:
        out.write(f"mapping: {mapping.member} {list(mapping.partitions)}\n")
    out.write(f"members: {' '.join(config.member_names()) or '(none)'}\n")


def _consume(js: JetStream, args: argparse.Namespace, static: bool, out: TextIO) -> None:
    handled = 0
    done = threading.Event()
    lock = threading.Lock()

    def handle(msg: JsMsg) -> None:
        nonlocal handled
        msg.double_ack()
        with lock:
            out.write(
                f"{args.member}\t{msg.subject}\t{msg.metadata.sequence.stream}\t"
                f"{msg.data.decode(errors='replace')}\n"
            )
            out.flush()
            handled += 1
            if args.count and handled >= args.count:
                done.set()

    join = pcg.static_consume if static else pcg.elastic_consume
    ctx = join(
        js,
        args.stream,
        args.group,
        args.member,
        handle,
        ConsumerConfig(ack_wait=args.ack_wait, max_ack_pending=1),
    )
    try:
        while not done.wait(0.2) and not ctx.closed:
            pass
    finally:
        ctx.stop()
        ctx.join(5)
    if ctx.error is not None:
        raise ctx.error

"""The command line's JetStream commands: ``stream ls|info|add|rm``,
``consumer ls|info|add|rm|next`` and ``kv add|update|ls|get|put|del|history|watch`` (``object``
and ``counter`` come from ``_cli.object`` and ``_cli.counter``); and
``pub --js --atomic``, ``pub --js --fast`` and ``pub --js --schedule`` (``publish_atomic``,
``publish_fast``, ``publish_scheduled``), which ``cli``'s ``pub`` hands over.

How it works: ``cli`` adds these parsers (with its connection options on each) and
their handlers; each handler connects one client on the main thread, makes one
JetStream call through the public API and prints a line per item. Errors are raised
as ``nats_sync.Error`` and printed by ``cli.main``.
"""

from __future__ import annotations

import argparse
import json
import time
from datetime import datetime
from typing import Any, TextIO

import nats_sync
from nats_sync._cli import AddOptions, Connect, Handler
from nats_sync._cli import counter as _cli_counter
from nats_sync._cli import object as _cli_object
from nats_sync._defaults import JS_ATOMIC_MAX_MESSAGES
from nats_sync.errors import InvalidArgumentError
from nats_sync.jetstream import (
    ApiObject,
    BatchAck,
    BatchClosedError,
    BatchTooLargeError,
    ConsumerInfo,
    Entry,
    JetStream,
    JetStreamError,
    StreamInfo,
)


def add_parsers(commands: Any, add_options: AddOptions) -> None:
    """Adds ``stream``, ``consumer`` and ``kv`` (and their actions) to the command parsers,
    and ``object`` from ``_cli.object``."""
    _cli_object.add_parsers(commands, add_options)
    _cli_counter.add_parsers(commands, add_options)
    stream = commands.add_parser("stream", help="list, show, add and remove streams")
    actions = stream.add_subparsers(dest="action", required=True, metavar="ACTION")
    actions.add_parser("ls", help="the streams, with their message counts")
    info = actions.add_parser("info", help="a stream's config and state (JSON)")
    info.add_argument("name")
    add = actions.add_parser("add", help="create a stream (or keep one that matches)")
    add.add_argument("name")
    add.add_argument("--subjects", required=True, help="subjects it stores, commas between")
    add.add_argument("--storage", choices=("file", "memory"), default="file")
    add.add_argument("--replicas", type=int, default=1)
    add.add_argument("--retention", choices=("limits", "interest", "workqueue"), default="limits")
    add.add_argument("--max-msgs", type=int, default=None)
    add.add_argument("--max-bytes", type=int, default=None)
    add.add_argument("--max-age", type=float, default=None, help="seconds")
    add.add_argument("--allow-direct", action="store_true", help="allow direct gets")
    _add_feature_options(add)
    remove = actions.add_parser("rm", help="delete a stream and its messages")
    remove.add_argument("name")
    for parser in (stream, *actions.choices.values()):
        add_options(parser)

    consumer = commands.add_parser("consumer", help="list, show, add, remove and read consumers")
    actions = consumer.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = actions.add_parser("ls", help="a stream's consumers")
    listing.add_argument("stream")
    info = actions.add_parser("info", help="a consumer's config and position (JSON)")
    info.add_argument("stream")
    info.add_argument("name")
    add = actions.add_parser("add", help="create a durable pull (or push) consumer")
    add.add_argument("stream")
    add.add_argument("name")
    add.add_argument("--filter", default=None, help="only this subject (wildcards allowed)")
    add.add_argument("--ack", choices=("explicit", "none", "all"), default="explicit")
    add.add_argument("--deliver", choices=("all", "last", "new", "last_per_subject"), default="all")
    add.add_argument("--max-ack-pending", type=int, default=None)
    add.add_argument(
        "--push", action="store_true", help="a push consumer (the server sends, unasked)"
    )
    add.add_argument(
        "--deliver-subject", default=None, help="push: where it sends (default a new inbox)"
    )
    add.add_argument(
        "--deliver-group", default=None, help="push: the readers' queue group that shares"
    )
    add.add_argument("--flow-control", action="store_true", help="push: with flow control")
    add.add_argument("--heartbeat", type=float, default=None, help="push: idle heartbeat, s")
    remove = actions.add_parser("rm", help="delete a consumer")
    remove.add_argument("stream")
    remove.add_argument("name")
    read = actions.add_parser("next", help="fetch messages, print and acknowledge them")
    read.add_argument("stream")
    read.add_argument("name")
    read.add_argument("--count", type=int, default=1, help="messages to fetch (default 1)")
    read.add_argument("--no-ack", action="store_true", help="print without acknowledging")
    read.add_argument(
        "--group",
        default=None,
        help="the priority group to pull in (consumers with priority groups)",
    )
    read.add_argument(
        "--min-pending",
        type=int,
        default=None,
        help="overflow: only while at least this many are pending",
    )
    read.add_argument(
        "--min-ack-pending",
        type=int,
        default=None,
        help="overflow: only while at least this many are unacknowledged",
    )
    read.add_argument(
        "--priority", type=int, default=None, help="prioritized: 0 (served first) to 9"
    )
    for parser in (consumer, *actions.choices.values()):
        add_options(parser)
    _add_kv_parser(commands, add_options)


#: ``stream add`` switches for the server 2.11-2.15 features: option -> StreamConfig field.
_FEATURE_SWITCHES = {
    "--allow-atomic": ("allow_atomic", "allow atomic batches (server 2.12+)"),
    "--allow-batched": ("allow_batched", "allow fast-ingest batches (server 2.14+)"),
    "--allow-msg-ttl": ("allow_msg_ttl", "allow per-message TTLs (server 2.11+)"),
    "--allow-msg-counter": ("allow_msg_counter", "make a counter stream (server 2.12+)"),
    "--allow-msg-schedules": ("allow_msg_schedules", "allow scheduled messages (server 2.12+)"),
}


def _add_feature_options(add: argparse.ArgumentParser) -> None:
    for option, (_, text) in _FEATURE_SWITCHES.items():
        add.add_argument(option, action="store_true", help=text)
    add.add_argument(
        "--subject-delete-marker-ttl",
        type=float,
        default=None,
        metavar="SECONDS",
        help="leave a delete marker living this long when max age removes a "
        "subject's last message (>= 1; the server then allows TTLs)",
    )
    add.add_argument(
        "--persist-mode",
        choices=("default", "async"),
        default=None,
        help="async: acknowledge before the write is flushed (not with --allow-atomic)",
    )


def _feature_fields(args: argparse.Namespace) -> dict[str, Any]:
    """The StreamConfig fields the feature options ask for (none when not given)."""
    fields: dict[str, Any] = {
        field: True
        for option, (field, _) in _FEATURE_SWITCHES.items()
        if getattr(args, option[2:].replace("-", "_"))
    }
    if args.subject_delete_marker_ttl is not None:
        fields["subject_delete_marker_ttl"] = args.subject_delete_marker_ttl
    if args.persist_mode is not None:
        fields["persist_mode"] = args.persist_mode
    return fields


def _add_kv_parser(commands: Any, add_options: AddOptions) -> None:
    kv = commands.add_parser(
        "kv", help="key-value buckets: add, update, list, get, put, delete, history, watch"
    )
    actions = kv.add_subparsers(dest="action", required=True, metavar="ACTION")
    add = actions.add_parser("add", help="create a bucket (or keep one that matches)")
    add.add_argument("bucket")
    add.add_argument("--history", type=int, default=1, help="values kept per key (1..64)")
    add.add_argument("--ttl", type=float, default=0.0, help="seconds a value lives")
    add.add_argument("--max-value-size", type=int, default=-1)
    add.add_argument("--max-bytes", type=int, default=-1)
    add.add_argument("--storage", choices=("file", "memory"), default="file")
    add.add_argument("--replicas", type=int, default=1)
    add.add_argument("--compression", action="store_true", help="compress values (s2)")
    add.add_argument("--description", default=None)
    add.add_argument(
        "--limit-marker-ttl",
        type=float,
        default=None,
        metavar="SECONDS",
        help="keep a marker this long when age removes a key, so watchers "
        "see it (>= 1; server 2.11+)",
    )
    update = actions.add_parser(
        "update", help="change a bucket's settings, keeping its values (only those given)"
    )
    update.add_argument("bucket")
    update.add_argument("--history", type=int, default=None, help="values kept per key (1..64)")
    update.add_argument("--ttl", type=float, default=None, help="seconds a value lives (0: ever)")
    update.add_argument("--max-value-size", type=int, default=None)
    update.add_argument("--max-bytes", type=int, default=None)
    update.add_argument("--replicas", type=int, default=None)
    update.add_argument("--description", default=None)
    listing = actions.add_parser("ls", help="the buckets, or a bucket's keys")
    listing.add_argument("bucket", nargs="?", help="list this bucket's keys")
    get = actions.add_parser("get", help="print a key's value")
    get.add_argument("bucket")
    get.add_argument("key")
    get.add_argument("--revision", type=int, default=None)
    put = actions.add_parser("put", help="store a value")
    put.add_argument("bucket")
    put.add_argument("key")
    put.add_argument("value")
    remove = actions.add_parser("del", help="delete a key (or the bucket, without a key)")
    remove.add_argument("bucket")
    remove.add_argument("key", nargs="?")
    remove.add_argument("--purge", action="store_true", help="also drop the key's history")
    history = actions.add_parser("history", help="a key's kept values, oldest first")
    history.add_argument("bucket")
    history.add_argument("key")
    watch = actions.add_parser("watch", help="print the current values, then every change")
    watch.add_argument("bucket")
    watch.add_argument("keys", nargs="?", default=">", help="key filter (default all)")
    watch.add_argument(
        "--count",
        type=int,
        default=None,
        help="stop after this many entries (default: until interrupted)",
    )
    watch.add_argument("--updates-only", action="store_true", help="only new changes")
    for parser in (kv, *actions.choices.values()):
        add_options(parser)


def handlers(connect: Connect) -> dict[str, Handler]:
    """The handlers of ``stream``, ``consumer`` and ``kv``, connecting with
    ``connect(args)``."""

    def stream(args: argparse.Namespace, out: TextIO) -> None:
        with connect(args) as nc:
            js = nc.jetstream(timeout=args.timeout)
            if args.action == "ls":
                for info in js.list_streams():
                    state = info.state
                    out.write(
                        f"{info.config.name}\t{state.messages} messages\t"
                        f"{state.bytes} bytes\t{','.join(info.config.subjects or [])}\n"
                    )
            elif args.action == "info":
                out.write(_json(js.stream(args.name).info()) + "\n")
            elif args.action == "add":
                fields: dict[str, Any] = {
                    "name": args.name,
                    "subjects": _subjects(args.subjects),
                    "storage": args.storage,
                    "num_replicas": args.replicas,
                    "retention": args.retention,
                    "max_msgs": args.max_msgs,
                    "max_bytes": args.max_bytes,
                    "max_age": args.max_age,
                }
                if args.allow_direct:
                    fields["allow_direct"] = True
                fields.update(_feature_fields(args))
                made = js.create_stream(**fields)
                out.write(f"stream {made.name} stores {', '.join(fields['subjects'])}\n")
            else:
                js.delete_stream(args.name)
                out.write(f"stream {args.name} deleted\n")

    def consumer(args: argparse.Namespace, out: TextIO) -> None:
        with connect(args) as nc:
            js = nc.jetstream(timeout=args.timeout)
            if args.action == "ls":
                for info in js.list_consumers(args.stream):
                    out.write(
                        f"{info.name}\t{info.num_pending} pending\t"
                        f"{info.num_ack_pending} unacknowledged\n"
                    )
            elif args.action == "info":
                out.write(_json(js.consumer_info(args.stream, args.name)) + "\n")
            elif args.action == "add":
                _add_consumer(js, args, out)
            elif args.action == "rm":
                js.delete_consumer(args.stream, args.name)
                out.write(f"consumer {args.name} on {args.stream} deleted\n")
            else:
                _next(js, args, out)

    def kv(args: argparse.Namespace, out: TextIO) -> None:
        with connect(args) as nc:
            _kv(nc.jetstream(timeout=args.timeout), args, out)

    return {
        "stream": stream,
        "consumer": consumer,
        "kv": kv,
        **_cli_object.handlers(connect),
        **_cli_counter.handlers(connect),
    }


def _kv(js: JetStream, args: argparse.Namespace, out: TextIO) -> None:
    action = args.action
    if action == "add":
        made = js.create_key_value(
            bucket=args.bucket,
            history=args.history,
            ttl=args.ttl,
            max_value_size=args.max_value_size,
            max_bytes=args.max_bytes,
            storage=args.storage,
            replicas=args.replicas,
            compression=args.compression,
            description=args.description,
            limit_marker_ttl=args.limit_marker_ttl,
        )
        out.write(f"bucket {made.bucket} keeps {args.history} value(s) per key\n")
    elif action == "update":
        _kv_update(js, args, out)
    elif action == "ls":
        names = (
            js.key_value(args.bucket).list_keys() if args.bucket else js.key_value_bucket_names()
        )
        for name in names:
            out.write(f"{name}\n")
    elif action == "get":
        entry = js.key_value(args.bucket).get(args.key, revision=args.revision)
        out.write(entry.value.decode("utf-8", "replace") + "\n")
    elif action == "put":
        revision = js.key_value(args.bucket).put(args.key, args.value.encode())
        out.write(f"{args.key} revision {revision}\n")
    elif action == "del":
        if args.key is None:
            js.delete_key_value(args.bucket)
            out.write(f"bucket {args.bucket} deleted\n")
        else:
            bucket = js.key_value(args.bucket)
            (bucket.purge if args.purge else bucket.delete)(args.key)
            out.write(f"{args.key} {'purged' if args.purge else 'deleted'}\n")
    elif action == "history":
        for entry in js.key_value(args.bucket).history(args.key):
            out.write(_entry_line(entry) + "\n")
    else:
        _kv_watch(js, args, out)


def _kv_update(js: JetStream, args: argparse.Namespace, out: TextIO) -> None:
    # An update takes a config whole: start from the bucket's own, so the flags not
    # given keep their values (as the nats CLI's ``kv edit``).
    names = ("history", "ttl", "max_value_size", "max_bytes", "replicas", "description")
    changes = {name: getattr(args, name) for name in names if getattr(args, name) is not None}
    if not changes:
        raise InvalidArgumentError(
            "kv update changes nothing without --history, --ttl, --max-value-size, "
            "--max-bytes, --replicas or --description"
        )
    current = js.key_value(args.bucket).status().config
    status = js.update_key_value(current, **changes).status()
    ttl = f"{status.ttl:g}s" if status.ttl else "for ever"
    out.write(
        f"bucket {status.bucket} updated: keeps {status.history} value(s) per key, "
        f"values live {ttl}\n"
    )


def _kv_watch(js: JetStream, args: argparse.Namespace, out: TextIO) -> None:
    if args.count is not None and args.count < 1:
        raise InvalidArgumentError(f"--count must be >= 1, got {args.count}")
    shown = 0
    with js.key_value(args.bucket).watch(args.keys, updates_only=args.updates_only) as watcher:
        for entry in watcher:
            out.write(_entry_line(entry) + "\n")
            out.flush()
            shown += 1
            if args.count is not None and shown >= args.count:
                return


def _entry_line(entry: Entry) -> str:
    stamp = entry.created.isoformat() if entry.created else "-"
    value = entry.value.decode("utf-8", "replace")
    return f"{entry.revision}\t{entry.operation}\t{stamp}\t{entry.key}\t{value}"


def _add_consumer(js: JetStream, args: argparse.Namespace, out: TextIO) -> None:
    fields: dict[str, Any] = {
        "durable_name": args.name,
        "filter_subject": args.filter,
        "ack_policy": args.ack,
        "deliver_policy": args.deliver,
        "max_ack_pending": args.max_ack_pending,
    }
    push: dict[str, Any] = {
        "deliver_subject": args.deliver_subject,
        "deliver_group": args.deliver_group,
        "flow_control": args.flow_control or None,
        "idle_heartbeat": args.heartbeat,
    }
    if not args.push:
        options = ("--deliver-subject", "--deliver-group", "--flow-control", "--heartbeat")
        used = [option for option, value in zip(options, push.values(), strict=True) if value]
        if used:
            raise InvalidArgumentError(f"{', '.join(used)}: for a push consumer (add --push)")
        made = js.create_consumer(args.stream, **fields)
        out.write(f"consumer {made.name} on {args.stream}\n")
        return
    pushed = js.create_push_consumer(args.stream, **fields, **push)
    config = pushed.cached_info.config
    group = f" in group {config.deliver_group}" if config.deliver_group else ""
    out.write(
        f"push consumer {pushed.name} on {args.stream} delivers to {config.deliver_subject}"
        f"{group}\n"
    )


def _next(js: JetStream, args: argparse.Namespace, out: TextIO) -> None:
    if args.count < 1:
        raise InvalidArgumentError(f"--count must be >= 1, got {args.count}")
    if js.consumer_info(args.stream, args.name).config.deliver_subject:
        _next_pushed(js, args, out)
        return
    reader = js.consumer(args.stream, args.name)
    batch = reader.fetch(
        args.count,
        max_wait=args.timeout,
        group=args.group,
        min_pending=args.min_pending,
        min_ack_pending=args.min_ack_pending,
        priority=args.priority,
    )
    shown = 0
    for msg in batch:
        meta = msg.metadata
        out.write(
            f"[{msg.subject}] stream seq {meta.sequence.stream}, delivered {meta.num_delivered}x\n"
        )
        out.write(msg.data.decode("utf-8", "replace") + "\n")
        if not args.no_ack:
            msg.ack()
        shown += 1
    if batch.error is not None:
        raise batch.error
    if shown == 0:
        out.write(f"no message within {args.timeout}s\n")
    elif not args.no_ack:
        js.client.flush(args.timeout)  # the acks reach the server before we disconnect


def add_pub_options(pub: argparse.ArgumentParser) -> None:
    """Adds ``--atomic``, ``--ttl`` and the schedule options to ``cli``'s ``pub``."""
    pub.add_argument(
        "--atomic",
        action="store_true",
        help="with --js: publish the --count messages as one atomic batch "
        "(all stored or none; at most 1000; the stream needs "
        "allow_atomic) and print its ack",
    )
    pub.add_argument(
        "--ttl",
        type=_cli_counter.parse_ttl,
        default=None,
        metavar="SECONDS",
        help='with --js: each message lives SECONDS (>= 1) or "never" '
        "(Nats-TTL; the stream needs allow_msg_ttl, server 2.11+)",
    )
    pub.add_argument(
        "--schedule",
        default=None,
        metavar="SPEC",
        help="with --js and --target: store a schedule (ADR-51) on the subject: "
        '"@at 2030-01-02T15:04:05Z", "@every 5m", "@hourly" or a 6-field '
        "cron; the server publishes the data to --target then (the "
        "stream needs allow_msg_schedules, server 2.12+; --ttl is then the "
        "produced messages'). Stop it by purging the subject",
    )
    pub.add_argument(
        "--target",
        default=None,
        metavar="SUBJ",
        help="with --schedule: where the server publishes (same stream)",
    )
    pub.add_argument(
        "--time-zone",
        default=None,
        metavar="ZONE",
        help="with a cron --schedule: its IANA time zone (server 2.14+)",
    )


def check_schedule_options(args: argparse.Namespace) -> None:
    """Refuses ``--schedule``, ``--target`` and ``--time-zone`` where they do not go."""
    if args.schedule is None:
        if args.target is not None or args.time_zone is not None:
            raise InvalidArgumentError("--target and --time-zone need --schedule")
        return
    if not args.js or args.target is None:
        raise InvalidArgumentError("--schedule needs --js and --target")
    if args.atomic or args.fast or args.count != 1 or args.msg_id is not None:
        raise InvalidArgumentError(
            "--schedule stores one schedule: not with --atomic, --fast, --count or --msg-id"
        )


def publish_scheduled(
    nc: nats_sync.Client,
    args: argparse.Namespace,
    headers: dict[str, list[str]] | None,
    out: TextIO,
) -> None:
    """``pub --js --schedule SPEC --target SUBJ``: stores the schedule, prints its ack."""
    ack = nc.jetstream(timeout=args.timeout).publish_scheduled(
        args.subject,
        str(args.data).encode(),
        schedule=args.schedule,
        target=args.target,
        ttl=args.ttl,
        time_zone=args.time_zone,
        headers=headers,
    )
    out.write(f"{ack.stream}\tseq {ack.seq}\tschedule {args.schedule!r} -> {args.target}\n")


def publish_atomic(
    nc: nats_sync.Client,
    args: argparse.Namespace,
    headers: dict[str, list[str]] | None,
    out: TextIO,
) -> None:
    """``pub --js --atomic``: ``--count`` messages as one atomic batch, the last one
    carrying the commit; prints the batch's ack (stream, last seq, batch id, count)."""
    if args.count < 1:
        raise InvalidArgumentError(f"--count must be >= 1, got {args.count}")

    def data(n: int) -> bytes:
        return str(args.data).replace("{n}", str(n)).encode()

    def msg_id(n: int) -> str | None:
        return None if args.msg_id is None else str(args.msg_id).replace("{n}", str(n))

    if args.count > JS_ATOMIC_MAX_MESSAGES:  # refused before anything is sent
        raise BatchTooLargeError(
            f"--count {args.count} with --atomic: an atomic batch holds "
            f"at most {JS_ATOMIC_MAX_MESSAGES} messages; nothing sent"
        )
    js = nc.jetstream(timeout=args.timeout)
    with js.atomic_batch() as batch:
        for n in range(1, args.count):
            batch.add(args.subject, data(n), headers=headers, msg_id=msg_id(n), ttl=args.ttl)
        ack = batch.commit(
            args.subject, data(args.count), headers=headers, msg_id=msg_id(args.count), ttl=args.ttl
        )
    out.write(f"{ack.stream}\tseq {ack.seq}\tbatch {ack.batch_id}\tcount {ack.count}\n")


def _subjects(text: str) -> list[str]:
    subjects = [part.strip() for part in text.split(",") if part.strip()]
    if not subjects:
        raise InvalidArgumentError(f"--subjects needs at least one subject, got {text!r}")
    return subjects


def _json(info: StreamInfo | ConsumerInfo | ApiObject) -> str:
    def plain(value: Any) -> Any:
        if isinstance(value, datetime):
            return value.isoformat()
        return str(value)

    return json.dumps(info.to_api(), indent=2, sort_keys=True, default=plain)


def publish_fast(
    nc: nats_sync.Client,
    args: argparse.Namespace,
    headers: dict[str, list[str]] | None,
    out: TextIO,
) -> None:
    """``pub --js --fast``: the messages as one fast-ingest batch (gap ``fail``), the
    last one committing it; prints the batch's final ack (no ack per message).

    Raises:
        JetStreamError: the stream took fewer messages than were sent (the batch ended
            early); ``FastBatchNotEnabledError`` without ``allow_batched``.
    """
    if args.count < 1:
        return
    fp = nc.jetstream(timeout=args.timeout).fast_publisher()

    def fill(text: str | None, n: int) -> str | None:
        return None if text is None else text.replace("{n}", str(n))

    def message(n: int) -> tuple[str, bytes]:
        return args.subject, args.data.replace("{n}", str(n)).encode()

    ended: BatchClosedError | None = None
    try:
        for n in range(1, args.count):
            fp.add(*message(n), headers=headers, msg_id=fill(args.msg_id, n), ttl=args.ttl)
        final = fp.commit(
            *message(args.count),
            headers=headers,
            msg_id=fill(args.msg_id, args.count),
            ttl=args.ttl,
        )
    except BatchClosedError as err:  # ended early: the server's count is still wanted
        ended = err
        final = fp.close()
    out.write(_batch_line(final))
    out.flush()
    if final.count < args.count:
        raise JetStreamError(
            f"the fast batch ended after {final.count} of {args.count} message(s)"
        ) from ended


def _batch_line(ack: BatchAck) -> str:
    return f"{ack.stream}\tseq {ack.seq}\tbatch {ack.batch_id}\tcount {ack.count}\n"


def _next_pushed(js: JetStream, args: argparse.Namespace, out: TextIO) -> None:
    """``consumer next`` on a push consumer: what it sends within ``--timeout``."""
    shown = 0
    with js.push_consumer(args.stream, args.name).messages() as stream:
        deadline = time.monotonic() + args.timeout
        while shown < args.count:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                msg = stream.next(timeout=left)
            except TimeoutError:
                break
            meta = msg.metadata
            out.write(
                f"[{msg.subject}] stream seq {meta.sequence.stream}, "
                f"delivered {meta.num_delivered}x\n"
            )
            out.write(msg.data.decode("utf-8", "replace") + "\n")
            if not args.no_ack:
                msg.ack()
            shown += 1
    if shown == 0:
        out.write(f"no message within {args.timeout}s\n")
    elif not args.no_ack:
        js.client.flush(args.timeout)  # the acks reach the server before we disconnect

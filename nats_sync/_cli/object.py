"""The command line's object store commands: ``object put|get|ls|rm|info|link``.

How it works: ``_cli.jetstream`` adds these parsers (with the connection options on
each) and the handler; the handler connects one client on the main thread, makes the
object store calls through the public API and prints a line per item. ``put`` streams
a file (or standard input) in chunks and ``get`` streams into a file (or standard
output), so neither holds the object in memory. Errors are raised as
``nats_sync.Error`` and printed by ``cli.main``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import datetime
from typing import Any, TextIO

from nats_sync._cli import AddOptions, Connect, Handler
from nats_sync.jetstream import BucketNotFoundError, JetStream, ObjectInfo


def add_parsers(commands: Any, add_options: AddOptions) -> None:
    """Adds ``object`` (and its actions) to the command parsers."""
    obj = commands.add_parser("object", help="put, get, list, show and remove stored objects")
    actions = obj.add_subparsers(dest="action", required=True, metavar="ACTION")
    put = actions.add_parser("put", help="store a file (the bucket is made when missing)")
    put.add_argument("bucket")
    put.add_argument("file", help="the file to store ('-' reads standard input)")
    put.add_argument("--name", default=None, help="the object's name (default: the file's)")
    put.add_argument("--description", default=None)
    get = actions.add_parser("get", help="write an object into a file (digest checked)")
    get.add_argument("bucket")
    get.add_argument("name")
    get.add_argument(
        "--output",
        "-o",
        default=None,
        help="the file to write (default: the object's name; '-': stdout)",
    )
    listing = actions.add_parser("ls", help="a bucket's objects, with sizes")
    listing.add_argument("bucket")
    remove = actions.add_parser("rm", help="delete an object (or, with no name, the bucket)")
    remove.add_argument("bucket")
    remove.add_argument("name", nargs="?", default=None)
    info = actions.add_parser("info", help="an object's info, or a bucket's status (JSON)")
    info.add_argument("bucket")
    info.add_argument("name", nargs="?", default=None)
    link = actions.add_parser(
        "link", help="store a link to an object (or, with no target name, to a bucket)"
    )
    link.add_argument("bucket")
    link.add_argument("name", help="the link's name")
    link.add_argument("target_bucket", help="the bucket linked to (or holding the object)")
    link.add_argument("target_name", nargs="?", default=None, help="the object linked to")
    for parser in (obj, *actions.choices.values()):
        add_options(parser)


def handlers(connect: Connect) -> dict[str, Handler]:
    """The handler of ``object``, connecting with ``connect(args)``."""

    def object_command(args: argparse.Namespace, out: TextIO) -> None:
        with connect(args) as nc:
            run(nc.jetstream(timeout=args.timeout), args, out)

    return {"object": object_command}


def run(js: JetStream, args: argparse.Namespace, out: TextIO) -> None:
    """Runs one ``object`` action."""
    if args.action == "put":
        _put(js, args, out)
        return
    if args.action == "link":
        _link(js, args, out)
        return
    store = js.object_store(args.bucket)
    if args.action == "get":
        target = args.output or os.path.basename(args.name) or "object"
        if target == "-":
            store.get_into(args.name, sys.stdout.buffer)
            sys.stdout.buffer.flush()
            return
        with open(target, "wb") as sink:
            info = store.get_into(args.name, sink)
        out.write(f"wrote {info.size} bytes of {info.name} to {target}\n")
    elif args.action == "ls":
        for info in store.list():
            when = info.mtime.isoformat() if info.mtime else "-"
            link = (info.options or {}).get("link")
            size = f"link to {_link_text(link)}" if link else f"{info.size} bytes"
            out.write(f"{info.name}\t{size}\t{when}\n")
    elif args.action == "rm":
        if args.name is None:
            js.delete_object_store(args.bucket)
            out.write(f"bucket {args.bucket} deleted\n")
        else:
            store.delete(args.name)
            out.write(f"object {args.name} in {args.bucket} deleted\n")
    elif args.name is None:
        status = store.status()
        out.write(
            json.dumps(
                {
                    "bucket": status.bucket,
                    "description": status.description,
                    "ttl": status.ttl,
                    "storage": status.storage,
                    "replicas": status.replicas,
                    "sealed": status.sealed,
                    "size": status.size,
                },
                indent=2,
                sort_keys=True,
            )
            + "\n"
        )
    else:
        out.write(_json(store.get_info(args.name)) + "\n")


def _put(js: JetStream, args: argparse.Namespace, out: TextIO) -> None:
    name = args.name or ("stdin" if args.file == "-" else os.path.basename(args.file))
    try:
        store = js.object_store(args.bucket)
    except BucketNotFoundError:
        store = js.create_object_store(args.bucket)
    if args.file == "-":
        info = store.put(name, sys.stdin.buffer, description=args.description)
    else:
        with open(args.file, "rb") as source:
            info = store.put(name, source, description=args.description)
    out.write(
        f"stored {info.name} in {args.bucket}: {info.size} bytes in "
        f"{info.chunks} chunks, {info.digest}\n"
    )


def _link(js: JetStream, args: argparse.Namespace, out: TextIO) -> None:
    store = js.object_store(args.bucket)
    target = js.object_store(args.target_bucket)
    if args.target_name is None:
        info = store.add_bucket_link(args.name, target)
    else:
        info = store.add_link(args.name, target.get_info(args.target_name))
    link = (info.options or {}).get("link")
    out.write(f"link {info.name} in {args.bucket} to {_link_text(link)}\n")


def _link_text(link: Any) -> str:
    """A link's target: ``object NAME in BUCKET``, or ``bucket BUCKET``."""
    if not isinstance(link, dict):
        return str(link)
    if link.get("name"):
        return f"object {link['name']} in {link.get('bucket')}"
    return f"bucket {link.get('bucket')}"


def _json(info: ObjectInfo) -> str:
    body = info.to_api()
    if info.mtime is not None:
        body["mtime"] = info.mtime.isoformat()
    return json.dumps(
        body,
        indent=2,
        sort_keys=True,
        default=lambda v: v.isoformat() if isinstance(v, datetime) else str(v),
    )

"""The ``nats-sync`` command line (also ``python -m nats_sync``).

How it works: argparse picks a sub-command; each one connects one client on the main
thread and uses only the public API. Callback threads (``reply``) belong to that
client. Errors print one line on stderr and exit with 1; Ctrl-C drains the client and
exits with 0 (``sub``/``reply``/``server`` are meant to be stopped that way).
"""

from __future__ import annotations

import argparse
import signal
import ssl
import statistics
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any, TextIO

import nats_sync
from nats_sync._cli import _defaults as cd
from nats_sync._cli import jetstream as _cli_jetstream
from nats_sync._cli import micro as _cli_micro
from nats_sync._cli import pcgroups as _cli_pcgroups
from nats_sync._cli import server as _cli_server
from nats_sync._cli import sys as _cli_sys
from nats_sync._cli import trace as _cli_trace
from nats_sync._defaults import DEFAULT_URL
from nats_sync._version import __version__
from nats_sync.errors import (
    BadSubscriptionError,
    ConnectionClosedError,
    Error,
    InvalidArgumentError,
    TimeoutError,
)
from nats_sync.jetstream import PubAck
from nats_sync.msg import Msg

_PROGRESS_WIDTH = 30


def _add_global_options(parser: argparse.ArgumentParser, *, with_defaults: bool) -> None:
    """Adds the connection options, which are accepted before and after the command.

    Args:
        parser: the top-level parser or one command's parser.
        with_defaults: True for the top-level parser only. A command's parser must leave
            an option it was not given out of the namespace (``SUPPRESS``): argparse
            copies every value a command's parser sets over the top-level ones, so a
            default there would undo ``--timeout 5 req ...``. Given on both sides, the
            value after the command wins, as with any repeated option.
    """
    # None: connect() picks $NATS_URL, the nats context, or the default URL.
    url_default = None if with_defaults else argparse.SUPPRESS
    timeout_default: Any = cd.CLI_TIMEOUT if with_defaults else argparse.SUPPRESS
    other_default: Any = None if with_defaults else argparse.SUPPRESS
    group = parser.add_argument_group("connection options (before or after the command)")
    # The help texts spell the defaults out: %(default)s would print ==SUPPRESS== in a
    # command's --help.
    group.add_argument(
        "-s",
        "--server",
        default=url_default,
        help="server URL(s), commas between (default: $NATS_URL, else the "
        f"nats context's url, else {DEFAULT_URL})",
    )
    group.add_argument(
        "--context",
        default=other_default,
        help="nats CLI context to use (default: $NATS_CONTEXT or the "
        "selected one, unless --server or $NATS_URL is given)",
    )
    group.add_argument("--creds", default=other_default, help=".creds file (JWT and nkey seed)")
    group.add_argument("--user", default=other_default, help="user name")
    group.add_argument("--password", default=other_default, help="password")
    group.add_argument("--token", default=other_default, help="authentication token")
    group.add_argument(
        "--tls-ca", default=other_default, help="CA file to verify the server's certificate"
    )
    group.add_argument(
        "--timeout",
        type=float,
        default=timeout_default,
        help=f"seconds for connect and requests (default {cd.CLI_TIMEOUT})",
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nats-sync",
        description="Publish, subscribe, request, manage JetStream and benchmark with NATS.",
    )
    parser.add_argument("--version", action="version", version=f"nats-sync {__version__}")
    _add_global_options(parser, with_defaults=True)
    commands = parser.add_subparsers(dest="cmd", required=True, metavar="COMMAND")

    pub = commands.add_parser("pub", help="publish a message (or --count of them)")
    pub.add_argument("subject")
    pub.add_argument("data", nargs="?", default="", help="payload ({n} becomes the count)")
    pub.add_argument("--count", type=int, default=1)
    pub.add_argument("--header", action="append", default=[], metavar="K:V")
    pub.add_argument("--reply", default="", help="reply subject")
    pub.add_argument(
        "--js",
        action="store_true",
        help="publish to a JetStream stream and print each ack (stream, seq)",
    )
    pub.add_argument(
        "--msg-id",
        default=None,
        help="with --js: Nats-Msg-Id for de-duplication ({n} becomes the count)",
    )
    _cli_jetstream.add_pub_options(pub)
    pub.add_argument(
        "--fast",
        action="store_true",
        help="with --js: one fast-ingest batch (ADR-50), print its final ack",
    )

    sub = commands.add_parser("sub", help="print messages as they arrive")
    sub.add_argument("subject")
    sub.add_argument("--queue", default="")
    sub.add_argument("--count", type=int, default=0, help="stop after N messages")

    req = commands.add_parser("req", help="send a request and print the reply (or replies)")
    req.add_argument("subject")
    req.add_argument("data", nargs="?", default="")
    req.add_argument("--header", action="append", default=[], metavar="K:V")
    req.add_argument(
        "--replies",
        type=int,
        metavar="N",
        help="gather up to N replies (request_many) until --timeout",
    )
    req.add_argument(
        "--stall",
        type=float,
        metavar="S",
        help="gather replies until none came for S seconds after one did",
    )

    reply = commands.add_parser("reply", help="answer requests")
    reply.add_argument("subject")
    mode = reply.add_mutually_exclusive_group()
    mode.add_argument("--echo", action="store_true", help="answer with the request (default)")
    mode.add_argument("--command", help="run CMD with the request on stdin, answer its stdout")
    reply.add_argument("--queue", default="", help="queue group (default: none)")
    reply.add_argument("--count", type=int, default=0, help="stop after N requests")

    bench = commands.add_parser("bench", help="publish, pub->sub and request figures")
    bench.add_argument("--msgs", type=int, default=100_000, help="messages (default %(default)s)")
    bench.add_argument("--size", type=int, default=128, help="payload bytes (default %(default)s)")
    bench.add_argument(
        "--requests", type=int, default=5_000, help="sequential requests (default %(default)s)"
    )

    _cli_server.add_parser(commands)
    _cli_trace.add_parser(commands)
    for command in commands.choices.values():
        _add_global_options(command, with_defaults=False)
    # Added after the loop: they put the options on their own actions' parsers too.
    _cli_jetstream.add_parsers(
        commands, lambda parser: _add_global_options(parser, with_defaults=False)
    )
    _cli_micro.add_parsers(
        commands, lambda parser: _add_global_options(parser, with_defaults=False)
    )
    _cli_sys.add_parsers(commands, lambda parser: _add_global_options(parser, with_defaults=False))
    _cli_pcgroups.add_parsers(
        commands, lambda parser: _add_global_options(parser, with_defaults=False)
    )
    return parser


def _headers(pairs: Sequence[str]) -> dict[str, list[str]] | None:
    headers: dict[str, list[str]] = {}
    for pair in pairs:
        key, sep, value = pair.partition(":")
        if not sep or not key.strip():
            raise InvalidArgumentError(f"--header takes KEY:VALUE, got {pair!r}")
        headers.setdefault(key.strip(), []).append(value.strip())
    return headers or None


def _connect(args: argparse.Namespace) -> nats_sync.Client:
    options: dict[str, Any] = {"connect_timeout": args.timeout, "name": "nats-sync cli"}
    if args.creds:
        options["user_credentials"] = args.creds
    if args.user:
        options["user"] = args.user
        options["password"] = args.password
    if args.token:
        options["token"] = args.token
    if args.tls_ca:
        options["tls"] = ssl.create_default_context(cafile=args.tls_ca)
    return nats_sync.connect(args.server, context=args.context, **options)


def _show(msg: Msg, out: TextIO) -> None:
    reply = f" (reply to {msg.reply})" if msg.reply else ""
    out.write(f"[{msg.subject}]{reply}\n")
    for key, value in (msg.headers or {}).items():
        for item in value if isinstance(value, list) else [value]:
            out.write(f"  {key}: {item}\n")
    out.write(msg.data.decode(errors="replace") + "\n")
    out.flush()


def _cmd_pub(args: argparse.Namespace, out: TextIO) -> None:
    headers = _headers(args.header)
    if args.js and args.reply:
        raise InvalidArgumentError(
            "--reply does not go with --js: the stream answers a JetStream publish"
        )
    if args.msg_id is not None and not args.js:
        raise InvalidArgumentError("--msg-id needs --js")
    if args.ttl is not None and not args.js:
        raise InvalidArgumentError("--ttl needs --js")
    if args.atomic and not args.js:
        raise InvalidArgumentError("--atomic needs --js")
    if args.fast and not args.js:
        raise InvalidArgumentError("--fast needs --js")
    if args.fast and args.atomic:
        raise InvalidArgumentError("--fast and --atomic are two kinds of batch: pick one")
    _cli_jetstream.check_schedule_options(args)
    with _connect(args) as nc:
        if args.schedule is not None:
            _cli_jetstream.publish_scheduled(nc, args, headers, out)
        elif args.atomic:
            _cli_jetstream.publish_atomic(nc, args, headers, out)
        elif args.fast:
            _cli_jetstream.publish_fast(nc, args, headers, out)
        elif args.js:
            _publish_acked(nc, args, headers, out)
        else:
            for n in range(1, args.count + 1):
                data = args.data.replace("{n}", str(n)).encode()
                nc.publish(args.subject, data, reply=args.reply, headers=headers)
            nc.flush(timeout=max(args.timeout, 10.0))
    out.write(f"published {args.count} message(s) to {args.subject!r}\n")


def _publish_acked(
    nc: nats_sync.Client,
    args: argparse.Namespace,
    headers: dict[str, list[str]] | None,
    out: TextIO,
) -> None:
    """``pub --js``: publish_async, printing the acks in order; the first error ends it."""
    js = nc.jetstream(timeout=args.timeout)
    awaited: deque[Future[PubAck]] = deque()

    def show(ack: PubAck) -> None:
        duplicate = "\tduplicate" if ack.duplicate else ""
        out.write(f"{ack.stream}\tseq {ack.seq}{duplicate}\n")

    for n in range(1, args.count + 1):
        if len(awaited) >= cd.CLI_JS_PUBLISH_WINDOW:  # stay below max_pending_acks: never stall
            show(awaited.popleft().result())
        msg_id = args.msg_id.replace("{n}", str(n)) if args.msg_id is not None else None
        awaited.append(
            js.publish_async(
                args.subject,
                args.data.replace("{n}", str(n)).encode(),
                headers=headers,
                msg_id=msg_id,
                ttl=args.ttl,
            )
        )
    while awaited:
        show(awaited.popleft().result())
    out.flush()


#: How often the commands that run until Ctrl-C look whether it came.
_INTERRUPT_POLL = 0.2


class _CtrlC:
    """Ctrl-C for the commands that run until interrupted (``sub``, ``reply``), as a flag.

    Why not KeyboardInterrupt: Python raises it at whichever bytecode the main thread is
    on when SIGINT arrives, and some of those, inside ``threading.Condition.wait`` (under
    ``Event.wait`` and a subscription's queue) between the wait and the lock's restore,
    leave the lock released: the ``with`` around it then raises ``RuntimeError: release
    unlocked lock``, or a later wait hangs. Where a signal can land differs between Python
    versions (the interpreter checks for it at different instructions), so Ctrl-C just
    after start failed on 3.10, 3.12 and 3.13 and not on 3.11. The handler only sets
    ``pressed``; the loops look at it every ``_INTERRUPT_POLL`` seconds and then drain or
    close. A second Ctrl-C (a user tired of waiting for the drain) raises
    KeyboardInterrupt as usual.
    """

    def __init__(self) -> None:
        self.pressed = False
        self._previous: Any = None

    def __enter__(self) -> _CtrlC:
        # signal.signal works on the main thread only; main() called from another thread
        # (a test, an embedding program) keeps the default behaviour.
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)

    def _handle(self, signum: int, frame: object) -> None:
        if self.pressed:
            raise KeyboardInterrupt
        self.pressed = True


def _until_interrupted(nc: nats_sync.Client, done: threading.Event, ctrl_c: _CtrlC) -> None:
    try:
        while not ctrl_c.pressed and not done.wait(_INTERRUPT_POLL):
            pass
    except KeyboardInterrupt:  # not on the main thread (no _CtrlC handler) or pressed twice
        pass
    finally:
        if not nc.is_closed:
            nc.drain(timeout=5.0)


def _cmd_sub(args: argparse.Namespace, out: TextIO) -> None:
    nc = _connect(args)
    try:
        sub = nc.subscribe(args.subject, queue=args.queue, max_msgs=args.count)
        nc.flush()
        # Installed before the ready line: a Ctrl-C from then on only sets the flag.
        with _CtrlC() as ctrl_c:
            out.write(f"listening on {args.subject!r}\n")
            out.flush()
            while not ctrl_c.pressed:
                try:
                    msg = sub.next_msg(timeout=_INTERRUPT_POLL)
                except TimeoutError:
                    continue
                except (BadSubscriptionError, ConnectionClosedError):
                    break  # max_msgs reached, or the connection is gone for good
                _show(msg, out)
    except KeyboardInterrupt:  # before the ready line, or pressed twice
        pass
    finally:
        nc.close()


def _cmd_req(args: argparse.Namespace, out: TextIO) -> None:
    if args.replies is not None or args.stall is not None:
        _gather_replies(args, out)
        return
    with _connect(args) as nc:
        started = time.perf_counter()
        msg = nc.request(
            args.subject, args.data.encode(), timeout=args.timeout, headers=_headers(args.header)
        )
        elapsed = time.perf_counter() - started
        _show(msg, out)
        out.write(f"(reply in {elapsed * 1000:.2f} ms)\n")


def _gather_replies(args: argparse.Namespace, out: TextIO) -> None:
    """``req --replies N`` / ``--stall S``: one request, every reply printed as it comes."""
    if args.replies is not None and args.replies < 1:
        raise InvalidArgumentError(f"--replies must be 1 or more, got {args.replies}")
    if args.stall is not None and not args.stall > 0:
        raise InvalidArgumentError(f"--stall must be more than 0 seconds, got {args.stall}")
    with _connect(args) as nc:
        started = time.perf_counter()
        count = 0
        for msg in nc.request_many(
            args.subject,
            args.data.encode(),
            timeout=args.timeout,
            headers=_headers(args.header),
            max_messages=args.replies,
            stall=args.stall,
        ):
            count += 1
            _show(msg, out)
            out.flush()
        if not count:
            raise TimeoutError(f"no reply on {args.subject!r} within {args.timeout}s")
        elapsed = time.perf_counter() - started
        out.write(f"({count} replies in {elapsed * 1000:.2f} ms)\n")


def _run_command(command: str, data: bytes) -> bytes:
    done = subprocess.run(
        command, shell=True, input=data, capture_output=True, timeout=30, check=False
    )
    if done.returncode != 0:
        raise Error(
            f"--command exited with {done.returncode}: "
            f"{done.stderr.decode(errors='replace').strip()[:200]}"
        )
    return done.stdout


def _cmd_reply(args: argparse.Namespace, out: TextIO) -> None:
    nc = _connect(args)
    done = threading.Event()
    answered = [0]

    def answer(msg: Msg) -> None:
        try:
            data = _run_command(args.command, msg.data) if args.command else msg.data
        except (Error, subprocess.SubprocessError) as err:
            out.write(f"nats-sync: {err}\n")
            msg.respond(b"", headers={"Nats-Service-Error": str(err)[:200]})
        else:
            msg.respond(data)
        answered[0] += 1
        if args.count and answered[0] >= args.count:
            done.set()

    nc.subscribe(args.subject, queue=args.queue, cb=answer)
    nc.flush()
    with _CtrlC() as ctrl_c:  # before the ready line, as in _cmd_sub
        out.write(f"answering requests on {args.subject!r}\n")
        out.flush()
        _until_interrupted(nc, done, ctrl_c)


def _progress(label: str, done: int, total: int, out: TextIO) -> None:
    filled = _PROGRESS_WIDTH * done // max(total, 1)
    out.write(
        f"\r{label:<10} [{'#' * filled}{'.' * (_PROGRESS_WIDTH - filled)}] {done:,}/{total:,}"
    )
    if done >= total:
        out.write("\n")
    out.flush()


def _cmd_bench(args: argparse.Namespace, out: TextIO) -> None:
    payload = b"x" * args.size
    step = max(args.msgs // 20, 1)
    rows: list[tuple[str, str]] = []
    with _connect(args) as nc, _connect(args) as receiver:
        started = time.perf_counter()
        for n in range(1, args.msgs + 1):
            nc.publish("nats-sync.bench.pub", payload)
            if n % step == 0 or n == args.msgs:
                _progress("publish", n, args.msgs, out)
        nc.flush(timeout=60)
        rate = args.msgs / (time.perf_counter() - started)
        rows.append(("publish", f"{rate:,.0f} msgs/s"))

        sub = receiver.subscribe(
            "nats-sync.bench.sub",
            pending_msgs_limit=args.msgs + 1,
            pending_bytes_limit=max(args.msgs * (args.size + 64), 1 << 20),
        )
        receiver.flush()
        started = time.perf_counter()
        for _ in range(args.msgs):
            nc.publish("nats-sync.bench.sub", payload)
        nc.flush(timeout=60)
        for n in range(1, args.msgs + 1):
            sub.next_msg(timeout=10)
            if n % step == 0 or n == args.msgs:
                _progress("pub->sub", n, args.msgs, out)
        rate = args.msgs / (time.perf_counter() - started)
        rows.append(("pub -> sub", f"{rate:,.0f} msgs/s received, {sub.dropped} dropped"))

        receiver.subscribe("nats-sync.bench.echo", cb=lambda msg: msg.respond(msg.data))
        receiver.flush()
        latencies: list[float] = []
        req_step = max(args.requests // 20, 1)
        for n in range(1, args.requests + 1):
            begun = time.perf_counter()
            nc.request("nats-sync.bench.echo", payload, timeout=args.timeout)
            latencies.append(time.perf_counter() - begun)
            if n % req_step == 0 or n == args.requests:
                _progress("request", n, args.requests, out)
        cuts = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else latencies * 99
        rows.append(("request", f"p50 {cuts[49] * 1e6:,.0f} us, p99 {cuts[98] * 1e6:,.0f} us"))
    out.write(f"\n{'scenario':<12} result ({args.size} B payloads)\n")
    for name, result in rows:
        out.write(f"{name:<12} {result}\n")


_COMMANDS: dict[str, Callable[[argparse.Namespace, TextIO], None]] = {
    "pub": _cmd_pub,
    "sub": _cmd_sub,
    "req": _cmd_req,
    "reply": _cmd_reply,
    "bench": _cmd_bench,
    "server": _cli_server.run,
    **_cli_jetstream.handlers(_connect),
    **_cli_micro.handlers(_connect),
    **_cli_trace.handlers(_connect),
    **_cli_sys.handlers(_connect),
    **_cli_pcgroups.handlers(_connect),
}


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line; returns the exit status.

    Args:
        argv: the arguments (default: ``sys.argv[1:]``).
    """
    args = _parser().parse_args(argv)
    try:
        _COMMANDS[args.cmd](args, sys.stdout)
    except Error as err:
        sys.stderr.write(f"nats-sync: {err}\n")
        return 1
    except OSError as err:  # e.g. no server binary, an unreadable file
        sys.stderr.write(f"nats-sync: {err}\n")
        return 1
    except KeyboardInterrupt:
        return 0
    return 0

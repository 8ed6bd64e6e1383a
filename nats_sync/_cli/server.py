"""The command line's ``server``: the nats-server the README and the guides connect to.

How it works: ``cli`` adds this parser and its handler. The handler runs the binary of the
``server`` extra through `nats_sync.testing.NatsServer` on 127.0.0.1:4222 (the URL every
guide writes; ``--port 0`` for a free one) with JetStream, its store in the server's
temporary work folder unless ``--store-dir`` names one to keep. It prints the URL and the
store, then waits on the main thread until Ctrl-C, SIGTERM or SIGHUP, stops the server
gracefully (SIGTERM) and removes the work folder. A server that cannot start (a port in
use) is one line on stderr from ``cli.main``, not a traceback.
"""

from __future__ import annotations

import argparse
import re
import signal
import threading
import time
from pathlib import Path
from typing import Any, TextIO

from nats_sync._defaults import DEFAULT_PORT
from nats_sync.errors import InvalidArgumentError
from nats_sync.testing import NatsServer

#: How often the waiting loop looks whether the server is still alive.
_ALIVE_POLL = 0.2
#: A line of a configuration file that sets JetStream up (``jetstream { ... }``,
#: ``jetstream: enabled``): such a file decides about JetStream and its store itself.
_CONFIG_JETSTREAM = re.compile(r"^\s*jetstream\b", re.MULTILINE | re.IGNORECASE)
#: What nats-server logs when its client port is taken.
_PORT_IN_USE = "address already in use"


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port (0 to 65535; 0: a free one)")
    return port


def add_parser(commands: Any) -> argparse.ArgumentParser:
    """Adds ``server`` to the command parsers; returns its parser."""
    server: argparse.ArgumentParser = commands.add_parser(
        "server",
        help="run a local nats-server with JetStream (127.0.0.1:4222)",
        description="Runs a nats-server (the binary of the server extra) on 127.0.0.1 for "
        "local work, with JetStream, until Ctrl-C. It prints the URL it serves "
        "and where the JetStream store is.",
    )
    server.add_argument(
        "--port",
        type=_port,
        default=DEFAULT_PORT,
        help=f"client port (default {DEFAULT_PORT}, the docs' URL; "
        "0: a free one, printed at start)",
    )
    jetstream = server.add_mutually_exclusive_group()
    jetstream.add_argument(
        "--no-jetstream",
        dest="jetstream",
        action="store_false",
        help="run without JetStream (core NATS only)",
    )
    jetstream.add_argument(
        "--store-dir",
        default=None,
        metavar="DIR",
        help="keep the JetStream store in DIR (reused at the next "
        "start; default: a temporary folder removed at exit)",
    )
    server.add_argument(
        "--config",
        help="nats-server configuration file (--port still "
        "sets the port; a jetstream block in it decides "
        "about JetStream unless --store-dir is given)",
    )
    return server


def _new_server(args: argparse.Namespace) -> tuple[NatsServer, str]:
    """The server the options ask for, and the line that says where its store is."""
    config = None
    if args.config:
        with open(args.config) as file:
            config = file.read()
    port = args.port or None  # 0: NatsServer lets nats-server pick a free port
    configured = config is not None and _CONFIG_JETSTREAM.search(config) is not None
    if not args.jetstream:
        if configured:
            raise InvalidArgumentError(
                f"--no-jetstream: {args.config} sets JetStream up "
                "itself; remove its jetstream block instead"
            )
        return NatsServer(port=port, config=config), "JetStream: off (--no-jetstream)"
    if configured and args.store_dir is None:
        # Its store_dir, if any, must not be overridden by a temporary one (-sd would).
        return (
            NatsServer(port=port, config=config),
            f"JetStream: as {args.config} sets it (store included)",
        )
    if args.store_dir is not None:
        store = Path(args.store_dir).expanduser()
        if store.exists() and not store.is_dir():
            raise InvalidArgumentError(f"--store-dir {args.store_dir}: not a folder")
        server = NatsServer(port=port, config=config, jetstream=True, store_dir=store)
        return server, f"JetStream store: {server.store_dir} (kept)"
    server = NatsServer(port=port, config=config, jetstream=True)
    return server, (
        f"JetStream store: {server.store_dir} (removed at exit; --store-dir DIR keeps it)"
    )


def _start(server: NatsServer, requested_port: int) -> None:
    """Starts ``server``; a failure becomes one line (an `OSError`, which ``cli.main``
    prints without the ``nats: error:`` of a client error), the port named."""
    try:
        server.start()
    except RuntimeError as err:
        log = server.log_text()
        if _PORT_IN_USE in log:
            raise OSError(
                f"port {requested_port} on {server.host} is in use (a nats-server already "
                "running there?): use that server, stop it, or give another port with "
                "--port N (--port 0: a free one)"
            ) from None
        fatal = [line for line in log.splitlines() if "[FTL]" in line or "[ERR]" in line]
        reason = fatal[-1].split("]", 2)[-1].strip() if fatal else str(err).splitlines()[0]
        raise OSError(f"nats-server did not start: {reason}") from None


def _raise_keyboard_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def run(args: argparse.Namespace, out: TextIO) -> None:
    """``nats-sync server``: runs until Ctrl-C, SIGTERM or SIGHUP (then exits with 0)."""
    server, store_line = _new_server(args)
    # A service manager or a test stops it with SIGTERM, a closed terminal with SIGHUP
    # (which nats-server alone would take as "reload" and outlive): all stop as Ctrl-C.
    previous: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():  # signal.signal's rule
        for name in ("SIGTERM", "SIGHUP"):  # no SIGHUP on Windows
            if hasattr(signal, name):
                signum = getattr(signal, name)
                previous[signum] = signal.signal(signum, _raise_keyboard_interrupt)
    try:
        _start(server, args.port)
        out.write(f"nats-server running at {server.url} (Ctrl-C to stop)\n")
        if server.port != DEFAULT_PORT:
            out.write(
                f"not the default port: give clients -s {server.url} or NATS_URL={server.url}\n"
            )
        out.write(store_line + "\n")
        out.flush()
        try:
            while server.is_running:
                time.sleep(_ALIVE_POLL)
        except KeyboardInterrupt:
            return  # Ctrl-C reaches nats-server too (same process group): both stop
        raise OSError("nats-server exited:\n" + server.log_tail())
    finally:
        try:
            server.stop()  # gracefully: a kept store is closed cleanly
        finally:
            server.cleanup()
            for signum, handler in previous.items():
                signal.signal(signum, handler)

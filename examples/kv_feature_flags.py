"""A WSGI app whose feature flags live in a NATS key-value bucket and change live.

Each worker process keeps the flags in memory, filled and kept current by a KV watcher
running on one thread of its own: a request reads a dict (no network), and a flag set
with ``nats-sync kv put flags dark_mode on`` reaches every worker within milliseconds.
``/flags/<name>?fresh=1`` reads the bucket instead (``kv.get``).

Run it (an embedded nats-server with JetStream unless --server is given):
    python examples/kv_feature_flags.py [--server nats://127.0.0.1:4222] [--port 8000]
then: curl http://127.0.0.1:8000/       and   nats-sync kv put flags dark_mode on
``--demo`` serves on a free port, flips a flag and shows the page change, then exits.
"""

from __future__ import annotations

import argparse
import os
import threading
import time
import urllib.request
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import Any
from urllib.parse import parse_qs
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import nats_sync
from nats_sync.jetstream import KeyNotFoundError, KeyValue, KeyWatcher
from nats_sync.testing import server_url

BUCKET = "flags"
StartResponse = Callable[[str, list[tuple[str, str]]], Any]


class FeatureFlags:
    """The bucket's flags in memory, kept current by a watcher on a thread of its own."""

    def __init__(self, kv: KeyValue) -> None:
        self.kv = kv
        self._flags: dict[str, str] = {}
        self._lock = threading.Lock()
        self._loaded = threading.Event()
        self._watcher: KeyWatcher = kv.watch_all()
        self._thread = threading.Thread(target=self._follow, name="feature-flags", daemon=True)
        self._thread.start()
        self._loaded.wait(5)  # serve with the flags as they are now

    def _follow(self) -> None:
        while True:
            try:
                entry = self._watcher.updates(timeout=None)
            except nats_sync.ConnectionClosedError:
                return  # stopped, or the client closed
            if entry is None:  # the end of the current values
                self._loaded.set()
                continue
            with self._lock:
                if entry.operation == "PUT":
                    self._flags[entry.key] = entry.value.decode()
                else:
                    self._flags.pop(entry.key, None)

    def get(self, name: str, default: str = "off") -> str:
        """The flag's value as last seen (no network)."""
        with self._lock:
            return self._flags.get(name, default)

    def stop(self) -> None:
        """Ends the watch and its thread."""
        self._watcher.stop()
        self._thread.join(5)


#: This process's FeatureFlags, under "flags" once made.
_made: dict[str, FeatureFlags] = {}
_made_lock = threading.Lock()


def flags() -> FeatureFlags:
    """This process's flags (made on first use, so pre-fork servers are safe)."""
    with _made_lock:
        if "flags" not in _made:
            nc = nats_sync.process_client(
                os.environ.get("NATS_URL", "nats://127.0.0.1:4222"), name=f"flags-{os.getpid()}"
            )
            js = nc.jetstream()
            _made["flags"] = FeatureFlags(js.create_key_value(bucket=BUCKET, history=5))
        return _made["flags"]


def app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
    """``/`` -> a page styled by ``dark_mode``; ``/flags/<name>`` -> the flag's value."""
    path = environ.get("PATH_INFO", "/")
    current = flags()
    if path.startswith("/flags/"):
        name = path.removeprefix("/flags/")
        fresh = parse_qs(environ.get("QUERY_STRING", "")).get("fresh") == ["1"]
        try:
            value = current.kv.get(name).value.decode() if fresh else current.get(name)
        except KeyNotFoundError:
            value = "off"
        except ValueError:  # not a valid key name
            start_response("400 Bad Request", [("Content-Type", "text/plain")])
            return [b"bad flag name\n"]
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [value.encode() + b"\n"]
    if path != "/":
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [b"try / or /flags/dark_mode\n"]
    theme = "dark" if current.get("dark_mode") == "on" else "light"
    start_response("200 OK", [("Content-Type", "text/html")])
    return [f"<html><body class='{theme}'>Hello in {theme} mode</body></html>\n".encode()]


class ThreadingWSGIServer(ThreadingMixIn, WSGIServer):
    """wsgiref's server, one thread per HTTP request."""

    daemon_threads = True


class QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def demo(port: int) -> None:
    """Flips ``dark_mode`` and shows the page follow it."""

    def page() -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as reply:
            return str(reply.read().decode().strip())

    print("before:", page())
    kv = flags().kv
    revision = kv.put("dark_mode", b"on")
    print(f"put dark_mode=on (revision {revision})")
    deadline = time.monotonic() + 5
    while "dark mode" not in page() and time.monotonic() < deadline:
        time.sleep(0.01)
    print("after:", page())
    kv.delete("dark_mode")
    while "light mode" not in page() and time.monotonic() < deadline:
        time.sleep(0.01)
    print("after delete:", page())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", help="NATS URL (default: an embedded server)")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--demo", action="store_true", help="flip a flag and exit")
    args = parser.parse_args()
    with server_url(args.server, jetstream=True) as url:
        os.environ["NATS_URL"] = url
        port = 0 if args.demo else args.port
        httpd = make_server("127.0.0.1", port, app, ThreadingWSGIServer, QuietHandler)
        serving = threading.Thread(target=httpd.serve_forever, name="http", daemon=True)
        serving.start()
        print(f"serving http://127.0.0.1:{httpd.server_port}/ (NATS at {url})")
        try:
            if args.demo:
                demo(httpd.server_port)
            else:
                serving.join()
        except KeyboardInterrupt:
            pass
        finally:
            httpd.shutdown()
            httpd.server_close()
            if "flags" in _made:
                _made["flags"].stop()


if __name__ == "__main__":
    main()

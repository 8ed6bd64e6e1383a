"""The WSGI app of the ``wsgi_t16`` case, served by gunicorn (see ``wsgi_bench.py``).

How it works: gunicorn imports ``benchmarks.wsgi_app:app`` in its worker process (no
``--preload``, so the import, and the client made by it, happen after the fork). The
environment chooses what each HTTP request does:

- ``BENCH_WSGI_VARIANT=nats_sync``: one ``request`` to the raw echo responder on one
  module-level ``nats_sync`` client, which all gunicorn threads share;
- ``BENCH_WSGI_VARIANT=nats-py``: the same request with nats-py, run on an event loop
  that a background thread owns, each gunicorn thread handing its coroutine over with
  ``asyncio.run_coroutine_threadsafe`` and blocking on the future (the glue a WSGI app
  writes to call an asyncio client);
- ``BENCH_WSGI_VARIANT=none``: no NATS call at all (the app's ceiling).

``BENCH_NATS_URL`` is the server, ``BENCH_WSGI_SIZE`` the request's payload size. The
echo's reply is checked against the payload: a wrong or missing reply answers 500, which
the load generator counts. ``GET /pid`` answers the worker's pid (the driver takes that
process's CPU, and uses it as the readiness probe).
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable, Iterable
from typing import Any

from benchmarks import common as c

VARIANT = os.environ.get("BENCH_WSGI_VARIANT", "none")
URL = os.environ.get("BENCH_NATS_URL", "nats://127.0.0.1:4222")
PAYLOAD = c.payload(int(os.environ.get("BENCH_WSGI_SIZE", "64")))
#: The body of a good answer; the same few bytes for every variant.
OK_BODY = b"ok\n"

StartResponse = Callable[[str, list[tuple[str, str]]], Any]


def _sync_caller() -> Callable[[], bytes]:
    import nats_sync  # noqa: PLC0415 - each variant imports its own library only

    client = nats_sync.connect(URL)

    def call() -> bytes:
        return client.request(c.ECHO_SUBJECT, PAYLOAD, timeout=c.REQUEST_TIMEOUT).data

    return call


def _natspy_caller() -> Callable[[], bytes]:
    import nats  # noqa: PLC0415 - each variant imports its own library only

    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, name="nats-py loop", daemon=True).start()

    async def ignore(error: Exception) -> None:
        pass

    client = asyncio.run_coroutine_threadsafe(nats.connect(URL, error_cb=ignore), loop).result(
        c.REQUEST_TIMEOUT
    )

    def call() -> bytes:
        future = asyncio.run_coroutine_threadsafe(
            client.request(c.ECHO_SUBJECT, PAYLOAD, timeout=c.REQUEST_TIMEOUT), loop
        )
        reply: bytes = future.result(c.REQUEST_TIMEOUT + 1).data
        return reply

    return call


def _no_call() -> Callable[[], bytes]:
    return lambda: PAYLOAD


CALLERS: dict[str, Callable[[], Callable[[], bytes]]] = {
    "nats_sync": _sync_caller,
    "nats-py": _natspy_caller,
    "none": _no_call,
}
if VARIANT not in CALLERS:
    raise SystemExit(f"BENCH_WSGI_VARIANT must be one of {sorted(CALLERS)}, not {VARIANT!r}")
call_nats = CALLERS[VARIANT]()


def app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
    """One HTTP request: one NATS request (or none), its reply checked."""
    if environ.get("PATH_INFO") == "/pid":
        body = str(os.getpid()).encode()
        status = "200 OK"
    else:
        try:
            good = call_nats() == PAYLOAD
        except Exception:  # any failure is one failed HTTP request, counted by ab
            good = False
        body, status = (OK_BODY, "200 OK") if good else (b"bad reply\n", "500 Bad Reply")
    start_response(status, [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]

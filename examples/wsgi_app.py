"""A WSGI app that answers HTTP requests through NATS request-reply.

Each worker process makes its own client on first use (``nats_sync.process_client``),
so the app is safe under pre-fork servers (gunicorn ``--preload``, uWSGI) and under
threaded ones; nothing connects at import time.

Run it with the standard library's server (and an embedded nats-server plus a small
price service, unless --server is given):
    python examples/wsgi_app.py [--server nats://127.0.0.1:4222] [--port 8000]
then: curl 'http://127.0.0.1:8000/price?sku=sku-7'
Under gunicorn: NATS_URL=nats://... gunicorn --preload -w 4 'wsgi_app:app'
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import Any
from urllib.parse import parse_qs
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import nats_sync
from nats_sync import micro
from nats_sync.testing import server_url

PRICE_SUBJECT = "prices.lookup"
StartResponse = Callable[[str, list[tuple[str, str]]], Any]


def app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
    """GET /price?sku=... -> the price service's JSON answer (504 on timeout)."""
    if environ.get("PATH_INFO") != "/price":
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [b"try /price?sku=sku-1\n"]
    sku = parse_qs(environ.get("QUERY_STRING", "")).get("sku", [""])[0]
    nc = nats_sync.process_client(
        os.environ.get("NATS_URL", "nats://127.0.0.1:4222"), name=f"wsgi-{os.getpid()}"
    )
    try:
        reply = nc.request(PRICE_SUBJECT, sku.encode(), timeout=1.0)
    except nats_sync.NoRespondersError:
        start_response("503 Service Unavailable", [("Content-Type", "text/plain")])
        return [b"no price service is running\n"]
    except nats_sync.TimeoutError:
        start_response("504 Gateway Timeout", [("Content-Type", "text/plain")])
        return [b"the price service did not answer in time\n"]
    start_response("200 OK", [("Content-Type", "application/json")])
    return [reply.data]


def start_price_service(url: str) -> nats_sync.Client:
    """A tiny NATS service (nats_sync.micro): the price of a SKU is derived from its number.

    Returns its client: draining or closing it ends the service.
    """
    nc = nats_sync.connect(url, name="price-service")

    def answer(req: micro.Request) -> None:
        sku = req.data.decode()
        digits = "".join(ch for ch in sku if ch.isdigit()) or "0"
        req.respond(json.dumps({"sku": sku, "price": int(digits) * 1.25}).encode())

    service = micro.add_service(nc, "prices", "1.0.0", queue_group="prices")
    service.add_endpoint("lookup", answer, subject=PRICE_SUBJECT, max_workers=2)
    return nc


class ThreadingWSGIServer(ThreadingMixIn, WSGIServer):
    """wsgiref's server, one thread per HTTP request."""

    daemon_threads = True


class QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", help="NATS URL (default: embedded server + price service)")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    with server_url(args.server) as url:
        os.environ["NATS_URL"] = url
        service = None if args.server else start_price_service(url)
        httpd = make_server("127.0.0.1", args.port, app, ThreadingWSGIServer, QuietHandler)
        print(f"serving http://127.0.0.1:{httpd.server_port}/price?sku=sku-7 (NATS at {url})")
        try:
            httpd.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            httpd.server_close()
            if service is not None:
                service.drain()


if __name__ == "__main__":
    main()

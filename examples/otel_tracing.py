"""A WSGI app and a micro service under one OpenTelemetry trace, printed to the console.

The app answers ``GET /price?sku=...`` by asking a price service over NATS; both clients
are instrumented (``nats_sync.otel.instrument``), so the HTTP request's span, the NATS
request's CLIENT span, the service's SERVER span and the database lookup it makes are
one trace. The spans are printed as JSON by the SDK's console exporter (needs the
``opentelemetry-sdk`` package; ``pip install 'nats-sync[otel]' opentelemetry-sdk``).

Run it (an embedded nats-server unless --server is given; it serves --requests HTTP
requests from a thread of its own, then exits):
    python examples/otel_tracing.py [--server nats://127.0.0.1:4222] [--requests 1]
"""

from __future__ import annotations

import argparse
import json
import threading
import urllib.request
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import parse_qs
from wsgiref.simple_server import WSGIRequestHandler, make_server

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor
from opentelemetry.trace import SpanKind

import nats_sync
from nats_sync import micro, otel
from nats_sync.testing import server_url

PRICES = {"sku-1": 250, "sku-7": 1999}
StartResponse = Callable[[str, list[tuple[str, str]]], Any]


def make_app(nc: nats_sync.Client) -> Callable[[dict[str, Any], StartResponse], Iterable[bytes]]:
    """The WSGI app: one SERVER span per HTTP request, around the NATS request."""
    tracer = trace.get_tracer("example.wsgi")

    def app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "/")
        with tracer.start_as_current_span(f"GET {path}", kind=SpanKind.SERVER):
            sku = parse_qs(environ.get("QUERY_STRING", "")).get("sku", [""])[0]
            try:
                reply = nc.request("prices.lookup", sku.encode(), timeout=2.0)
            except nats_sync.TimeoutError:
                start_response("504 Gateway Timeout", [("Content-Type", "text/plain")])
                return [b"the price service did not answer in time\n"]
            start_response("200 OK", [("Content-Type", "application/json")])
            return [reply.data]

    return app


def start_price_service(nc: nats_sync.Client) -> micro.Service:
    """The price service: its handler asks a "database" subscriber for the row."""
    nc.subscribe(
        "db.prices", cb=lambda msg: msg.respond(str(PRICES.get(msg.data.decode(), 0)).encode())
    )

    def lookup(req: micro.Request) -> None:
        row = nc.request("db.prices", req.data, timeout=2.0)
        req.respond(json.dumps({"sku": req.data.decode(), "cents": int(row.data)}).encode())

    svc = micro.add_service(nc, "prices", "1.0.0")
    svc.add_endpoint("lookup", lookup, subject="prices.lookup")
    return svc


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--server", help="a nats-server URL (default: an embedded one)")
    parser.add_argument("--requests", type=int, default=1, help="HTTP requests to make")
    args = parser.parse_args()

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter()))
    trace.set_tracer_provider(provider)

    with server_url(args.server) as url:
        service_nc = nats_sync.connect(url, name="price-service")
        web_nc = nats_sync.connect(url, name="web")
        for nc in (service_nc, web_nc):
            otel.instrument(nc)  # the global tracer provider set above
        svc = start_price_service(service_nc)
        service_nc.flush()
        httpd = make_server("127.0.0.1", 0, make_app(web_nc), handler_class=_QuietHandler)
        server = threading.Thread(target=httpd.serve_forever, daemon=True)
        server.start()
        try:
            for _ in range(args.requests):
                with urllib.request.urlopen(
                    f"http://127.0.0.1:{httpd.server_port}/price?sku=sku-7", timeout=10
                ) as response:
                    print("HTTP answer:", response.read().decode())
        finally:
            httpd.shutdown()
            server.join()
            httpd.server_close()
            svc.stop()
            web_nc.close()
            service_nc.close()
            provider.shutdown()


if __name__ == "__main__":
    main()

"""A request-reply service run as a queue group of workers, and a client calling it.

Run against a server:      python examples/request_reply.py --server nats://127.0.0.1:4222
Run with an embedded one:  python examples/request_reply.py
"""

from __future__ import annotations

import argparse
import threading

import nats_sync
from nats_sync.testing import server_url


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--server", help="NATS URL (default: start an embedded server)")
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--requests", type=int, default=1000)
    args = parser.parse_args()

    with server_url(args.server) as url:
        served: dict[str, int] = {}
        lock = threading.Lock()
        service = nats_sync.connect(url, name="upper-service")
        for worker in range(args.workers):
            name = f"worker-{worker}"

            def handle(msg: nats_sync.Msg, name: str = name) -> None:
                with lock:
                    served[name] = served.get(name, 0) + 1
                msg.respond(msg.data.upper(), headers={"served-by": name})

            service.subscribe("svc.upper", queue="upper-workers", cb=handle)
        service.flush()

        with nats_sync.connect(url, name="upper-client") as nc:
            print("one request:", nc.request("svc.upper", b"hello", timeout=1.0).data)
            payloads = [f"item {i}".encode() for i in range(args.requests)]
            replies = nc.request_batch("svc.upper", payloads, timeout=2.0)
            answered = [r for r in replies if isinstance(r, nats_sync.Msg)]
            for reply, payload in zip(replies, payloads, strict=True):
                if isinstance(reply, nats_sync.Msg) and reply.data != payload.upper():
                    raise SystemExit(f"wrong reply {reply.data!r} to {payload!r}")
            print(f"pipelined {len(payloads)} requests: {len(answered)} answered")
            try:
                nc.request("svc.nobody", b"?", timeout=1.0)
            except nats_sync.NoRespondersError as err:
                print("as expected:", err)
        service.drain()
        print("requests per worker:", dict(sorted(served.items())))


if __name__ == "__main__":
    main()

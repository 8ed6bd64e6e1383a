"""Publish and subscribe from a blocking script.

Run against a server:      python examples/pubsub.py --server nats://127.0.0.1:4222
Run with an embedded one:  python examples/pubsub.py
"""

from __future__ import annotations

import argparse

import nats_sync
from nats_sync.testing import server_url


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--server", help="NATS URL (default: start an embedded server)")
    parser.add_argument("--count", type=int, default=10)
    args = parser.parse_args()

    with server_url(args.server) as url, nats_sync.connect(url, name="pubsub-example") as nc:
        sub = nc.subscribe("orders.>")
        for number in range(args.count):
            nc.publish(
                f"orders.{number % 3}", f"order {number}".encode(), headers={"seq": str(number)}
            )
        nc.flush()
        for msg in sub:
            assert msg.headers is not None
            print(f"{msg.subject}: {msg.data.decode()} (seq {msg.headers['seq']})")
            if sub.delivered == args.count and sub.pending_msgs == 0:
                break
        print(f"received {sub.delivered} of {args.count}, dropped {sub.dropped}")


if __name__ == "__main__":
    main()

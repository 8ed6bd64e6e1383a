"""A pipeline that must not lose data, on JetStream, from a blocking script.

1. A producer stores orders with ``publish_async`` (each with a ``msg_id``, so a publish
   retried after a crash is stored once).
2. A worker reads them through a durable pull consumer with explicit acks. It "crashes"
   halfway (stops without acknowledging what it holds); a second worker takes over and
   gets exactly what was not acknowledged. Work is idempotent by stream sequence.
3. A replay: an ordered consumer reads the whole stream again from the start, as a new
   service would.
4. A range read: ``Stream.get_msgs`` for a window of sequences.

Run against a server:      python examples/jetstream_pipeline.py --server nats://127.0.0.1:4222
Run with an embedded one:  python examples/jetstream_pipeline.py
"""

from __future__ import annotations

import argparse
import json
import time

import nats_sync
from nats_sync.jetstream import JetStream
from nats_sync.testing import server_url


def produce(js: JetStream, count: int) -> None:
    started = time.perf_counter()
    futures = [
        js.publish_async(
            f"orders.{n % 4}",
            json.dumps({"order": n, "amount": n % 97}).encode(),
            msg_id=f"order-{n}",
        )
        for n in range(count)
    ]
    js.publish_async_completed(timeout=30)
    acks = [future.result() for future in futures]
    elapsed = time.perf_counter() - started
    print(
        f"stored {len(acks)} orders (seq {acks[0].seq}..{acks[-1].seq}) "
        f"in {elapsed:.2f}s, {len(acks) / elapsed:,.0f} acks/s"
    )
    again = js.publish("orders.0", b"{}", msg_id="order-0")  # a retried publish
    print(f"publishing order-0 again: seq {again.seq}, duplicate={again.duplicate}")


def work(js: JetStream, count: int) -> None:
    consumer = js.create_consumer(
        "ORDERS", durable_name="billing", ack_policy="explicit", ack_wait=2.0
    )
    done: set[int] = set()
    total = 0
    started = time.perf_counter()
    # The first worker acknowledges half, then holds a batch without acking: a crash.
    batch = consumer.fetch(count // 2, max_wait=5)
    for msg in batch:
        total += json.loads(msg.data)["amount"]
        done.add(msg.metadata.sequence.stream)
        msg.ack()
    held = list(consumer.fetch(10, max_wait=5))
    print(f"worker 1 acknowledged {len(done)} and crashed holding {len(held)}")
    # The second worker: the held messages come back after ack_wait, then the rest.
    redelivered = 0
    with consumer.messages(max_messages=200) as stream:
        while len(done) < count:
            msg = stream.next(timeout=10)
            seq = msg.metadata.sequence.stream
            if msg.metadata.num_delivered > 1:
                redelivered += 1
            if seq not in done:  # idempotent: a redelivery of finished work is skipped
                total += json.loads(msg.data)["amount"]
                done.add(seq)
            msg.ack()
    elapsed = time.perf_counter() - started
    print(
        f"worker 2 finished: {len(done)} orders billed once each, {redelivered} "
        f"redelivered after the crash, total {total}, in {elapsed:.2f}s"
    )


def replay(js: JetStream, count: int) -> None:
    started = time.perf_counter()
    ordered = js.ordered_consumer("ORDERS")
    seen = 0
    last = 0
    with ordered.messages() as stream:
        for msg in stream:
            assert msg.metadata.sequence.stream == last + 1, "an ordered consumer never skips"
            last = msg.metadata.sequence.stream
            seen += 1
            if seen == count:
                break
    ordered.stop()
    elapsed = time.perf_counter() - started
    print(
        f"replayed {seen} orders in order from the start in {elapsed:.2f}s, "
        f"{seen / elapsed:,.0f} msgs/s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--server", help="NATS URL (default: start an embedded JetStream server)")
    parser.add_argument("--orders", type=int, default=2_000)
    args = parser.parse_args()

    with server_url(args.server, jetstream=True) as url, nats_sync.connect(url) as nc:
        js = nc.jetstream()
        js.create_stream(
            name="ORDERS", subjects=["orders.>"], duplicate_window=60.0, allow_direct=True
        )
        produce(js, args.orders)
        work(js, args.orders)
        replay(js, args.orders)
        window = [msg.seq for msg in js.stream("ORDERS").get_msgs(10, end_seq=19)]
        print(f"read sequences {window[0]}..{window[-1]} directly: {len(window)} messages")
        js.delete_stream("ORDERS")


if __name__ == "__main__":
    main()

"""JetStream pull consuming: fetch(500) + ack per message, nats_sync against nats-py.

``python -m benchmarks.js_fetch [--messages 50000] [--batch 500] [--reps 3]``

How it works: one ``nats-server -js`` serves every run. Each run is a fresh worker
process (the two clients alternate, nats_sync first on odd repetitions) that makes a
stream of ``--messages`` 64-byte messages (stored with async publishes before the clock
starts), a durable explicit-ack pull consumer, then times reading all of them in
fetches of ``--batch`` messages, acking each one (fire and forget), and a final flush
so every ack has reached the server. nats_sync uses ``PullConsumer.fetch``; nats-py its
legacy ``pull_subscribe(...).fetch(batch, timeout)``. Prints msgs/s per run and the
medians.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time

import nats

import nats_sync
from nats_sync.testing import NatsServer

PAYLOAD = b"x" * 64


def run_nats_sync(url: str, count: int, batch: int) -> float:
    nc = nats_sync.connect(url)
    js = nc.jetstream()
    js.create_stream(name="BENCH", subjects=["bench.>"], storage="memory")
    futures = [nc.request_future("bench.a", PAYLOAD, timeout=30) for _ in range(count)]
    for future in futures:
        future.result()
    consumer = js.create_consumer(
        "BENCH", durable_name="C", ack_policy="explicit", max_ack_pending=-1
    )
    start = time.perf_counter()
    got = 0
    while got < count:
        for msg in consumer.fetch(batch, max_wait=5):
            msg.ack()
            got += 1
    nc.flush()
    elapsed = time.perf_counter() - start
    nc.close()
    return count / elapsed


def run_nats_py(url: str, count: int, batch: int) -> float:
    async def main() -> float:
        nc = await nats.connect(url)
        js = nc.jetstream()
        await js.add_stream(name="BENCH", subjects=["bench.>"], storage="memory")
        acks = [await js.publish_async("bench.a", PAYLOAD) for _ in range(count)]
        await asyncio.gather(*acks)
        await js.add_consumer("BENCH", durable_name="C", ack_policy="explicit", max_ack_pending=-1)
        psub = await js.pull_subscribe("bench.a", durable="C", stream="BENCH")
        start = time.perf_counter()
        got = 0
        while got < count:
            for msg in await psub.fetch(batch, timeout=5):
                await msg.ack()
                got += 1
        await nc.flush()
        elapsed = time.perf_counter() - start
        await nc.close()
        return count / elapsed

    return asyncio.run(main())


def worker(client: str, url: str, count: int, batch: int) -> None:
    rate = (run_nats_sync if client == "nats_sync" else run_nats_py)(url, count, batch)
    print(json.dumps({"client": client, "rate": rate}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--worker", nargs=2, metavar=("CLIENT", "URL"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker[0], args.worker[1], args.messages, args.batch)
        return
    rates: dict[str, list[float]] = {"nats_sync": [], "nats-py": []}
    with NatsServer(jetstream=True) as server:
        for rep in range(args.reps):
            order = ["nats_sync", "nats-py"] if rep % 2 == 0 else ["nats-py", "nats_sync"]
            for client in order:
                # A fresh stream for every run: the worker makes it; drop the last one.
                with nats_sync.connect(server.url) as nc:
                    try:
                        nc.jetstream().delete_stream("BENCH")
                    except nats_sync.jetstream.StreamNotFoundError:
                        pass
                out = subprocess.run(
                    [
                        sys.executable,
                        "-m",
                        "benchmarks.js_fetch",
                        "--messages",
                        str(args.messages),
                        "--batch",
                        str(args.batch),
                        "--worker",
                        client,
                        server.url,
                    ],
                    check=True,
                    capture_output=True,
                    text=True,
                ).stdout
                rate = json.loads(out.strip().splitlines()[-1])["rate"]
                rates[client].append(rate)
                print(f"rep {rep + 1} {client:9} {rate:>10,.0f} msgs/s", flush=True)
    print(f"\nfetch({args.batch}) + ack of {args.messages:,} messages, median of {args.reps}:")
    for client, values in rates.items():
        print(
            f"  {client:9} {statistics.median(values):>10,.0f} msgs/s "
            f"(min {min(values):,.0f}, max {max(values):,.0f})"
        )
    ratio = statistics.median(rates["nats_sync"]) / statistics.median(rates["nats-py"])
    print(f"  nats_sync / nats-py = {ratio:.1f}x")


if __name__ == "__main__":
    main()

"""A quick thread curve: T threads requesting on one connection, for comparing the GIL
on and off on a free-threaded build (docs/platforms.md, "Without the GIL").

Usage: ``PYTHON_GIL=0 .venv-ft/bin/python -m tools.ft_thread_curve [--threads 1,4,16]
[--seconds 3]`` (and again with ``PYTHON_GIL=1``). One embedded nats-server, an echo
responder in a child process (the same interpreter and environment), 64-byte requests;
prints requests per second and this process's CPU time per request for each T. A smoke
measurement, not the benchmark: ``make bench`` is that.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time

import nats_sync
from nats_sync.testing import NatsServer

RESPONDER = """
import sys, threading, nats_sync
nc = nats_sync.connect(sys.argv[1])
nc.subscribe("curve.echo", cb=lambda msg: msg.respond(msg.data))
nc.flush(5)
print("ready", flush=True)
sys.stdin.read()
nc.close()
"""
PAYLOAD = b"x" * 64


def measure(nc: nats_sync.Client, threads: int, seconds: float) -> tuple[float, float]:
    """Requests per second and CPU microseconds per request with ``threads`` requesters."""
    stop = threading.Event()
    counts = [0] * threads
    barrier = threading.Barrier(threads + 1)

    def run(index: int) -> None:
        barrier.wait(10)
        done = 0
        while not stop.is_set():
            nc.request("curve.echo", PAYLOAD, timeout=10)
            done += 1
        counts[index] = done

    workers = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(threads)]
    for worker in workers:
        worker.start()
    barrier.wait(10)
    started, cpu_started = time.monotonic(), time.process_time()
    time.sleep(seconds)
    stop.set()
    for worker in workers:
        worker.join(30)
    elapsed, cpu = time.monotonic() - started, time.process_time() - cpu_started
    total = sum(counts)
    return total / elapsed, cpu / max(total, 1) * 1e6


def main() -> None:
    """Runs the curve and prints one line per thread count."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", default="1,4,16")
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    gil = getattr(sys, "_is_gil_enabled", lambda: True)()
    print(
        f"{sys.version.split()[0]} {'GIL on' if gil else 'GIL off'} "
        f"(PYTHON_GIL={os.environ.get('PYTHON_GIL', 'unset')}), {os.cpu_count()} CPUs"
    )
    with NatsServer() as server:
        responder = subprocess.Popen(
            [sys.executable, "-c", RESPONDER, server.url],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert responder.stdout is not None and responder.stdout.readline() == "ready\n"
            nc = nats_sync.connect(server.url)
            nc.request("curve.echo", PAYLOAD, timeout=10)  # the inbox made, warm
            for threads in (int(part) for part in args.threads.split(",")):
                rate, cpu_us = measure(nc, threads, args.seconds)
                print(f"T={threads:3d}  {rate:9,.0f} req/s  {cpu_us:6.1f} µs CPU/request")
            nc.close()
        finally:
            responder.communicate("", timeout=10)


if __name__ == "__main__":
    main()

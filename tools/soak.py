"""Soak run (``make soak``): steady publish/subscribe/request traffic between two clients
while the server restarts every ``--restart-every`` seconds; writes its figures to
docs/RELIABILITY.md (section ``soak``) and fails on lost buffered messages, RSS growth of
10% or more, or threads/file descriptors left after close.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import struct
import sys
import threading
import time
import tracemalloc
from pathlib import Path

from _reliability_doc import write_section  # tools/ is on sys.path when run

import nats_sync
from nats_sync.testing import NatsServer

ROOT = Path(__file__).resolve().parents[1]


def rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=180.0)
    parser.add_argument("--restart-every", type=float, default=20.0)
    parser.add_argument("--rate", type=int, default=1000, help="messages per second")
    parser.add_argument("--output", type=Path, default=ROOT / "docs" / "RELIABILITY.md")
    parser.add_argument("--trace", action="store_true",
                        help="print where Python memory grew (tracemalloc), for diagnosis")
    args = parser.parse_args()
    if args.trace:
        tracemalloc.start(10)
    warm_snapshot = None

    threads_before, fds_before = threading.active_count(), open_fds()
    # Preallocated so the tool's own bookkeeping does not show up as RSS growth.
    capacity = int(args.seconds * args.rate * 1.5) + 10_000
    received = bytearray(capacity)
    buffered: set[int] = set()
    published = answered = timed_out = refused = restarts = 0
    with NatsServer() as server:
        listener = nats_sync.connect(server.url, name="soak-subscriber",
                                     max_reconnect_attempts=-1,
                                     reconnect_delay_cb=lambda attempt: 0.02)

        def mark(msg: nats_sync.Msg) -> None:
            received[struct.unpack(">Q", msg.data[:8])[0]] = 1

        sub = listener.subscribe("soak.data", cb=mark, pending_msgs_limit=1_000_000)
        listener.subscribe("soak.echo", cb=lambda msg: msg.respond(msg.data))
        listener.flush()
        nc = nats_sync.connect(server.url, name="soak-publisher", max_reconnect_attempts=-1,
                               reconnect_delay_cb=lambda attempt: 0.3)
        started = time.monotonic()
        warm_rss = 0
        next_restart = started + args.restart_every
        sequence = 0
        while (now := time.monotonic()) - started < args.seconds:
            if now >= next_restart:
                server.kill()
                time.sleep(0.5)
                server.start()
                restarts += 1
                next_restart = now + args.restart_every
            if not warm_rss and now - started > 10:
                warm_rss = rss_kib()
                if args.trace:
                    warm_snapshot = tracemalloc.take_snapshot()
            for _ in range(args.rate // 20):  # one 50 ms tick
                sequence += 1
                was_down = nc.is_reconnecting
                try:
                    nc.publish("soak.data", struct.pack(">Q", sequence) + b"x" * 8)
                except nats_sync.OutboundBufferLimitError:
                    refused += 1
                    continue
                published += 1
                if was_down and nc.is_reconnecting:
                    buffered.add(sequence)
            try:
                nc.request("soak.echo", b"ping", timeout=0.5)
                answered += 1
            except (nats_sync.TimeoutError, nats_sync.NoRespondersError):
                timed_out += 1
            time.sleep(max(0.0, 0.05 - (time.monotonic() - now)))
        nc.flush(timeout=10)
        time.sleep(1.0)
        end_rss = rss_kib()
        if warm_snapshot is not None:
            for stat in tracemalloc.take_snapshot().compare_to(warm_snapshot, "lineno")[:10]:
                print(stat)
        reconnects = nc.stats["reconnects"]
        nc.close()
        listener.close()
        del sub
    time.sleep(0.5)
    threads_after, fds_after = threading.active_count(), open_fds()
    unique = sum(received)
    lost = published - unique
    lost_buffered = sum(1 for number in buffered if not received[number])
    growth = (end_rss - warm_rss) / warm_rss * 100 if warm_rss else 0.0
    ok = lost_buffered == 0 and growth < 10 and threads_after <= threads_before and (
        fds_after <= fds_before)
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    write_section(args.output, "soak", f"""## Soak (`make soak`)

{args.seconds:.0f} s of traffic between two clients ({args.rate:,} msgs/s published, a
request every 50 ms) while the server was killed and restarted {restarts} times (every
{args.restart_every:.0f} s, 0.5 s down). Run on {when}, Python {platform.python_version()}.

| figure | value |
|---|---:|
| messages published | {published:,} |
| received (unique) | {unique:,} |
| lost (in flight at a kill: core NATS is at-most-once) | {lost:,} |
| published while disconnected (buffered) | {len(buffered):,} |
| **lost from the buffer** | **{lost_buffered}** |
| refused (buffer full) | {refused:,} |
| requests answered / timed out | {answered:,} / {timed_out:,} |
| reconnects of the publisher | {reconnects} |
| RSS after warm-up -> at the end | {warm_rss:,} KiB -> {end_rss:,} KiB ({growth:+.1f}%) |
| threads before connect / after close | {threads_before} / {threads_after} |
| open file descriptors before / after | {fds_before} / {fds_after} |

Result: **{"all bounds held" if ok else "a bound was broken"}**.
""")
    print(f"published {published:,}, received {unique:,}, lost {lost:,} "
          f"(buffered lost {lost_buffered}), RSS {growth:+.1f}%, threads "
          f"{threads_before}->{threads_after}, fds {fds_before}->{fds_after}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

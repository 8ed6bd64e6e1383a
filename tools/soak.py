#!/usr/bin/env python3
"""Soak run (``make soak``): steady traffic while the server restarts; writes section
``soak`` of docs/RELIABILITY.md.

One real ``nats-server`` (``nats_sync.testing.NatsServer``) and two clients in this
process. Client A publishes a numbered stream (16-byte payloads: sequence number and
publish time) at ``--rate`` msgs/s from one thread and sends ``--request-rate``
requests/s from another; client B subscribes to the stream (a callback recording each
sequence number) and answers the requests. Every ``--restart-every`` seconds the server
gets SIGKILL and is started again on the same port ``--downtime`` seconds later.

Messages published while client A was reconnecting (``is_reconnecting`` before and after
the call) are held in its disconnect buffer and must all arrive: so that they do not
reach a server on which client B has not yet re-subscribed (the server would drop them:
no interest), A's ``reconnect_delay_cb`` holds its reconnect until B is back and has
flushed, as tools/reliability.py does. Other lost messages published from 1 s before a
kill until A's reconnect were in flight on a socket that died (core NATS is
at-most-once); any other loss is unexplained (tools/_streamcheck.py, shared with
``make reliability``, keeps this account).

Also measured: RSS (``VmRSS``) after a warm-up and at the end, threads and open file
descriptors before connecting and after closing. Exit status 1 when a buffered message
was lost, a loss is unexplained, ``publish()`` raised anything but
``OutboundBufferLimitError``, a restart was not recovered from, RSS grew 10% or more, or
threads or file descriptors were left after close; 3 when the watchdog fired.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import nats_sync
from nats_sync.testing import NatsServer
from tools._reliability_doc import DEFAULT_PAGE, run_date, write_section
from tools._streamcheck import (
    FLUSH_TIMEOUT,
    RECONNECT_TIMEOUT,
    ClientEvents,
    Paced,
    Receiver,
    StreamPublisher,
    StreamTally,
    now,
    start_watchdog,
    tally,
)

SUBJECT = "soak.data"
ECHO = "soak.echo"
REQUEST_TIMEOUT = 0.5
BASELINE_TIMEOUT = 5.0  # after close: threads and fds must be back within this long
RSS_LIMIT = 10.0  # percent


def rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc/self/status")


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


class Requester(Paced):
    def __init__(self, nc: nats_sync.Client, rate: int) -> None:
        super().__init__("soak-requester", rate, 1)
        self.nc = nc
        self.sent = self.answered = self.wrong = self.timed_out = self.no_responders = 0
        self.errors: Counter[str] = Counter()

    def step(self) -> None:
        self.sent += 1
        payload = b"%d" % self.sent
        try:
            reply = self.nc.request(ECHO, payload, timeout=REQUEST_TIMEOUT)
        except nats_sync.TimeoutError:
            self.timed_out += 1
        except nats_sync.NoRespondersError:
            self.no_responders += 1
        except nats_sync.Error as error:
            self.errors[type(error).__name__] += 1
        else:
            if reply.data == payload:
                self.answered += 1
            else:
                self.wrong += 1


@dataclass
class Restart:
    at: float
    publisher_back: float | None = None
    subscriber_back: float | None = None


@dataclass
class Figures:
    seconds: float = 0.0
    restarts: list[Restart] = field(default_factory=list)
    stream: StreamTally = field(default_factory=StreamTally)
    requests: Requester | None = None
    responder_errors: int = 0
    reconnects_a: int = 0
    reconnects_b: int = 0
    client_errors: Counter[str] = field(default_factory=Counter)
    rss_before: int = 0
    rss_warm: int = 0
    rss_end: int = 0
    blocks_warm: int = 0
    blocks_end: int = 0
    warm_at: float = 0.0
    threads_before: int = 0
    threads_after: int = 0
    fds_before: int = 0
    fds_after: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def growth(self) -> float:
        return (self.rss_end - self.rss_warm) / self.rss_warm * 100 if self.rss_warm else 0.0

    @property
    def unrecovered(self) -> int:
        return sum(
            1 for r in self.restarts if r.publisher_back is None or r.subscriber_back is None
        )

    def broken(self) -> list[str]:
        stream = self.stream
        checks = [
            (bool(stream.from_buffer), f"{len(stream.from_buffer)} buffered messages lost"),
            (bool(stream.unexplained), f"{len(stream.unexplained)} messages lost unexplained"),
            (bool(stream.publish_errors), f"publish() raised {dict(stream.publish_errors)}"),
            (self.unrecovered > 0, f"{self.unrecovered} restarts not recovered from"),
            (self.growth >= RSS_LIMIT, f"RSS grew {self.growth:+.1f}%"),
            (
                self.threads_after > self.threads_before,
                f"threads {self.threads_before} -> {self.threads_after}",
            ),
            (self.fds_after > self.fds_before, f"fds {self.fds_before} -> {self.fds_after}"),
        ]
        return [text for failed, text in checks if failed]


def wait_for(condition: Callable[[], bool], timeout: float) -> bool:
    deadline = now() + timeout
    while not condition():
        if now() > deadline:
            return False
        time.sleep(0.05)
    return True


def soak(args: argparse.Namespace, server: NatsServer) -> Figures:
    figures = Figures()
    capacity = int(args.seconds * args.rate * 1.2) + 10_000
    receiver = Receiver(capacity)
    events_a, events_b = ClientEvents(), ClientEvents()
    subscriber_ready = threading.Event()
    subscriber_ready.set()

    def hold_until_subscriber_ready(attempt: int) -> float:
        subscriber_ready.wait(RECONNECT_TIMEOUT)
        return 0.02

    figures.threads_before, figures.fds_before = threading.active_count(), open_fds()
    figures.rss_before = rss_kib()
    client_b = nats_sync.connect(
        server.url,
        name="soak-b",
        max_reconnect_attempts=-1,
        reconnect_delay_cb=lambda attempt: 0.05,
        **events_b.options(),
    )
    client_a = None
    try:

        def respond(msg: nats_sync.Msg) -> None:
            try:
                msg.respond(msg.data)
            except nats_sync.Error:
                figures.responder_errors += 1

        stream = client_b.subscribe(
            SUBJECT,
            cb=receiver.on_msg,
            pending_msgs_limit=4_000_000,
            pending_bytes_limit=512 * 1024 * 1024,
        )
        client_b.subscribe(ECHO, cb=respond)
        client_b.flush(FLUSH_TIMEOUT)
        client_a = nats_sync.connect(
            server.url,
            name="soak-a",
            max_reconnect_attempts=-1,
            reconnect_delay_cb=hold_until_subscriber_ready,
            **events_a.options(),
        )
        publisher = StreamPublisher(client_a, SUBJECT, args.rate, capacity, "soak-publisher")
        requester = Requester(client_a, args.request_rate)
        started = now()
        publisher.start()
        requester.start()
        warmup = (
            args.warmup
            if args.warmup is not None
            else min(args.restart_every + 5.0, args.seconds / 2)
        )
        next_restart = started + args.restart_every
        try:
            while (moment := now()) - started < args.seconds:
                if not figures.rss_warm and moment - started >= warmup:
                    figures.rss_warm, figures.warm_at = rss_kib(), moment - started
                    figures.blocks_warm = sys.getallocatedblocks()
                if moment >= next_restart and moment - started + args.downtime + 2 < (args.seconds):
                    figures.restarts.append(
                        restart(
                            server, client_b, args.downtime, events_a, events_b, subscriber_ready
                        )
                    )
                    next_restart = moment + args.restart_every
                time.sleep(0.05)
        finally:
            publisher.stop()
            requester.stop()
        if not figures.rss_warm:  # a run shorter than its warm-up
            figures.rss_warm, figures.warm_at = rss_kib(), now() - started
            figures.blocks_warm = sys.getallocatedblocks()
        figures.seconds = now() - started
        with contextlib.suppress(nats_sync.Error):
            client_a.flush(FLUSH_TIMEOUT)
        receiver.wait_drained(publisher.published)
        with contextlib.suppress(nats_sync.Error):
            client_b.flush(FLUSH_TIMEOUT)
        figures.rss_end = rss_kib()
        figures.blocks_end = sys.getallocatedblocks()
        figures.stream = tally(
            publisher, receiver, [(r.at, r.publisher_back) for r in figures.restarts]
        )
        figures.requests = requester
        figures.reconnects_a = client_a.stats["reconnects"]
        figures.reconnects_b = client_b.stats["reconnects"]
        if stream.dropped:
            figures.notes.append(
                f"the subscription dropped {stream.dropped} messages (slow consumer)"
            )
    finally:
        for client in (client_a, client_b):
            if client is not None:
                client.close()
    figures.client_errors = events_a.error_kinds() + events_b.error_kinds()
    # close() joins the client's threads; give the kernel and the last callbacks a moment
    wait_for(
        lambda: (
            threading.active_count() <= figures.threads_before and open_fds() <= figures.fds_before
        ),
        BASELINE_TIMEOUT,
    )
    figures.threads_after, figures.fds_after = threading.active_count(), open_fds()
    return figures


def restart(
    server: NatsServer,
    client_b: nats_sync.Client,
    downtime: float,
    events_a: ClientEvents,
    events_b: ClientEvents,
    subscriber_ready: threading.Event,
) -> Restart:
    """SIGKILL, ``downtime`` s, start on the same port; B back and flushed, then A."""
    subscriber_ready.clear()
    record = Restart(now())
    try:
        server.kill()
        time.sleep(downtime)
        server.start()
        record.subscriber_back = events_b.wait_reconnected_after(record.at, RECONNECT_TIMEOUT)
        if record.subscriber_back is not None:
            client_b.flush(FLUSH_TIMEOUT)
    finally:
        subscriber_ready.set()
    record.publisher_back = events_a.wait_reconnected_after(record.at, RECONNECT_TIMEOUT)
    return record


def section(f: Figures, args: argparse.Namespace, when: str, command: str) -> str:
    requests, stream = f.requests, f.stream
    assert requests is not None
    broken = f.broken()
    downs = [r.publisher_back - r.at for r in f.restarts if r.publisher_back is not None]
    outage = f"{min(downs):.2f} to {max(downs):.2f} s" if downs else "n/a"
    other_requests = sum(requests.errors.values()) + requests.wrong
    answers = (
        f"{requests.answered:,} / {requests.timed_out:,} / "
        f"{requests.no_responders:,} / {other_requests:,}"
    )
    errors = ", ".join(f"{name} {count}" for name, count in sorted(f.client_errors.items()))
    notes = "".join(f"\n- {note}" for note in f.notes)
    return f"""## Soak (`make soak`)

{f.seconds:.0f} s of steady traffic on one `nats-server` that was killed (SIGKILL) and
started again on the same port {len(f.restarts)} times: every {args.restart_every:.0f} s,
down for {args.downtime:.1f} s. Client A publishes a numbered stream at
{args.rate:,} msgs/s from one thread and sends {args.request_rate} requests/s (timeout
{REQUEST_TIMEOUT} s) from another; client B records the stream with a callback
subscription and answers the requests. A's reconnect waits until B is back and has
flushed, so that what A held in its disconnect buffer meets B's re-made subscription
(the server would drop it otherwise). Lost messages are split as in the fault table
above: published while A was reconnecting (from its buffer: must be 0), published from
1 s before a kill until A's reconnect (in flight on a socket that died: core NATS is
at-most-once), and any other (unexplained: must be 0).

| figure | value |
|---|---:|
| messages published | {stream.published:,} |
| received (unique) | {stream.unique:,} |
| duplicates / out of order | {stream.duplicates:,} / {stream.out_of_order:,} |
| lost | {stream.lost:,} |
| lost in flight at a kill | {len(stream.in_flight):,} |
| published while disconnected (buffered) | {stream.buffered:,} |
| **lost from the buffer** | **{len(stream.from_buffer)}** |
| **lost unexplained** | **{len(stream.unexplained)}** |
| refused (buffer full) | {stream.refused:,} |
| requests sent | {requests.sent:,} |
| answered / timed out / no responders / other | {answers} |
| restarts / reconnects of A / of B | {len(f.restarts)} / {f.reconnects_a} / {f.reconnects_b} |
| A back after a kill (incl. downtime) | {outage} |
| RSS before connect | {f.rss_before:,} KiB |
| RSS after warm-up ({f.warm_at:.0f} s) -> at the end | {f.rss_warm:,} KiB -> {f.rss_end:,} KiB |
| **RSS growth** (limit < {RSS_LIMIT:.0f}%) | **{f.growth:+.1f}%** |
| Python memory blocks in use, same moments | {f.blocks_warm:,} -> {f.blocks_end:,} |
| threads before connect / after close | {f.threads_before} / {f.threads_after} |
| open file descriptors before connect / after close | {f.fds_before} / {f.fds_after} |

- Requests are sent one at a time, each waiting up to {REQUEST_TIMEOUT} s: those sent
  while A or B was disconnected time out. error_cb: {errors or "nothing"}.
- RSS is `VmRSS` from /proc/self/status (this process: both clients, the tool's
  preallocated bookkeeping). The Python memory blocks (`sys.getallocatedblocks()`)
  tell a leak of objects from the allocator keeping pages it has touched.{notes}
- Run on {when}, Python {platform.python_version()}, `{command}`.

Result: **{"all bounds held" if not broken else "a bound was broken: " + "; ".join(broken)}**.
"""


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--seconds", type=float, default=180.0, help="traffic time (180)")
    parser.add_argument(
        "--restart-every", type=float, default=20.0, help="seconds between server restarts (20)"
    )
    parser.add_argument(
        "--downtime",
        type=float,
        default=1.0,
        help="seconds the server stays down at each restart (1)",
    )
    parser.add_argument("--rate", type=int, default=1000, help="messages per second (1000)")
    parser.add_argument("--request-rate", type=int, default=50, help="requests per second (50)")
    parser.add_argument(
        "--warmup",
        type=float,
        default=None,
        help="seconds before the first RSS figure (default: the first "
        "restart + 5 s, at most half the run)",
    )
    parser.add_argument(
        "--output",
        type=Path,
        default=DEFAULT_PAGE,
        help="page whose `soak` section is written (docs/RELIABILITY.md)",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    given = sys.argv[1:] if argv is None else argv
    command = "make soak" + (f' SOAK_ARGS="{" ".join(given)}"' if given else "")
    when = run_date()
    server = NatsServer()
    watchdog = start_watchdog("soak", args.seconds + 180.0, server.cleanup)
    try:
        server.start()
        figures = soak(args, server)
    finally:
        server.cleanup()
    write_section("soak", section(figures, args, when, command), args.output)
    watchdog.set()
    requests = figures.requests
    assert requests is not None
    stream = figures.stream
    print(
        f"published {stream.published:,}, received {stream.unique:,}, lost "
        f"{stream.lost:,} (in flight {len(stream.in_flight)}, from the buffer "
        f"{len(stream.from_buffer)}, unexplained {len(stream.unexplained)}; buffered "
        f"{stream.buffered:,}); requests {requests.answered:,}/{requests.sent:,} answered; "
        f"restarts {len(figures.restarts)}; RSS {figures.rss_warm:,} -> "
        f"{figures.rss_end:,} KiB ({figures.growth:+.1f}%); threads "
        f"{figures.threads_before} -> {figures.threads_after}; fds {figures.fds_before} -> "
        f"{figures.fds_after}; wrote section soak of {args.output}"
    )
    broken = figures.broken()
    if broken:
        print("soak: FAILED: " + "; ".join(broken), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Fault injection against real nats-servers; writes docs/RELIABILITY.md (``make reliability``).

How it works: for each fault a fresh publisher client publishes a continuous numbered
stream (16-byte payloads: sequence number and publish time, ~2,000 msgs/s from one
thread) while a subscriber client on a server that is not faulted records every
sequence number that arrives. The faults are injected on real ``nats-server`` processes
started with ``nats_sync.testing`` (SIGKILL and restart, lame duck mode, SIGSTOP, the
client's own ``force_reconnect()``). For every accepted publish the publisher notes
whether the client was reconnecting both just before and just after the call: those
messages went into the disconnect buffer ("buffered"), and the client promises to
deliver them. Lost messages that were not buffered and were published in the second
before a fault or before the reconnect are "lost in flight": the kernel had them, the
server died or the socket was abandoned, as with every core NATS client. Any other loss
is unexplained (the stream and this accounting are in tools/_streamcheck.py, shared with
``make soak``). Recovery is the time from the fault to the publisher's
``reconnected_cb``.

The JetStream rows (``js_restart``, ``js_leader``: tools/_jsfaults.py) push an
acknowledged ``publish_async`` stream and a durable consumer through kill -9 of a
JetStream server and of an R3 stream's leader, and check that every acknowledged
publish is stored and every stored message consumed. They write their own section of
the page; each section keeps the rows a run with ``--only`` did not run.

The fast-ingest row (``js_fast``: tools/_jsfast.py) kills a JetStream server under a
``fast_publisher`` that commits a batch every 2,000 messages and sends what a failed
batch did not acknowledge again in a new one, and checks that every message a batch
acknowledged is stored, once. It writes its own section too, and so does the resume row
(``js_fast_resume``: tools/_jsfastresume.py): the guide's recipe for resuming a failed
batch, through five step-downs and a kill -9 of an R3 stream's leader, must store every
message once, in order.

The Spark rows (``spark_kill``, ``spark_rolling``, ``spark_stepdown``, ``spark_worker``,
each in publish modes fast and async: tools/_sparkfaults.py) run a streaming query from
one R3 stream into another on a local SparkSession through node kills, a rolling
restart, leader step-downs and a killed Python worker, restarting the query whenever
it dies, and count its restarts, missing and duplicated messages, the longest gap
between micro-batches and the lag at the end. ``--only spark`` runs only them;
``--spark-seconds`` shortens their input.

Every wait is bounded; a watchdog ends the whole run (dumping every thread's stack)
if it ever takes longer than ``--deadline`` seconds.

Exit status: 0 when nothing buffered was lost, nothing was lost unexplained, no
acknowledged JetStream publish (or fast-ingest message) was lost, no resumed fast-ingest
message was lost, duplicated or stored out of order, every stored message was consumed,
every fault was recovered from and every Spark row met its targets; 1 otherwise; 3 when
the watchdog fired.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nats_sync
from nats_sync.testing import NatsCluster, NatsServer, find_server_binary
from tools import _jsfastresume as resume
from tools import _sparkfaults as sparkrows
from tools import _sparkreport
from tools._jsfast import FAST_FAULTS, FastResult, run_fast_fault
from tools._jsfast import intro as fast_intro
from tools._jsfast import note_line as fast_note_line
from tools._jsfast import outro as fast_outro
from tools._jsfast import table_header as fast_table_header
from tools._jsfast import table_row as fast_table_line
from tools._jsfastresume import FAST_RESUME_FAULTS, ResumeResult, run_fast_resume_fault
from tools._jsfaults import JS_FAULTS, JsFault, JsResult, run_js_fault
from tools._jsfaults import intro as js_intro
from tools._jsfaults import note_line as js_note_line
from tools._jsfaults import table_header as js_table_header
from tools._jsfaults import table_row as js_table_line
from tools._reliability_doc import (
    DEFAULT_PAGE,
    MergedRows,
    TableRow,
    earlier_rows,
    fmt_ms,
    kept_sentence,
    merge_rows,
    row_notes,
    run_date,
    write_section,
)
from tools._streamcheck import (
    FLUSH_TIMEOUT,
    IN_FLIGHT_BEFORE,
    RECONNECT_TIMEOUT,
    ClientEvents,
    Receiver,
    StreamPublisher,
    StreamTally,
    now,
    start_watchdog,
    tally,
)

LDM_CONFIG = 'lame_duck_grace_period: "500ms"\n'

SERVER_EXIT_TIMEOUT = 15.0  # lame duck server -> process gone
MESH_TIMEOUT = 20.0
INTEREST_TIMEOUT = 10.0
WARMUP = 1.0  # stream runs this long before the first fault
SETTLE = 1.0  # and this long after each recovery
KILL_DOWNTIME = 1.0  # single server: SIGKILL, then restart after this long

log = logging.getLogger("reliability")
#: Every server and cluster started, so the watchdog can kill them before it exits.
STARTED: list[NatsServer | NatsCluster] = []


# --- recording ---------------------------------------------------------------------------


@dataclass
class Injection:
    at: float
    recovered: float | None = None

    @property
    def recovery(self) -> float | None:
        return None if self.recovered is None else self.recovered - self.at


@dataclass
class RowResult:
    key: str
    fault: str
    injections: list[Injection] = field(default_factory=list)
    stream: StreamTally = field(default_factory=StreamTally)
    dropped: int = 0
    moves: int = 0  # preparatory force_reconnect() moves off the subscriber's node
    notes: list[str] = field(default_factory=list)
    error: str | None = None

    @property
    def recoveries(self) -> list[float]:
        return [r for inj in self.injections if (r := inj.recovery) is not None]

    @property
    def missed_recoveries(self) -> int:
        return sum(1 for inj in self.injections if inj.recovered is None)

    @property
    def ok(self) -> bool:
        return (
            self.error is None
            and not self.stream.from_buffer
            and not self.stream.unexplained
            and self.missed_recoveries == 0
        )


# --- one row: clients, stream, faults ------------------------------------------------------


class Row:
    """A publisher and a subscriber client for one fault, and the stream between them."""

    def __init__(self, result: RowResult, rate: int) -> None:
        self.result = result
        self.rate = rate
        self.subject = f"reliability.{result.key}"
        self.pub_events = ClientEvents()
        self.sub_events = ClientEvents()
        self.receiver = Receiver()
        self.pub_nc: nats_sync.Client | None = None
        self.sub_nc: nats_sync.Client | None = None
        self.sub: nats_sync.Subscription | None = None
        self.publisher: StreamPublisher | None = None

    # set-up

    def connect_publisher(self, servers: list[str], **options: Any) -> nats_sync.Client:
        options.setdefault("reconnect_delay_cb", lambda attempt: 0.1)
        self.pub_nc = nats_sync.connect(
            servers,
            name=f"reliability-pub-{self.result.key}",
            max_reconnect_attempts=-1,
            connect_timeout=2.0,
            **self.pub_events.options(),
            **options,
        )
        return self.pub_nc

    def connect_subscriber(self, server: str, **options: Any) -> None:
        options.setdefault("reconnect_delay_cb", lambda attempt: 0.05)
        self.sub_nc = nats_sync.connect(
            server,
            name=f"reliability-sub-{self.result.key}",
            max_reconnect_attempts=-1,
            ignore_discovered_servers=True,
            connect_timeout=2.0,
            **self.sub_events.options(),
            **options,
        )
        self.sub = self.sub_nc.subscribe(
            f"{self.subject}.*",
            cb=self.receiver.on_msg,
            pending_msgs_limit=4_000_000,
            pending_bytes_limit=512 * 1024 * 1024,
        )
        self.sub_nc.flush(FLUSH_TIMEOUT)

    def wait_interest(self, urls: list[str]) -> None:
        """Publishes probes from each server until the subscriber sees one from each.

        Route interest propagates asynchronously: this makes sure every server the
        publisher may move to routes the stream to the subscriber.
        """
        for url in urls:
            probe = nats_sync.connect(url, allow_reconnect=False, connect_timeout=2.0)
            try:
                deadline = now() + INTEREST_TIMEOUT
                token = f"{url} {now()}".encode()
                while token not in self.receiver.probes:
                    if now() > deadline:
                        raise RuntimeError(f"no route interest for {self.subject} via {url}")
                    probe.publish(f"{self.subject}.probe", token)
                    probe.flush(FLUSH_TIMEOUT)
                    time.sleep(0.02)
            finally:
                probe.close()

    def start_stream(self) -> StreamPublisher:
        assert self.pub_nc is not None
        self.publisher = StreamPublisher(
            self.pub_nc, f"{self.subject}.data", self.rate, name="reliability-pub"
        )
        self.publisher.start()
        time.sleep(WARMUP)
        return self.publisher

    # faults

    def inject(self, fault: Callable[[], None]) -> Injection:
        """Runs ``fault`` and waits for the publisher's reconnect."""
        injection = Injection(at=now())
        fault()
        injection.recovered = self.pub_events.wait_reconnected_after(
            injection.at, RECONNECT_TIMEOUT
        )
        self.result.injections.append(injection)
        number = len(self.result.injections)
        if injection.recovered is None:
            print(
                f"  [{self.result.key}] fault {number}: NO RECONNECT within "
                f"{RECONNECT_TIMEOUT:.0f}s (publisher {self.pub_state()})",
                flush=True,
            )
        else:
            print(
                f"  [{self.result.key}] fault {number}: publisher reconnected after "
                f"{1000 * (injection.recovered - injection.at):.0f} ms to "
                f"{self.pub_nc.connected_url if self.pub_nc else '?'}",
                flush=True,
            )
        return injection

    def pub_state(self) -> str:
        nc = self.pub_nc
        if nc is None:
            return "absent"
        return (
            f"connected={nc.is_connected} reconnecting={nc.is_reconnecting} "
            f"closed={nc.is_closed} last_error={nc.last_error!r}"
        )

    # end

    def finish(self) -> None:
        """Stops the stream, waits for the tail to arrive, computes the row."""
        result, receiver = self.result, self.receiver
        if self.publisher is not None:
            self.publisher.stop()
        if self.pub_nc is not None and self.pub_nc.is_connected:
            try:
                self.pub_nc.flush(FLUSH_TIMEOUT)
            except nats_sync.Error as err:
                result.notes.append(f"final publisher flush failed: {err}")
        receiver.wait_drained(self.publisher.published if self.publisher else 0)
        if self.sub_nc is not None and self.sub_nc.is_connected:
            with contextlib.suppress(nats_sync.Error):
                self.sub_nc.flush(FLUSH_TIMEOUT)
        time.sleep(0.2)
        if self.publisher is not None:
            analyse(result, self.publisher, receiver)
        if self.sub is not None:
            result.dropped = self.sub.dropped
        sub_reconnects = len(self.sub_events.reconnected_at)
        if sub_reconnects and result.key != "restart":
            result.notes.append(f"the subscriber reconnected {sub_reconnects} times")
        for label, events in (("publisher", self.pub_events), ("subscriber", self.sub_events)):
            if events.errors:
                kinds = sorted({e.split(":", 1)[0] for e in events.errors})
                log.info("%s %s errors: %s", result.key, label, events.errors)
                result.notes.append(f"{label} error_cb: {len(events.errors)} ({', '.join(kinds)})")

    def close(self) -> None:
        for nc in (self.pub_nc, self.sub_nc):
            if nc is not None:
                with contextlib.suppress(Exception):
                    nc.close()


def analyse(result: RowResult, publisher: StreamPublisher, receiver: Receiver) -> None:
    """The row's tally, and notes on where its losses and late arrivals fall."""
    stream = result.stream = tally(
        publisher, receiver, [(inj.at, inj.recovered) for inj in result.injections]
    )
    times = publisher.times
    errors = sum(stream.publish_errors.values())
    if errors:
        result.notes.append(f"publish() raised {errors} times: {publisher.first_error}")
    if stream.in_flight:
        fault_times = [inj.at for inj in result.injections]

        def from_nearest_fault(at: float) -> float:
            return at - min(fault_times, key=lambda fault: abs(at - fault))

        offsets = [from_nearest_fault(times[seq]) for seq in stream.in_flight]
        result.notes.append(
            f"the {len(offsets)} messages lost in flight were published between "
            f"{1000 * min(offsets):+.1f} ms and {1000 * max(offsets):+.1f} ms of a fault "
            "(written to the socket of a server that was dying or already dead)"
        )
    if receiver.late:
        during = sum(1 for seq in receiver.late if stream.near_a_fault(times[seq]))
        result.notes.append(
            f"{during} of the {len(receiver.late)} out-of-order arrivals were published from "
            f"{IN_FLIGHT_BEFORE:.0f} s before a fault to the publisher's reconnect (held by the "
            "faulted server and delivered after the newer ones)"
        )
    for label, seqs in (
        ("lost from the buffer", stream.from_buffer),
        ("lost unexplained", stream.unexplained),
    ):
        if seqs:
            first = times[0]
            sample = ", ".join(f"#{s} (t={times[s] - first:.3f}s)" for s in seqs[:10])
            faults = ", ".join(f"{inj.at - first:.3f}s" for inj in result.injections)
            print(
                f"  [{result.key}] {label}: {len(seqs)}: {sample}; faults at {faults}", flush=True
            )


# --- the faults ------------------------------------------------------------------------------


class LameDuckCluster(NatsCluster):
    """A cluster whose servers run with a short lame duck grace period."""

    def _new_server(
        self, index: int, routes: str | None, ports: list[int] | None = None
    ) -> NatsServer:
        server = super()._new_server(index, routes, ports)
        server.config = LDM_CONFIG
        return server


def node_of(cluster: NatsCluster, nc: nats_sync.Client) -> NatsServer | None:
    url = nc.connected_url
    return next((s for s in cluster.servers if s.url == url), None)


def cluster_row(
    cluster: NatsCluster, result: RowResult, rate: int, **pub_options: Any
) -> tuple[Row, NatsServer]:
    """Publisher on the cluster's URLs; subscriber on a node the publisher is not on."""
    row = Row(result, rate)
    pub_nc = row.connect_publisher(cluster.urls, **pub_options)
    pub_node = node_of(cluster, pub_nc)
    sub_node = next(s for s in cluster.servers if s is not pub_node)
    row.connect_subscriber(sub_node.url)
    row.wait_interest(cluster.urls)
    return row, sub_node


def move_off(row: Row, cluster: NatsCluster, avoid: NatsServer) -> None:
    """Moves the publisher off ``avoid`` (the subscriber's node) with the stream held."""
    nc, publisher = row.pub_nc, row.publisher
    assert nc is not None and publisher is not None
    moves = 0
    while node_of(cluster, nc) in (avoid, None) and moves < 5:
        with publisher.paused():
            nc.flush(FLUSH_TIMEOUT)
            start = now()
            nc.force_reconnect()
            if row.pub_events.wait_reconnected_after(start, RECONNECT_TIMEOUT) is None:
                raise RuntimeError("a preparatory force_reconnect() never reconnected")
            nc.flush(FLUSH_TIMEOUT)
        moves += 1
    if node_of(cluster, nc) in (avoid, None):
        raise RuntimeError("could not move the publisher off the subscriber's node")
    row.result.moves += moves


def fault_publisher_node(
    cluster: NatsCluster,
    result: RowResult,
    rate: int,
    times: int,
    hit: Callable[[Row, NatsServer], Injection],
    **pub_options: Any,
) -> Row:
    """``times`` faults, each ``hit`` on the publisher's node once it is off the
    subscriber's; a node that ``hit`` left dead is restarted before the next."""
    row, sub_node = cluster_row(cluster, result, rate, **pub_options)
    row.start_stream()
    for _ in range(times):
        move_off(row, cluster, sub_node)
        assert row.pub_nc is not None
        target = node_of(cluster, row.pub_nc)
        assert target is not None
        if hit(row, target).recovered is None:
            break
        if target.is_running:
            cluster.wait_for_mesh(MESH_TIMEOUT)
        else:
            target.start()
            cluster.wait_for_mesh(MESH_TIMEOUT)
            row.wait_interest([target.url])
        time.sleep(SETTLE)
    return row


def fault_cluster_kill(cluster: NatsCluster, result: RowResult, rate: int, times: int) -> Row:
    return fault_publisher_node(
        cluster, result, rate, times, lambda row, target: row.inject(target.kill)
    )


def fault_single_restart(result: RowResult, rate: int, times: int) -> Row:
    server = NatsServer()
    STARTED.append(server)
    server.start()
    row = Row(result, rate)
    try:
        sub_ready = threading.Event()
        sub_ready.set()

        def hold_until_subscriber_ready(attempt: int) -> float:
            sub_ready.wait(RECONNECT_TIMEOUT)
            return 0.0

        row.connect_subscriber(server.url)
        row.connect_publisher([server.url], reconnect_delay_cb=hold_until_subscriber_ready)
        row.wait_interest([server.url])
        row.start_stream()

        def kill_and_restart() -> None:
            sub_ready.clear()
            start = now()
            server.kill()
            time.sleep(KILL_DOWNTIME)
            server.start()
            assert row.sub_nc is not None
            try:
                if row.sub_events.wait_reconnected_after(start, RECONNECT_TIMEOUT) is None:
                    raise RuntimeError("the subscriber did not reconnect")
                row.sub_nc.flush(FLUSH_TIMEOUT)
            finally:
                sub_ready.set()

        for _ in range(times):
            if row.inject(kill_and_restart).recovered is None:
                break
            time.sleep(SETTLE)
        row.finish()
    finally:
        row.close()
        server.cleanup()
    return row


def fault_lame_duck(cluster: NatsCluster, result: RowResult, rate: int, times: int) -> Row:
    def lame_duck(row: Row, target: NatsServer) -> Injection:
        injection = row.inject(target.signal_lame_duck)
        deadline = now() + SERVER_EXIT_TIMEOUT
        while target.is_running and now() < deadline:
            time.sleep(0.05)
        if target.is_running:
            result.notes.append("a lame duck server did not exit in time and was killed")
            target.kill()
        return injection

    return fault_publisher_node(cluster, result, rate, times, lame_duck)


def fault_stale(cluster: NatsCluster, result: RowResult, rate: int, times: int) -> Row:
    def freeze(row: Row, target: NatsServer) -> Injection:
        try:
            return row.inject(target.pause)
        finally:
            target.resume()

    return fault_publisher_node(
        cluster, result, rate, times, freeze, ping_interval=0.2, max_outstanding_pings=2
    )


def fault_force_reconnect(cluster: NatsCluster, result: RowResult, rate: int, times: int) -> Row:
    row, _ = cluster_row(cluster, result, rate)
    row.start_stream()
    for _ in range(times):
        assert row.pub_nc is not None
        if row.inject(row.pub_nc.force_reconnect).recovered is None:
            break
        time.sleep(SETTLE / 2)
    return row


@dataclass(frozen=True)
class Fault:
    key: str
    title: str
    times: int


FAULTS = [
    Fault("kill", "kill -9 of the publisher's node of a 3-node cluster, then restart", 3),
    Fault("restart", "kill -9 of a single server, restart on the same port after 1 s", 3),
    Fault("lameduck", "lame duck mode of the publisher's node (grace 500 ms), then restart", 2),
    Fault("stale", "SIGSTOP of the publisher's node (ping 0.2 s, 2 outstanding), SIGCONT", 3),
    Fault("force", "force_reconnect() on a 3-node cluster", 10),
]


def run_fault(fault: Fault, cluster: NatsCluster | None, rate: int) -> RowResult:
    result = RowResult(fault.key, fault.title)
    print(f"{fault.key}: {fault.title} (x{fault.times})", flush=True)
    started = now()
    row: Row | None = None
    try:
        if fault.key == "restart":
            row = fault_single_restart(result, rate, fault.times)
        else:
            assert cluster is not None
            for server in cluster.servers:
                if not server.is_running:
                    server.start()
            cluster.wait_for_mesh(MESH_TIMEOUT)
            runner = {
                "kill": fault_cluster_kill,
                "lameduck": fault_lame_duck,
                "stale": fault_stale,
                "force": fault_force_reconnect,
            }[fault.key]
            row = runner(cluster, result, rate, fault.times)
            row.finish()
    except Exception as err:  # a broken row is reported, the others still run
        log.exception("row %s failed", fault.key)
        result.error = f"{type(err).__name__}: {err}"
        if row is not None and row.publisher is not None and not result.stream.published:
            with contextlib.suppress(Exception):
                row.finish()
    finally:
        if row is not None:
            row.close()
    stream = result.stream
    print(
        f"  [{fault.key}] published {stream.published}, received {stream.unique} unique, "
        f"lost {stream.lost} (in flight {len(stream.in_flight)}, from buffer "
        f"{len(stream.from_buffer)}, unexplained {len(stream.unexplained)}), buffered "
        f"{stream.buffered}, dup {stream.duplicates}, ooo {stream.out_of_order} "
        f"[{now() - started:.1f}s]" + (f" ERROR {result.error}" if result.error else ""),
        flush=True,
    )
    return result


# --- the report --------------------------------------------------------------------------------


def machine(load: tuple[float, float, float]) -> dict[str, str]:
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    try:
        server = subprocess.run(
            [find_server_binary(), "--version"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError) as err:
        server = f"unknown ({err})"
    return {
        "CPU": cpu,
        "Cores": str(os.cpu_count()),
        "OS": platform.platform(),
        "Python": f"{platform.python_implementation()} {platform.python_version()}",
        "nats-server": server.removeprefix("nats-server: "),
        "nats_sync": nats_sync.__version__,
        "Load average at start (1/5/15 min)": " / ".join(f"{x:.2f}" for x in load),
    }


TABLE_HEADER = [
    "| fault | injected | published | received (unique) | lost | lost in flight "
    "| buffered | lost from buffer | duplicates | out of order | refused "
    "| recovery median | recovery max |",
    "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
]


def table_line(r: RowResult) -> str:
    recoveries = r.recoveries
    median = statistics.median(recoveries) if recoveries else None
    worst = max(recoveries) if recoveries else None
    missed = f" ({r.missed_recoveries} never)" if r.missed_recoveries else ""
    s = r.stream
    lost = f"{s.lost:,}" + (f" ({len(s.unexplained):,} unexplained)" if s.unexplained else "")
    return (
        f"| {r.fault} | {len(r.injections)} | {s.published:,} | {s.unique:,} | {lost} "
        f"| {len(s.in_flight):,} | {s.buffered:,} | **{len(s.from_buffer):,}** "
        f"| {s.duplicates:,} | {s.out_of_order:,} | {s.refused:,} | {fmt_ms(median)} "
        f"| {fmt_ms(worst)}{missed} |"
    )


def note_line(r: RowResult) -> str | None:
    items = []
    if r.moves:
        items.append(
            f"{r.moves} preparatory force_reconnect() move{'s' * (r.moves > 1)} "
            "(stream held, not counted as a fault) took the publisher off the "
            "subscriber's node"
        )
    items += r.notes
    if r.dropped:
        items.append(f"the subscriber dropped {r.dropped} as a slow consumer")
    return row_notes(r.fault, items, r.error)


def table(results: list[RowResult]) -> list[str]:
    return [*TABLE_HEADER, *(table_line(r) for r in results)]


def merged(
    section: str, order: list[str], fresh: list[TableRow], titles: dict[str, str], output: Path
) -> MergedRows:
    """This run's rows of ``section`` with the ones it did not run, kept from the page."""
    return merge_rows(order, fresh, earlier_rows(section, titles, output))


def markdown(
    results: list[RowResult],
    rows: MergedRows,
    rate: int,
    elapsed: float,
    info: dict[str, str],
    when: str,
    command: str,
) -> str:
    ok = all(r.ok for r in results) and rows.ok
    out = [
        "# Reliability under faults",
        "",
        "What the client promises, and what this page checks against real `nats-server`s:",
        "",
        "- **Nothing published while disconnected is lost**, as long as it fits in",
        "  `pending_size` (2 MiB by default): `publish()` buffers it during the reconnect and",
        "  the client sends it, after re-subscribing, on the new connection. When the buffer is",
        "  full `publish()` raises `OutboundBufferLimitError` instead of dropping silently.",
        "- **Messages in flight at a crash can be lost**, as with every core NATS client: what",
        "  was already handed to the kernel when a server is killed (or what a frozen server",
        "  never read) is gone with that socket. Core NATS is at-most-once; use JetStream",
        "  for at-least-once (its own faults are in the JetStream section below).",
        "- The client finds a new server after each fault and reports it through",
        "  `reconnected_cb`.",
        "",
        f"Result of the last run: **{'all guarantees held' if ok else 'FAILED'}**.",
        "",
        "## Method",
        "",
        "For each fault, a publisher client publishes a numbered stream from one thread (16-byte",
        f"payloads: sequence number and publish time, ~{rate:,} msgs/s), and a subscriber client",
        "on a server that is not faulted (a callback subscription) records every sequence",
        "number that arrives. Faults are injected with `nats_sync.testing` (`NatsServer`,",
        "`NatsCluster`); the stream runs 1 s before the first fault and ~1 s after each",
        "recovery. Each row uses fresh clients with `max_reconnect_attempts=-1` and a short",
        "delay between passes over the pool (`reconnect_delay_cb`: 0.1 s for the publisher,",
        "0.05 s for the subscriber; the first pass starts at once).",
        "",
        "- **published**: messages `publish()` accepted. **buffered**: of those, published",
        "  while the publisher was reconnecting (`is_reconnecting` before and after the call),",
        "  i.e. held in the disconnect buffer. **refused**: `OutboundBufferLimitError`s.",
        "- **lost** = published - received unique, split into **lost from buffer** (buffered",
        "  messages: must be 0) and **lost in flight** (not buffered, published from 1 s",
        "  before a fault until the publisher reconnected: written to a socket that died).",
        "  In practice these are the last write the kernel accepted before the server died, or",
        "  after it died but before the client's reader saw the connection end (TCP accepts",
        "  one write after the peer is gone). Their number depends on scheduling: when the",
        "  machine is busy, the client's threads notice a crash later and the publisher's",
        "  catch-up burst goes out in that one write.",
        "  Any other loss is counted as unexplained, and fails the run like a loss from the",
        "  buffer.",
        "- **out of order**: arrivals with a lower sequence number than one already received.",
        "- **recovery**: from the fault injection to the publisher's `reconnected_cb`.",
        "",
        "The faults:",
        "",
        "1. **kill -9 in a cluster**: the publisher connects to the URLs of a 3-node cluster;",
        "   the subscriber is pinned to a node the publisher is not on. The publisher's node",
        "   gets SIGKILL; once the publisher has reconnected, the node is restarted on the",
        "   same ports and the mesh re-forms. Should the publisher have landed on the",
        "   subscriber's node, a `force_reconnect()` with the stream held moves it first.",
        "2. **kill -9 of a single server**: publisher and subscriber on the same server, which",
        "   gets SIGKILL and is restarted on the same port 1 s later. Both clients lose their",
        "   connection; to measure the publisher's buffer guarantee (and not the race between",
        "   two clients' reconnects), the publisher's `reconnect_delay_cb` holds its reconnect",
        "   until the subscriber has reconnected and flushed, so the SUB is in place before the",
        "   buffered messages arrive. Recovery therefore includes the 1 s downtime and the",
        "   subscriber's reconnect.",
        "3. **lame duck mode**: the publisher's node gets SIGUSR2 (`lame_duck_grace_period:",
        '   "500ms"`). The client leaves on the server\'s lame duck INFO; the node exits and',
        "   is restarted once the publisher has moved.",
        "4. **SIGSTOP** of the publisher's node, with `ping_interval=0.2` and",
        "   `max_outstanding_pings=2`: the client declares the connection stale and moves; the",
        "   node gets SIGCONT once the publisher has reconnected elsewhere. Messages written to",
        "   the frozen server's socket before the client gave up are delivered late (out of",
        "   order) or lost in flight, depending on what the server does with them on waking.",
        "5. **force_reconnect()** on the cluster: the client drops its connection and",
        "   reconnects (to another node, the one left is tried last).",
        "",
        "## Results",
        "",
        *TABLE_HEADER,
        *rows.lines,
        "",
        *kept_sentence(rows, {f.key: f.title for f in FAULTS}),
    ]
    if rows.notes:
        out += ["Notes:", "", *rows.notes, ""]
    out += [
        "## Machine",
        "",
        *[f"- {k}: {v}" for k, v in info.items()],
        f"- Date: {when}",
        f"- Run time: {elapsed:.0f} s",
        "",
        "The numbers vary from run to run (timing of the faults against the stream); the",
        "guarantee columns (lost from buffer, recovery) must not. Reproduce with:",
        "",
        "```",
        command,
        "```",
        "",
        "(`tools/reliability.py`; `RELIABILITY_ARGS` passes options such as `--only kill,force`",
        "or `--rate 1000`; the run exits non-zero when a buffered message is lost, a loss is",
        "unexplained, or a fault was not recovered from.)",
        "",
        rows.comment,
    ]
    return "\n".join(out)


JS_OUTRO = [
    "(`tools/_jsfaults.py`, run by `tools/reliability.py`; the run exits non-zero when an",
    "acknowledged publish is lost, a stored message is never consumed, a retry is stored",
    "twice, a publish is never acknowledged, or publishing or consuming does not recover.)",
]


def js_markdown(
    ok: bool,
    rows: MergedRows,
    intro: list[str],
    header: list[str],
    titles: dict[str, str],
    outro: list[str],
    elapsed: float,
    info: dict[str, str],
    when: str,
    command: str,
) -> str:
    """A JetStream section (``jetstream`` or ``jetstream_fast``): ``intro``, the
    results table (``header``, ``rows``), the run and ``outro``."""
    ok = ok and rows.ok
    out = [
        *intro,
        "### Results",
        "",
        f"Result of the last run: **{'all guarantees held' if ok else 'FAILED'}**.",
        "",
        *header,
        *rows.lines,
        "",
        *kept_sentence(rows, titles),
    ]
    if rows.notes:
        out += ["Notes:", "", *rows.notes, ""]
    out += [
        f"Run on {when}, nats-server {info['nats-server']}, {info['Python']}, "
        f"{info['Cores']} cores, {info['CPU']} (load average at start "
        f"{info['Load average at start (1/5/15 min)']}); these rows took {elapsed:.0f} s.",
        "Reproduce with:",
        "",
        "```",
        command,
        "```",
        "",
        *outro,
        "",
        rows.comment,
    ]
    return "\n".join(out)


def write_spark_section(
    results: list[sparkrows.SparkResult],
    elapsed: float,
    info: dict[str, str],
    when: str,
    command: str,
    output: Path,
) -> None:
    """The ``spark`` section: this run's Spark rows and the ones it did not run."""
    titles = {r.key: r.title for r in sparkrows.SPARK_ROWS}
    rows = merged(
        _sparkreport.SECTION,
        [r.key for r in sparkrows.SPARK_ROWS],
        [
            TableRow(r.key, _sparkreport.table_row(r), _sparkreport.note_line(r), r.ok, when)
            for r in results
        ],
        titles,
        output,
    )
    run_line = (
        f"Run on {when}, nats-server {info['nats-server']}, {info['Python']}, pyspark "
        f"{spark_version()}, {info['Cores']} cores, {info['CPU']} (load average at start "
        f"{info['Load average at start (1/5/15 min)']}); these rows took {elapsed:.0f} s."
    )
    write_section(
        _sparkreport.SECTION,
        _sparkreport.markdown(rows, titles, all(r.ok for r in results), run_line, command),
        output,
        after="jetstream_fast_resume",
    )


def spark_version() -> str:
    try:
        import pyspark  # noqa: PLC0415 - present only where the Spark rows ran

        return str(pyspark.__version__)
    except ImportError:
        return "?"


# --- main ----------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument(
        "--output",
        type=Path,
        default=DEFAULT_PAGE,
        help="markdown file to write (default: docs/RELIABILITY.md)",
    )
    parser.add_argument(
        "--rate", type=int, default=2000, help="messages per second of the core rows"
    )
    parser.add_argument(
        "--js-rate",
        type=int,
        default=1000,
        help="publish_async messages per second of the JetStream rows",
    )
    parser.add_argument(
        "--fast-rate",
        type=int,
        default=2000,
        help="messages per second of the fast-ingest rows (js_fast, js_fast_resume)",
    )
    parser.add_argument(
        "--only",
        default="",
        help="comma-separated faults to run: "
        + ",".join(all_keys())
        + " (spark: every Spark row; spark_kill: both of its publish modes)",
    )
    parser.add_argument(
        "--spark-seconds",
        type=float,
        default=sparkrows.INPUT_SECONDS,
        help="seconds of input of each Spark row (default %(default).0f; less for a try)",
    )
    parser.add_argument(
        "--spark-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an option for the Spark rows' source and sink (repeatable)",
    )
    parser.add_argument(
        "--spark-master",
        default="local[2,4]",
        help=(
            "the Spark rows' master (default %(default)s: two cores, and a task tried up "
            "to four times, as spark.task.maxFailures on a cluster; plain local[2] tries "
            "each task once, so a killed Python worker fails the query)"
        ),
    )
    parser.add_argument(
        "--deadline",
        type=float,
        default=None,
        help="seconds after which the whole run is abandoned (exit 3; default 720, "
        "and 3 minutes more for each Spark row)",
    )
    parser.add_argument("--verbose", action="store_true", help="log nats_sync at INFO")
    return parser.parse_args(argv)


def all_keys() -> list[str]:
    """Every row's key, in the order they run."""
    return [
        *(f.key for f in FAULTS),
        *(f.key for f in JS_FAULTS),
        *(f.key for f in FAST_FAULTS),
        *(f.key for f in FAST_RESUME_FAULTS),
        *(r.key for r in sparkrows.SPARK_ROWS),
    ]


@dataclass
class Selection:
    """The rows of each kind a run makes."""

    core: list[Fault]
    js: list[JsFault]
    fast: list[JsFault]
    resume: list[JsFault]
    spark: list[sparkrows.SparkRow]


def selected(only: str) -> Selection | None:
    """The rows ``--only`` names (all when empty); None if it names an unknown one."""
    if not only:
        return Selection(FAULTS, JS_FAULTS, FAST_FAULTS, FAST_RESUME_FAULTS, sparkrows.SPARK_ROWS)
    wanted = {key.strip() for key in only.split(",") if key.strip()}
    groups = {"spark", *(f.key for f in sparkrows.SPARK_FAULTS)}
    unknown = wanted - set(all_keys()) - groups
    if unknown:
        print(f"unknown fault(s): {', '.join(sorted(unknown))}", file=sys.stderr)
        return None
    return Selection(
        [f for f in FAULTS if f.key in wanted],
        [f for f in JS_FAULTS if f.key in wanted],
        [f for f in FAST_FAULTS if f.key in wanted],
        [f for f in FAST_RESUME_FAULTS if f.key in wanted],
        sparkrows.select_rows(sorted(wanted)),
    )


def spark_options(pairs: list[str]) -> dict[str, str] | None:
    """``--spark-option`` values as a dict; None if one has no ``=``."""
    options: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            print(f"--spark-option {pair!r}: expected KEY=VALUE", file=sys.stderr)
            return None
        options[key.strip()] = value
    return options


def run_spark_rows(
    rows: list[sparkrows.SparkRow], args: argparse.Namespace, options: dict[str, str]
) -> list[sparkrows.SparkResult]:
    """The Spark rows, one after the other, on one SparkSession."""
    if not rows:
        return []
    print(f"starting Spark ({args.spark_master}) for the Spark rows ...", flush=True)
    spark = sparkrows.spark_session(args.spark_master)
    try:
        return [
            sparkrows.run_spark_row(
                spark,
                row,
                input_seconds=args.spark_seconds,
                options=options,
                track=STARTED.append,
                seed=index,
            )
            for index, row in enumerate(rows)
        ]
    finally:
        spark.stop()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(threadName)s %(name)s %(message)s",
    )
    chosen = selected(args.only)
    options = spark_options(args.spark_option)
    if chosen is None or options is None:
        return 2
    faults, js_faults, fast_faults, resume_faults = (
        chosen.core,
        chosen.js,
        chosen.fast,
        chosen.resume,
    )
    if args.deadline is None:
        args.deadline = 720.0 + len(chosen.spark) * (args.spark_seconds + 120.0)
    started = now()
    load = os.getloadavg()
    when = run_date()
    cluster: NatsCluster | None = None

    def cleanup() -> None:
        for started in STARTED:
            started.cleanup()

    watchdog = start_watchdog("reliability", args.deadline, cleanup)
    results: list[RowResult] = []
    js_results: list[JsResult] = []
    fast_results: list[FastResult] = []
    resume_results: list[ResumeResult] = []
    spark_results: list[sparkrows.SparkResult] = []
    resume_done = started
    try:
        if any(f.key != "restart" for f in faults):
            cluster = LameDuckCluster(3, name="reliability")
            STARTED.append(cluster)
            cluster.start()
        results = [run_fault(fault, cluster, args.rate) for fault in faults]
        if cluster is not None:
            cluster.cleanup()  # the JetStream rows get the machine to themselves
        core_done = now()
        js_results = [run_js_fault(fault, args.js_rate, STARTED.append) for fault in js_faults]
        js_done = now()
        fast_results = [
            run_fast_fault(fault, args.fast_rate, STARTED.append) for fault in fast_faults
        ]
        fast_done = now()
        resume_results = [
            run_fast_resume_fault(fault, args.fast_rate, STARTED.append) for fault in resume_faults
        ]
        resume_done = now()
        spark_results = run_spark_rows(chosen.spark, args, options)
    finally:
        cleanup()
    elapsed = now() - started
    command = "make reliability" + (
        f' RELIABILITY_ARGS="{" ".join(argv or sys.argv[1:])}"' if (argv or sys.argv[1:]) else ""
    )
    info = machine(load)
    # Each section is written only when this run has rows of it, and keeps the rows of
    # it that were not run (--only): a JetStream run leaves the core table alone.
    if results:
        rows = merged(
            "faults",
            [f.key for f in FAULTS],
            [TableRow(r.key, table_line(r), note_line(r), r.ok, when) for r in results],
            {f.key: f.title for f in FAULTS},
            args.output,
        )
        write_section(
            "faults",
            markdown(results, rows, args.rate, core_done - started, info, when, command),
            args.output,
        )
    if js_results:
        rows = merged(
            "jetstream",
            [f.key for f in JS_FAULTS],
            [TableRow(r.key, js_table_line(r), js_note_line(r), r.ok, when) for r in js_results],
            {f.key: f.title for f in JS_FAULTS},
            args.output,
        )
        titles = {f.key: f.title for f in JS_FAULTS}
        write_section(
            "jetstream",
            js_markdown(
                all(r.ok for r in js_results),
                rows,
                js_intro(args.js_rate),
                js_table_header(),
                titles,
                JS_OUTRO,
                js_done - core_done,
                info,
                when,
                command,
            ),
            args.output,
            after="faults",
        )
    if fast_results:
        titles = {f.key: f.title for f in FAST_FAULTS}
        rows = merged(
            "jetstream_fast",
            [f.key for f in FAST_FAULTS],
            [
                TableRow(r.key, fast_table_line(r), fast_note_line(r), r.ok, when)
                for r in fast_results
            ],
            titles,
            args.output,
        )
        write_section(
            "jetstream_fast",
            js_markdown(
                all(r.ok for r in fast_results),
                rows,
                fast_intro(args.fast_rate),
                fast_table_header(),
                titles,
                fast_outro(),
                fast_done - js_done,
                info,
                when,
                command,
            ),
            args.output,
            after="jetstream",
        )
    if resume_results:
        titles = {f.key: f.title for f in FAST_RESUME_FAULTS}
        rows = merged(
            "jetstream_fast_resume",
            [f.key for f in FAST_RESUME_FAULTS],
            [
                TableRow(r.key, resume.table_row(r), resume.note_line(r), r.ok, when)
                for r in resume_results
            ],
            titles,
            args.output,
        )
        write_section(
            "jetstream_fast_resume",
            js_markdown(
                all(r.ok for r in resume_results),
                rows,
                resume.intro(args.fast_rate),
                resume.table_header(),
                titles,
                resume.outro(),
                resume_done - fast_done,
                info,
                when,
                command,
            ),
            args.output,
            after="jetstream_fast",
        )
    if spark_results:
        write_spark_section(spark_results, now() - resume_done, info, when, command, args.output)
    watchdog.set()
    if results:
        print("\n".join(table(results)))
    if js_results:
        print("\n".join([*js_table_header(), *(js_table_line(r) for r in js_results)]))
    if fast_results:
        print("\n".join([*fast_table_header(), *(fast_table_line(r) for r in fast_results)]))
    if resume_results:
        print("\n".join([*resume.table_header(), *map(resume.table_row, resume_results)]))
    if spark_results:
        print(
            "\n".join([*_sparkreport.table_header(), *map(_sparkreport.table_row, spark_results)])
        )
    print(f"wrote {args.output} in {elapsed:.0f}s")
    failed = (
        [r.key for r in results if not r.ok]
        + [r.key for r in js_results if not r.ok]
        + [r.key for r in fast_results if not r.ok]
        + [r.key for r in resume_results if not r.ok]
        + [r.key for r in spark_results if not r.ok]
    )
    if failed:
        print(f"reliability: FAILED: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

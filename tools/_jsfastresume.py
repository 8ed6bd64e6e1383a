"""The fast-ingest resume row of ``make reliability`` (``js_fast_resume``): fast batches
(``js.fast_publisher()``, gap ``fail``) into an R3 stream whose leader steps down five
times and is killed -9 once, each failed batch resumed by the recipe of
docs/guides/jetstream.md ("Resuming a batch that failed part-way").

How it works: a 3-node JetStream cluster (``nats_sync.testing``) holds an R3 stream with
``allow_batched`` and a 120 s duplicate window. A publisher thread (`ResumingPublisher`)
stores numbered messages (16-byte payloads: the number and when it became due, the
same bytes on every attempt; ``msg_id=<row>-<number>``) in chunks of `CHUNK`, each with
the guide's loop, as a user would write it: a batch from ``js.fast_publisher()`` with
its defaults, ``add`` for all but the last message and ``commit`` for the last; when
``add`` or ``commit`` raises, ``done += fp.ack_sequence``, wait 1 s and start a new
batch from ``done`` with the same message ids; after a ``commit``, ``done +=
final.count``; at most 30 batches a chunk. Messages become due at a steady rate; one
that is due is sent at once (a resumed batch catches up), one that is not waits.

The faults come from a separate admin client, one at a time: the stream leader steps
down (``$JS.API.STREAM.LEADER.STEPDOWN``) five times, and between the second and the
third step-down the leader is killed -9 instead; it starts again on its port and store
once publishing has recovered, and the next fault waits until it is a current replica.

Then the stream is read back (``get_msg_columns``) and must hold exactly the message
ids ``<row>-0`` ... ``<row>-(N-1)``, each once, in that order, with the payload sent
under each: **lost**, **duplicated** and **out of order** count the departures (and the
row fails on any). Recovery is the time from a fault to the first acknowledgement
(flow ack or final count) of a message sent after it. The recipe giving up (30 failed
batches in one chunk), a publisher that hangs or raises something that is not a
``nats_sync.Error``, or a fault never recovered from fails the row too.
"""

from __future__ import annotations

import contextlib
import json
import logging
import statistics
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import nats_sync
from nats_sync.jetstream import FastPublisher, JetStream, Stream
from nats_sync.testing import NatsCluster, NatsServer
from tools._jsfaults import (
    DUPLICATE_WINDOW,
    MSG_ID,
    RECOVERY_TIMEOUT,
    REPLICAS_TIMEOUT,
    SETTLE,
    WARMUP,
    JsFault,
    JsInjection,
    WarningTally,
    current,
    fmt_ms,
    fmt_s,
)
from tools._reliability_doc import row_notes
from tools._streamcheck import PAYLOAD, ClientEvents, now

CHUNK = 5000  # messages per run of the recipe (one batch when nothing fails)
ATTEMPTS = 30  # the recipe's: batches per chunk before it gives up
RESUME_PAUSE = 1.0  # the recipe's: after a failed batch, before the next one
STEPDOWNS = 5
KILL_AFTER = 2  # the kill -9 comes after this many step-downs
READ_BATCH = 5000  # get_msg_columns(batch=...)
#: The publisher's thread ends within this of `ResumingPublisher.stop`: the rest of its
#: chunk, and the recipe's batches at worst (an ack timeout, 5 s, and the pause each).
STOP_TIMEOUT = ATTEMPTS * 6.0 + 30.0

FAST_RESUME_FAULTS = [
    JsFault(
        "js_fast_resume",
        "JetStream fast ingest resumed by the guide's recipe: the R3 "
        "stream's leader steps down 5 times and is killed -9 once (restarted) in a "
        "3-node cluster",
        STEPDOWNS + 1,
    ),
]


# --- the publisher ------------------------------------------------------------------------


@dataclass
class BatchRecord:
    """One batch of the recipe as the publisher saw it."""

    first: int  # the number of its first message
    sent: int = 0  # messages added (the commit included)
    acked: int = 0  # acknowledged: ack_sequence, or the final count
    outcome: str = "open"  # "committed", or the error that ended it

    def describe(self) -> str:
        return f"{self.outcome} at {self.sent:,} sent / {self.acked:,} acked"


class ResumingPublisher(threading.Thread):
    """Stores the numbered messages chunk by chunk with the guide's recipe, until
    `stop` (which lets it finish the chunk it is in).

    The row's thread only calls `position`, `wait_acked_after` and `stop` while this
    one runs; what they read is guarded by ``_lock``.
    """

    def __init__(self, js: JetStream, subject: str, key: str, rate: int) -> None:
        super().__init__(name="reliability-fast-resume", daemon=True)
        self.js, self.subject, self.key, self.rate = js, subject, key, rate
        self.payloads: list[bytes] = []  # number -> its payload, on every attempt
        self.batches: list[BatchRecord] = []
        self.chunk_batches: list[int] = []  # batches each chunk took (at most ATTEMPTS)
        self.attempts: Counter[int] = Counter()  # number -> times sent
        self.failure: BaseException | None = None
        self.anomalies: list[str] = []  # what the library's answers should never say
        self._lock = threading.Condition()
        self._stopping = threading.Event()
        self._epoch = 0.0
        self._sent_at: list[float] = []  # the open batch's send times, by batch seq - 1
        self._acked_events: list[tuple[float, float]] = []  # (sent, acknowledged)
        self._latest_acked_send = float("-inf")

    def msg_id(self, number: int) -> str:
        return f"{self.key}-{number}"

    @property
    def published(self) -> int:
        return len(self.payloads)

    def run(self) -> None:
        self._epoch = now()
        try:
            while not self._stopping.is_set():
                self.store_chunk(len(self.payloads), CHUNK)
        except BaseException as error:  # reported by stop(), not lost on a thread
            self.failure = error

    # the recipe (docs/guides/jetstream.md), with the row's bookkeeping around it

    def store_chunk(self, first: int, count: int) -> None:
        """Stores numbers ``first`` to ``first + count - 1`` once each, in order."""
        done = 0  # first .. first + done - 1 are stored
        self.chunk_batches.append(0)
        for _attempt in range(ATTEMPTS):
            self.chunk_batches[-1] += 1
            fp = self.js.fast_publisher()  # gap "fail": stored in order, without a hole
            record = self._open(first + done)
            try:
                for n in range(done, count - 1):
                    self._add(fp, record, first + n)
                last = first + count - 1
                payload = self._sending(record, last)
                final = fp.commit(self.subject, payload, msg_id=self.msg_id(last))
            except nats_sync.Error as error:  # ended early, or no ack in time
                self._acknowledged(record, fp.ack_sequence, error_kind(error))
                done += fp.ack_sequence  # acknowledged: stored
                time.sleep(RESUME_PAUSE)  # a restarted server, a new stream leader
                continue
            self._acknowledged(record, final.count, "committed")
            done += final.count  # the server's count, duplicates included
            if done == count:
                return
        raise RuntimeError(
            f"the recipe stored {done} of numbers {first}..{first + count - 1} "
            f"in {ATTEMPTS} batches"
        )

    def _add(self, fp: FastPublisher, record: BatchRecord, number: int) -> None:
        fp.add(self.subject, self._sending(record, number), msg_id=self.msg_id(number))
        if fp.ack_sequence > record.acked:
            self._acknowledged(record, fp.ack_sequence)

    def _due(self, number: int) -> bytes:
        """The payload of ``number``, once it is due (made on its first attempt)."""
        if number == len(self.payloads):
            due = self._epoch + number / self.rate
            delay = due - now()
            if delay > 0:
                time.sleep(delay)
            self.payloads.append(PAYLOAD.pack(number, due))
        return self.payloads[number]

    # bookkeeping

    def _open(self, first: int) -> BatchRecord:
        record = BatchRecord(first)
        with self._lock:
            self.batches.append(record)
            self._sent_at = []
        return record

    def _sending(self, record: BatchRecord, number: int) -> bytes:
        """``number``'s payload, noted as sent (by the open batch, now)."""
        payload = self._due(number)
        self.attempts[number] += 1
        with self._lock:
            record.sent += 1
            self._sent_at.append(now())
        return payload

    def _acknowledged(self, record: BatchRecord, upto: int, outcome: str | None = None) -> None:
        with self._lock:
            if upto > len(self._sent_at):
                self.anomalies.append(
                    f"a batch acknowledged {upto} of the {len(self._sent_at)} messages it sent"
                )
                upto = len(self._sent_at)
            if upto > record.acked:
                sent = self._sent_at[upto - 1]
                self._acked_events.append((sent, now()))
                if sent > self._latest_acked_send:
                    self._latest_acked_send = sent
                    self._lock.notify_all()
                record.acked = upto
            if outcome is not None:
                record.outcome = outcome

    # the row's thread

    def position(self) -> tuple[int, int]:
        """The open batch (1-based, of the run) and how many messages it has sent."""
        with self._lock:
            return len(self.batches), len(self._sent_at)

    def wait_acked_after(self, start: float, timeout: float) -> float | None:
        """When the first acknowledgement of a message sent at or after ``start`` was
        seen; None if none within ``timeout``."""
        with self._lock:
            if not self._lock.wait_for(lambda: self._latest_acked_send >= start, timeout):
                return None
            return min(acked for sent, acked in self._acked_events if sent >= start)

    def stop(self) -> None:
        """Lets the thread finish its chunk and joins it; raises if it hangs or failed."""
        self._stopping.set()
        self.join(STOP_TIMEOUT)
        if self.is_alive():
            raise RuntimeError(f"{self.name} did not end within {STOP_TIMEOUT:.0f} s")
        if self.failure is not None:
            raise RuntimeError(f"{self.name} failed: {self.failure}") from self.failure


def error_kind(error: BaseException) -> str:
    """The error's type, and its cause's when it has one (``BatchClosedError`` says
    why the batch ended there)."""
    kind = type(error).__name__
    return kind if error.__cause__ is None else f"{kind} ({type(error.__cause__).__name__})"


# --- results ------------------------------------------------------------------------------


@dataclass
class ResumeInjection(JsInjection):
    kind: str = "step-down"  # or "kill -9"
    batch: int = 0  # the batch open when the fault came (1-based, of the run)
    batch_sent: int = 0  # and how many messages it had sent
    ended_batch: bool = False  # that batch failed (the recipe resumed it)
    client_on_node: bool = False  # kill -9: the publisher's client was on the node


@dataclass
class ResumeTally:
    """The stream read back against the numbers published (see the module)."""

    published: int = 0
    stored: int = 0
    lost: list[int] = field(default_factory=list)
    duplicated: list[int] = field(default_factory=list)
    out_of_order: int = 0  # stored messages with a lower number than one before them
    wrong_payload: list[int] = field(default_factory=list)  # numbers
    foreign: list[int] = field(default_factory=list)  # stream seqs with no such msg id
    resent: int = 0  # attempts after the first, of every number
    batches: int = 0
    most_batches: int = 0  # the most batches one chunk took (the recipe allows ATTEMPTS)
    failed: Counter[str] = field(default_factory=Counter)  # failed batches, by error


@dataclass
class ResumeResult:
    key: str
    fault: str
    injections: list[ResumeInjection] = field(default_factory=list)
    tally: ResumeTally = field(default_factory=ResumeTally)
    anomalies: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    error: str | None = None

    @property
    def recoveries(self) -> list[float]:
        return [r for inj in self.injections if (r := inj.recovery) is not None]

    @property
    def missed_recoveries(self) -> int:
        return sum(1 for inj in self.injections if inj.recovery is None)

    @property
    def ok(self) -> bool:
        t = self.tally
        return (
            self.error is None
            and not t.lost
            and not t.duplicated
            and not t.out_of_order
            and not t.wrong_payload
            and not t.foreign
            and not self.anomalies
            and self.missed_recoveries == 0
            and t.stored == t.published
        )


def read_back(stream: Stream, last_seq: int) -> list[tuple[int, str | None, bytes]]:
    """Every stored message as (stream seq, msg id, payload), in stream order."""
    stored: list[tuple[int, str | None, bytes]] = []
    for run in stream.get_msg_columns(1, end_seq=max(last_seq, 1), batch=READ_BATCH):
        for seq, data, headers in zip(run.seqs, run.datas, run.headers, strict=True):
            msg_id = (headers or {}).get(MSG_ID)
            stored.append((seq, msg_id if isinstance(msg_id, str) else None, data))
    return stored


def analyse(
    publisher: ResumingPublisher, stored: list[tuple[int, str | None, bytes]]
) -> ResumeTally:
    """Compares the stream with ``<row>-0`` ... ``<row>-(N-1)``, each once, in order."""
    t = ResumeTally(published=publisher.published, stored=len(stored))
    t.resent = sum(publisher.attempts.values()) - t.published
    t.batches = len(publisher.batches)
    t.most_batches = max(publisher.chunk_batches, default=0)
    t.failed = Counter(
        b.outcome for b in publisher.batches if b.outcome not in ("committed", "open")
    )
    prefix = f"{publisher.key}-"
    seen: Counter[int] = Counter()
    previous = -1
    for seq, msg_id, data in stored:
        suffix = msg_id[len(prefix) :] if msg_id and msg_id.startswith(prefix) else ""
        if not suffix.isdigit() or int(suffix) >= t.published:
            t.foreign.append(seq)
            continue
        number = int(suffix)
        seen[number] += 1
        if seen[number] == 2:
            t.duplicated.append(number)
        if number < previous:
            t.out_of_order += 1
        previous = max(previous, number)
        if data != publisher.payloads[number]:
            t.wrong_payload.append(number)
    t.lost = [n for n in range(t.published) if not seen[n]]
    return t


# --- the row -------------------------------------------------------------------------------


class ResumeRow:
    """The cluster's clients (publisher, admin), the stream and the publisher."""

    def __init__(self, result: ResumeResult, rate: int) -> None:
        self.result, self.rate = result, rate
        self.name = result.key.upper()
        self.subject = f"reliability.{result.key}"
        self.events = ClientEvents()
        self.nc: nats_sync.Client | None = None
        self.admin: nats_sync.Client | None = None
        self.stream: Stream | None = None
        self.publisher: ResumingPublisher | None = None
        self.finishing = False
        self.warnings = WarningTally()
        logging.getLogger("nats_sync").addHandler(self.warnings)

    def start(self, cluster: NatsCluster) -> None:
        self.nc = nats_sync.connect(
            cluster.urls,
            name=f"reliability-pub-{self.result.key}",
            max_reconnect_attempts=-1,
            connect_timeout=2.0,
            reconnect_delay_cb=lambda attempt: 0.1,
            **self.events.options(),
        )
        self.admin = nats_sync.connect(
            cluster.urls,
            name=f"reliability-admin-{self.result.key}",
            max_reconnect_attempts=-1,
            connect_timeout=2.0,
            reconnect_delay_cb=lambda attempt: 0.1,
        )
        self.stream = self.admin.jetstream(timeout=10).create_stream(
            name=self.name,
            subjects=[f"{self.subject}.>"],
            num_replicas=3,
            allow_batched=True,
            duplicate_window=DUPLICATE_WINDOW,
        )
        self.publisher = ResumingPublisher(
            self.nc.jetstream(), f"{self.subject}.data", self.result.key, self.rate
        )
        self.publisher.start()
        time.sleep(WARMUP)

    def leader(self) -> str:
        assert self.stream is not None
        deadline = now() + RECOVERY_TIMEOUT
        while True:
            with contextlib.suppress(nats_sync.Error):
                leader = (self.stream.info().cluster or {}).get("leader")
                if leader:
                    return str(leader)
            if now() > deadline:
                raise RuntimeError(f"stream {self.name} had no leader for {RECOVERY_TIMEOUT:.0f} s")
            time.sleep(0.1)

    def step_down(self) -> None:
        assert self.admin is not None
        reply = self.admin.request(f"$JS.API.STREAM.LEADER.STEPDOWN.{self.name}", b"", timeout=10)
        answer = json.loads(reply.data)
        if not answer.get("success"):
            raise RuntimeError(f"stream leader step-down refused: {answer}")

    def inject(self, kind: str) -> ResumeInjection:
        assert self.publisher is not None
        batch, sent = self.publisher.position()
        return ResumeInjection(at=now(), kind=kind, batch=batch, batch_sent=sent)

    def recover(self, injection: ResumeInjection) -> bool:
        assert self.publisher is not None
        publisher = self.publisher
        injection.acked = publisher.wait_acked_after(injection.at, RECOVERY_TIMEOUT)
        batch = publisher.batches[injection.batch - 1] if injection.batch else None
        injection.ended_batch = batch is not None and batch.outcome not in ("open", "committed")
        self.result.injections.append(injection)
        ended = [b.describe() for b in publisher.batches[max(injection.batch, 1) - 1 : -1]]
        print(
            f"  [{self.result.key}] fault {len(self.result.injections)} ({injection.kind} "
            f"in batch {injection.batch} after {injection.batch_sent:,} messages): first "
            f"new ack after {fmt_s(injection.recovery)}; batches ended since (outcome at "
            f"sent / acked): {'; '.join(ended) or 'none'}",
            flush=True,
        )
        return injection.acked is not None

    def finish(self) -> None:
        """Stops the publisher (after its chunk), reads the stream back, computes."""
        assert self.publisher is not None and self.stream is not None
        self.finishing = True
        try:
            self.publisher.stop()
        finally:
            if not self.publisher.is_alive():
                self.compute()

    def compute(self) -> None:
        assert self.publisher is not None and self.stream is not None
        result = self.result
        stored = read_back(self.stream, self.stream.info().state.last_seq)
        t = result.tally = analyse(self.publisher, stored)
        result.anomalies = list(self.publisher.anomalies)
        failed = [inj for inj in result.injections if inj.ended_batch]
        result.notes.append(
            f"{t.batches:,} batches for {t.published // CHUNK:,} chunks of {CHUNK:,}, "
            f"{t.most_batches} at most for one chunk (the recipe gives up after "
            f"{ATTEMPTS}); the "
            f"faults that ended the batch they came in: {len(failed)} of "
            f"{len(result.injections)} ("
            + ", ".join(
                f"{i.kind} {'ended' if i.ended_batch else 'survived'}" for i in result.injections
            )
            + ")"
        )
        kills = [i for i in result.injections if i.kind == "kill -9"]
        if kills:
            result.notes.append(
                "the publisher's client was connected to the killed leader"
                if kills[0].client_on_node
                else "the publisher's client was on another node than the killed leader"
            )
        if t.failed:
            kinds = ", ".join(f"{n} {kind}" for kind, n in t.failed.most_common())
            result.notes.append(
                f"failed batches: {kinds}; {t.resent:,} messages resent with the same msg_id"
            )
        result.notes.append(
            "recovery after each fault (batch, messages it had sent): "
            + ", ".join(
                f"{fmt_s(i.recovery)} ({i.kind}: {i.batch}, {i.batch_sent:,})"
                for i in result.injections
            )
        )
        for label, numbers in (
            ("lost", t.lost),
            ("duplicated", t.duplicated),
            ("stored with another payload", t.wrong_payload),
        ):
            if numbers:
                result.notes.append(f"**{label}**: {len(numbers):,}, #{numbers[:10]}")
        if t.out_of_order:
            result.notes.append(f"**out of order**: {t.out_of_order:,}")
        if t.foreign:
            result.notes.append(f"**stream seqs with no msg id sent**: {t.foreign[:10]}")
        for anomaly in result.anomalies[:5]:
            result.notes.append(f"**{anomaly}**")
        if self.warnings.kinds:
            kinds = ", ".join(f"{n} {kind}" for kind, n in self.warnings.kinds.most_common())
            result.notes.append(f"warnings logged by nats_sync: {kinds}")
        if self.events.reconnected_at:
            result.notes.append(
                f"the publisher's client reconnected {len(self.events.reconnected_at)} times"
            )
        errors = self.events.error_kinds()
        if errors:
            kinds = ", ".join(f"{n} {kind}" for kind, n in errors.most_common())
            result.notes.append(f"client error_cb: {kinds}")

    def salvage(self) -> None:
        """After a fault step raised: the figures so far (best effort)."""
        if self.publisher is not None and not self.finishing:
            with contextlib.suppress(Exception):
                self.finish()

    def close(self) -> None:
        logging.getLogger("nats_sync").removeHandler(self.warnings)
        for nc in (self.nc, self.admin):
            if nc is not None:
                with contextlib.suppress(Exception):
                    nc.close()


def wait_current(row: ResumeRow, name: str) -> None:
    """Until the restarted node ``name`` is a current replica of the stream again."""
    assert row.stream is not None
    deadline = now() + REPLICAS_TIMEOUT
    while True:
        with contextlib.suppress(nats_sync.Error):
            if current(row.stream.info().cluster or {}, name):
                return
        if now() > deadline:
            raise RuntimeError(
                f"{name} was not a current replica within {REPLICAS_TIMEOUT:.0f} s of its restart"
            )
        time.sleep(0.2)


def fault_js_fast_resume(
    row: ResumeRow, times: int, track: Callable[[NatsServer | NatsCluster], None]
) -> None:
    """``times - 1`` step-downs of the stream's leader and one kill -9 of it (restarted
    once publishing recovered), one at a time."""
    cluster = NatsCluster(3, name="reliability-fast-resume", jetstream=True)
    track(cluster)
    try:
        cluster.start()
        row.start(cluster)
        for index in range(times):
            leader = row.leader()
            if index == KILL_AFTER:
                target = next((s for s in cluster.servers if s.name == leader), None)
                if target is None:
                    raise RuntimeError(f"stream leader {leader!r} is none of the servers")
                injection = row.inject("kill -9")
                injection.client_on_node = row.nc is not None and row.nc.connected_url == target.url
                target.kill()
                recovered = row.recover(injection)
                target.start()
                cluster.wait_for_mesh()
                cluster.wait_for_jetstream()
                wait_current(row, leader)
            else:
                injection = row.inject("step-down")
                row.step_down()
                recovered = row.recover(injection)
            if not recovered:
                break
            time.sleep(SETTLE)
        row.finish()
    except Exception:
        for server in cluster.servers:  # the figures need the stream back
            with contextlib.suppress(Exception):
                server.start()
        row.salvage()
        raise
    finally:
        row.close()
        cluster.cleanup()


def run_fast_resume_fault(
    fault: JsFault, rate: int, track: Callable[[NatsServer | NatsCluster], None]
) -> ResumeResult:
    result = ResumeResult(fault.key, fault.title)
    print(f"{fault.key}: {fault.title} (x{fault.times})", flush=True)
    started = now()
    try:
        fault_js_fast_resume(ResumeRow(result, rate), fault.times, track)
    except Exception as err:  # reported as the row's failure
        result.error = f"{type(err).__name__}: {err}"
        print(f"  [{fault.key}] failed: {result.error}", flush=True)
    t, recoveries = result.tally, result.recoveries
    print(
        f"  [{fault.key}] published {t.published:,}, stored {t.stored:,}, lost "
        f"{len(t.lost)}, duplicated {len(t.duplicated)}, out of order {t.out_of_order}, "
        f"batches {t.batches:,} ({sum(t.failed.values())} failed, at most "
        f"{t.most_batches} of {ATTEMPTS} for a chunk), resent {t.resent:,}, "
        f"recovery {fmt_ms(statistics.median(recoveries) if recoveries else None)} median, "
        f"{fmt_ms(max(recoveries) if recoveries else None)} max [{now() - started:.1f}s]"
        + (f" ERROR {result.error}" if result.error else ""),
        flush=True,
    )
    for anomaly in result.anomalies:
        print(f"  [{fault.key}] ANOMALY: {anomaly}", flush=True)
    return result


# --- the report ---------------------------------------------------------------------------


def table_header() -> list[str]:
    return [
        "| fault | injected | published | stored | **lost** | **duplicated** "
        "| **out of order** | batches | batches failed | resent | recovery median "
        "| recovery max |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]


def table_row(r: ResumeResult) -> str:
    t, recoveries = r.tally, r.recoveries
    missed = f" ({r.missed_recoveries} never)" if r.missed_recoveries else ""
    return (
        f"| {r.fault} | {len(r.injections)} | {t.published:,} | {t.stored:,} "
        f"| **{len(t.lost):,}** | **{len(t.duplicated):,}** | **{t.out_of_order:,}** "
        f"| {t.batches:,} | {sum(t.failed.values()):,} | {t.resent:,} "
        f"| {fmt_ms(statistics.median(recoveries) if recoveries else None)} "
        f"| {fmt_ms(max(recoveries) if recoveries else None)}{missed} |"
    )


def note_line(r: ResumeResult) -> str | None:
    return row_notes(r.fault, r.notes, r.error)


def intro(rate: int) -> list[str]:
    """The section's heading, promise and method (up to its results)."""
    return [
        "## Resuming fast-ingest batches through leader changes",
        "",
        "What the guide's recipe for a fast-ingest batch that failed part-way",
        '([JetStream guide](guides/jetstream.md), "Resuming a batch that failed',
        'part-way") promises, checked against a real 3-node cluster:',
        "",
        "- **Every message is stored once, in order**: with gap `fail` everything up to",
        "  `fp.ack_sequence` (or a `commit`'s `count`) is stored; a new batch from there,",
        "  with the same message ids, stores the rest, and the stream drops what it had",
        "  already. Through step-downs and a kill -9 of the stream's leader.",
        "",
        "### Method",
        "",
        "A 3-node JetStream cluster, an R3 stream (file storage) with `allow_batched` and a",
        f"{DUPLICATE_WINDOW:.0f} s duplicate window. A publisher thread stores numbered",
        f"messages, due at ~{rate:,} msgs/s (16-byte payloads: the number and when it fell",
        "due, the same bytes on every attempt; `msg_id=<row>-<number>`), in chunks of",
        f"{CHUNK:,}, each with the guide's loop as written: `js.fast_publisher()` with its",
        "defaults, `add` up to the chunk's last message and `commit` with it; when `add` or",
        "`commit` raises, `done += fp.ack_sequence`, 1 s pause, and a new batch from",
        "`done` with the same message ids; after a `commit`, `done += final.count`; at",
        f"most {ATTEMPTS} batches a chunk. A message already due is sent at once (a resumed",
        "batch catches up). The client has `max_reconnect_attempts=-1` and 0.1 s between",
        "passes over the pool.",
        "",
        f"From a second client the stream's leader steps down ({STEPDOWNS} times,",
        "`$JS.API.STREAM.LEADER.STEPDOWN`), and after the second step-down it gets SIGKILL",
        "instead, starting again on its port and store once publishing has recovered.",
        "Publishing starts 1 s before the first fault; each next fault comes ~1 s after",
        "the recovery from the previous one (and once the killed node is a current replica",
        "again). When publishing stops, the open chunk is finished. Then the stream is read",
        "back (`stream.get_msg_columns()`) and compared with `<row>-0` ... `<row>-(N-1)`:",
        "",
        "- **lost**: a number not in the stream. **duplicated**: a number stored twice.",
        "  **out of order**: a stored message with a lower number than one stored before",
        "  it. All must be 0 (and every payload the one sent, every stored msg id one of",
        "  the row's).",
        "- **batches failed**: by the error that ended them (see the notes); **resent**:",
        "  messages sent again by a resumed batch (the stream dropped those it had).",
        "- **recovery**: from the fault to the first acknowledgement (flow ack or final",
        "  count) of a message sent after it; a failed batch's includes the recipe's 1 s.",
        "",
    ]


def outro() -> list[str]:
    """What ends the section after the reproduce command."""
    return [
        "(`tools/_jsfastresume.py`, run by `tools/reliability.py`; the run exits non-zero",
        "when a message is lost, duplicated or out of order, the recipe gives up, the",
        "library's answers contradict themselves, the publisher hangs or raises something",
        "else than a `nats_sync.Error`, or publishing does not recover.)",
    ]

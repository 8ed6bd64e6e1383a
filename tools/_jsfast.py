"""The fast-ingest row of ``make reliability`` (``js_fast``): ADR-50 fast batches
(``js.fast_publisher()``, gap ``fail``) through kill -9 of a single JetStream server.

How it works: one ``nats-server -js`` (``nats_sync.testing``) holds a stream with
``allow_batched`` and a 120 s duplicate window. A publisher thread (`FastIngestPublisher`,
paced like the other rows' publishers) sends numbered messages (16-byte payloads:
number and the time of this attempt, `tools._streamcheck.PAYLOAD`; each with
``msg_id=<row>-<number>``) as fast-ingest batches with gap ``fail``, committing every
`BATCH_SIZE` messages and opening the next batch. The server is SIGKILLed and started
again on its port and store after 1 s, five times; each kill waits for the publisher to
be about to send a chosen batch sequence (`KILL_AT`: the middle of a batch, its commit,
the first message of a new batch), so the kills land at those three moments.

What counts as acknowledged is what the batch says: with gap ``fail`` a flow ack for
batch sequence N (``fp.ack_sequence``) means every message of the batch up to N is
stored, and a final `BatchAck` (``commit``, or ``close`` on a batch the server ended)
means the first ``count`` are. Whenever a batch fails (``add``/``commit`` raising: ack
timeout, ``FastBatchUnknownError`` from the restarted server that never heard of it,
``BatchClosedError``, no stream yet...), the publisher does what an application would:
it asks ``close()`` for the server's count (given only when the server ended the batch
itself), treats every message above the highest acknowledged sequence as *not
acknowledged*, and sends those again, with the same msg ids, at the head of a new batch.
At the end the open batch is closed and what is left is retried until acknowledged.

Then the stream is read back (``get_msg_columns``) and compared:

- **acked and lost**: a message at or below an acknowledged batch sequence (or within a
  final ack's count) that is not in the stream. Must be 0.
- **stored twice**: one msg id at two stream sequences (a retry the duplicate window
  did not catch). Must be 0.
- **never acked**: numbers still without an acknowledgement after the final retries.
  Must be 0.
- **retried: deduplicated / stored**: of the numbers acknowledged on a retry, those
  whose stored copy is an earlier attempt (the payload's time tells which: the stream
  had the message and deduplicated the retry) and those stored from the acknowledged
  attempt (the earlier ones never made it).

Recovery is the time from a kill to the first acknowledgement of a message sent after
it. A publisher that hangs, raises something that is not a ``nats_sync.Error``, or
never recovers fails the row like a lost message, and so do answers that contradict
themselves (an ack beyond what the batch sent, a stored message no attempt sent).
"""

from __future__ import annotations

import contextlib
import logging
import statistics
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field

import nats_sync
from nats_sync.jetstream import (
    BatchAck,
    BatchClosedError,
    FastPublisher,
    JetStream,
    JetStreamError,
    Stream,
)
from nats_sync.testing import NatsCluster, NatsServer
from tools._jsfaults import (
    ACK_TIMEOUT,
    DUPLICATE_WINDOW,
    FINISH_TIMEOUT,
    KILL_DOWNTIME,
    MSG_ID,
    RECOVERY_TIMEOUT,
    SETTLE,
    WARMUP,
    JsFault,
    JsInjection,
    WarningTally,
    fmt_ms,
    fmt_s,
)
from tools._reliability_doc import row_notes
from tools._streamcheck import PAYLOAD, ClientEvents, Paced, now

BATCH_SIZE = 2000  # messages per batch: the last one is sent with commit()
FLOW = 100  # fast_publisher(flow=...): messages per flow ack, at most
MAX_OUTSTANDING_ACKS = 2  # add() waits once FLOW * this are unacknowledged
RETRY_PAUSE = 0.1  # after a failed batch, before the next one opens
READ_BATCH = 5000  # get_msg_columns(batch=...)
#: Where in a batch each kill lands (cycled): the batch sequence about to be sent when
#: the server gets SIGKILL. BATCH_SIZE is the commit, 1 the first message of a batch.
KILL_AT = (BATCH_SIZE // 2, BATCH_SIZE, 1)
KILL_POINT_TIMEOUT = 10.0  # the publisher reaches the next kill point within this

FAST_FAULTS = [
    JsFault(
        "js_fast",
        "JetStream fast ingest: kill -9 of a single server under a fast-batch "
        "publisher (gap fail), restart on the same port and store after 1 s",
        5,
    ),
]


# --- the publisher ------------------------------------------------------------------------


@dataclass
class BatchRecord:
    """One batch as the publisher saw it."""

    size: int = 0  # messages added (the commit included)
    acked: int = 0  # the highest batch sequence acknowledged
    outcome: str = "open"  # "committed", "closed", or why it failed
    ended: float = 0.0  # when its final ack came or its failure was seen

    def describe(self) -> str:
        return f"{self.outcome} at {self.size}/{self.acked}"


class FastIngestPublisher(Paced):
    """Publishes the numbered messages in fast-ingest batches (gap ``fail``) and sends
    every message that no batch acknowledged again, same ``msg_id``, in a new batch.

    The batch belongs to one thread at a time: this one while it runs, then the row's
    thread (`drain`) once `stop` has joined it. Only `wait_acked_after` is called from
    another thread meanwhile; what it reads is guarded by ``_lock``.
    """

    def __init__(
        self, js: JetStream, subject: str, key: str, rate: int, batch_size: int = BATCH_SIZE
    ) -> None:
        super().__init__("reliability-fast-pub", rate, max(1, rate // 100))
        self.js, self.subject, self.key, self.batch_size = js, subject, key, batch_size
        self._lock = threading.Condition()
        self.sent: list[list[float]] = []  # number -> send time of each attempt
        self.acked: dict[int, int] = {}  # number -> the attempt (1, 2...) acknowledged
        self.first_failure: dict[int, str] = {}  # number -> why its first batch failed
        self.batches: list[BatchRecord] = []
        self.reported: Counter[str] = Counter()  # error_cb: gaps and refused messages
        self.anomalies: list[str] = []  # what the library's answers should never say
        self.ack_events: list[tuple[float, float]] = []  # (attempt sent, acknowledged)
        self._latest_acked_send = float("-inf")
        self._retry: deque[int] = deque()
        self._fp: FastPublisher | None = None
        self._batch: list[int] = []  # the open batch's numbers, by batch sequence - 1
        self._record = BatchRecord()
        self._armed: tuple[int, threading.Event] | None = None

    def msg_id(self, number: int) -> str:
        return f"{self.key}-{number}"

    @property
    def published(self) -> int:
        return len(self.sent)

    # sending (this thread, then the row's in drain)

    def step(self) -> None:
        if self._retry:
            self._send(self._retry.popleft())
        else:
            self.sent.append([])
            self._send(len(self.sent) - 1)

    def _send(self, number: int) -> None:
        if self._fp is None:
            self._fp = self.js.fast_publisher(
                flow=FLOW,
                max_outstanding_acks=MAX_OUTSTANDING_ACKS,
                continue_on_gap=False,
                ack_timeout=ACK_TIMEOUT,
                error_cb=self._on_report,
            )
            self._batch, self._record = [], BatchRecord()
            self.batches.append(self._record)
        fp, attempts = self._fp, self.sent[number]
        sent = now()
        attempts.append(sent)
        self._batch.append(number)
        self._record.size += 1
        armed = self._armed
        if armed is not None and armed[0] == len(self._batch):
            self._armed = None
            armed[1].set()  # the row kills the server now, as this message goes out
        payload = PAYLOAD.pack(number, sent)
        try:
            if len(self._batch) < self.batch_size:
                fp.add(self.subject, payload, msg_id=self.msg_id(number))
                self._acknowledged(fp.ack_sequence)
                return
            final = fp.commit(self.subject, payload, msg_id=self.msg_id(number))
        except nats_sync.Error as error:
            self._failed(error)
            return
        self._ended(final, "committed")

    def _close_batch(self) -> None:
        assert self._fp is not None
        try:
            final = self._fp.close()
        except nats_sync.Error as error:
            self._failed(error)
            return
        self._ended(final, "closed")

    def _on_report(self, error: JetStreamError) -> None:
        self.reported[type(error).__name__] += 1

    # what the batch acknowledged

    def _acknowledged(self, upto: int) -> None:
        """Batch sequences up to ``upto`` are acknowledged: their numbers are stored."""
        done = self._record.acked
        if upto <= done:
            return
        if upto > len(self._batch):
            self.anomalies.append(
                f"a batch acknowledged sequence {upto} of the {len(self._batch)} messages sent"
            )
            upto = len(self._batch)
        at = now()
        with self._lock:
            for number in self._batch[done:upto]:
                attempt = len(self.sent[number])
                if self.acked.setdefault(number, attempt) != attempt:
                    self.anomalies.append(f"#{number} acknowledged twice")
                sent = self.sent[number][-1]
                self.ack_events.append((sent, at))
                self._latest_acked_send = max(self._latest_acked_send, sent)
            self._lock.notify_all()
        self._record.acked = upto

    def _ended(self, final: BatchAck, outcome: str) -> None:
        """The batch's final ack: its ``count`` first messages are stored."""
        if final.count > len(self._batch):
            self.anomalies.append(
                f"a final ack counted {final.count} of the {len(self._batch)} messages sent"
            )
        self._acknowledged(final.count)
        self._record.outcome, self._record.ended = outcome, now()
        if self._record.acked < len(self._batch):
            # gap fail stored fewer than were sent: the rest is not acknowledged
            self._record.outcome = f"{outcome} short"
            self._requeue(f"{outcome} with a short count")
        self._fp = None

    def _failed(self, error: nats_sync.Error) -> None:
        """The batch failed: what it did not acknowledge goes round again."""
        fp = self._fp
        assert fp is not None
        kind = type(error).__name__
        if isinstance(error, BatchClosedError) and error.__cause__ is not None:
            kind = f"{kind} ({type(error.__cause__).__name__})"
        acked = fp.ack_sequence
        # The server's count, when it ended the batch itself (gap fail); raises for a
        # batch whose outcome is not known (timeout, unknown to a restarted server).
        with contextlib.suppress(nats_sync.Error):
            acked = max(acked, fp.close().count)
        self._acknowledged(min(acked, len(self._batch)))
        self._record.outcome, self._record.ended = kind, now()
        self._requeue(kind)
        self._fp = None
        time.sleep(RETRY_PAUSE)

    def _requeue(self, why: str) -> None:
        unacked = self._batch[self._record.acked :]
        for number in unacked:
            if len(self.sent[number]) == 1:
                self.first_failure[number] = why
        self._retry.extendleft(reversed(unacked))

    # the row's thread

    def arm(self, position: int) -> threading.Event:
        """An event set when the publisher is about to send batch sequence ``position``
        of a batch."""
        event = threading.Event()
        self._armed = (position, event)
        return event

    def wait_acked_after(self, start: float, timeout: float) -> float | None:
        """When the first acknowledgement of a message sent at or after ``start`` was
        seen; None if none within ``timeout``."""
        with self._lock:
            if not self._lock.wait_for(lambda: self._latest_acked_send >= start, timeout):
                return None
            return min(acked for sent, acked in self.ack_events if sent >= start)

    def drain(self, timeout: float) -> bool:
        """After `stop`: closes the open batch and sends what is left (in batches, as
        fast as they go) until every number is acknowledged; False after ``timeout``."""
        deadline = now() + timeout
        while now() < deadline:
            if self._retry:
                self._send(self._retry.popleft())
            elif self._fp is not None:
                self._close_batch()
            else:
                return True
        return False


# --- results ------------------------------------------------------------------------------


@dataclass
class FastTally:
    """What was published, acknowledged and stored (see the module)."""

    published: int = 0
    acked: int = 0
    never_acked: int = 0
    not_acknowledged: int = 0  # numbers whose first batch did not acknowledge them
    not_acknowledged_kinds: Counter[str] = field(default_factory=Counter)
    retries: int = 0  # attempts after the first, of every number
    retried_deduplicated: int = 0
    retried_stored: int = 0
    acked_lost: list[int] = field(default_factory=list)
    stored: int = 0
    stored_twice: list[str] = field(default_factory=list)  # msg ids
    foreign: list[int] = field(default_factory=list)  # stream seqs not from any attempt
    batches: int = 0
    committed: int = 0  # ended by commit (or by close, the last one) with a full count
    failed: Counter[str] = field(default_factory=Counter)  # failed batches, by error
    acked_in_failed: int = 0  # messages acknowledged by batches that failed later


@dataclass
class FastResult:
    key: str
    fault: str
    injections: list[JsInjection] = field(default_factory=list)
    tally: FastTally = field(default_factory=FastTally)
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
            and not t.acked_lost
            and not t.stored_twice
            and not t.never_acked
            and not t.foreign
            and not self.anomalies
            and self.missed_recoveries == 0
        )


Stored = dict[int, tuple[int, float, str | None]]  # stream seq -> (number, sent, msg id)


def read_back(stream: Stream, last_seq: int) -> Stored:
    """Every stored message, read in bulk with ``get_msg_columns``."""
    stored: Stored = {}
    for run in stream.get_msg_columns(1, end_seq=max(last_seq, 1), batch=READ_BATCH):
        for seq, data, headers in zip(run.seqs, run.datas, run.headers, strict=True):
            msg_id = (headers or {}).get(MSG_ID)
            number, sent = PAYLOAD.unpack(data)
            stored[seq] = (number, sent, msg_id if isinstance(msg_id, str) else None)
    return stored


def analyse(publisher: FastIngestPublisher, stored: Stored) -> FastTally:
    """Compares what the batches acknowledged with what the stream holds."""
    t = FastTally(published=publisher.published, acked=len(publisher.acked))
    t.never_acked = t.published - t.acked
    t.not_acknowledged = len(publisher.first_failure)
    t.not_acknowledged_kinds = Counter(publisher.first_failure.values())
    t.retries = sum(len(attempts) for attempts in publisher.sent) - t.published
    t.stored = len(stored)
    by_id: dict[str, list[int]] = {}
    copies: dict[int, list[float]] = {}  # number -> the attempts' times stored
    for seq, (number, sent, msg_id) in stored.items():
        if (
            number >= len(publisher.sent)
            or sent not in publisher.sent[number]
            or msg_id != publisher.msg_id(number)
        ):
            t.foreign.append(seq)
            continue
        by_id.setdefault(msg_id, []).append(seq)
        copies.setdefault(number, []).append(sent)
    t.stored_twice = sorted(msg_id for msg_id, seqs in by_id.items() if len(seqs) > 1)
    for number, attempt in sorted(publisher.acked.items()):
        if number not in copies:
            t.acked_lost.append(number)
            continue
        if attempt > 1:
            stored_attempt = publisher.sent[number].index(copies[number][0]) + 1
            if stored_attempt < attempt:
                t.retried_deduplicated += 1
            else:
                t.retried_stored += 1
    t.batches = len(publisher.batches)
    for batch in publisher.batches:
        if batch.outcome in ("committed", "closed"):
            t.committed += 1
        elif batch.outcome != "open":
            t.failed[batch.outcome] += 1
            t.acked_in_failed += batch.acked
    return t


def recheck_lost(stream: Stream, lost: list[int], last_seq: int) -> list[int]:
    """The numbers of ``lost`` that a second reader (``get_msgs``, the direct get) does
    not find either."""
    wanted = set(lost)
    for msg in stream.get_msgs(1, end_seq=max(last_seq, 1)):
        number = PAYLOAD.unpack(msg.data)[0]
        wanted.discard(number)
    return sorted(wanted)


# --- the row -------------------------------------------------------------------------------


class FastRow:
    """The server, the client, the stream and the publisher of the row."""

    def __init__(self, result: FastResult, rate: int) -> None:
        self.result, self.rate = result, rate
        self.name = result.key.upper()
        self.subject = f"reliability.{result.key}"
        self.events = ClientEvents()
        self.nc: nats_sync.Client | None = None
        self.stream: Stream | None = None
        self.publisher: FastIngestPublisher | None = None
        self.finishing = False
        self.kill_points: list[int] = []
        self.warnings = WarningTally()
        logging.getLogger("nats_sync").addHandler(self.warnings)

    def start(self, server: NatsServer) -> None:
        self.nc = nats_sync.connect(
            [server.url],
            name=f"reliability-pub-{self.result.key}",
            max_reconnect_attempts=-1,
            connect_timeout=2.0,
            reconnect_delay_cb=lambda attempt: 0.1,
            **self.events.options(),
        )
        js = self.nc.jetstream()
        self.stream = js.create_stream(
            name=self.name,
            subjects=[f"{self.subject}.>"],
            allow_batched=True,
            duplicate_window=DUPLICATE_WINDOW,
        )
        self.publisher = FastIngestPublisher(js, f"{self.subject}.data", self.result.key, self.rate)
        self.publisher.start()
        time.sleep(WARMUP)

    def at_position(self, position: int) -> None:
        """Waits until the publisher is about to send batch sequence ``position``."""
        assert self.publisher is not None
        if not self.publisher.arm(position).wait(KILL_POINT_TIMEOUT):
            self.result.notes.append(
                f"the publisher did not reach batch sequence "
                f"{position} within {KILL_POINT_TIMEOUT:.0f} s "
                "(killed anyway)"
            )
        self.kill_points.append(position)

    def recover(self, injection: JsInjection) -> bool:
        assert self.publisher is not None
        injection.acked = self.publisher.wait_acked_after(injection.at, RECOVERY_TIMEOUT)
        self.result.injections.append(injection)
        until = injection.acked if injection.acked is not None else now()
        ended = ", ".join(
            b.describe() for b in list(self.publisher.batches) if injection.at <= b.ended <= until
        )
        print(
            f"  [{self.result.key}] fault {len(self.result.injections)} (at batch "
            f"sequence {self.kill_points[-1]}): first new ack after "
            f"{fmt_s(injection.recovery)}; batches ended meanwhile (outcome at "
            f"sent/acked): {ended or 'none'}",
            flush=True,
        )
        return injection.acked is not None

    def finish(self) -> None:
        """Stops publishing, acknowledges what is left, reads the stream back and
        computes the row."""
        assert self.publisher is not None and self.stream is not None
        self.finishing = True
        publisher, result = self.publisher, self.result
        try:
            publisher.stop()
        finally:
            # The figures even when the thread failed (it is not running any more).
            if not publisher.is_alive():
                if not publisher.drain(FINISH_TIMEOUT):
                    result.notes.append(
                        f"retries still unacknowledged after {FINISH_TIMEOUT:.0f} s"
                    )
                self.compute()

    def compute(self) -> None:
        assert self.publisher is not None and self.stream is not None
        publisher, result = self.publisher, self.result
        last_seq = self.stream.info().state.last_seq
        stored = read_back(self.stream, last_seq)
        t = result.tally = analyse(publisher, stored)
        result.anomalies = list(publisher.anomalies)
        if t.acked_lost:
            missing = recheck_lost(self.stream, t.acked_lost, last_seq)
            if len(missing) < len(t.acked_lost):
                result.anomalies.append(
                    f"get_msg_columns missed {len(t.acked_lost) - len(missing)} stored "
                    "messages that get_msgs found"
                )
            t.acked_lost = missing
        self.add_notes()

    def add_notes(self) -> None:
        assert self.publisher is not None
        result, t, publisher = self.result, self.result.tally, self.publisher
        result.notes.append(
            f"{t.batches:,} batches of up to {BATCH_SIZE:,} (flow {FLOW}, "
            f"{MAX_OUTSTANDING_ACKS} outstanding acks, ack_timeout "
            f"{ACK_TIMEOUT:.0f} s): {t.committed:,} acknowledged in full by "
            "their final ack"
        )
        if t.failed:
            kinds = ", ".join(f"{n:,} {kind}" for kind, n in t.failed.most_common())
            result.notes.append(
                f"failed batches: {kinds}; they had acknowledged "
                f"{t.acked_in_failed:,} messages before failing "
                "(kept as acknowledged, checked like the rest)"
            )
        if t.not_acknowledged_kinds:
            kinds = ", ".join(f"{n:,} {kind}" for kind, n in t.not_acknowledged_kinds.most_common())
            result.notes.append(f"not acknowledged by their first batch: {kinds}")
        if t.retries:
            result.notes.append(
                f"{t.retries:,} retries with the same msg_id (a message can fail again in "
                f"the next batch while the server is down); of the numbers acknowledged on "
                f"a retry, {t.retried_deduplicated:,} deduplicated by the stream (an earlier "
                f"attempt had been stored), {t.retried_stored:,} stored from the "
                "acknowledged attempt"
            )
        if publisher.reported:
            kinds = ", ".join(f"{n} {kind}" for kind, n in publisher.reported.most_common())
            result.notes.append(f"error_cb heard: {kinds}")
        if result.injections:
            result.notes.append(
                "recovery after each kill (at batch sequence): "
                + ", ".join(
                    f"{fmt_s(inj.recovery)} ({at})"
                    for inj, at in zip(result.injections, self.kill_points, strict=False)
                )
            )
        if t.stored_twice:
            result.notes.append(f"**stored twice**: {t.stored_twice[:10]}")
        if t.acked_lost:
            result.notes.append(f"**acked and lost**: #{t.acked_lost[:10]}")
        if t.never_acked:
            result.notes.append(f"**never acked**: {t.never_acked:,}")
        if t.foreign:
            result.notes.append(
                f"**stream sequences holding no attempt that was sent**: {t.foreign[:10]}"
            )
        for anomaly in result.anomalies[:5]:
            result.notes.append(f"**{anomaly}**")
        if self.warnings.kinds:
            kinds = ", ".join(f"{n} {kind}" for kind, n in self.warnings.kinds.most_common())
            result.notes.append(f"warnings logged by nats_sync: {kinds}")
        if self.events.reconnected_at:
            result.notes.append(f"the client reconnected {len(self.events.reconnected_at)} times")
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
        if self.publisher is not None and self.publisher.is_alive():
            with contextlib.suppress(Exception):
                self.publisher.stop()
        if self.nc is not None:
            with contextlib.suppress(Exception):
                self.nc.close()


def fault_js_fast(
    row: FastRow, times: int, track: Callable[[NatsServer | NatsCluster], None]
) -> None:
    """A single JetStream server, killed under the publisher and started again on its
    port and store (as ``js_restart``)."""
    server = NatsServer(jetstream=True)
    track(server)
    try:
        server.start()
        row.start(server)
        for index in range(times):
            position = KILL_AT[index % len(KILL_AT)]
            row.at_position(position)
            injection = JsInjection(at=now())
            server.kill()
            time.sleep(KILL_DOWNTIME)
            server.start()
            if not row.recover(injection):
                break
            time.sleep(SETTLE)
        row.finish()
    except Exception:
        with contextlib.suppress(Exception):
            server.start()  # the figures need the stream back
        row.salvage()
        raise
    finally:
        row.close()
        server.cleanup()


def run_fast_fault(
    fault: JsFault, rate: int, track: Callable[[NatsServer | NatsCluster], None]
) -> FastResult:
    result = FastResult(fault.key, fault.title)
    print(f"{fault.key}: {fault.title} (x{fault.times})", flush=True)
    started = now()
    try:
        fault_js_fast(FastRow(result, rate), fault.times, track)
    except Exception as err:  # reported as the row's failure
        result.error = f"{type(err).__name__}: {err}"
        if err.__cause__ is not None:
            result.error += f" ({type(err.__cause__).__name__}: {err.__cause__})"
        print(f"  [{fault.key}] failed: {result.error}", flush=True)
    t = result.tally
    recoveries = result.recoveries
    print(
        f"  [{fault.key}] published {t.published:,}, acked {t.acked:,}, acked and lost "
        f"{len(t.acked_lost)}, not acknowledged {t.not_acknowledged:,} (retries "
        f"{t.retries:,}: {t.retried_deduplicated:,} deduplicated, {t.retried_stored:,} "
        f"stored), stored {t.stored:,} (twice {len(t.stored_twice)}), never acked "
        f"{t.never_acked:,}, batches {t.committed:,} committed / "
        f"{sum(t.failed.values()):,} failed, recovery "
        f"{fmt_ms(statistics.median(recoveries) if recoveries else None)} median, "
        f"{fmt_ms(max(recoveries) if recoveries else None)} max "
        f"[{now() - started:.1f}s]" + (f" ERROR {result.error}" if result.error else ""),
        flush=True,
    )
    for anomaly in result.anomalies:
        print(f"  [{fault.key}] ANOMALY: {anomaly}", flush=True)
    return result


# --- the report ---------------------------------------------------------------------------


def table_header() -> list[str]:
    return [
        "| fault | injected | published | acked | **acked and lost** | not acknowledged "
        "| retried: deduplicated | retried: stored | stored | **stored twice** "
        "| **never acked** | batches committed | batches failed | recovery median "
        "| recovery max |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]


def table_row(r: FastResult) -> str:
    t, recoveries = r.tally, r.recoveries
    missed = f" ({r.missed_recoveries} never)" if r.missed_recoveries else ""
    return (
        f"| {r.fault} | {len(r.injections)} | {t.published:,} | {t.acked:,} "
        f"| **{len(t.acked_lost):,}** | {t.not_acknowledged:,} | {t.retried_deduplicated:,} "
        f"| {t.retried_stored:,} | {t.stored:,} | **{len(t.stored_twice):,}** "
        f"| **{t.never_acked:,}** | {t.committed:,} | {sum(t.failed.values()):,} "
        f"| {fmt_ms(statistics.median(recoveries) if recoveries else None)} "
        f"| {fmt_ms(max(recoveries) if recoveries else None)}{missed} |"
    )


def note_line(r: FastResult) -> str | None:
    return row_notes(r.fault, r.notes, r.error)


def intro(rate: int) -> list[str]:
    """The section's heading, promise and method (up to its results)."""
    return [
        "## JetStream fast-ingest batches under faults",
        "",
        "What a fast-ingest batch (`js.fast_publisher()`, ADR-50, gap `fail`) promises,",
        "and what this section checks against a real `nats-server`:",
        "",
        "- **What the batch acknowledged is stored**: with gap `fail`, once the server has",
        "  acknowledged batch sequence N (`fp.ack_sequence`), every message of the batch up",
        "  to N is in the stream, and a final `BatchAck` stores its first `count`; through a",
        "  kill -9 of the server as well.",
        "- **The rest may or may not be stored**: when a batch fails, send everything above",
        "  its last acknowledged sequence again, same `msg_id`, in a new batch; within the",
        "  duplicate window each message is stored once.",
        "",
        "### Method",
        "",
        "One JetStream server (file storage), a stream with `allow_batched` and a",
        f"{DUPLICATE_WINDOW:.0f} s duplicate window. A publisher thread sends numbered",
        f"messages at ~{rate:,} msgs/s (16-byte payloads: number and the time of the attempt,",
        "`msg_id=<row>-<number>`) with `fast_publisher(flow="
        f"{FLOW}, max_outstanding_acks={MAX_OUTSTANDING_ACKS},",
        f"continue_on_gap=False, ack_timeout={ACK_TIMEOUT:.0f})`, committing every "
        f"{BATCH_SIZE:,} messages and",
        "opening the next batch. The client has `max_reconnect_attempts=-1` and 0.1 s",
        "between passes over the pool. The server gets SIGKILL and starts again 1 s later",
        "on the same port and store, five times; publishing starts 1 s before the first",
        "kill and goes on ~1 s after each recovery. Each kill comes as the publisher is",
        f"about to send batch sequence {KILL_AT[0]:,} (the middle of a batch), "
        f"{KILL_AT[1]:,} (its commit) or",
        f"{KILL_AT[2]} (the first message of a new batch), in turn.",
        "",
        "When a batch fails (`add` or `commit` raising: ack timeout, `FastBatchUnknownError`",
        "from the restarted server, `BatchClosedError`, no stream yet), the publisher asks",
        "`close()` for the server's count (there is one only when the server ended the",
        "batch itself), takes what is above the highest acknowledged sequence as **not",
        "acknowledged**, and sends it again at the head of a new batch "
        f"({RETRY_PAUSE} s later). At the",
        "end the open batch is closed and what is left is retried until acknowledged. Then",
        "the stream is read back (`stream.get_msg_columns()`; a message found missing is",
        "looked for again with `stream.get_msgs()`) and compared with the acknowledgements.",
        "",
        "- **acked**: numbers acknowledged (by a flow ack or a final count, in the first",
        "  batch or a later one); **not acknowledged**: numbers their first batch did not",
        "  acknowledge; **retried: deduplicated**: of the numbers acknowledged on a retry,",
        "  those whose stored copy is an earlier attempt (the payload's time says which:",
        "  the stream had it and deduplicated the retry); **retried: stored**: stored from",
        "  the acknowledged attempt (the earlier ones never reached the stream).",
        "- **acked and lost**: acknowledged, not in the stream. Must be 0.",
        "- **stored twice**: one `msg_id` at two stream sequences. Must be 0.",
        f"- **never acked**: still not acknowledged {FINISH_TIMEOUT:.0f} s after the last "
        "message. Must be 0.",
        "- **batches failed**: by the error that ended them (see the notes).",
        "- **recovery**: from the kill to the first acknowledgement of a message sent after",
        "  it (the 1 s downtime, the store's recovery and the client's reconnect included).",
        "",
    ]


def outro() -> list[str]:
    """What ends the section after the reproduce command."""
    return [
        "(`tools/_jsfast.py`, run by `tools/reliability.py`; the run exits non-zero when an",
        "acknowledged message is lost, a message is stored twice or never acknowledged,",
        "the library's answers contradict themselves, the publisher hangs or raises",
        "something else than a `nats_sync.Error`, or publishing does not recover.)",
    ]

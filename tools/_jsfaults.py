"""The JetStream rows of ``make reliability``: acknowledged publishes and a durable
consumer through kill -9 of a JetStream server and of a replicated stream's leader.

How a row works: a publisher client sends a numbered stream with ``publish_async`` at a
steady rate (16-byte payloads: sequence number and first publish time; each with
``msg_id=<row>-<number>``), and a consumer client reads a durable pull consumer
(``ack_policy="explicit"``) with ``messages()`` and acks every message. Faults are
SIGKILLs of real ``nats-server`` processes (``nats_sync.testing``). A publish whose
future fails (ack timeout, connection error) or whose call raises is *not
acknowledged*: the publisher retries it with the same ``msg_id`` until it gets a
PubAck, as an application would, and a PubAck with ``duplicate`` set shows the stream
had stored the first attempt and deduplicated the retry. At the end the stream is read
back and compared:

- **acked and lost**: a publish that got a PubAck and is not in the stream (or not at
  the sequence its PubAck named). JetStream promises 0; anything else fails the run.
- **stored not consumed**: a stored message the consumer never received. At-least-once
  delivery promises 0; anything else fails the run.
- **stored twice**: one ``msg_id`` at two stream sequences, i.e. a retry the stream did
  not deduplicate (all retries fall well within the duplicate window): must be 0.
- **delivered twice**: stream sequences the consumer received more than once. Expected
  after a crash: an ack that was in flight to (or not yet persisted by) the dying server
  is lost, and the server redelivers the message after ``ack_wait``.

Recovery is the time from the kill to the first PubAck of a publish sent after it; the
consumer's, to the first delivery of a message first published after it.
"""

from __future__ import annotations

import contextlib
import logging
import re
import statistics
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import nats_sync
from nats_sync.jetstream import JetStream, JsMsg, PubAck, PullConsumer, Stream
from nats_sync.testing import NatsCluster, NatsServer
from tools._reliability_doc import fmt_ms, row_notes
from tools._streamcheck import JOIN_TIMEOUT, PAYLOAD, ClientEvents, Paced, now

ACK_TIMEOUT = 2.0  # publish_async: a PubAck not back within this fails the future
RETRY_DELAY = 0.5  # a failed publish is sent again (same msg_id) this long after
ACK_WAIT = 3.0  # the consumer's: an unacked delivery is redelivered after this
PULL_WAIT = 5.0  # messages(): pull expiry; the heartbeat is half of it
DUPLICATE_WINDOW = 120.0
KILL_DOWNTIME = 1.0  # single server: SIGKILL, then start again after this long
RECOVERY_TIMEOUT = 30.0  # kill -> first new PubAck, and -> first new delivery
REPLICAS_TIMEOUT = 30.0  # a restarted node is a current replica again
FINISH_TIMEOUT = 30.0  # end of a row: every retry acked, every stored message consumed
WARMUP = 1.0
SETTLE = 1.0
MSG_ID = "Nats-Msg-Id"


@dataclass(frozen=True)
class JsFault:
    key: str
    title: str
    times: int


JS_FAULTS = [
    JsFault(
        "js_restart",
        "JetStream: kill -9 of a single server, restart on the same port and store after 1 s",
        5,
    ),
    JsFault(
        "js_leader",
        "JetStream: kill -9 of the R3 stream's leader in a 3-node cluster, then restart",
        5,
    ),
]


# --- the publisher ------------------------------------------------------------------------


@dataclass(frozen=True)
class Acked:
    """The first PubAck of one numbered message."""

    stream_seq: int
    duplicate: bool
    attempt: int  # 1: the first publish; more: a retry with the same msg_id


class AckedPublisher(Paced):
    """Publishes the numbered stream with ``publish_async`` and retries every publish
    that is not acknowledged (same ``msg_id``) until it is.

    At most one attempt of a number is in flight at a time: a retry is scheduled only
    when the previous attempt has failed, so a PubAck always answers the one attempt
    that is out. Futures settle on the client's threads; everything they touch is
    guarded by ``_lock``.
    """

    def __init__(self, js: JetStream, subject: str, key: str, rate: int) -> None:
        super().__init__("reliability-js-pub", rate, max(1, rate // 100))
        self.js, self.subject, self.key = js, subject, key
        self._lock = threading.Condition()
        self.sent_at: list[float] = []  # first attempt of each number
        self.attempts: list[int] = []
        self.acked: dict[int, Acked] = {}
        self.first_failure: dict[int, str] = {}  # number -> why its first attempt failed
        self.failures: Counter[str] = Counter()  # every failed attempt, by error type
        self.ack_events: list[tuple[float, float]] = []  # (attempt sent, PubAck received)
        self.in_flight = 0
        self._latest_acked_send = float("-inf")
        self._due: deque[tuple[float, int]] = deque()  # (retry not before, number)

    def msg_id(self, number: int) -> str:
        return f"{self.key}-{number}"

    # the publisher thread

    def step(self) -> None:
        # One retry at most per new message: a long outage's backlog must not flood a
        # recovering server (or this 2-core machine) with retries.
        self.retry_due(limit=1)
        number = len(self.sent_at)
        self.sent_at.append(now())
        self.attempts.append(0)
        self._attempt(number)

    def retry_due(self, limit: int) -> int:
        """Sends up to ``limit`` retries whose delay has passed; returns how many."""
        sent = 0
        while sent < limit:
            with self._lock:
                if not self._due or self._due[0][0] > now():
                    break
                number = self._due.popleft()[1]
            self._attempt(number)
            sent += 1
        return sent

    def _attempt(self, number: int) -> None:
        self.attempts[number] += 1
        attempt, sent = self.attempts[number], now()
        payload = PAYLOAD.pack(number, self.sent_at[number])
        with self._lock:
            self.in_flight += 1
        try:
            future = self.js.publish_async(
                self.subject, payload, msg_id=self.msg_id(number), timeout=ACK_TIMEOUT
            )
        except nats_sync.Error as error:  # stalled window, full buffer: nothing was sent
            self._failed(number, attempt, error)
            return
        future.add_done_callback(lambda done: self._settled(number, attempt, sent, done))

    # the client's threads (ack delivery, ack timer)

    def _settled(self, number: int, attempt: int, sent: float, future: Future[PubAck]) -> None:
        error = future.exception()
        if error is not None:
            self._failed(number, attempt, error)
            return
        ack = future.result()
        with self._lock:
            self.in_flight -= 1
            self.acked.setdefault(number, Acked(ack.seq, ack.duplicate, attempt))
            self.ack_events.append((sent, now()))
            if sent > self._latest_acked_send:
                self._latest_acked_send = sent
                self._lock.notify_all()

    def _failed(self, number: int, attempt: int, error: BaseException) -> None:
        kind = type(error).__name__
        with self._lock:
            self.in_flight -= 1
            self.failures[kind] += 1
            if attempt == 1:
                self.first_failure[number] = kind
            self._due.append((now() + RETRY_DELAY, number))
            self._lock.notify_all()

    # the row's thread

    def wait_acked_after(self, start: float, timeout: float) -> float | None:
        """When the first PubAck of a publish sent at or after ``start`` came; None if
        none within ``timeout``."""
        with self._lock:
            if not self._lock.wait_for(lambda: self._latest_acked_send >= start, timeout):
                return None
            return min(acked for sent, acked in self.ack_events if sent >= start)

    def retry_until_acked(self, timeout: float) -> None:
        """After `stop`: retries what is left until every number has a PubAck (or
        ``timeout`` passes), at twice the stream's rate."""
        deadline = now() + timeout
        while now() < deadline:
            with self._lock:
                if not self.in_flight and not self._due:
                    return
            self.retry_due(limit=max(1, self.rate // 50))
            time.sleep(0.01)


# --- the consumer -------------------------------------------------------------------------


class ConsumerLoop(threading.Thread):
    """Reads the durable consumer with ``messages()`` and acks every message.

    Records each delivery by stream sequence (with ``num_delivered``), and when each
    message first published after a given moment arrived (the consumer's recovery).
    """

    def __init__(self, consumer: PullConsumer) -> None:
        super().__init__(name="reliability-js-consumer", daemon=True)
        self.consumer = consumer
        self._lock = threading.Condition()
        self._stopping = threading.Event()
        self.deliveries: Counter[int] = Counter()  # stream seq -> times delivered
        self.redelivered = 0  # repeats the server marked (num_delivered > 1)
        self.replayed = 0  # repeats with num_delivered == 1: the consumer's state went back
        self.arrivals: list[tuple[float, float]] = []  # (first published, delivered)
        self._latest_sent = float("-inf")
        self.errors: Counter[str] = Counter()
        self.ack_errors: Counter[str] = Counter()
        self.reopened = 0
        self.failure: BaseException | None = None

    def run(self) -> None:
        try:
            stream = self.consumer.messages(max_wait=PULL_WAIT)
            while not self._stopping.is_set():
                try:
                    msg = stream.next(timeout=0.2)
                except nats_sync.TimeoutError:
                    continue
                except nats_sync.Error as error:
                    self.errors[type(error).__name__] += 1
                    if stream.is_closed and not self._stopping.is_set():
                        # messages() is meant to survive outages: a stream that ended
                        # anyway is counted (a finding), and reading goes on.
                        time.sleep(0.1)
                        stream = self.consumer.messages(max_wait=PULL_WAIT)
                        self.reopened += 1
                    continue
                self._on_msg(msg)
            stream.stop()
        except BaseException as error:  # reported by stop(), not lost on a thread
            self.failure = error

    def _on_msg(self, msg: JsMsg) -> None:
        meta = msg.metadata
        seq = meta.sequence.stream
        _, first_sent = PAYLOAD.unpack(msg.data)
        with self._lock:
            self.deliveries[seq] += 1
            if self.deliveries[seq] > 1:
                if meta.num_delivered > 1:
                    self.redelivered += 1
                else:
                    self.replayed += 1
            self.arrivals.append((first_sent, now()))
            if first_sent > self._latest_sent:
                self._latest_sent = first_sent
                self._lock.notify_all()
        try:
            msg.ack()
        except nats_sync.Error as error:
            self.ack_errors[type(error).__name__] += 1

    def wait_delivered_after(self, start: float, timeout: float) -> float | None:
        """When the first message first published at or after ``start`` arrived."""
        with self._lock:
            if not self._lock.wait_for(lambda: self._latest_sent >= start, timeout):
                return None
            return min(at for sent, at in self.arrivals if sent >= start)

    def consumed(self) -> set[int]:
        with self._lock:
            return set(self.deliveries)

    def stop(self) -> None:
        self._stopping.set()
        self.join(JOIN_TIMEOUT)
        if self.is_alive():
            raise RuntimeError(f"{self.name} did not stop within {JOIN_TIMEOUT:.0f} s")
        if self.failure is not None:
            raise RuntimeError(f"{self.name} failed") from self.failure


# --- a row --------------------------------------------------------------------------------


class WarningTally(logging.Handler):
    """Counts the warnings the library logs during a row (``messages()`` reports missed
    heartbeats and failed consumer checks there, having no ``error_cb``), by kind."""

    _KIND = re.compile(r"nats: ([^:]+):")

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.kinds: Counter[str] = Counter()

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        found = self._KIND.search(text)
        self.kinds[found.group(1) if found else text[:60]] += 1


@dataclass
class JsInjection:
    at: float
    acked: float | None = None  # first PubAck of a publish sent after the kill
    delivered: float | None = None  # first delivery of a message published after it

    @property
    def recovery(self) -> float | None:
        return None if self.acked is None else self.acked - self.at

    @property
    def consumer_recovery(self) -> float | None:
        return None if self.delivered is None else self.delivered - self.at


@dataclass
class JsTally:
    """What was published, acknowledged, stored and consumed (see the module)."""

    published: int = 0
    acked: int = 0
    acked_at_once: int = 0
    not_acknowledged: int = 0
    not_acknowledged_kinds: Counter[str] = field(default_factory=Counter)
    retries: int = 0  # attempts after the first, of every number
    retried_duplicate: int = 0  # acked on a retry with duplicate: the first was stored
    retried_stored: int = 0  # acked on a retry as new: the first never made it
    never_acked: int = 0
    acked_lost: list[int] = field(default_factory=list)
    ack_elsewhere: list[int] = field(default_factory=list)  # stored, not at the acked seq
    stored: int = 0
    stored_twice: int = 0
    not_consumed: list[int] = field(default_factory=list)
    delivered: int = 0
    delivered_twice: int = 0  # stream seqs delivered more than once
    redelivered: int = 0
    replayed: int = 0


@dataclass
class JsResult:
    key: str
    fault: str
    injections: list[JsInjection] = field(default_factory=list)
    tally: JsTally = field(default_factory=JsTally)
    notes: list[str] = field(default_factory=list)
    error: str | None = None

    @property
    def recoveries(self) -> list[float]:
        return [r for inj in self.injections if (r := inj.recovery) is not None]

    @property
    def consumer_recoveries(self) -> list[float]:
        return [r for inj in self.injections if (r := inj.consumer_recovery) is not None]

    @property
    def missed_recoveries(self) -> int:
        return sum(
            1 for inj in self.injections if inj.recovery is None or inj.consumer_recovery is None
        )

    @property
    def ok(self) -> bool:
        t = self.tally
        return (
            self.error is None
            and not t.acked_lost
            and not t.ack_elsewhere
            and not t.not_consumed
            and not t.stored_twice
            and not t.never_acked
            and self.missed_recoveries == 0
        )


class JsRow:
    """The two clients, the stream and the consumer of one JetStream fault."""

    def __init__(self, result: JsResult, rate: int) -> None:
        self.result, self.rate = result, rate
        self.name = result.key.upper()
        self.subject = f"reliability.{result.key}"
        self.pub_events = ClientEvents()
        self.sub_events = ClientEvents()
        self.pub_nc: nats_sync.Client | None = None
        self.sub_nc: nats_sync.Client | None = None
        self.stream: Stream | None = None
        self.publisher: AckedPublisher | None = None
        self.loop: ConsumerLoop | None = None
        self.finishing = False
        self.warnings = WarningTally()
        logging.getLogger("nats_sync").addHandler(self.warnings)

    def salvage(self) -> None:
        """After a fault step raised: the figures so far, when both ends ran and
        `finish` was not what failed (best effort; the row is failed anyway)."""
        if self.publisher is not None and self.loop is not None and not self.finishing:
            with contextlib.suppress(Exception):
                self.finish()

    def connect(self, servers: list[str]) -> None:
        def client(role: str, events: ClientEvents) -> nats_sync.Client:
            return nats_sync.connect(
                servers,
                name=f"reliability-{role}-{self.result.key}",
                max_reconnect_attempts=-1,
                connect_timeout=2.0,
                reconnect_delay_cb=lambda attempt: 0.1,
                **events.options(),
            )

        self.pub_nc = client("pub", self.pub_events)
        self.sub_nc = client("sub", self.sub_events)

    def start(self, replicas: int) -> None:
        """Makes the stream and the durable consumer, starts both ends."""
        assert self.pub_nc is not None and self.sub_nc is not None
        admin = self.sub_nc.jetstream()
        self.stream = admin.create_stream(
            name=self.name,
            subjects=[f"{self.subject}.>"],
            num_replicas=replicas,
            duplicate_window=DUPLICATE_WINDOW,
        )
        consumer = admin.create_consumer(
            self.name, durable_name="reliability", ack_policy="explicit", ack_wait=ACK_WAIT
        )
        self.loop = ConsumerLoop(consumer)
        self.loop.start()
        self.publisher = AckedPublisher(
            self.pub_nc.jetstream(), f"{self.subject}.data", self.result.key, self.rate
        )
        self.publisher.start()
        time.sleep(WARMUP)

    def recover(self, injection: JsInjection) -> bool:
        """Waits for the first new PubAck and the first new delivery after the kill."""
        assert self.publisher is not None and self.loop is not None
        injection.acked = self.publisher.wait_acked_after(injection.at, RECOVERY_TIMEOUT)
        injection.delivered = self.loop.wait_delivered_after(injection.at, RECOVERY_TIMEOUT)
        self.result.injections.append(injection)
        number = len(self.result.injections)
        print(
            f"  [{self.result.key}] fault {number}: first new PubAck after "
            f"{fmt_s(injection.recovery)}, first new delivery after "
            f"{fmt_s(injection.consumer_recovery)}",
            flush=True,
        )
        return injection.acked is not None and injection.delivered is not None

    def on_node(self, server: NatsServer) -> tuple[bool, bool]:
        """Whether the publisher and the consumer client are connected to ``server``."""

        def on(nc: nats_sync.Client | None) -> bool:
            return nc is not None and nc.connected_url == server.url

        return on(self.pub_nc), on(self.sub_nc)

    def finish(self) -> None:
        """Stops publishing (retrying what is not acknowledged), lets the consumer catch
        up, reads the stream back and computes the row."""
        assert self.publisher is not None and self.loop is not None
        assert self.stream is not None
        self.finishing = True
        self.publisher.stop()
        self.publisher.retry_until_acked(FINISH_TIMEOUT)
        last_seq = self.wait_consumed()
        self.loop.stop()
        stored = read_back(self.stream, last_seq)
        self.result.tally = analyse(self.publisher, self.loop, stored, self.stream)
        self.add_notes()

    def wait_consumed(self) -> int:
        """Until the consumer has received every stored message and has no ack pending
        (redeliveries included), or `FINISH_TIMEOUT`; returns the stream's last seq."""
        assert self.stream is not None and self.loop is not None
        consumer = self.loop.consumer
        deadline = now() + FINISH_TIMEOUT + ACK_WAIT
        last_seq = 0
        while True:
            with contextlib.suppress(nats_sync.Error):
                last_seq = self.stream.info().state.last_seq
                info = consumer.info()
                if (
                    not info.num_pending
                    and not info.num_ack_pending
                    and len(self.loop.consumed()) >= last_seq
                ):
                    return last_seq
            if now() > deadline:
                return last_seq
            time.sleep(0.2)

    def add_notes(self) -> None:
        assert self.publisher is not None and self.loop is not None
        result, t, loop = self.result, self.result.tally, self.loop
        if t.not_acknowledged_kinds:
            kinds = ", ".join(f"{n:,} {kind}" for kind, n in t.not_acknowledged_kinds.most_common())
            result.notes.append(f"not acknowledged at first: {kinds}")
        if t.retries:
            outcomes = [
                (
                    t.retried_duplicate,
                    "answered `duplicate` (the first attempt had been "
                    "stored: the stream deduplicated the retry)",
                ),
                (
                    t.retried_stored,
                    "stored as new (the first attempt never reached the "
                    "stream, or was not committed)",
                ),
            ]
            result.notes.append(
                f"{t.retries:,} retries with the same msg_id (some failed "
                "again while the fault lasted); "
                + ", ".join(f"{n:,} {text}" for n, text in outcomes if n)
            )
        if t.delivered_twice:
            causes = [
                (
                    t.redelivered,
                    "redeliveries marked by the server (num_delivered > 1: "
                    "the ack was lost with the killed server, so the message came again "
                    "after ack_wait)",
                ),
                (
                    t.replayed,
                    "repeated with num_delivered 1 (the consumer's delivered "
                    "state on disk was older than the crash, so these were sent again as "
                    "first deliveries)",
                ),
            ]
            result.notes.append(
                f"{t.delivered_twice:,} stream sequences delivered more than "
                "once: " + ", ".join(f"{n:,} {text}" for n, text in causes if n)
            )
        if t.ack_elsewhere:
            result.notes.append(
                f"**{len(t.ack_elsewhere)} PubAcks name a sequence that "
                f"holds another message**: #{t.ack_elsewhere[:10]}"
            )
        for label, errors in (
            ("consumer messages().next() raised", loop.errors),
            ("msg.ack() raised", loop.ack_errors),
        ):
            if errors:
                kinds = ", ".join(f"{n} {kind}" for kind, n in errors.most_common())
                result.notes.append(f"{label}: {kinds}")
        if loop.reopened:
            result.notes.append(f"**messages() ended {loop.reopened} times and was opened again**")
        if self.warnings.kinds:
            kinds = ", ".join(f"{n} {kind}" for kind, n in self.warnings.kinds.most_common())
            result.notes.append(f"warnings logged by nats_sync: {kinds}")
        for label, events in (("publisher", self.pub_events), ("consumer", self.sub_events)):
            if events.reconnected_at:
                result.notes.append(
                    f"the {label} client reconnected {len(events.reconnected_at)} times"
                )

    def close(self) -> None:
        logging.getLogger("nats_sync").removeHandler(self.warnings)
        for stoppable in (self.publisher, self.loop):
            if stoppable is not None and stoppable.is_alive():
                with contextlib.suppress(Exception):
                    stoppable.stop()
        for nc in (self.pub_nc, self.sub_nc):
            if nc is not None:
                with contextlib.suppress(Exception):
                    nc.close()


def read_back(stream: Stream, last_seq: int) -> dict[int, tuple[int, str | None]]:
    """Every stored message: stream seq -> (its number, its msg_id)."""
    stored: dict[int, tuple[int, str | None]] = {}
    for msg in stream.get_msgs(1, end_seq=max(last_seq, 1)):
        msg_id = (msg.headers or {}).get(MSG_ID)
        stored[msg.seq] = (PAYLOAD.unpack(msg.data)[0], msg_id if isinstance(msg_id, str) else None)
    return stored


def analyse(
    publisher: AckedPublisher,
    loop: ConsumerLoop,
    stored: dict[int, tuple[int, str | None]],
    stream: Stream,
) -> JsTally:
    """Compares what was acknowledged, stored and consumed."""
    t = JsTally(published=len(publisher.sent_at), acked=len(publisher.acked))
    t.acked_at_once = sum(1 for a in publisher.acked.values() if a.attempt == 1)
    t.not_acknowledged = len(publisher.first_failure)
    t.not_acknowledged_kinds = Counter(publisher.first_failure.values())
    t.retries = sum(publisher.attempts) - t.published
    t.retried_duplicate = sum(1 for a in publisher.acked.values() if a.attempt > 1 and a.duplicate)
    t.retried_stored = sum(1 for a in publisher.acked.values() if a.attempt > 1 and not a.duplicate)
    t.never_acked = t.published - t.acked
    where: dict[int, list[int]] = {}
    for seq, (number, _) in stored.items():
        where.setdefault(number, []).append(seq)
    for number, acked in sorted(publisher.acked.items()):
        if number not in where:
            t.acked_lost.append(number)
        elif acked.stream_seq not in where[number]:
            t.ack_elsewhere.append(number)
    # A read that skipped a sequence (a replica behind, a gap) must not pass for a
    # loss: each missing one is asked of the stream's leader once more.
    for number in list(t.acked_lost):
        with contextlib.suppress(nats_sync.Error):
            msg = stream.get_msg(publisher.acked[number].stream_seq)
            if PAYLOAD.unpack(msg.data)[0] == number:
                t.acked_lost.remove(number)
                stored[msg.seq] = (number, None)
    t.stored = len(stored)
    t.stored_twice = sum(1 for seqs in where.values() if len(seqs) > 1)
    consumed = loop.consumed()
    t.not_consumed = sorted(seq for seq in stored if seq not in consumed)
    t.delivered = sum(loop.deliveries.values())
    t.delivered_twice = sum(1 for n in loop.deliveries.values() if n > 1)
    t.redelivered, t.replayed = loop.redelivered, loop.replayed
    return t


# --- the faults -----------------------------------------------------------------------------


def fault_js_restart(
    row: JsRow, times: int, track: Callable[[NatsServer | NatsCluster], None]
) -> None:
    """A single JetStream server, killed and started again on its port and store."""
    server = NatsServer(jetstream=True)
    track(server)
    try:
        server.start()
        row.connect([server.url])
        row.start(replicas=1)
        for _ in range(times):
            injection = JsInjection(at=now())
            server.kill()
            time.sleep(KILL_DOWNTIME)
            server.start()
            if not row.recover(injection):
                break
            time.sleep(SETTLE)
        row.finish()
    except Exception:
        row.salvage()
        raise
    finally:
        row.close()
        server.cleanup()


def fault_js_leader(
    row: JsRow, times: int, track: Callable[[NatsServer | NatsCluster], None]
) -> None:
    """An R3 stream (and consumer) on a 3-node cluster; its leader is killed, and
    started again once publishing and consuming have recovered."""
    cluster = NatsCluster(3, name="reliability-js", jetstream=True)
    track(cluster)
    try:
        cluster.start()
        row.connect(cluster.urls)
        row.start(replicas=3)
        kill_leaders(row, cluster, times)
        row.finish()
    except Exception:
        for server in cluster.servers:  # the figures need every replica back
            with contextlib.suppress(Exception):
                server.start()
        row.salvage()
        raise
    finally:
        row.close()
        cluster.cleanup()


def kill_leaders(row: JsRow, cluster: NatsCluster, times: int) -> None:
    """``times`` kills of the stream's current leader, each started again once the
    clients have recovered and caught up as a replica before the next."""
    assert row.stream is not None and row.loop is not None
    result = row.result
    pub_on = sub_on = consumer_led = 0
    for _ in range(times):
        leader = (row.stream.info().cluster or {}).get("leader")
        target = next((s for s in cluster.servers if s.name == leader), None)
        if target is None:
            raise RuntimeError(f"stream leader {leader!r} is none of the cluster's servers")
        consumer_led += (row.loop.consumer.info().cluster or {}).get("leader") == leader
        on_pub, on_sub = row.on_node(target)
        pub_on, sub_on = pub_on + on_pub, sub_on + on_sub
        injection = JsInjection(at=now())
        target.kill()
        recovered = row.recover(injection)
        target.start()
        cluster.wait_for_mesh()
        cluster.wait_for_jetstream()
        wait_replicas_current(row, target.name or "")
        if not recovered:
            break
        time.sleep(SETTLE)
    result.notes.append(
        f"the killed stream leader was also the consumer's leader {consumer_led} of "
        f"{len(result.injections)} times; the publisher client was connected to it "
        f"{pub_on} times, the consumer client {sub_on} times (otherwise a client stayed "
        "connected and waited for the new leader)"
    )


def wait_replicas_current(row: JsRow, name: str) -> None:
    """Until the restarted node ``name`` is a current replica of the stream and the
    consumer again (so the next kill finds a full replica set)."""
    assert row.stream is not None and row.loop is not None
    deadline = now() + REPLICAS_TIMEOUT
    while True:
        with contextlib.suppress(nats_sync.Error):
            clusters = [row.stream.info().cluster, row.loop.consumer.info().cluster]
            if all(current(c or {}, name) for c in clusters):
                return
        if now() > deadline:
            raise RuntimeError(
                f"{name} was not a current replica within {REPLICAS_TIMEOUT:.0f} s of its restart"
            )
        time.sleep(0.2)


def current(cluster: dict[str, Any], name: str) -> bool:
    """Whether ``name`` leads, or is a current replica in, this cluster info."""
    if not cluster.get("leader"):
        return False
    if cluster["leader"] == name:
        return True
    return any(r.get("name") == name and r.get("current") for r in cluster.get("replicas") or [])


def run_js_fault(
    fault: JsFault, rate: int, track: Callable[[NatsServer | NatsCluster], None]
) -> JsResult:
    result = JsResult(fault.key, fault.title)
    print(f"{fault.key}: {fault.title} (x{fault.times})", flush=True)
    started = now()
    runner = {"js_restart": fault_js_restart, "js_leader": fault_js_leader}[fault.key]
    try:
        runner(JsRow(result, rate), fault.times, track)
    except Exception as err:  # a broken row is reported, the others still run
        result.error = f"{type(err).__name__}: {err}"
        print(f"  [{fault.key}] failed: {result.error}", flush=True)
    t = result.tally
    print(
        f"  [{fault.key}] published {t.published:,}, acked {t.acked:,}, acked and lost "
        f"{len(t.acked_lost)}, not acknowledged {t.not_acknowledged:,} (retries "
        f"{t.retries:,}: {t.retried_duplicate:,} duplicate, {t.retried_stored:,} stored), "
        f"stored {t.stored:,} (twice {t.stored_twice}), not consumed {len(t.not_consumed)}, "
        f"delivered twice {t.delivered_twice:,} [{now() - started:.1f}s]"
        + (f" ERROR {result.error}" if result.error else ""),
        flush=True,
    )
    return result


# --- the report ---------------------------------------------------------------------------


def fmt_s(seconds: float | None) -> str:
    return "never" if seconds is None else f"{1000 * seconds:.0f} ms"


def table_header() -> list[str]:
    return [
        "| fault | injected | published | acked | **acked and lost** | not acknowledged "
        "| retried: duplicate | retried: stored | stored | stored twice "
        "| **stored not consumed** | delivered twice | recovery median | recovery max "
        "| consumer recovery max |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]


def table_row(r: JsResult) -> str:
    t = r.tally
    recoveries, consumer = r.recoveries, r.consumer_recoveries
    missed = f" ({r.missed_recoveries} never)" if r.missed_recoveries else ""
    never = f" ({t.never_acked:,} never)" if t.never_acked else ""
    return (
        f"| {r.fault} | {len(r.injections)} | {t.published:,} | {t.acked:,}{never} "
        f"| **{len(t.acked_lost):,}** | {t.not_acknowledged:,} | {t.retried_duplicate:,} "
        f"| {t.retried_stored:,} | {t.stored:,} | {t.stored_twice:,} "
        f"| **{len(t.not_consumed):,}** | {t.delivered_twice:,} "
        f"| {fmt_ms(statistics.median(recoveries) if recoveries else None)} "
        f"| {fmt_ms(max(recoveries) if recoveries else None)}{missed} "
        f"| {fmt_ms(max(consumer) if consumer else None)} |"
    )


def note_line(r: JsResult) -> str | None:
    items = list(r.notes)
    if r.tally.acked_lost:
        items.append(f"**acked and lost**: #{r.tally.acked_lost[:10]}")
    if r.tally.not_consumed:
        items.append(f"**stored, never consumed**: stream seqs {r.tally.not_consumed[:10]}")
    return row_notes(r.fault, items, r.error)


def method(rate: int) -> list[str]:
    """What is promised and how it is checked."""
    return [
        "What JetStream promises, and what this section checks against real `nats-server`s",
        "(file storage, the defaults otherwise):",
        "",
        "- **An acknowledged publish is stored**: once the future of `publish_async` holds a",
        "  PubAck, the message is in the stream, through a kill -9 of its server or of its",
        "  leader (an R3 stream acks what a majority of its replicas hold).",
        "- **Every stored message reaches a durable consumer** with explicit acks, at least",
        "  once. After a crash some are delivered twice: an ack in flight to the dying",
        "  server (or not yet persisted by it) is lost, and the message comes again.",
        "- **A publish without an ack may or may not be stored**: retry it with the same",
        "  `msg_id`; within the stream's duplicate window it is stored once.",
        "",
        "### Method",
        "",
        f"A publisher client sends a numbered stream with `publish_async` (~{rate:,} msgs/s,",
        "16-byte payloads, `msg_id=<row>-<number>`, ack timeout "
        f"{ACK_TIMEOUT:.0f} s); a consumer client reads a",
        f'durable pull consumer (`ack_policy="explicit"`, `ack_wait={ACK_WAIT:.0f}` s) with',
        f"`messages(max_wait={PULL_WAIT:.0f})` and acks each message. Both clients have",
        "`max_reconnect_attempts=-1` and 0.1 s between passes over the pool. Publishing",
        "starts 1 s before the first kill and goes on ~1 s after each recovery. Every publish",
        "whose future fails (ack timeout, no stream: `NoStreamResponseError`, connection",
        "closed) or whose call raises (window stalled) is **not acknowledged** and is",
        f"published again {RETRY_DELAY} s later with the same `msg_id` (at most one retry per",
        "new message; at the end, until each has its PubAck). Then the consumer is given time",
        "to catch up, the stream is read back (`stream.get_msgs()`; a message not found is",
        "asked for once more by sequence, from the leader) and compared with the PubAcks and",
        "the deliveries.",
        "",
        "- **acked**: numbers with a PubAck (first attempt or a retry); **not acknowledged**:",
        "  numbers whose first attempt failed; **retried: duplicate**: of those, acked on a",
        "  retry with `duplicate` set (the first attempt had been stored: the stream",
        "  deduplicated the retry); **retried: stored**: acked on a retry as a new message",
        "  (the first attempt never reached the stream).",
        "- **acked and lost**: acked, but not in the stream (or not at the sequence its",
        "  PubAck named). Must be 0.",
        "- **stored twice**: one `msg_id` at two sequences (a retry not deduplicated). Must",
        "  be 0.",
        "- **stored not consumed**: stored sequences the consumer never received (it is given",
        f"  up to {FINISH_TIMEOUT:.0f} s after the last publish). Must be 0.",
        "- **delivered twice**: stream sequences the consumer received more than once.",
        "- **recovery**: from the kill to the first PubAck of a publish sent after it;",
        "  **consumer recovery**: to the first delivery of a message first published after",
        "  it.",
        "",
        "The faults:",
        "",
        "1. **kill -9 of a single JetStream server** (R1 stream, both clients on it): SIGKILL,",
        "   then the server starts again 1 s later on the same port with the same store.",
        "   Recovery includes the 1 s downtime and the store's recovery.",
        "2. **kill -9 of the stream's leader** in a 3-node JetStream cluster (R3 stream and",
        '   consumer; the leader from `stream.info().cluster["leader"]`): the clients',
        "   connect to the cluster's URLs, so each is on the killed node or not by chance.",
        "   Once a new PubAck and a new delivery have come, the node starts again on the same",
        "   ports and store, and the next kill waits until it is a current replica of both.",
        "   During the election the stream has no leader, so publishes get no responders",
        "   (`NoStreamResponseError` after the library's two retries) until one is elected.",
        "",
    ]


def intro(rate: int) -> list[str]:
    """The section's heading, promises and method (up to its results)."""
    return ["## JetStream under faults", "", *method(rate)]

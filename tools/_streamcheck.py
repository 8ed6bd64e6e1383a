"""The numbered stream that ``make reliability`` and ``make soak`` push through faults.

A `StreamPublisher` thread publishes 16-byte payloads (sequence number, publish time) at a
steady rate and notes, for every accepted publish, whether the client was reconnecting
just before and just after the call: those messages sat in the disconnect buffer, which
the client promises to deliver. A `Receiver` callback records which sequence numbers
arrived. `tally` then splits what went missing into three kinds:

- **from the buffer**: published while reconnecting; must be 0;
- **in flight**: not buffered, published from `IN_FLIGHT_BEFORE` seconds before a fault
  until the publisher's reconnect (written to a socket that died: core NATS is
  at-most-once);
- **unexplained**: anything else; must be 0.

Also here: `ClientEvents` (a client's reconnects and errors), `Paced` (a thread running a
step at a fixed rate), and `start_watchdog`, which ends a run that hangs.
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import struct
import sys
import threading
import time
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import nats_sync

#: Payload: sequence number and publish time (time.monotonic()), 16 bytes.
PAYLOAD = struct.Struct(">Qd")

RECONNECT_TIMEOUT = 15.0  # fault -> a client's reconnected_cb
FLUSH_TIMEOUT = 5.0
JOIN_TIMEOUT = 10.0  # a paced thread stops (or pauses) within this long
DRAIN_QUIET = 1.5  # end of a run: the receiver saw nothing new for this long
DRAIN_MAX = 10.0
#: A lost, not buffered message published this long before a fault (or later, up to the
#: reconnect) counts as lost in flight.
IN_FLIGHT_BEFORE = 1.0


def now() -> float:
    return time.monotonic()


class ClientEvents:
    """Records a client's reconnects and errors (called on its callback thread)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.reconnected_at: list[float] = []
        self.errors: list[str] = []

    def options(self) -> dict[str, Any]:
        """The keyword arguments of `nats_sync.connect` that feed this record."""
        return {"reconnected_cb": self._on_reconnected, "error_cb": self._on_error}

    def _on_reconnected(self) -> None:
        with self._cond:
            self.reconnected_at.append(now())
            self._cond.notify_all()

    def _on_error(self, error: BaseException) -> None:
        with self._cond:
            self.errors.append(f"{type(error).__name__}: {error}")

    def error_kinds(self) -> Counter[str]:
        """How many errors of each exception type."""
        with self._cond:
            return Counter(error.split(":", 1)[0] for error in self.errors)

    def wait_reconnected_after(self, start: float, timeout: float) -> float | None:
        """The first reconnect at or after ``start``; None if none within ``timeout``."""

        def found() -> float | None:
            return next((t for t in self.reconnected_at if t >= start), None)

        with self._cond:
            self._cond.wait_for(lambda: found() is not None, timeout)
            return found()


class Receiver:
    """The subscriber's side: which sequence numbers arrived, how often, in what order.

    ``capacity`` sequence numbers are counted without growing (the soak preallocates so
    that its RSS figures do not include this bookkeeping); more are counted too.
    """

    def __init__(self, capacity: int = 1 << 16) -> None:
        self.counts = bytearray(max(capacity, 1))  # arrivals per sequence number (max 255)
        self.received = self.unique = self.duplicates = self.out_of_order = 0
        self.highest = -1
        self.last_arrival = now()
        self.probes: set[bytes] = set()  # payloads published to SUBJECT.probe
        self.late: list[int] = []  # sequence numbers that arrived out of order

    def on_msg(self, msg: nats_sync.Msg) -> None:
        """The subscription's callback (one delivery thread: no lock needed)."""
        self.last_arrival = now()
        if msg.subject.endswith(".probe"):
            self.probes.add(msg.data)
            return
        seq = PAYLOAD.unpack(msg.data)[0]
        counts = self.counts
        if seq >= len(counts):
            counts.extend(bytes(max(seq + 1 - len(counts), len(counts))))
        self.received += 1
        if counts[seq]:
            self.duplicates += 1
        else:
            self.unique += 1
        counts[seq] = min(counts[seq] + 1, 255)
        if seq < self.highest:
            self.out_of_order += 1
            self.late.append(seq)
        else:
            self.highest = seq

    def wait_drained(self, published: int) -> None:
        """Returns once all of ``published`` arrived, nothing arrived for `DRAIN_QUIET`
        seconds, or `DRAIN_MAX` seconds passed."""
        deadline = now() + DRAIN_MAX
        while self.unique < published and now() < deadline:
            if now() - self.last_arrival > DRAIN_QUIET:
                return
            time.sleep(0.05)


class Paced(threading.Thread):
    """A thread calling `step` ``rate`` times a second, ``batch`` calls at a time, until
    `stop`; `paused` holds it between batches. After a stall of more than a second it
    carries on at the rate instead of bursting to catch up."""

    def __init__(self, name: str, rate: int, batch: int) -> None:
        super().__init__(name=name, daemon=True)
        self.rate, self.batch = rate, batch
        self.failure: BaseException | None = None
        self._stopping = threading.Event()
        self._go = threading.Event()
        self._go.set()
        self._idle = threading.Event()

    def step(self) -> None:
        raise NotImplementedError

    def run(self) -> None:
        interval = self.batch / self.rate
        deadline = now()
        try:
            while not self._stopping.is_set():
                if not self._go.is_set():
                    self._idle.set()
                    self._go.wait(0.1)
                    deadline = now()
                    continue
                for _ in range(self.batch):
                    self.step()
                deadline += interval
                delay = deadline - now()
                if delay > 0:
                    self._stopping.wait(delay)
                elif delay < -1.0:
                    deadline = now()
        except BaseException as error:  # reported by stop(), not lost on a thread
            self.failure = error

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Holds the thread (between batches) for the duration of the block."""
        self._idle.clear()
        self._go.clear()
        try:
            if not self._idle.wait(JOIN_TIMEOUT):
                raise RuntimeError(f"{self.name} did not pause within {JOIN_TIMEOUT:.0f} s")
            yield
        finally:
            self._go.set()

    def stop(self) -> None:
        """Stops and joins the thread; raises if it hangs or `step` raised."""
        self._stopping.set()
        self._go.set()
        self.join(JOIN_TIMEOUT)
        if self.is_alive():
            raise RuntimeError(
                f"{self.name} did not stop within {JOIN_TIMEOUT:.0f} s (publish hangs?)"
            )
        if self.failure is not None:
            raise RuntimeError(f"{self.name} failed") from self.failure


class StreamPublisher(Paced):
    """Publishes the numbered stream on ``subject`` at ``rate`` msgs/s (batches of 1% of
    the rate). ``capacity`` sequence numbers are recorded without growing."""

    def __init__(
        self,
        nc: nats_sync.Client,
        subject: str,
        rate: int,
        capacity: int = 1 << 16,
        name: str = "stream-publisher",
    ) -> None:
        super().__init__(name, rate, max(1, rate // 100))
        self.nc, self.subject = nc, subject
        capacity = max(capacity, 1)
        self.times = array("d", bytes(8 * capacity))  # publish time of each accepted seq
        self.buffered = bytearray(capacity)  # 1: published while the client was reconnecting
        self.published = 0
        self.refused = 0  # OutboundBufferLimitError
        self.errors: Counter[str] = Counter()  # any other error from publish(), by type
        self.first_error: str | None = None

    def step(self) -> None:
        seq, nc = self.published, self.nc
        before = nc.is_reconnecting
        at = now()
        try:
            nc.publish(self.subject, PAYLOAD.pack(seq, at))
        except nats_sync.OutboundBufferLimitError:
            self.refused += 1
            return
        except nats_sync.Error as error:
            self.errors[type(error).__name__] += 1
            if self.first_error is None:
                self.first_error = f"{type(error).__name__}: {error}"
            return
        after = nc.is_reconnecting
        if seq == len(self.times):
            self.times.extend(array("d", bytes(8 * seq)))
            self.buffered.extend(bytes(seq))
        self.times[seq] = at
        self.buffered[seq] = before and after
        self.published = seq + 1


@dataclass
class StreamTally:
    """Both ends' counts, and the missing sequence numbers by kind (see the module)."""

    published: int = 0
    received: int = 0
    unique: int = 0
    duplicates: int = 0
    out_of_order: int = 0
    buffered: int = 0
    refused: int = 0
    publish_errors: Counter[str] = field(default_factory=Counter)
    from_buffer: list[int] = field(default_factory=list)
    in_flight: list[int] = field(default_factory=list)
    unexplained: list[int] = field(default_factory=list)
    windows: list[tuple[float, float]] = field(default_factory=list)

    @property
    def lost(self) -> int:
        return len(self.from_buffer) + len(self.in_flight) + len(self.unexplained)

    def near_a_fault(self, at: float) -> bool:
        """Whether time ``at`` is within a fault's in-flight window."""
        return any(start <= at <= end for start, end in self.windows)


def tally(
    publisher: StreamPublisher, receiver: Receiver, faults: Iterable[tuple[float, float | None]]
) -> StreamTally:
    """Counts and classifies the losses; ``faults`` are (injected, publisher reconnected)
    times, the latter None when it never did."""
    result = StreamTally(
        published=publisher.published,
        received=receiver.received,
        unique=receiver.unique,
        duplicates=receiver.duplicates,
        out_of_order=receiver.out_of_order,
        buffered=sum(publisher.buffered),
        refused=publisher.refused,
        publish_errors=Counter(publisher.errors),
        windows=[
            (at - IN_FLIGHT_BEFORE, back if back is not None else at + RECONNECT_TIMEOUT)
            for at, back in faults
        ],
    )
    counts = receiver.counts
    for seq in range(publisher.published):
        if seq < len(counts) and counts[seq]:
            continue
        if publisher.buffered[seq]:
            result.from_buffer.append(seq)
        elif result.near_a_fault(publisher.times[seq]):
            result.in_flight.append(seq)
        else:
            result.unexplained.append(seq)
    return result


def start_watchdog(tool: str, seconds: float, cleanup: Callable[[], None]) -> threading.Event:
    """Ends the process after ``seconds`` (exit 3, every thread's stack on stderr, after
    ``cleanup``) unless the returned event is set first."""
    done = threading.Event()

    def watch() -> None:
        if done.wait(seconds):
            return
        print(
            f"\n{tool}: still running after {seconds:.0f} s: giving up; thread stacks:",
            file=sys.stderr,
            flush=True,
        )
        faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        with contextlib.suppress(Exception):
            cleanup()
        os._exit(3)

    threading.Thread(target=watch, name=f"{tool}-watchdog", daemon=True).start()
    return done

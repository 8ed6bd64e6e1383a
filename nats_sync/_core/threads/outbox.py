"""The outbox: encoded frames waiting for the writer thread; also the disconnect buffer.

How it works: publishers (any user thread), the reader thread (PONG answers) and the
handler append frames under ``lock``; the writer thread takes the whole list at once.
A frame is ``bytes``, or for a large payload a list ``[control line, payload, CRLF]``
kept whole so the payload is never copied and a failed send can put back whole
messages. The writer is woken only when it is waiting, so a burst of publishes costs
one notify, not one per message.

Bounds: ``limit`` (``pending_size``) bytes. While connected a publisher finding the
outbox full waits for the writer to make room, at most ``full_wait`` seconds, then gets
``OutboundBufferLimitError``; while disconnected it gets the error at once. It waits
outside ``lock``, on a sleeper of its own (``_core.threads.waiting``), so a Ctrl-C there can never
leave the lock half-released under the writer. Control
frames (PING, PONG, SUB, UNSUB) are never refused: they are small and the connection
cannot work without them.

``pong_waiters`` lives here too: a PING and the waiter for its PONG are queued under the
same lock, so waiters line up in exactly the order their PINGs go out.

Across a reconnect only messages are kept: control frames are typed
(:class:`ControlFrame`) so :meth:`Outbox.keep_messages_only` can drop them (the handler
replays subscriptions from its own state) and queue one fresh PING per flush still
waiting, after every buffered message.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence

from nats_sync._core.proto import PING
from nats_sync._core.threads.waiting import Sleepers, wait_until
from nats_sync._defaults import DIRECT_CLAIM_CHECK
from nats_sync.errors import ConnectionClosedError, OutboundBufferLimitError

log = logging.getLogger("nats_sync")


class ControlFrame(bytes):
    """A protocol frame that is not a message (PING, PONG, SUB, UNSUB)."""


class Remainder(bytes):
    """The unsent tail of a message a caller's thread wrote in part (a direct send).

    It must go out next on the same connection; after a loss the whole message
    (``whole``) is what gets re-sent, as for any partly written frame.
    """

    whole: bytes


def remainder(tail: bytes, whole: bytes) -> Remainder:
    """A :class:`Remainder` of ``whole`` holding its unsent ``tail``."""
    frame = Remainder(tail)
    frame.whole = whole
    return frame


_PING_FRAME = ControlFrame(PING)
Frame = bytes | list[bytes]
#: Called with None when the PONG arrives, or with an error when it never will.
PongWaiter = Callable[[BaseException | None], None]


def frame_size(frame: Frame) -> int:
    """Bytes a frame takes on the wire."""
    if isinstance(frame, bytes):
        return len(frame)
    return sum(len(part) for part in frame)


class Outbox:
    """Frames queued for the writer thread, bounded by ``limit`` bytes.

    Args:
        limit: ``pending_size``; 0 refuses publishes whenever disconnected.
        full_wait: how long a publisher waits for room while connected.
    """

    # Every publish reads and writes these under ``lock``.
    __slots__ = (
        "_bell",
        "_main_thread",
        "_room_sleepers",
        "_sleepers",
        "connected",
        "frames",
        "full_wait",
        "limit",
        "lock",
        "out_bytes",
        "out_msgs",
        "pong_waiters",
        "sending",
        "size",
        "stale_claims",
        "stopping",
        "writer_waiting",
    )

    def __init__(self, limit: int, full_wait: float) -> None:
        self.lock = threading.Lock()
        # The writer sleeps on a SimpleQueue, not a Condition: put() is one C call, so
        # Ctrl-C in a publishing main thread cannot cut a wake-up in half (Condition.notify
        # interrupted between releasing a waiter and removing it made every later notify
        # raise "release unlocked lock"), and a wake-up too many is harmless.
        self._bell: queue.SimpleQueue[None] = queue.SimpleQueue()
        self._sleepers = 0
        #: Publishers waiting for room (not a threading.Condition: see ``_core.threads.waiting``).
        self._room_sleepers = Sleepers()
        self.frames: list[Frame] = []
        self.size = 0
        self.limit = limit
        self.full_wait = full_wait
        #: False while disconnected: the outbox buffers and refuses past ``limit``.
        self.connected = False
        self.writer_waiting = False
        #: The ident of a caller's thread writing to the socket itself, 0 when none
        #: (see :meth:`claim_direct`; the ident lets an interrupted one tell it holds it).
        self.sending = 0
        self._main_thread = threading.main_thread().ident
        #: Claims the writer found held by a thread no longer writing (see :meth:`take`).
        self.stale_claims = 0
        self.stopping = False
        self.out_msgs = 0
        self.out_bytes = 0
        self.pong_waiters: deque[PongWaiter | None] = deque()

    @property
    def room_waiters(self) -> int:
        """Publishers waiting for room (an interrupted one may still count until the
        next wake-up)."""
        return len(self._room_sleepers)

    def put_messages(self, frames: Sequence[Frame], size: int, payload_size: int) -> None:
        """Queues PUB/HPUB frames of ``size`` bytes in all, carrying ``payload_size``.

        The publish hot path (``Publisher.publish``) holds an inlined copy of this
        for one frame: keep the two alike.

        Raises:
            OutboundBufferLimitError: no room (at once when disconnected, after
                ``full_wait`` when connected).
            ConnectionClosedError: the client closed while this waited for room.
        """
        with self.lock:
            if self.size + size <= self.limit or (not self.size and self.connected):
                self.frames.extend(frames)
                self.size += size
                self.out_msgs += len(frames)
                self.out_bytes += payload_size
                if self.writer_waiting:
                    self.wake_writer()
                return
        self.put_when_room(frames, size, payload_size)

    def put_when_room(self, frames: Sequence[Frame], size: int, payload_size: int) -> None:
        """Without ``lock``: waits until ``size`` more bytes fit, then queues ``frames``.

        Raises:
            OutboundBufferLimitError: still no room after ``full_wait`` (at once when
                disconnected).
            ConnectionClosedError: the client closed while this waited.
        """

        def queued_if_room() -> bool | None:
            fits = self.size + size <= self.limit or (not self.size and self.connected)
            if not fits and not self.connected:
                raise OutboundBufferLimitError(
                    f"disconnected with {self.size} of {self.limit} bytes buffered; "
                    f"a {size}-byte message does not fit (pending_size)"
                )
            if self.stopping:
                raise ConnectionClosedError("the client was closed while this publish waited")
            if not fits:
                return None
            self.frames.extend(frames)
            self.size += size
            self.out_msgs += len(frames)
            self.out_bytes += payload_size
            if self.writer_waiting:
                self.wake_writer()
            return True

        deadline = time.monotonic() + self.full_wait
        if wait_until(self.lock, self._room_sleepers, queued_if_room, deadline) is None:
            raise OutboundBufferLimitError(
                f"{self.size} bytes have waited over {self.full_wait}s for the "
                "server to read them (pending_size reached)"
            )

    def wake_writer(self) -> None:
        """With ``lock`` held and the writer waiting: wakes it, once per wake-up (frames
        queued before it runs ride along for free)."""
        # Rung first: Ctrl-C between the two lines must leave the flag set (the next
        # frame rings again, harmlessly), never cleared with the writer still asleep.
        self._bell.put(None)
        self.writer_waiting = False

    def claim_direct(self, payload_size: int) -> bool:
        """Lets the calling thread write one message to the socket itself.

        Only when nothing is queued and the writer is idle: then handing the frame to
        the writer would cost a thread switch and gain nothing (a request's latency).
        The caller must call :meth:`release_direct` once its write is over.
        """
        with self.lock:
            if self.frames or self.sending or not self.writer_waiting or not self.connected:
                return False
            self.sending = threading.get_ident()
            self.out_msgs += 1
            self.out_bytes += payload_size
            return True

    def queue_behind_direct(self, frame: bytes, payload_size: int) -> bool:
        """Queues a message for the caller writing to the socket now, if one is.

        That caller takes it with the next :meth:`release_direct` (or the writer, woken
        there, does): no thread switch for it. False when no caller is writing (or it
        does not fit): then it goes through :meth:`put_messages`.

        Never behind the main thread's claim: the main thread writes no one else's
        messages anyway (a Ctrl-C could land between taking and writing them), and its
        claim alone can be left held by an interrupt: queued normally, the message
        wakes the writer, which then looks whether that claim is still live.
        """
        with self.lock:
            if (
                not self.sending
                or self.sending == self._main_thread
                or not self.connected
                or self.size + len(frame) > self.limit
            ):
                return False
            self.frames.append(frame)
            self.size += len(frame)
            self.out_msgs += 1
            self.out_bytes += payload_size
            return True

    def release_direct(
        self, unsent: Remainder | list[Frame] | None = None, take_more: bool = False
    ) -> list[bytes] | None:
        """Ends a direct write, or with ``take_more`` hands the caller what was queued
        meanwhile to write next (only plain messages: control frames and large payloads
        stay for the writer, which takes over whatever is left).

        Args:
            unsent: the tail of what the socket did not take (a partly written message,
                then the ones after it); the writer sends it before anything else.
            take_more: whether the caller would write more (never with ``unsent``).

        Returns:
            The frames the caller now writes, still holding the claim; None once the
            claim is released.
        """
        with self.lock:
            if unsent:
                if isinstance(unsent, list):
                    self.frames[:0] = unsent
                    self.size += sum(frame_size(frame) for frame in unsent)
                else:
                    self.frames.insert(0, unsent)
                    self.size += len(unsent)
            elif take_more and self.frames and all(type(f) is bytes for f in self.frames):
                frames: list[bytes] = self.frames  # type: ignore[assignment]  # checked
                self.frames = []
                self.size = 0
                if self._room_sleepers:
                    self._room_sleepers.wake_all()
                return frames
            self.sending = 0
            # Only when there is something for it: waking the writer for nothing costs
            # a thread switch on every request.
            if self.writer_waiting and (self.frames or self.stopping):
                self.wake_writer()
            return None

    def give_back_direct(self) -> None:
        """The claiming thread, unwinding (a failed write, Ctrl-C): ends its claim if it
        still holds it, even when Ctrl-C lands again meanwhile.

        A lock's acquire is interruptible on POSIX, so a second SIGINT can cut
        :meth:`release_direct` while it waits for ``lock``, before the claim is cleared;
        the writer would then sleep for ever behind a claim nobody holds, with frames
        queued (seen in the interrupt storms as requests timing out on a CONNECTED
        client). The caller re-raises what it is unwinding from.
        """
        while True:
            try:
                if self.sending == threading.get_ident():
                    self.release_direct()
                return
            except BaseException:  # another Ctrl-C: the first one is on its way up
                continue

    def put_control(self, frame: bytes) -> None:
        """Queues a control frame (SUB, UNSUB, PONG, ...); never refused."""
        with self.lock:
            self.frames.append(ControlFrame(frame))
            self.size += len(frame)
            if self.writer_waiting:
                self.wake_writer()

    def put_ping(self, waiter: PongWaiter | None) -> None:
        """Queues a PING and, in the same order, the waiter for its PONG."""
        with self.lock:
            frames, waiters = len(self.frames), len(self.pong_waiters)
            try:
                self.frames.append(_PING_FRAME)
                self.pong_waiters.append(waiter)
            finally:
                # Ctrl-C (a flush in the main thread) between the two appends: the PING
                # is queued, so its waiter must be too, or every later PONG would settle
                # the flush after the one it answers.
                if len(self.frames) > frames and len(self.pong_waiters) == waiters:
                    self.pong_waiters.append(waiter)
            self.size += len(_PING_FRAME)
            if self.writer_waiting:
                self.wake_writer()

    def pop_pong_waiter(self) -> PongWaiter | None:
        """The waiter of the oldest unanswered PING (None for keepalive PINGs)."""
        with self.lock:
            return self.pong_waiters.popleft() if self.pong_waiters else None

    def take_pong_waiters(self) -> list[PongWaiter | None]:
        """Removes and returns every waiter (their connection is gone)."""
        with self.lock:
            waiters = list(self.pong_waiters)
            self.pong_waiters.clear()
            return waiters

    def take(self, claim_is_live: Callable[[int], bool] | None = None) -> list[Frame] | None:
        """Writer thread: waits for frames and takes them all.

        Args:
            claim_is_live: tells whether the thread of a direct-send claim (its ident)
                is still writing. With it, a writer kept waiting by a claim looks every
                ``DIRECT_CLAIM_CHECK`` seconds and ends a claim whose thread has left
                its write: :meth:`give_back_direct` narrows, but cannot close, the
                moments where a Ctrl-C leaves a claim held (on entering it, or in its
                own ``except``), and without this the writer would sleep for ever with
                frames queued. None: never looked at (greenlets, where an interrupt
                only lands at a wait, inside ``give_back_direct``'s retries).

        Returns:
            The frames, or None once :meth:`stop_writer` was called and (when it
            asked for a flush) nothing is left to send.
        """
        with self.lock:
            while not self.frames or self.sending:
                if self.stopping and not self.frames and not self.sending:
                    return None
                self.writer_waiting = True
                self._sleepers += 1
                claim = self.sending if claim_is_live is not None else 0
                rung = True
                self.lock.release()
                try:
                    if claim:
                        try:
                            self._bell.get(timeout=DIRECT_CLAIM_CHECK)
                        except queue.Empty:
                            rung = False
                    else:
                        self._bell.get()  # the writer thread: never interrupted
                finally:
                    self.lock.acquire()
                    self._sleepers -= 1
                self.writer_waiting = False
                # Under the lock: a live holder cannot release or claim meanwhile.
                if (
                    not rung
                    and self.sending == claim
                    and claim_is_live is not None
                    and not claim_is_live(claim)
                ):
                    self.sending = 0
                    self.stale_claims += 1
                    log.debug("nats_sync: ended a direct-send claim its thread left")
            frames = self.frames
            self.frames = []
            self.size = 0
            if self._room_sleepers:
                self._room_sleepers.wake_all()
            return frames

    def requeue(self, frames: list[Frame]) -> None:
        """Puts back frames a failed write did not deliver, ahead of newer ones."""
        if not frames:
            return
        with self.lock:
            self.frames[:0] = frames
            self.size += sum(frame_size(frame) for frame in frames)

    def keep_messages_only(self) -> None:
        """After a lost connection: drop control frames, re-queue PINGs for flush waiters.

        Keepalive PINGs (no waiter) are forgotten; each flush still waiting gets a new
        PING after every buffered message, so its PONG still means "all sent before".
        """
        with self.lock:
            messages = [
                frame.whole if type(frame) is Remainder else frame
                for frame in self.frames
                if type(frame) is not ControlFrame
            ]
            waiters = [waiter for waiter in self.pong_waiters if waiter is not None]
            self.frames = messages + [_PING_FRAME] * len(waiters)
            self.size = sum(frame_size(frame) for frame in self.frames)
            self.pong_waiters = deque(waiters)

    def put_control_first(self, frames: list[bytes]) -> None:
        """Queues control frames ahead of everything buffered (re-subscriptions)."""
        if not frames:
            return
        with self.lock:
            self.frames[:0] = [ControlFrame(frame) for frame in frames]
            self.size += sum(len(frame) for frame in frames)
            if self.writer_waiting:
                self.wake_writer()

    def set_connected(self, connected: bool) -> None:
        """Switches between sending (connected) and buffering (disconnected)."""
        with self.lock:
            self.connected = connected
            self.stopping = False
            if not connected and self._room_sleepers:
                self._room_sleepers.wake_all()

    def stop_writer(self, discard: bool) -> None:
        """Makes :meth:`take` return None once the outbox is empty.

        Args:
            discard: drop what is queued instead of letting the writer send it.
        """
        with self.lock:
            self.stopping = True
            if discard:
                self.frames = []
                self.size = 0
            for _ in range(self._sleepers):
                self._bell.put(None)
            self._room_sleepers.wake_all()

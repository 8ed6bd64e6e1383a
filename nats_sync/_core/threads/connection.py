"""One live connection: the reader thread and the writer thread over one transport.

How it works:

- Reader thread (:meth:`Connection.run_reader`): ``recv_into`` a large buffer, feed the
  parser, hand the ops of each read to ``on_ops`` (the handler's dispatcher) as one list. It touches
  only the parser, which it owns, and never runs user code. It ends on end of stream,
  a socket error or a protocol error, and reports that once through ``on_lost``.
- A caller's thread may write one message itself (:meth:`Connection.send_direct`) when
  nothing is queued and the writer is idle; the outbox's ``sending`` flag keeps it and
  the writer from writing at the same time. Requests made while it writes queue behind
  it, and it writes them too, joined, before it lets go (a few rounds at most; never on
  the main thread, where a Ctrl-C could land between taking and writing them, and
  which may leave its claim held: the writer ends a claim whose thread is no longer in
  ``send_direct``, see :func:`_sending_directly`): under
  many requesting threads that saves the writer's wake-ups and gives the server fewer,
  larger reads.
- Writer thread (:meth:`Connection.run_writer`): takes everything in the outbox at once,
  joins runs of small frames into one buffer and sends the result with as few syscalls
  as it can (``sendmsg`` with many buffers; large payloads are never copied). On a
  failed send it puts back every message not fully handed to the kernel, whole, ahead
  of newer ones, and reports through ``on_lost``.

- A blocking request's thread may read its own reply (:meth:`Connection.lead`), on a
  plain TCP connection, when the reader thread stepped aside: the reader parks once it
  finds nothing to read, nothing pending and requests being made (``may_park``, the
  handler's view), and then looks at the socket only every ``READER_PARK_POLL`` until
  ``may_park`` turns false. The reply then costs one wake-up (the requester's, by the
  kernel) instead of two (the reader's, then the requester's by the reader). Whoever
  holds ``_token`` reads and dispatches; it is never two threads at once, so the
  handler still sees one dispatcher at a time.

Policy (reconnect, close) is not decided here: the handler's ``on_lost`` does that.
"""

from __future__ import annotations

import logging
import select
import sys
import threading
import time
from collections.abc import Callable

from nats_sync import _defaults as d
from nats_sync._core.proto import Parser, ServerOp
from nats_sync._core.threads.lifecycle import run_to_completion
from nats_sync._core.threads.outbox import Frame, Outbox, frame_size, remainder
from nats_sync._core.transport.greenlets import threads_are_greenlets
from nats_sync._core.transport.streams import Buffer, TcpStream, Transport
from nats_sync._defaults import READ_BUFFER_SIZE, READER_PARK_POLL
from nats_sync.errors import Error, NatsConnectionError, ProtocolError

log = logging.getLogger("nats_sync")


def _never() -> bool:
    return False


def _segments(frames: list[Frame]) -> list[Buffer]:
    """The buffers to send: runs of small frames joined, large payloads as they are."""
    try:
        return [b"".join(frames)]  # type: ignore[arg-type]  # all small: one C call
    except TypeError:
        pass  # a large frame (a list) among them: join around it
    segments: list[Buffer] = []
    run: list[bytes] = []
    for frame in frames:
        if isinstance(frame, bytes):
            run.append(frame)
        else:
            if run:
                segments.append(run[0] if len(run) == 1 else b"".join(run))
                run = []
            segments.extend(frame)
    if run:
        segments.append(run[0] if len(run) == 1 else b"".join(run))
    return segments


def _unsent_messages(messages: list[bytes], sent: int) -> list[Frame]:
    """What is left of ``messages`` written as one buffer of which ``sent`` bytes went
    out: the message cut short as a :class:`Remainder`, then the rest whole."""
    for index, message in enumerate(messages):
        if sent < len(message):
            head: Frame = remainder(message[sent:], message) if sent else message
            return [head, *messages[index + 1 :]]
        sent -= len(message)
    return []


def _unsent(frames: list[Frame], sent: int) -> list[Frame]:
    """The frames not wholly sent after ``sent`` bytes went out (partial ones included)."""
    for index, frame in enumerate(frames):
        size = frame_size(frame)
        if sent < size:
            return frames[index:]
        sent -= size
    return []


class Connection:
    """The threads' bodies for one transport.

    Args:
        transport: the connected stream.
        parser: the parser, possibly holding bytes read during the handshake.
        outbox: the client's outbox.
        on_ops: the dispatcher's callback for the server ops of each read, in order
            (reader thread).
        on_lost: handler callback, called once, when the connection fails.
        may_park: the dispatcher's callback: whether the reader may step aside for requesters
            now (nothing but blocking requests would need it). None: never.
    """

    def __init__(
        self,
        transport: Transport,
        parser: Parser,
        outbox: Outbox,
        on_ops: Callable[[list[ServerOp]], None],
        on_lost: Callable[[Connection, Error], None],
        may_park: Callable[[], bool] | None = None,
    ) -> None:
        self.transport = transport
        self.parser = parser
        self._outbox = outbox
        self._on_ops = on_ops
        self._on_lost = on_lost
        #: Set once the connection has failed or been shut down on purpose.
        self.finished = False
        # Direct sends and requesters' own reads need calls that cannot block: a plain
        # TCP stream has them; TLS and WebSocket framing would have to split records.
        self._tcp = transport if isinstance(transport, TcpStream) else None
        #: Whether requesters may read their own replies (plain TCP: non-blocking reads).
        self.can_lead = self._tcp is not None and may_park is not None
        self._may_park = may_park if may_park is not None and self.can_lead else _never
        #: Held by whichever thread reads the socket and dispatches (see lead()); an
        #: RLock, owned by a thread: a leader interrupted right after acquiring it
        #: still releases it (``release()`` fails, harmlessly, when not held).
        self._token = threading.RLock()
        self._buffer = memoryview(bytearray(READ_BUFFER_SIZE))  # used under _token only
        self._poll = select.poll()
        # Taken as ``with self._park_lock`` by other threads: Condition.__enter__ is
        # Python code, and Ctrl-C right after its acquire would leak the lock.
        self._park_lock = threading.Lock()
        self._park = threading.Condition(self._park_lock)
        self._parked = False
        self._resume = False
        # The reader, the writer and any leader: the last one out releases the socket.
        self._running = 2
        self._running_lock = threading.Lock()

    def shutdown(self) -> None:
        """Ends the stream on purpose: both threads return without reporting a loss."""
        self.finished = True
        self.transport.shutdown()
        self.wake_reader()

    def _lost(self, error: Error) -> None:
        # On the main thread (a direct sender, a requester reading its own reply) on a
        # thread of its own: a Ctrl-C landing after ``finished`` is set and before the
        # loss is reported would leave a dead connection nobody reconnects.
        run_to_completion(lambda: self._report_loss(error), "lost")

    def _report_loss(self, error: Error) -> None:
        # Test-and-set under a lock: the reader and the writer (or a direct sender)
        # failing at once must report one loss, GIL or not.
        with self._running_lock:
            if self.finished:
                return
            self.finished = True
        self.transport.shutdown()
        self.wake_reader()
        self._on_lost(self, error)

    def wake_reader(self) -> None:
        """Any thread: makes a parked reader read again now (something needs it)."""
        if self._parked:
            with self._park_lock:
                self._resume = True
                self._park.notify_all()

    def _thread_done(self) -> None:
        """The last of the threads using the socket to finish releases it."""
        with self._running_lock:
            self._running -= 1
            last = self._running == 0
        if last:
            self.finished = True
            self.transport.close()

    def dispatch_buffered(self) -> None:
        """Hands every op complete in the parser to ``on_ops`` (after a read, and at the
        start for what the handshake read beyond its PONG).

        Calls ``next_ops`` until it finds nothing (twice when all is well): a protocol
        error comes out on the call after the ops before it were handed on.
        """
        on_ops = self._on_ops
        while ops := self.parser.next_ops():
            on_ops(ops)

    def _dispatch_read(self, count: int) -> None:
        """Under ``_token``: hands on the ``count`` bytes just read into ``_buffer``.

        Raises:
            NatsConnectionError: ``count`` is 0, the end of the stream.
        """
        if count == 0:
            raise NatsConnectionError("the server closed the connection")
        self.parser.feed(self._buffer[:count])
        self.dispatch_buffered()

    def send_direct(self, frame: bytes, payload_size: int) -> bool:
        """Caller's thread: writes one message now if the writer is idle, and then what
        other callers queued behind it meanwhile (see :meth:`Outbox.queue_behind_direct`).

        Never blocks: what the socket does not take at once is handed to the writer
        thread, ahead of everything queued (a server that stops reading makes the
        writer wait, not the caller).

        Returns:
            False when the frame must go through the outbox instead; True when it was
            sent, handed on or queued behind another caller's write, or, if the write
            failed, put back in the outbox for the next connection (the loss is
            reported as usual).
        """
        outbox = self._outbox
        tcp = self._tcp
        if self.finished or tcp is None:
            return False
        batch: list[bytes] | None = None  # others' messages this thread took to write
        try:
            if not outbox.claim_direct(payload_size):
                return outbox.queue_behind_direct(frame, payload_size)
            # Others' messages only off the main thread: a Ctrl-C (only ever raised in
            # the main thread) could otherwise land between taking and writing them.
            combine = threading.get_ident() != threading.main_thread().ident
            data = frame
            rounds = 0
            while True:
                sent = tcp.send_nowait(data)
                rounds += 1
                if sent < len(data):
                    outbox.release_direct(
                        remainder(frame[sent:], frame)
                        if batch is None
                        else _unsent_messages(batch, sent)
                    )
                    return True
                # In the try too: Ctrl-C as release_direct() is entered must not keep
                # the claim either.
                batch = outbox.release_direct(None, combine and rounds < d.DIRECT_WRITE_ROUNDS)
                if batch is None:
                    return True
                data = b"".join(batch)
        except Error as err:
            # Whole: the server drops a partial frame with the link.
            try:
                outbox.requeue(batch if batch is not None else [frame])  # type: ignore[arg-type]
            finally:
                outbox.give_back_direct()
            self._lost(err)
            return True
        except BaseException:
            # Ctrl-C right after the claim or the send (the result of either can be lost
            # to it): give the writer its turn back, or it would wait for ever. The frame
            # went out or not; a small one on an idle socket is never cut (were it, the
            # server would end the link and the client reconnect).
            outbox.give_back_direct()
            raise

    def _read_available(self) -> bool:
        """Under ``_token``: reads and dispatches what the socket has; False if nothing.

        Raises:
            Error: the connection failed or the server broke the protocol.
        """
        tcp = self._tcp
        count = tcp.recv_into_nowait(self._buffer) if tcp is not None else None
        if count is None:
            return False
        self._dispatch_read(count)
        return True

    def _read_failed(self, error: Exception, who: str) -> None:
        """Reports a failed read as the connection's loss; a bug's traceback is logged."""
        if isinstance(error, Error):
            self._lost(error)
            return
        log.exception("nats_sync: %s failed", who)
        self._lost(ProtocolError(f"{who} failed: {error!r}"))

    def lead(self, is_done: Callable[[], bool], deadline: float) -> None:
        """A blocking requester's thread: reads the socket itself until ``is_done()``,
        the connection ends or ``deadline`` (monotonic) passes.

        Only when the reader thread has stepped aside; otherwise returns at once and the
        reader delivers as usual. Failures are reported through ``on_lost`` as the
        reader would; the caller then waits for its reply as usual.

        Safe against an asynchronous exception (Ctrl-C in the main thread) at any
        bytecode: the token is released by ownership (the result of ``acquire`` itself
        can be lost to the exception), the leader is counted out, and one that
        lands while bytes are read or dispatched ends the connection (the stream
        position is unknown then), so the client reconnects instead of hanging.
        """
        if not self._parked:
            return
        token = self._token
        entered = False
        try:
            if not token.acquire(blocking=False):
                return
            with self._running_lock:  # no call inside: nothing can interrupt it
                if self._running > 0 and not self.finished:
                    # One statement: counted if and only if the finally counts it out.
                    self._running, entered = self._running + 1, True
            if not entered:
                return
            poll = self._poll.poll
            while not is_done() and not self.finished:
                # Wait first: the reply is a round trip away, so a read now would only
                # find nothing (one system call saved per request).
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                # Interrupted here, nothing is lost: the wait is the place to stop.
                if poll(remaining * 1000.0 + 1.0):  # ms, rounded up: never spin on 0
                    try:
                        self._read_available()
                    except Exception:
                        raise
                    except BaseException:
                        # Bytes read, fed or half dispatched are lost for good: only a
                        # new connection (and the replay) puts the client right again.
                        self._lost(
                            NatsConnectionError(
                                "interrupted while reading the server's bytes; reconnecting"
                            )
                        )
                        raise
        except Exception as err:
            self._read_failed(err, "reading a reply")
        finally:
            try:
                # One C call that releases the token only if this thread holds it (an
                # RLock checks its owner): an ``_is_owned()`` check then ``release()``
                # could be cut between the two by Ctrl-C (a signal is handled right
                # after a call returns).
                token.release()
            except RuntimeError:
                pass  # not held: it returned before taking it
            finally:
                if entered:
                    try:
                        self._thread_done()
                    finally:
                        if not self._may_park():
                            self.wake_reader()  # subscriptions, futures or flushes need it

    def _park_while_requesters_read(self) -> None:
        """Reader thread, ``_token`` released: requesters read their replies meanwhile.

        Returns once ``may_park`` turns false, someone calls :meth:`wake_reader`, or the
        connection ends. Every ``READER_PARK_POLL`` it takes a look at the socket for
        ops nobody waits for (PING, INFO, -ERR).
        """
        park = self._park
        with self._park_lock:
            self._parked = True
            self._resume = False
        try:
            while not self.finished:
                with self._park_lock:
                    # Looked at again now that _parked is set: a requester that saw it
                    # unset registered its request first, and will not lead.
                    if not self._resume and self._may_park():
                        park.wait(READER_PARK_POLL)
                    if self._resume:
                        return
                if self._token.acquire(blocking=False):
                    try:
                        while self._read_available():
                            pass
                    finally:
                        self._token.release()
                if not self._may_park():
                    return
        finally:
            with self._park_lock:
                self._parked = False

    def _read_until_finished(self) -> None:
        """The reader loop: blocking reads, and on a plain TCP connection stepping aside
        for requesters while ``may_park`` says so (see :meth:`lead`)."""
        token = self._token
        if self.can_lead and self._tcp is not None:
            self._poll.register(self._tcp.fileno(), select.POLLIN)
        buffer = self._buffer
        recv_into = self.transport.recv_into
        dispatch_read = self._dispatch_read
        may_park = self._may_park
        token.acquire()
        held = True
        try:
            self.dispatch_buffered()
            while not self.finished:
                if may_park():
                    if self._read_available():  # step aside only with nothing unread
                        continue
                    token.release()
                    held = False
                    self._park_while_requesters_read()  # raises with the token free
                    token.acquire()
                    held = True
                    continue
                dispatch_read(recv_into(buffer))  # blocks, holding the token
        finally:
            if held:
                token.release()

    def run_reader(self) -> None:
        """Reader thread body."""
        try:
            self._read_until_finished()
        except Exception as err:
            self._read_failed(err, "the reader thread")
        finally:
            self._thread_done()

    def run_writer(self) -> None:
        """Writer thread body."""
        try:
            self._write_until_stopped()
        finally:
            self._thread_done()

    def _write_until_stopped(self) -> None:
        send = self.transport.send
        take = self._outbox.take
        # Greenlets: an OS thread's frames are not a greenlet's (see Outbox.take).
        claim_is_live = None if threads_are_greenlets() else _sending_directly
        while (frames := take(claim_is_live)) is not None:
            if self.finished:
                self._outbox.requeue(frames)
                return
            segments = _segments(frames)
            sent = 0
            index = 0
            try:
                while index < len(segments):
                    count = send(segments[index:] if index else segments)
                    sent += count
                    while count:
                        size = len(segments[index])
                        if count >= size:
                            count -= size
                            index += 1
                        else:
                            segments[index] = memoryview(segments[index])[count:]
                            count = 0
            except Error as err:
                self._outbox.requeue(_unsent(frames, sent))
                self._lost(err)
                return


def _sending_directly(ident: int) -> bool:
    """Whether thread ``ident`` is inside :meth:`Connection.send_direct` now (its claim
    is live); asked by the writer, under the outbox's lock, only of a claim that kept it
    waiting (a Ctrl-C can cut the give-back of a claim; see ``Outbox.take``)."""
    frame = sys._current_frames().get(ident)
    while frame is not None:
        if frame.f_code is _SEND_DIRECT:
            return True
        frame = frame.f_back
    return False


_SEND_DIRECT = Connection.send_direct.__code__

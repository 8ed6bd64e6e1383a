"""The ordered consumer: every stream message once, in order, recreated after a gap.

How it works: an :class:`OrderedConsumer` reads through an ephemeral pull consumer of
its own (no acks, in memory, one replica, removed by the server when idle), made on the
first read. It remembers the stream and consumer sequence of the last message it handed
over. A message whose consumer sequence is not the next one (a gap), a deleted or
vanished consumer, or a reconnect of the client means the server-side consumer can no
longer be trusted: the reader throws it away and makes a new one that starts at the
stream sequence after the last one delivered, retrying with a backoff of 1 s doubling
to 10 s. So nothing is skipped and nothing is repeated.

Threads: ``fetch``/``next`` run on the caller's thread, one read at a time
(``OrderedConsumerConcurrentRequestsError`` otherwise). ``messages()`` runs on the
caller's thread too, over a ``MessageStream`` it replaces on reset; ``consume(cb)``
runs ``cb`` on the pull consumer's ``ConsumeContext`` thread
(``nats_sync-js-consume-ordered-<stream>``). The reconnect listener
runs on a client thread and only sets ``_reset_needed``. State: the sequences and the
current consumer are written by the reading thread under ``_lock`` held for the read.

:class:`Watch` is what the key-value and object store watchers read: an ordered
consumer on some subjects that starts with the last message of each (``all`` kept ones
with ``include_history``), or at the stream's next sequence (``updates_only``: a fixed
sequence, not ``new``, which a remake before the first message would ask again, losing
what was stored meanwhile). It makes the server-side consumer at once, so nothing
stored after it returns is missed, and tells the end of the initial messages as one
``None``: after the first message with no pending messages after it (``num_pending``
0), or at once when the consumer had nothing to deliver. Its ``_marker_due`` and
``init_done`` are touched by the reading thread only.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from nats_sync import _defaults as d
from nats_sync import errors as core_errors
from nats_sync._core.components.port import port_of
from nats_sync._core.threads.waiting import Signal
from nats_sync._core.validate import check_int, check_timeout
from nats_sync.errors import InvalidArgumentError
from nats_sync.jetstream._consumers.consumer import ConsumeContext, PullConsumer, put_consumer
from nats_sync.jetstream._streams.wire import check_consumer_name
from nats_sync.jetstream.errors import (
    ConsumerDeletedError,
    ConsumerNotFoundError,
    JetStreamError,
    OrderedConsumerConcurrentRequestsError,
)

if TYPE_CHECKING:
    from nats_sync.jetstream._consumers.msg import JsMsg
    from nats_sync.jetstream._streams.context_protocol import JsContext

_DELIVER_POLICIES = ("all", "last", "new", "by_start_sequence", "by_start_time", "last_per_subject")
#: Errors after which the server-side consumer is remade (not the reader's fault).
_RESET_ON = (ConsumerDeletedError, ConsumerNotFoundError)


class _Reset(Exception):  # noqa: N818  (a signal inside this module, never raised out)
    """The server-side consumer must be remade before reading on."""


class OrderedConsumer:
    """Every message of a stream (or of its filter subjects) once, in order.

    Made by ``js.ordered_consumer(stream, ...)``; reads with ``fetch``, ``next``,
    ``messages`` and ``consume`` like a pull consumer, without acknowledgements.
    """

    def __init__(
        self,
        js: JsContext,
        stream: str,
        *,
        filter_subjects: Sequence[str] | None = None,
        deliver_policy: str = "all",
        opt_start_seq: int | None = None,
        opt_start_time: datetime | None = None,
        headers_only: bool = False,
        replay_policy: str = "instant",
        inactive_threshold: float | None = None,
        max_reset_attempts: int | None = None,
        metadata: dict[str, str] | None = None,
        name_prefix: str | None = None,
    ) -> None:
        if replay_policy not in ("instant", "original"):
            raise InvalidArgumentError(
                f"replay_policy must be 'instant' or 'original', got {replay_policy!r}"
            )
        if inactive_threshold is not None:
            check_timeout(inactive_threshold, "inactive_threshold")
        if max_reset_attempts is not None:
            check_int(max_reset_attempts, "max_reset_attempts", 1)
        if metadata is not None and not (
            isinstance(metadata, dict)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items())
        ):
            raise InvalidArgumentError(f"metadata must map str to str, got {metadata!r}")
        if name_prefix is not None:
            check_consumer_name(name_prefix)
        if deliver_policy not in _DELIVER_POLICIES:
            raise InvalidArgumentError(
                f"deliver_policy must be one of {', '.join(_DELIVER_POLICIES)}, "
                f"got {deliver_policy!r}"
            )
        if deliver_policy == "by_start_sequence" and not opt_start_seq:
            raise InvalidArgumentError("deliver_policy 'by_start_sequence' needs opt_start_seq")
        if deliver_policy == "by_start_time" and opt_start_time is None:
            raise InvalidArgumentError("deliver_policy 'by_start_time' needs opt_start_time")
        subjects = list(filter_subjects or [])
        if any(not isinstance(subject, str) or not subject for subject in subjects):
            raise InvalidArgumentError(f"filter_subjects must be non-empty strs, got {subjects}")
        self._js = js
        self._stream = stream
        self._filters = subjects
        self._deliver_policy = deliver_policy
        self._opt_start_seq = opt_start_seq
        self._opt_start_time = opt_start_time
        self._headers_only = headers_only
        self._replay_policy = replay_policy
        self._inactive_threshold = inactive_threshold or d.JS_ORDERED_INACTIVE_THRESHOLD
        self._max_reset_attempts = max_reset_attempts
        self._metadata = dict(metadata) if metadata else None
        self._name_prefix = name_prefix
        self._serial = 0  # consumers made so far: named <name_prefix>_<serial>
        self._lock = threading.Lock()
        self._consumer: PullConsumer | None = None
        self._stream_seq = 0  # of the last message handed over
        self._consumer_seq = 0
        self._reset_needed = False
        self._stopped = Signal()  # not threading.Event: see nats_sync._core.threads.waiting
        self._remove_listener = port_of(js.client).add_status_listener(self._on_status)

    def __repr__(self) -> str:
        return f"<nats_sync.jetstream.OrderedConsumer on {self._stream!r}>"

    @property
    def stream_name(self) -> str:
        """The stream read."""
        return self._stream

    @property
    def last_stream_sequence(self) -> int:
        """The stream sequence of the last message handed over (0 before the first)."""
        return self._stream_seq

    def _on_status(self, event: str) -> None:
        if event == "reconnected":
            self._reset_needed = True  # the ephemeral consumer may be gone with the server
        elif event == "closed":
            self._stopped.set()

    # --- the server-side consumer ---------------------------------------------------

    def _config(self) -> dict[str, Any]:
        fields: dict[str, Any] = {
            "ack_policy": "none",
            "mem_storage": True,
            "num_replicas": 1,
            "inactive_threshold": self._inactive_threshold,
            "max_deliver": 1,
        }
        if self._replay_policy != "instant":
            fields["replay_policy"] = self._replay_policy
        if self._metadata:
            fields["metadata"] = dict(self._metadata)
        if self._name_prefix is not None:
            fields["name"] = f"{self._name_prefix}_{self._serial}"
        if self._headers_only:
            fields["headers_only"] = True
        if len(self._filters) == 1:
            fields["filter_subject"] = self._filters[0]
        elif self._filters:
            fields["filter_subjects"] = list(self._filters)
        if self._stream_seq:
            fields.update(deliver_policy="by_start_sequence", opt_start_seq=self._stream_seq + 1)
        else:
            fields["deliver_policy"] = self._deliver_policy
            if self._opt_start_seq:
                fields["opt_start_seq"] = self._opt_start_seq
            if self._opt_start_time is not None:
                fields["opt_start_time"] = self._opt_start_time
        return fields

    def _current(self, deadline: float) -> PullConsumer:
        """The consumer to read from, remade when needed (retrying until ``deadline``)."""
        if self._reset_needed and self._consumer is not None:
            self._drop_consumer()
        self._reset_needed = False
        backoff = d.JS_ORDERED_FIRST_BACKOFF
        attempts = 0
        while self._consumer is None:
            if self._stopped.is_set() or self._js.client.is_closed:
                raise core_errors.ConnectionClosedError("the ordered consumer was stopped")
            try:
                self._serial += 1
                attempts += 1
                self._consumer = put_consumer(
                    self._js, self._stream, None, self._config(), "create", None
                )
                self._consumer_seq = 0
            except (
                JetStreamError,
                core_errors.TimeoutError,
                core_errors.NatsConnectionError,
            ) as failed:
                limit = self._max_reset_attempts
                if limit is not None and attempts >= limit:
                    raise JetStreamError(
                        f"the ordered consumer of stream {self._stream!r} could not be made "
                        f"(again) in {attempts} attempts (max_reset_attempts): {failed}"
                    ) from failed
                if time.monotonic() + backoff > deadline:
                    raise
                self._stopped.wait(backoff)
                backoff = min(backoff * 2, d.JS_ORDERED_MAX_BACKOFF)
        return self._consumer

    def _drop_consumer(self) -> None:
        consumer, self._consumer = self._consumer, None
        if consumer is None:
            return
        try:
            self._js.delete_consumer(self._stream, consumer.name)
        except (JetStreamError, core_errors.Error):
            pass  # gone already, or unreachable now: the server expires it anyway

    def _claim(self) -> None:
        """Takes ``_lock`` for one read (the caller releases it).

        Raises:
            OrderedConsumerConcurrentRequestsError: another read holds it.
        """
        if not self._lock.acquire(blocking=False):
            raise OrderedConsumerConcurrentRequestsError(
                f"the ordered consumer of {self._stream!r} is being read already"
            )

    def _accept(self, msg: JsMsg) -> bool:
        """Whether ``msg`` is the next one; on a gap, the consumer is marked for reset."""
        sequence = msg.metadata.sequence
        if sequence.consumer != self._consumer_seq + 1:
            self._reset_needed = True
            return False
        self._consumer_seq = sequence.consumer
        self._stream_seq = sequence.stream
        return True

    # --- reading ------------------------------------------------------------------------

    def fetch(self, max_messages: int = 1, *, max_wait: float = 30.0) -> list[JsMsg]:
        """Up to ``max_messages`` next messages within ``max_wait`` seconds (maybe none).

        Raises:
            OrderedConsumerConcurrentRequestsError: another read is under way.
        """
        self._claim()
        try:
            deadline = time.monotonic() + max_wait
            while True:
                consumer = self._current(deadline)
                batch = consumer.fetch(
                    max_messages, max_wait=max(deadline - time.monotonic(), 0.001)
                )
                taken: list[JsMsg] = []
                for msg in batch:
                    if not self._accept(msg):
                        break
                    taken.append(msg)
                error = batch.error
                if isinstance(error, _RESET_ON):
                    self._reset_needed = True
                    self._consumer = None  # the server dropped it
                elif error is not None:
                    raise error
                if taken or time.monotonic() >= deadline or not self._reset_needed:
                    return taken
        finally:
            self._lock.release()

    def next(self, max_wait: float = 5.0) -> JsMsg:
        """The next message.

        Raises:
            TimeoutError: none within ``max_wait`` seconds.
        """
        got = self.fetch(1, max_wait=max_wait)
        if not got:
            raise core_errors.TimeoutError(
                f"no message from the ordered consumer of {self._stream!r} within {max_wait}s"
            )
        return got[0]

    def messages(self, *, max_messages: int = 500, max_wait: float = 30.0) -> OrderedMessages:
        """Messages one by one as they come (``for msg in ...``), until ``stop()``."""
        return OrderedMessages(self, max_messages, max_wait)

    def consume(
        self,
        cb: Callable[[JsMsg], None],
        *,
        max_messages: int = 500,
        max_wait: float = 30.0,
        error_cb: Callable[[BaseException], None] | None = None,
    ) -> ConsumeContext:
        """Runs ``cb(msg)`` for every message, in order, on a thread of its own (the
        pull consumer's ``ConsumeContext``, over this consumer's messages)."""
        if not callable(cb):
            raise InvalidArgumentError(f"cb must be callable, got {cb!r}")
        messages = self.messages(max_messages=max_messages, max_wait=max_wait)
        return ConsumeContext(messages, cb, error_cb, f"ordered-{self._stream}", self._js.client)

    def start(self, max_wait: float = 5.0) -> int:
        """Makes the server-side consumer now (if it is not made yet) and returns how
        many messages it had to deliver when it was made.

        A key-value watcher needs that count before its first read: zero means the
        end of the initial values is now, not after some message.

        Raises:
            OrderedConsumerConcurrentRequestsError: a read is under way.
        """
        self._claim()
        try:
            return self._current(time.monotonic() + max_wait).cached_info.num_pending
        finally:
            self._lock.release()

    def stop(self) -> None:
        """Ends every read and removes the server-side consumer."""
        self._stopped.set()
        self._remove_listener()
        with self._lock:
            self._drop_consumer()


class OrderedMessages:
    """The messages of an ordered consumer as an iterator; remade consumers are invisible."""

    def __init__(self, ordered: OrderedConsumer, max_messages: int, max_wait: float) -> None:
        self._ordered = ordered
        self._max_messages = max_messages
        self._max_wait = max_wait
        self._inner: Any = None
        self._stopped = Signal()  # not threading.Event: see nats_sync._core.threads.waiting

    def __iter__(self) -> Iterator[JsMsg]:
        while True:
            try:
                yield self.next(timeout=None)
            except core_errors.ConnectionClosedError:
                return

    def __enter__(self) -> OrderedMessages:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def next(self, timeout: float | None = None) -> JsMsg:
        """The next message in order.

        Raises:
            TimeoutError: none within ``timeout`` seconds.
            ConnectionClosedError: stopped, or the client closed.
        """
        ordered = self._ordered
        deadline = None if timeout is None else time.monotonic() + timeout
        ordered._claim()
        try:
            while True:
                if self._stopped.is_set() or ordered._stopped.is_set():
                    self._close_inner()
                    raise core_errors.ConnectionClosedError("the ordered reader was stopped")
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise core_errors.TimeoutError(f"no message within {timeout}s")
                try:
                    msg = self._next_from_stream(remaining)
                except _Waiting:
                    continue
                except _Reset:
                    self._close_inner()
                    continue
                if ordered._accept(msg):
                    return msg
                self._close_inner()  # a gap: remade from the last delivered sequence
        finally:
            ordered._lock.release()

    def _next_from_stream(self, remaining: float | None) -> JsMsg:
        ordered = self._ordered
        far = time.monotonic() + (remaining if remaining is not None else 3600.0)
        if ordered._reset_needed or self._inner is None:
            self._close_inner()
            consumer = ordered._current(far)
            self._inner = consumer.messages(
                max_messages=self._max_messages, max_wait=self._max_wait
            )
        # Short waits, so a stop() or a reconnect is noticed within a second.
        wait = 1.0 if remaining is None else min(remaining, 1.0)
        try:
            msg: JsMsg = self._inner.next(timeout=wait)
        except core_errors.TimeoutError:
            if ordered._reset_needed:
                raise _Reset from None
            if remaining is not None and remaining <= wait:
                raise
            raise _Waiting from None
        except _RESET_ON:
            ordered._reset_needed = True
            ordered._consumer = None
            raise _Reset from None
        except core_errors.BadSubscriptionError:
            if self._stopped.is_set() or ordered._stopped.is_set():
                raise _Waiting from None  # stopped meanwhile: the loop ends it
            raise _Reset from None
        return msg

    def _close_inner(self) -> None:
        inner, self._inner = self._inner, None
        if inner is not None:
            inner.stop()

    def stop(self) -> None:
        """Ends the iteration; a thread blocked in ``next`` wakes up."""
        self._stopped.set()
        inner = self._inner
        if inner is not None:
            inner.stop()  # thread-safe; the reading thread then sees the flag

    def drain(self, timeout: float | None = None) -> None:
        """Same as :meth:`stop`: an ordered reader holds nothing unacknowledged."""
        self.stop()


class Watch:
    """The messages of an ordered consumer on ``subjects``: the initial ones, ``None``
    once at their end (not with ``updates_only``), then every new one.

    ``start_seq`` starts it at that stream sequence (every message from there on,
    whatever ``include_history`` says; with ``updates_only``, no ``None``), as nats.go's
    watchers do with ``ResumeFromRevision``.

    Raises:
        InvalidArgumentError: ``include_history`` with ``updates_only``.
    """

    def __init__(
        self,
        js: JsContext,
        stream: str,
        subjects: Sequence[str],
        *,
        include_history: bool,
        updates_only: bool,
        headers_only: bool = False,
        start_seq: int | None = None,
    ) -> None:
        if include_history and updates_only:
            raise InvalidArgumentError("include_history and updates_only exclude each other")
        if updates_only and start_seq is None:
            start_seq = js.stream_info(stream).state.last_seq + 1
        if start_seq is not None:
            self._ordered = OrderedConsumer(
                js,
                stream,
                filter_subjects=subjects,
                deliver_policy="by_start_sequence",
                opt_start_seq=start_seq,
                headers_only=headers_only,
            )
        else:
            self._ordered = OrderedConsumer(
                js,
                stream,
                filter_subjects=subjects,
                deliver_policy="all" if include_history else "last_per_subject",
                headers_only=headers_only,
            )
        try:
            pending = self._ordered.start(js.timeout)
        except BaseException:
            self._ordered.stop()
            raise
        self._messages = self._ordered.messages()
        #: Whether the end of the initial messages was handed over.
        self.init_done = updates_only
        self._marker_due = not updates_only and pending == 0

    def next(self, timeout: float | None) -> JsMsg | None:
        """The next message; ``None`` once, at the end of the initial ones.

        Raises:
            TimeoutError: nothing new within ``timeout`` seconds.
            ConnectionClosedError: stopped, or the client closed.
        """
        if self._marker_due:
            self._marker_due = False
            self.init_done = True
            return None
        msg = self._messages.next(timeout=timeout)
        if not self.init_done and msg.metadata.num_pending == 0:
            self._marker_due = True
        return msg

    def stop(self) -> None:
        """Ends the watch at once (a reader blocked in ``next`` wakes up) and removes its
        server-side consumer."""
        self._messages.stop()
        self._ordered.stop()


class _Waiting(_Reset):
    """Nothing arrived within one poll; the loop looks at its flags and waits again."""

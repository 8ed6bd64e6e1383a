"""Pull consumers: fetch, fetch_bytes, fetch_nowait, next, messages() and consume().

How it works: :class:`PullConsumer` holds the stream and consumer names and the info it
was bound with; every read is a pull request on the ``_consumers.pull`` machinery.

- ``fetch`` / ``fetch_bytes`` / ``fetch_nowait`` / ``next`` send one pull on a fresh
  inbox and return a :class:`~nats_sync.jetstream._consumers.pull.MessageBatch`, read lazily by
  the thread that iterates it (nothing else runs).
- ``messages()`` returns a :class:`~nats_sync.jetstream._consumers.pull.MessageStream`, which
  pulls ahead on the threads that read it and on the client's status listener (after a
  reconnect).
- ``consume(cb)`` starts one thread, ``nats_sync-js-consume-<consumer>`` (a daemon),
  that reads a ``MessageStream`` and runs ``cb(msg)`` for each message, in order. It
  ends when the stream ends: ``stop()``, ``drain()``, the client's close, or a terminal
  error (handed to ``error_cb``). A :class:`ConsumeContext` owns the thread and the
  stream; its only state of its own, the terminal error, is written by that thread
  before it ends and read after (``join``).

Priority groups (ADR-42): every read takes ``group`` and its criteria
(``min_pending``, ``min_ack_pending``, ``priority``), checked here before anything is
sent (``_consumers.priority``). With the ``pinned_client`` policy the pin the server gives is kept
in the consumer's ``PinTracker`` and sent with every pull of every read of this object;
a pull answered 423 (the pin moved) goes on without it. ``unpin(group)`` asks the server
to pick another reader.

A ``PullConsumer`` keeps no state of its own beyond ``cached_info`` (replaced whole) and
its pin tracker (locked inside), so any thread may use it at once.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from nats_sync import _defaults as d
from nats_sync._core.components.port import port_of
from nats_sync._core.validate import check_int, check_timeout
from nats_sync.errors import (
    BadSubscriptionError,
    ConnectionClosedError,
    DrainTimeoutError,
    ErrorCallback,
    InvalidArgumentError,
    TimeoutError,
)
from nats_sync.jetstream._consumers.msg import JsMsg, MsgMetadata, SequencePair
from nats_sync.jetstream._consumers.priority import (
    PinTracker,
    PullGroup,
    check_group_name,
    pull_group,
)
from nats_sync.jetstream._consumers.pull import (
    MessageBatch,
    MessageStream,
    PullAgain,
    report,
)
from nats_sync.jetstream._consumers.pull_wire import pull_body
from nats_sync.jetstream._streams.wire import CoreClient, check_stream_name
from nats_sync.jetstream.api import ConsumerConfig, ConsumerInfo, config_with
from nats_sync.jetstream.errors import (
    ConsumerNotFoundError,
    NotPullConsumerError,
    StreamNotFoundError,
)

if TYPE_CHECKING:
    from nats_sync.jetstream._streams.context_protocol import JsContext

log = logging.getLogger("nats_sync")

__all__ = [
    "ConsumeContext",
    "JsMsg",
    "MessageBatch",
    "MessageStream",
    "MsgMetadata",
    "PullConsumer",
    "SequencePair",
]


@dataclass(frozen=True)
class _Reading:
    """How a continuous read pulls and ends (``messages()``'s and ``consume()``'s
    options beyond the limits)."""

    threshold_messages: int | None
    threshold_bytes: int | None
    stop_after: int | None
    error_on_missing_heartbeat: bool

    def check(self, max_messages: int, max_bytes: int | None) -> None:
        """Raises `InvalidArgumentError` naming an option that cannot be."""
        if self.threshold_messages is not None:
            check_int(self.threshold_messages, "threshold_messages", 0)
            if self.threshold_messages >= max_messages:
                raise InvalidArgumentError(
                    f"threshold_messages must be below max_messages ({max_messages}), "
                    f"got {self.threshold_messages}"
                )
        if self.threshold_bytes is not None:
            if max_bytes is None:
                raise InvalidArgumentError("threshold_bytes needs max_bytes")
            check_int(self.threshold_bytes, "threshold_bytes", 0)
            if self.threshold_bytes >= max_bytes:
                raise InvalidArgumentError(
                    f"threshold_bytes must be below max_bytes ({max_bytes}), "
                    f"got {self.threshold_bytes}"
                )
        if self.stop_after is not None:
            check_int(self.stop_after, "stop_after", 1)


class PullConsumer:
    """A pull consumer bound by stream and name (``js.consumer``, ``js.create_consumer``...).

    Every method blocks like the core client and is safe from any thread.
    """

    def __init__(self, js: JsContext, stream: str, info: ConsumerInfo) -> None:
        self._js = js
        self._stream = stream
        self._name = info.name
        self._info = info
        self._next_subject = js.api.subject(f"CONSUMER.MSG.NEXT.{stream}.{info.name}")
        self._pins = PinTracker()

    def __repr__(self) -> str:
        return f"<nats_sync.jetstream.PullConsumer {self._stream!r}/{self._name!r}>"

    @property
    def name(self) -> str:
        """The consumer's name."""
        return self._name

    @property
    def stream_name(self) -> str:
        """The stream it reads."""
        return self._stream

    @property
    def cached_info(self) -> ConsumerInfo:
        """The info as of the last call that returned it (no request)."""
        return self._info

    def info(self, timeout: float | None = None) -> ConsumerInfo:
        """The consumer's config and position now."""
        self._info = self._js.consumer_info(self._stream, self._name, timeout=timeout)
        return self._info

    # --- one pull ---------------------------------------------------------------------

    def fetch(
        self,
        max_messages: int = 1,
        *,
        max_wait: float = 30.0,
        heartbeat: float | None = None,
        group: str | None = None,
        min_pending: int | None = None,
        min_ack_pending: int | None = None,
        priority: int | None = None,
    ) -> MessageBatch:
        """Asks for up to ``max_messages`` and returns at once; the batch yields them as
        they arrive.

        The batch ends when they all came, when the server has nothing more within
        ``max_wait`` seconds (an empty batch is normal), when the heartbeats stop, or
        ``max_wait`` + 1 s after the request at the latest. The server's refusals of
        a priority group read end it with :attr:`MessageBatch.error`:
        ``PriorityGroupRequiredError`` (no group), ``InvalidPriorityGroupError`` (not
        one of the consumer's), ``PriorityPolicyError`` (criteria of another policy).

        Args:
            max_messages: the most messages to get.
            max_wait: how long the server may wait for messages (the pull's expires).
            heartbeat: the idle heartbeat asked of the server, seconds (at most half of
                ``max_wait``); None: 5 s for a ``max_wait`` of 10 s or more, else none.
            group: the priority group the pull belongs to (required by a consumer with
                ``priority_groups``; ADR-42, nats-server 2.11). With the
                ``pinned_client`` policy the pin is kept and sent; a pull that lost it
                pulls again without it for the rest of ``max_wait``.
            min_pending: ``overflow`` policy: served only while the consumer has at
                least this many messages pending.
            min_ack_pending: ``overflow`` policy: served only while at least this
                many are unacknowledged (either criterion suffices).
            priority: ``prioritized`` policy: 0 (served first) to 9.

        Raises:
            InvalidArgumentError: a bad count, wait, heartbeat or criterion, or criteria
                without ``group``.
            InvalidGroupNameError: a bad group name.
        """
        check_int(max_messages, "max_messages", 1)
        return self._fetch(
            max_messages,
            None,
            max_wait,
            heartbeat,
            self._group(group, min_pending, min_ack_pending, priority),
        )

    def fetch_bytes(
        self,
        max_bytes: int,
        *,
        max_wait: float = 30.0,
        heartbeat: float | None = None,
        group: str | None = None,
        min_pending: int | None = None,
        min_ack_pending: int | None = None,
        priority: int | None = None,
    ) -> MessageBatch:
        """Like :meth:`fetch`, limited by size: messages up to ``max_bytes`` in all (as
        the server counts them: subject, reply, headers and payload). The priority
        group keywords are :meth:`fetch`'s.

        Raises:
            InvalidArgumentError: a bad size, wait, heartbeat or criterion.
        """
        check_int(max_bytes, "max_bytes", 1)
        return self._fetch(
            d.JS_BYTES_ONLY_BATCH,
            max_bytes,
            max_wait,
            heartbeat,
            self._group(group, min_pending, min_ack_pending, priority),
        )

    def fetch_nowait(
        self,
        max_messages: int = 1,
        *,
        group: str | None = None,
        min_pending: int | None = None,
        min_ack_pending: int | None = None,
        priority: int | None = None,
    ) -> MessageBatch:
        """Asks for up to ``max_messages`` of what is there now, without waiting for
        more (an empty batch at once when there is nothing).

        The server ends the request at once when the consumer has nothing, but says
        nothing while ``max_ack_pending`` holds messages back: the batch then ends 1 s
        after the request (nats.go's limit too).

        The priority group keywords are :meth:`fetch`'s.

        Raises:
            InvalidArgumentError: a bad count or criterion.
        """
        check_int(max_messages, "max_messages", 1)
        pg = self._group(group, min_pending, min_ack_pending, priority)
        body = pull_body(max_messages, no_wait=True, group=None if pg is None else pg.fields())
        return MessageBatch(
            self._js.client,
            self._next_subject,
            body,
            batch=max_messages,
            max_bytes=None,
            wait=d.JS_FETCH_MARGIN,
            heartbeat=None,
            ack_timeout=self._js.timeout,
            group=pg,
            again=_again(pg, None, None),
        )

    def next(
        self,
        max_wait: float = 5.0,
        *,
        group: str | None = None,
        min_pending: int | None = None,
        min_ack_pending: int | None = None,
        priority: int | None = None,
    ) -> JsMsg:
        """The next message, waiting up to ``max_wait`` seconds (the priority group
        keywords are :meth:`fetch`'s).

        Raises:
            TimeoutError: no message came in time.
            ConsumerNotFoundError: the consumer does not exist.
            ConsumerDeletedError: the consumer was deleted while waiting.
            InvalidArgumentError: a bad wait or criterion.
            PriorityGroupRequiredError: the consumer has priority groups and no
                ``group`` was given (also ``InvalidPriorityGroupError``,
                ``PriorityPolicyError``: see :meth:`fetch`).
        """
        with self.fetch(
            1,
            max_wait=max_wait,
            group=group,
            min_pending=min_pending,
            min_ack_pending=min_ack_pending,
            priority=priority,
        ) as batch:
            for msg in batch:
                return msg
        if batch.error is not None:
            raise batch.error
        raise TimeoutError(
            f"no message from consumer {self._name!r} of stream {self._stream!r} within {max_wait}s"
        )

    def _fetch(
        self,
        batch: int,
        max_bytes: int | None,
        max_wait: float,
        heartbeat: float | None,
        pg: PullGroup | None,
    ) -> MessageBatch:
        check_timeout(max_wait, "max_wait")
        if heartbeat is None:
            heartbeat = d.JS_FETCH_HEARTBEAT if max_wait >= d.JS_FETCH_HEARTBEAT_FROM else None
        else:
            _check_heartbeat(heartbeat, max_wait)
        body = pull_body(
            batch,
            expires=max_wait,
            max_bytes=max_bytes,
            heartbeat=heartbeat,
            group=None if pg is None else pg.fields(),
        )
        return MessageBatch(
            self._js.client,
            self._next_subject,
            body,
            batch=batch,
            max_bytes=max_bytes,
            wait=max_wait + d.JS_FETCH_MARGIN,
            heartbeat=heartbeat,
            ack_timeout=self._js.timeout,
            group=pg,
            again=_again(pg, max_wait, heartbeat),
        )

    def _group(
        self,
        group: str | None,
        min_pending: int | None,
        min_ack_pending: int | None,
        priority: int | None,
    ) -> PullGroup | None:
        return pull_group(self._pins, group, min_pending, min_ack_pending, priority)

    def unpin(self, group: str, timeout: float | None = None) -> None:
        """Unpins the reader the server pinned for ``group`` (``pinned_client``
        policy): it picks another waiting pull, whose reader gets the messages from
        then on. The old reader's next pull is answered 423 and goes on as a standby.

        Args:
            group: one of the consumer's ``priority_groups``.
            timeout: seconds to wait for the answer (None: the context's).

        Raises:
            InvalidGroupNameError: a bad group name (checked before sending).
            InvalidPriorityGroupError: not one of the consumer's groups (10160).
            ConsumerNotFoundError: there is no such consumer.
        """
        call = f"CONSUMER.UNPIN.{self._stream}.{self._name}"
        self._js.api.request(call, {"group": check_group_name(group)}, timeout)

    # --- continuous pulls ----------------------------------------------------------------

    def messages(
        self,
        *,
        max_messages: int = 500,
        max_bytes: int | None = None,
        max_wait: float = 30.0,
        heartbeat: float | None = None,
        group: str | None = None,
        min_pending: int | None = None,
        min_ack_pending: int | None = None,
        priority: int | None = None,
        threshold_messages: int | None = None,
        threshold_bytes: int | None = None,
        stop_after: int | None = None,
        error_on_missing_heartbeat: bool = False,
    ) -> MessageStream:
        """Messages pulled ahead continuously: ``for msg in consumer.messages(): ...``.

        Up to ``max_messages`` (and ``max_bytes``, when given) are asked for ahead, and
        asked for again when half of them were handed out. Reconnects and server
        restarts are survived; a missed heartbeat is a warning (in the ``nats_sync``
        log) and a new pull. It ends with ``ConsumerDeletedError`` when the consumer is
        deleted, and at ``stop()``, ``drain()`` or the client's close.

        Args:
            max_messages: messages buffered or in flight at most.
            max_bytes: bytes buffered or in flight at most (None: no byte limit).
            max_wait: each pull request's expiry, seconds (>= 1).
            heartbeat: the idle heartbeat asked of the server (None: ``max_wait / 2``
                within 0.5-30 s; at most ``max_wait / 2``).
            group: the priority group to pull from, as for :meth:`fetch`. A lost pin
                never ends the stream: it pulls on without it. With
                ``pinned_client``, keep ``max_wait`` below the consumer's
                ``priority_timeout``: each pull renews the pin.
            min_pending: with ``group`` (overflow): as for :meth:`fetch`.
            min_ack_pending: with ``group`` (overflow): as for :meth:`fetch`.
            priority: with ``group`` (prioritized): as for :meth:`fetch`.
            threshold_messages: pull again once this many messages or fewer are
                buffered or in flight (0 to ``max_messages - 1``; None: half of
                ``max_messages``), as nats.go's ``PullThresholdMessages``.
            threshold_bytes: the same for bytes, with ``max_bytes``
                (``PullThresholdBytes``).
            stop_after: end the iteration once this many messages were handed out,
                never asking for more (nats.go's ``StopAfter``).
            error_on_missing_heartbeat: raise ``NoHeartbeatError`` from the iteration
                when a heartbeat is missed, instead of logging it; iterating again goes
                on with a new pull (nats.go's ``WithMessagesErrOnMissingHeartbeat``).

        Raises:
            InvalidArgumentError: a bad limit, wait, heartbeat, threshold or criterion.
        """
        return self._stream_of(
            max_messages,
            max_bytes,
            max_wait,
            heartbeat,
            None,
            self._group(group, min_pending, min_ack_pending, priority),
            _Reading(threshold_messages, threshold_bytes, stop_after, error_on_missing_heartbeat),
        )

    def consume(
        self,
        cb: Callable[[JsMsg], None],
        *,
        max_messages: int = 500,
        max_bytes: int | None = None,
        max_wait: float = 30.0,
        heartbeat: float | None = None,
        error_cb: ErrorCallback | None = None,
        group: str | None = None,
        min_pending: int | None = None,
        min_ack_pending: int | None = None,
        priority: int | None = None,
        threshold_messages: int | None = None,
        threshold_bytes: int | None = None,
        stop_after: int | None = None,
    ) -> ConsumeContext:
        """Runs ``cb(msg)`` for every message, in order, on a thread of its own.

        The messages come as from :meth:`messages` (same arguments, the priority
        group keywords and the thresholds included; ``stop_after`` ends the consume
        once that many callbacks ran). An exception in
        ``cb`` goes to ``error_cb`` (or the log) and the next message follows; warnings
        (missed heartbeats, refused pulls) go there too, and so does the error that
        ends it (the consumer was deleted).

        Args:
            cb: ``callable(msg)``; acking is up to it.
            error_cb: ``callable(exception)``, run on the consume thread.

        Returns:
            The context to ``stop()``, ``drain()`` or ``join()`` it.

        Raises:
            InvalidArgumentError: ``cb`` is not callable, or a bad limit.
        """
        if not callable(cb):
            raise InvalidArgumentError(f"cb must be callable, got {cb!r}")
        if error_cb is not None and not callable(error_cb):
            raise InvalidArgumentError(f"error_cb must be callable or None, got {error_cb!r}")
        stream = self._stream_of(
            max_messages,
            max_bytes,
            max_wait,
            heartbeat,
            error_cb,
            self._group(group, min_pending, min_ack_pending, priority),
            _Reading(threshold_messages, threshold_bytes, stop_after, False),
        )
        return ConsumeContext(stream, cb, error_cb, self._name, self._js.client)

    def _stream_of(
        self,
        max_messages: int,
        max_bytes: int | None,
        max_wait: float,
        heartbeat: float | None,
        error_cb: ErrorCallback | None,
        pg: PullGroup | None,
        reading: _Reading,
    ) -> MessageStream:
        check_int(max_messages, "max_messages", 1)
        if max_bytes is not None:
            check_int(max_bytes, "max_bytes", 1)
        reading.check(max_messages, max_bytes)
        check_timeout(max_wait, "max_wait")
        if max_wait < d.JS_STREAM_MIN_WAIT:
            raise InvalidArgumentError(
                f"max_wait must be >= {d.JS_STREAM_MIN_WAIT}s for a continuous read, "
                f"got {max_wait!r}"
            )
        if heartbeat is None:
            heartbeat = min(max(max_wait / 2, d.JS_STREAM_MIN_HEARTBEAT), d.JS_STREAM_MAX_HEARTBEAT)
        else:
            _check_heartbeat(heartbeat, max_wait)
        label = f"consumer {self._name!r} of stream {self._stream!r}"
        return MessageStream(
            self._js.client,
            self._next_subject,
            label,
            max_messages=max_messages,
            max_bytes=max_bytes,
            max_wait=max_wait,
            heartbeat=heartbeat,
            ack_timeout=self._js.timeout,
            exists=self._exists,
            error_cb=error_cb,
            group=pg,
            threshold_messages=reading.threshold_messages,
            threshold_bytes=reading.threshold_bytes,
            stop_after=reading.stop_after,
            raise_missed_heartbeat=reading.error_on_missing_heartbeat,
        )

    def _exists(self, timeout: float) -> bool:
        """False when the consumer (or its stream) is certainly gone."""
        try:
            self._js.consumer_info(self._stream, self._name, timeout=timeout)
        except (ConsumerNotFoundError, StreamNotFoundError):
            return False
        return True


def put_consumer(
    js: JsContext,
    stream: str,
    config: ConsumerConfig | None,
    fields: dict[str, Any],
    action: str,
    timeout: float | None,
) -> PullConsumer:
    """Creates (``action`` "create"), updates ("update") or either ("") a consumer of
    ``stream`` from ``config`` and ``fields``: ``js.create_consumer`` and its kin, here
    so that streams, ordered consumers and bulk reads make theirs without the context.

    Raises:
        InvalidArgumentError: a bad field or stream name.
        JetStreamError: what the server refused (see ``js.create_consumer``).
    """
    full = config_with(ConsumerConfig, config, fields, "config")
    stream = check_stream_name(stream)
    call, body = full.create_call(stream, action, lambda: ephemeral_name(js.client))
    return PullConsumer(js, stream, ConsumerInfo.from_api(js.api.request(call, body, timeout)))


def bind_consumer(js: JsContext, stream: str, name: str, timeout: float | None) -> PullConsumer:
    """An existing consumer (``js.consumer``).

    Raises:
        NotPullConsumerError: it is a push consumer (bind it with ``js.push_consumer``).
        ConsumerNotFoundError: there is no such consumer.
        StreamNotFoundError: there is no such stream.
    """
    stream = check_stream_name(stream)
    info = js.consumer_info(stream, name, timeout=timeout)
    if info.config.deliver_subject:
        raise NotPullConsumerError(
            f"consumer {name!r} of stream {stream!r} is a push consumer (deliver_subject "
            f"{info.config.deliver_subject!r}): bind it with js.push_consumer"
        )
    return PullConsumer(js, stream, info)


def ephemeral_name(client: CoreClient) -> str:
    """A name for a consumer made without one (pull or push)."""
    # A NUID's first characters are the same for every id of a process: hash the whole
    # id so names made one after the other differ in every character.
    return hashlib.sha256(client.new_inbox().encode()).hexdigest()[:10]


def _again(
    pg: PullGroup | None, max_wait: float | None, heartbeat: float | None
) -> PullAgain | None:
    """How a fetch pulls again after its pin was lost (423): the same pull, without the
    id, for what it still wants within the time left (``max_wait`` None: ``no_wait``)."""
    if pg is None:
        return None

    def again(count: int, size: int, left: float) -> bytes | None:
        if max_wait is None:  # fetch_nowait: the deadline is the margin itself
            if left < d.JS_PIN_RETRY_MIN_WAIT:
                return None
            return pull_body(count, no_wait=True, group=pg.fields())
        expires = left - d.JS_FETCH_MARGIN
        if expires < d.JS_PIN_RETRY_MIN_WAIT:
            return None
        beat = heartbeat if heartbeat and 2 * heartbeat <= expires else None
        return pull_body(
            count, expires=expires, max_bytes=size or None, heartbeat=beat, group=pg.fields()
        )

    return again


def _check_heartbeat(heartbeat: float, max_wait: float) -> None:
    check_timeout(heartbeat, "heartbeat")
    if 2 * heartbeat > max_wait:
        raise InvalidArgumentError(
            f"heartbeat must be at most half of max_wait ({max_wait}s), got {heartbeat!r}"
        )


class MessageSource(Protocol):
    """What a consume thread reads: a pull consumer's ``MessageStream``, a push
    consumer's ``PushMessageStream`` or an ordered consumer's messages."""

    def next(self, timeout: float | None = None) -> JsMsg:
        """The next message; raises when the source ended."""
        ...

    def stop(self) -> None:
        """Ends the source at once."""

    def drain(self, timeout: float | None = None) -> None:
        """Ends the source after what it received."""


class ConsumeContext:
    """A running ``consume(cb)``: one thread reading a :class:`MessageSource` (the
    messages of a pull, push or ordered consumer) and calling ``cb`` for each message.
    A context manager that stops it.
    """

    def __init__(
        self,
        stream: MessageSource,
        cb: Callable[[JsMsg], None],
        error_cb: ErrorCallback | None,
        name: str,
        client: CoreClient,
    ) -> None:
        self._stream = stream
        port = port_of(client)
        otel = port.instrumentation
        # Traced: each cb runs in a CONSUMER process span, child of the publisher's.
        self._cb = cb if otel is None else otel.wrap_callback(name, cb)
        self._error_cb = error_cb
        self._error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._run, name=f"nats_sync-js-consume-{name}", daemon=True
        )
        self._remove_listener = port.add_status_listener(self._on_status)
        self._thread.start()

    def _on_status(self, event: str) -> None:
        """``close()`` (which tells "closed" after ending every subscription) waits a
        moment for this thread, as for the client's own callback threads; a ``cb`` that
        does not return is left to finish on its own."""
        if event == "closed" and threading.current_thread() is not self._thread:
            self._thread.join(d.CLOSE_CALLBACK_GRACE)

    def _run(self) -> None:
        """The consume thread: the next message, then ``cb``, until the stream ends."""
        try:
            self._consume()
        finally:
            self._remove_listener()

    def _consume(self) -> None:
        stream, cb, error_cb = self._stream, self._cb, self._error_cb
        while True:
            try:
                msg = stream.next()
            except (BadSubscriptionError, ConnectionClosedError):
                return  # stopped, drained, or the client closed
            except Exception as err:  # a terminal error: the consumer was deleted, ...
                self._error = err
                report(err, error_cb, f"consume of {stream!r} ended: {err}")
                return
            try:
                cb(msg)
            except Exception as err:
                if error_cb is None:
                    log.exception("nats_sync: the consume callback of %r raised", stream)
                else:
                    report(err, error_cb, "")

    @property
    def closed(self) -> bool:
        """Whether it has ended: the thread returned and ``cb`` will not run again."""
        return not self._thread.is_alive()

    @property
    def error(self) -> BaseException | None:
        """The error that ended it (e.g. ``ConsumerDeletedError``), or None."""
        return self._error

    def stop(self) -> None:
        """Stops at once: ``cb`` is not called again after the call running now; what
        was received but not handed over is redelivered by the server after
        ``ack_wait``. Does not wait (see :meth:`join`)."""
        self._stream.stop()

    def drain(self, timeout: float | None = None) -> None:
        """Stops pulling, hands every message already received to ``cb``, and waits
        for that.

        Args:
            timeout: seconds to wait in all (None: no limit).

        Raises:
            DrainTimeoutError: ``cb`` was still busy after ``timeout`` (it goes on).
        """
        if timeout is not None:
            check_timeout(timeout, "timeout")
        self._stream.drain(timeout)
        if threading.current_thread() is self._thread:
            return  # called from cb: the thread ends after it returns
        if not self.join(timeout):
            raise DrainTimeoutError(f"consume of {self._stream!r} did not finish within {timeout}s")

    def join(self, timeout: float | None = None) -> bool:
        """Waits until it has ended; returns whether it has (False after ``timeout``)."""
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)
        return not self._thread.is_alive()

    def __enter__(self) -> ConsumeContext:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "closed" if self.closed else "running"
        return f"<nats_sync.jetstream.ConsumeContext {self._thread.name} {state}>"

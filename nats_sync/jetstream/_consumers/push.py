"""Push consumers: made (``js.create_push_consumer``), bound (``js.push_consumer``) and
read (``messages()``, ``consume(cb)``).

How it works: a push consumer has a ``deliver_subject`` the server sends its messages
to, unasked (and a ``deliver_group`` when several readers share them); nats_sync
makes pull consumers by default, and reads push consumers that exist (made by a Go
service, the ``nats`` CLI, nats-py) or that are asked for. :class:`PushConsumer`
holds the stream and consumer names and the info it was bound with; each read is a
:class:`~nats_sync.jetstream._consumers.push_stream.PushMessageStream`, one core
subscription on the deliver subject, read by the thread that calls its ``next()``.

- ``messages()`` returns the stream; it starts no thread.
- ``consume(cb)`` reads one with the thread of a
  :class:`~nats_sync.jetstream._consumers.consumer.ConsumeContext`
  (``nats_sync-js-consume-<consumer>``, as a pull consumer's ``consume``), which runs
  ``cb(msg)`` for each message in order; warnings go to ``error_cb``.

Without a ``deliver_group`` every subscription on the deliver subject gets every
message, so a ``PushConsumer`` has one read open at a time (as nats.go's): a second
one, while the first is open, is refused. The consumer keeps ``cached_info``
(replaced whole) and its open read (a weak reference, under ``_lock``); any thread may
use it.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from nats_sync import _defaults as d
from nats_sync.errors import ErrorCallback, InvalidArgumentError
from nats_sync.jetstream._consumers.consumer import ConsumeContext, ephemeral_name
from nats_sync.jetstream._consumers.msg import JsMsg
from nats_sync.jetstream._consumers.push_stream import PushMessageStream, check_pending_limits
from nats_sync.jetstream._streams.wire import check_stream_name
from nats_sync.jetstream.api import ConsumerConfig, ConsumerInfo, config_with
from nats_sync.jetstream.errors import (
    ConsumerNotFoundError,
    NotPushConsumerError,
    StreamNotFoundError,
)

if TYPE_CHECKING:
    from nats_sync.jetstream._streams.context_protocol import JsContext

__all__ = ["PushConsumer", "PushMessageStream", "bind_push_consumer", "put_push_consumer"]


class PushConsumer:
    """A push consumer bound by stream and name (``js.push_consumer``,
    ``js.create_push_consumer``...).

    Read it with :meth:`messages` or :meth:`consume`; the messages are the same
    ``JsMsg`` as a pull consumer's (``ack()``, ``nak()``, ``term()``, metadata).
    Every method blocks like the core client and is safe from any thread.
    """

    def __init__(self, js: JsContext, stream: str, info: ConsumerInfo) -> None:
        if not info.config.deliver_subject:
            raise NotPushConsumerError(
                f"consumer {info.name!r} of stream {stream!r} is a pull consumer (no "
                "deliver_subject): bind it with js.consumer"
            )
        self._js = js
        self._stream = stream
        self._name = info.name
        self._info = info
        self._lock = threading.Lock()
        self._reading: weakref.ref[PushMessageStream] | None = None

    def __repr__(self) -> str:
        return f"<nats_sync.jetstream.PushConsumer {self._stream!r}/{self._name!r}>"

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
        """The consumer's config and position now.

        Raises:
            ConsumerNotFoundError: the consumer no longer exists.
        """
        self._info = self._js.consumer_info(self._stream, self._name, timeout=timeout)
        return self._info

    def messages(
        self,
        *,
        pending_msgs_limit: int = d.DEFAULT_SUB_PENDING_MSGS_LIMIT,
        pending_bytes_limit: int = d.DEFAULT_SUB_PENDING_BYTES_LIMIT,
    ) -> PushMessageStream:
        """The messages as the server delivers them: ``for msg in consumer.messages()``.

        Subscribes to the consumer's ``deliver_subject`` (in its ``deliver_group``,
        when it has one). Flow-control requests are answered as the messages before
        them are taken; with the consumer's ``idle_heartbeat``, two intervals of
        silence raise ``MissedHeartbeatError`` from ``next()``, once, and the stream
        goes on; messages dropped because the queue was full raise
        ``SlowConsumerError`` the same way. It ends at ``stop()``, ``drain()``, the
        client's close, or with ``ConsumerDeletedError``.

        Args:
            pending_msgs_limit: messages queued at most before new ones are dropped.
            pending_bytes_limit: payload bytes queued at most.

        Raises:
            InvalidArgumentError: a bad limit, or another read of this consumer
                (without a deliver group) is open.
        """
        return self._open(pending_msgs_limit, pending_bytes_limit, None, raise_warnings=True)

    def consume(
        self,
        cb: Callable[[JsMsg], None],
        *,
        error_cb: ErrorCallback | None = None,
        pending_msgs_limit: int = d.DEFAULT_SUB_PENDING_MSGS_LIMIT,
        pending_bytes_limit: int = d.DEFAULT_SUB_PENDING_BYTES_LIMIT,
    ) -> ConsumeContext:
        """Runs ``cb(msg)`` for every message, in order, on a thread of its own.

        The messages come as from :meth:`messages`. An exception in ``cb`` goes to
        ``error_cb`` (or the log) and the next message follows; warnings (a missed
        heartbeat, drops, an unexpected status) go there too, and so does the error
        that ends it (the consumer was deleted).

        Args:
            cb: ``callable(msg)``; acking is up to it.
            error_cb: ``callable(exception)``, run on the consume thread.
            pending_msgs_limit: messages queued for ``cb`` at most before new ones
                are dropped (and reported).
            pending_bytes_limit: payload bytes queued at most.

        Returns:
            The context to ``stop()``, ``drain()`` or ``join()`` it.

        Raises:
            InvalidArgumentError: ``cb`` is not callable, a bad limit, or another
                read of this consumer (without a deliver group) is open.
        """
        if not callable(cb):
            raise InvalidArgumentError(f"cb must be callable, got {cb!r}")
        if error_cb is not None and not callable(error_cb):
            raise InvalidArgumentError(f"error_cb must be callable or None, got {error_cb!r}")
        stream = self._open(pending_msgs_limit, pending_bytes_limit, error_cb, raise_warnings=False)
        try:
            return ConsumeContext(stream, cb, error_cb, self._name, self._js.client)
        except BaseException:
            stream.stop()
            raise

    def _open(
        self,
        pending_msgs_limit: int,
        pending_bytes_limit: int,
        error_cb: ErrorCallback | None,
        *,
        raise_warnings: bool,
    ) -> PushMessageStream:
        check_pending_limits(pending_msgs_limit, pending_bytes_limit)
        info = self._info
        with self._lock:
            open_read = None if self._reading is None else self._reading()
            if open_read is not None and not open_read.is_closed and not info.config.deliver_group:
                raise InvalidArgumentError(
                    f"push consumer {self._name!r} of stream {self._stream!r} is being read "
                    "already; stop that read first (without a deliver_group, every read "
                    "would get every message)"
                )
            stream = PushMessageStream(
                self._js.client,
                info,
                f"push consumer {self._name!r} of stream {self._stream!r}",
                ack_timeout=self._js.timeout,
                exists=self._exists,
                pending_msgs_limit=pending_msgs_limit,
                pending_bytes_limit=pending_bytes_limit,
                error_cb=error_cb,
                raise_warnings=raise_warnings,
            )
            self._reading = weakref.ref(stream)
        return stream

    def _exists(self, timeout: float) -> bool:
        """False when the consumer (or its stream) is certainly gone."""
        try:
            self._js.consumer_info(self._stream, self._name, timeout=timeout)
        except (ConsumerNotFoundError, StreamNotFoundError):
            return False
        return True


def put_push_consumer(
    js: JsContext,
    stream: str,
    config: ConsumerConfig | None,
    fields: dict[str, Any],
    action: str,
    timeout: float | None,
) -> PushConsumer:
    """Creates (``action`` "create") or creates-or-updates ("") a push consumer of
    ``stream`` from ``config`` and ``fields`` (``js.create_push_consumer`` and its
    kin); without a ``deliver_subject`` it gets a new inbox.

    Raises:
        InvalidArgumentError: a bad field or stream name.
        JetStreamError: what the server refused (see ``js.create_consumer``).
    """
    full = config_with(ConsumerConfig, config, fields, "config")
    stream = check_stream_name(stream)
    if not full.deliver_subject:
        full = full.replace(deliver_subject=js.client.new_inbox())
    call, body = full.create_call(stream, action, lambda: ephemeral_name(js.client), push=True)
    return PushConsumer(js, stream, ConsumerInfo.from_api(js.api.request(call, body, timeout)))


def bind_push_consumer(
    js: JsContext, stream: str, name: str, timeout: float | None
) -> PushConsumer:
    """An existing push consumer (``js.push_consumer``).

    Raises:
        NotPushConsumerError: it is a pull consumer.
        ConsumerNotFoundError: there is no such consumer.
        StreamNotFoundError: there is no such stream.
    """
    stream = check_stream_name(stream)
    return PushConsumer(js, stream, js.consumer_info(stream, name, timeout=timeout))

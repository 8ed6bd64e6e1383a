"""nats-py's names on the JetStream context: the legacy ones (``add_stream``,
``get_msg``, ``pull_subscribe``, ``subscribe``...) and those of its JetStream manager
(``nc.jsm()``: ``streams_info``, ``pause_consumer``...), as the mixin
:class:`NatsPyNames` that :class:`~nats_sync.jetstream.JetStream` inherits.

How it works: each method is one or two calls on the context (typed as the
:class:`~nats_sync.jetstream._streams.context_protocol.JsContext` protocol, so this module does not
import ``context``) or one API request, on the caller's thread. Moved out of
``_streams/context.py`` to keep it short; the names and behaviour are those it had. No thread,
no state (the mixin has no attributes of its own).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Any

from nats_sync._core.validate import check_int
from nats_sync.errors import InvalidArgumentError
from nats_sync.jetstream._consumers import compat as _compat
from nats_sync.jetstream._consumers.compat import JsSubscription
from nats_sync.jetstream._consumers.consumer import bind_consumer, put_consumer
from nats_sync.jetstream._streams.stream import Stream, put_stream
from nats_sync.jetstream._streams.wire import check_consumer_name, check_stream_name, format_time
from nats_sync.jetstream.api import (
    ConsumerConfig,
    ConsumerInfo,
    ConsumerPause,
    ConsumerReset,
    StoredMsg,
    StreamConfig,
    StreamInfo,
    config_with,
)

if TYPE_CHECKING:
    from nats_sync.jetstream._consumers.msg import JsMsg
    from nats_sync.jetstream._streams.context_protocol import JsContext


class NatsPyNames:
    """Names from nats-py that `JetStream` answers to as well, so ported code runs unchanged.

    Those of nats-py's JetStream context (``add_stream``, ``pull_subscribe``,
    ``subscribe``...) and of its JetStream manager (``nc.jsm()``: ``streams_info``,
    ``pause_consumer``...). New code is better off with `JetStream`'s own names;
    ``pause_consumer``, ``resume_consumer`` and ``reset_consumer`` have no other.
    """

    def add_stream(
        self: JsContext, config: StreamConfig | None = None, **fields: Any
    ) -> StreamInfo:
        """nats-py's ``add_stream``: ``create_stream``, returning the info."""
        full = config_with(StreamConfig, config, fields, "config")
        return put_stream(self, "CREATE", full, None).cached_info

    def find_stream_name_by_subject(self: JsContext, subject: str) -> str:
        """nats-py's name for :meth:`stream_name_by_subject`."""
        return self.stream_name_by_subject(subject)

    def purge_stream(
        self: JsContext,
        name: str,
        seq: int | None = None,
        subject: str | None = None,
        keep: int | None = None,
    ) -> int:
        """nats-py's ``purge_stream``: ``Stream.purge`` by name."""
        return _named_stream(self, name).purge(subject=subject, keep=keep, sequence=seq)

    def get_msg(
        self: JsContext, stream_name: str, seq: int | None = None, subject: str | None = None
    ) -> StoredMsg:
        """nats-py's ``get_msg``: by sequence, or the last message on ``subject``."""
        stream = _named_stream(self, stream_name)
        if seq is not None:
            return stream.get_msg(seq)
        if subject is None:
            raise InvalidArgumentError("get_msg needs seq or subject")
        return stream.get_last_msg(subject)

    def get_last_msg(self: JsContext, stream_name: str, subject: str) -> StoredMsg:
        """nats-py's ``get_last_msg``: the last message stored on ``subject``."""
        return _named_stream(self, stream_name).get_last_msg(subject)

    def delete_msg(self: JsContext, stream_name: str, seq: int) -> None:
        """nats-py's ``delete_msg``: removes one message (erasing it)."""
        _named_stream(self, stream_name).delete_msg(seq, erase=True)

    def add_consumer(
        self: JsContext, stream: str, config: ConsumerConfig | None = None, **fields: Any
    ) -> ConsumerInfo:
        """nats-py's ``add_consumer``: ``create_or_update_consumer``, returning the info."""
        return put_consumer(self, stream, config, fields, "", None).cached_info

    def pull_subscribe(
        self: JsContext,
        subject: str,
        durable: str | None = None,
        stream: str | None = None,
        config: ConsumerConfig | None = None,
    ) -> _compat.PullSubscription:
        """nats-py's ``pull_subscribe``: binds the durable consumer (or creates one,
        ephemeral without ``durable``) filtered on ``subject``; read with
        ``fetch(batch, timeout)``."""
        return _compat.pull_subscribe(self, subject, durable, stream, config)

    def pull_subscribe_bind(
        self: JsContext,
        consumer: str | None = None,
        stream: str | None = None,
        *,
        durable: str | None = None,
        name: str | None = None,
    ) -> _compat.PullSubscription:
        """nats-py's ``pull_subscribe_bind``: binds an existing pull consumer (by
        ``consumer``, ``durable`` or ``name``) of ``stream``; read with ``fetch``.

        Raises:
            InvalidArgumentError: no stream or no consumer name given.
            ConsumerNotFoundError: there is no such consumer.
        """
        consumer_name = consumer or durable or name
        if not stream or not consumer_name:
            raise InvalidArgumentError("pull_subscribe_bind needs the stream and the consumer")
        return _compat.PullSubscription(
            self, bind_consumer(self, stream, consumer_name, None), ephemeral=False
        )

    # --- nats-py's JetStream manager names (nc.jsm()) ---------------------------------

    def streams_info(
        self: JsContext, offset: int = 0, timeout: float | None = None
    ) -> list[StreamInfo]:
        """nats-py's ``streams_info``: every stream's info from ``offset`` on."""
        return list(NatsPyNames.streams_info_iterator(self, offset, timeout))

    def streams_info_iterator(
        self: JsContext, offset: int = 0, timeout: float | None = None
    ) -> Iterator[StreamInfo]:
        """nats-py's ``streams_info_iterator``: :meth:`list_streams` from ``offset`` on."""
        check_int(offset, "offset", 0)
        return itertools.islice(self.list_streams(timeout=timeout), offset, None)

    def consumers_info(
        self: JsContext, stream: str, offset: int | None = None, timeout: float | None = None
    ) -> list[ConsumerInfo]:
        """nats-py's ``consumers_info``: every consumer's info of ``stream`` from
        ``offset`` on."""
        check_int(offset or 0, "offset", 0)
        return list(itertools.islice(self.list_consumers(stream, timeout), offset or 0, None))

    def pause_consumer(
        self: JsContext,
        stream: str,
        consumer: str,
        pause_until: str | datetime,
        timeout: float | None = None,
    ) -> ConsumerPause:
        """Pauses a consumer until ``pause_until`` (an aware datetime, or RFC 3339 text as
        nats-py takes it); it delivers nothing meanwhile. nats-server 2.11 and later.

        Raises:
            ConsumerNotFoundError: there is no such consumer.
        """
        until = format_time(pause_until) if isinstance(pause_until, datetime) else pause_until
        call = f"CONSUMER.PAUSE.{check_stream_name(stream)}.{check_consumer_name(consumer)}"
        return ConsumerPause.from_api(self.api.request(call, {"pause_until": until}, timeout))

    def resume_consumer(
        self: JsContext, stream: str, consumer: str, timeout: float | None = None
    ) -> ConsumerPause:
        """Resumes a paused consumer now (a pause until a time long past, as nats-py
        does). nats-server 2.11 and later."""
        return NatsPyNames.pause_consumer(self, stream, consumer, "1970-01-01T00:00:00Z", timeout)

    def reset_consumer(
        self: JsContext,
        stream: str,
        consumer: str,
        seq: int | None = None,
        timeout: float | None = None,
    ) -> ConsumerReset:
        """Resets a consumer's delivery state (ADR-60, nats-server 2.14 and later):
        pending and redelivered counts cleared; with ``seq``, the next message delivered
        is at that stream sequence or after it, else one above the ack floor.

        Raises:
            ConsumerNotFoundError: there is no such consumer.
            APIError: the reset does not fit the consumer's deliver policy (10204).
        """
        call = f"CONSUMER.RESET.{check_stream_name(stream)}.{check_consumer_name(consumer)}"
        body = {"seq": seq} if seq else None
        return ConsumerReset.from_api(self.api.request(call, body, timeout))

    def subscribe(
        self: JsContext,
        subject: str,
        queue: str | None = None,
        cb: Callable[[JsMsg], None] | None = None,
        durable: str | None = None,
        stream: str | None = None,
        manual_ack: bool = False,
        ordered_consumer: bool = False,
        deliver_policy: str | None = None,
        config: ConsumerConfig | None = None,
    ) -> JsSubscription:
        """nats-py's ``js.subscribe``, built on a pull consumer (or an ordered one), or
        on a push consumer when ``durable`` (or ``queue``) names one that exists, or
        when ``config`` has a ``deliver_subject`` (a push consumer is made, with the
        ``queue`` as its deliver group).

        Without ``cb``, read with ``next_msg`` or iteration; with it, ``cb(msg)`` runs on
        a thread of its own and the message is acknowledged after it returns, unless
        ``manual_ack`` (or a push consumer's ``ack_policy`` is "none"). A ``queue``
        names the shared durable consumer.

        Raises:
            InvalidArgumentError: ``queue`` and ``durable`` differ, or the push
                consumer's deliver group is not ``queue``.
        """
        return _compat.subscribe(
            self,
            subject,
            queue,
            cb,
            durable,
            stream,
            manual_ack,
            ordered_consumer,
            deliver_policy,
            config,
        )

    def subscribe_bind(
        self: JsContext,
        stream: str,
        config: ConsumerConfig | None,
        consumer: str,
        cb: Callable[[JsMsg], None] | None = None,
        manual_ack: bool = False,
    ) -> JsSubscription:
        """nats-py's ``subscribe_bind``: reads the existing push consumer ``consumer``
        of ``stream`` (its deliver subject and group as the server has them; ``config``
        is taken for nats-py's signature), as :meth:`subscribe` does.

        Raises:
            NotPushConsumerError: it is a pull consumer (``pull_subscribe_bind``).
            ConsumerNotFoundError: there is no such consumer.
        """
        return _compat.subscribe_bind(self, stream, config, consumer, cb, manual_ack)


def _named_stream(js: JsContext, name: str) -> Stream:
    """A ``Stream`` bound by name alone (its ``cached_info`` holds only the name) for
    the one-request calls of :class:`NatsPyNames`: no STREAM.INFO first, as nats-py
    sends one request; a missing stream is the server's ``StreamNotFoundError`` all the same."""
    return Stream(js, StreamInfo(config=StreamConfig(name=check_stream_name(name))))

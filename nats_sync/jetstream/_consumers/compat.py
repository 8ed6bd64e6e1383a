"""nats-py's legacy JetStream reading names: ``pull_subscribe``, ``subscribe`` and
``subscribe_bind``.

How it works: ``pull_subscribe`` binds (or creates) a pull consumer filtered on the
subject and wraps it in :class:`PullSubscription`, whose ``fetch(batch, timeout)``
returns a list and raises ``TimeoutError`` only when nothing at all arrived, as nats-py
does. ``subscribe`` reads a pull consumer with ``messages()`` (or ``consume(cb)`` when a
callback is given, acknowledging after the callback returns unless ``manual_ack``), or
an ordered consumer for ``ordered_consumer=True``; it reads a push consumer the same
way when the consumer its ``durable`` (or ``queue``) names is one, or when ``config``
has a ``deliver_subject`` (then it makes a push consumer, as nats-py does, in the
``queue`` as its deliver group). ``subscribe_bind`` reads an existing push consumer.
The threads are those of ``messages``/``consume``; these wrappers hold only what they
were built with.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from nats_sync import errors as core_errors
from nats_sync.errors import InvalidArgumentError
from nats_sync.jetstream._consumers.consumer import PullConsumer, put_consumer
from nats_sync.jetstream._consumers.ordered import OrderedConsumer
from nats_sync.jetstream._consumers.push import (
    PushConsumer,
    bind_push_consumer,
    put_push_consumer,
)
from nats_sync.jetstream._streams.wire import check_stream_name
from nats_sync.jetstream.api import ConsumerConfig, ConsumerInfo
from nats_sync.jetstream.errors import ConsumerNotFoundError, JetStreamError, NotPullConsumerError

if TYPE_CHECKING:
    from nats_sync.jetstream._consumers.msg import JsMsg
    from nats_sync.jetstream._streams.context_protocol import JsContext


class PullSubscription:
    """nats-py's pull subscription: ``fetch(batch, timeout)`` on a pull consumer."""

    def __init__(self, js: JsContext, consumer: PullConsumer, *, ephemeral: bool) -> None:
        self._js = js
        self._consumer = consumer
        self._ephemeral = ephemeral

    @property
    def consumer(self) -> PullConsumer:
        """The pull consumer read."""
        return self._consumer

    def fetch(
        self, batch: int = 1, timeout: float | None = 5.0, heartbeat: float | None = None
    ) -> list[JsMsg]:
        """Up to ``batch`` messages within ``timeout`` seconds.

        Raises:
            TimeoutError: no message at all arrived (nats-py's behaviour); a partial
                batch is returned as it is.
        """
        wait = 5.0 if timeout is None else timeout
        fetched = self._consumer.fetch(batch, max_wait=wait, heartbeat=heartbeat)
        messages = list(fetched)
        if fetched.error is not None and not messages:
            raise fetched.error
        if not messages:
            raise core_errors.TimeoutError(
                f"no message from consumer {self._consumer.name!r} within {wait}s"
            )
        return messages

    def consumer_info(self) -> ConsumerInfo:
        """The consumer's info now."""
        return self._consumer.info()

    def unsubscribe(self) -> None:
        """Ends the subscription; an ephemeral consumer is deleted with it."""
        if self._ephemeral:
            _delete_quietly(self._js, self._consumer)


class JsSubscription:
    """nats-py's ``js.subscribe`` result, read from a pull, push or ordered consumer."""

    def __init__(
        self,
        js: JsContext,
        consumer: PullConsumer | PushConsumer | None,
        reader: Any,
        *,
        ephemeral: bool,
        with_callback: bool,
        on_end: Callable[[], None] | None = None,
    ) -> None:
        self._on_end = on_end
        self._js = js
        self._consumer = consumer
        self._reader = reader
        self._ephemeral = ephemeral
        self._with_callback = with_callback

    def next_msg(self, timeout: float | None = 1.0) -> JsMsg:
        """The next message.

        Raises:
            TimeoutError: none within ``timeout`` seconds.
        """
        if self._with_callback:
            raise InvalidArgumentError(
                "this subscription has a callback; next_msg works only without one"
            )
        message: JsMsg = self._reader.next(timeout=timeout)
        return message

    def __iter__(self) -> Iterator[JsMsg]:
        """Messages until the subscription ends."""
        while True:
            try:
                yield self.next_msg(timeout=None)
            except (core_errors.BadSubscriptionError, core_errors.ConnectionClosedError):
                return

    def consumer_info(self) -> ConsumerInfo:
        """The underlying consumer's info (not for ordered subscriptions)."""
        if self._consumer is None:
            raise InvalidArgumentError("an ordered subscription has no fixed consumer")
        return self._consumer.info()

    def unsubscribe(self) -> None:
        """Stops reading; an ephemeral consumer is deleted."""
        self._reader.stop()
        self._end()

    def _end(self) -> None:
        if self._ephemeral and self._consumer is not None:
            _delete_quietly(self._js, self._consumer)
        if self._on_end is not None:
            self._on_end()

    def drain(self, timeout: float | None = None) -> None:
        """Lets what was pulled be handed over, then stops."""
        self._reader.drain(timeout)
        self._end()


def pull_subscribe(
    js: JsContext,
    subject: str,
    durable: str | None = None,
    stream: str | None = None,
    config: ConsumerConfig | None = None,
) -> PullSubscription:
    """See ``JetStream.pull_subscribe``."""
    stream_name = stream or js.stream_name_by_subject(subject)
    consumer, ephemeral = _bind_or_create(js, stream_name, subject, durable, config, None)
    if isinstance(consumer, PushConsumer):
        raise NotPullConsumerError(
            f"consumer {durable!r} of stream {stream_name!r} is a push consumer: read it "
            "with js.subscribe or js.subscribe_bind"
        )
    return PullSubscription(js, consumer, ephemeral=ephemeral)


def subscribe(
    js: JsContext,
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
    """See ``JetStream.subscribe``."""
    if cb is not None and not callable(cb):
        raise InvalidArgumentError(f"cb must be callable, got {cb!r}")
    stream_name = stream or js.stream_name_by_subject(subject)
    if ordered_consumer:
        if queue or durable:
            raise InvalidArgumentError("an ordered consumer takes neither queue nor durable")
        ordered = OrderedConsumer(
            js,
            check_stream_name(stream_name),
            filter_subjects=[subject],
            deliver_policy=deliver_policy or "all",
        )
        reader = _read(ordered, cb, manual_ack=True)
        return JsSubscription(
            js, None, reader, ephemeral=False, with_callback=cb is not None, on_end=ordered.stop
        )
    # A queue group shares one durable consumer named after it (nats-py does the same).
    if queue and durable and durable != queue:
        raise InvalidArgumentError(
            f"cannot create queue subscription {queue!r} to consumer {durable!r}"
        )
    name = durable or queue
    consumer: PullConsumer | PushConsumer
    if config is not None and config.deliver_subject and not _exists(js, stream_name, name):
        consumer = _create_push(js, stream_name, subject, name, queue, config, deliver_policy)
        ephemeral = not name
    else:
        consumer, ephemeral = _bind_or_create(
            js, stream_name, subject, name, config, deliver_policy
        )
    if isinstance(consumer, PushConsumer):
        _check_group(consumer, queue)
    reader = _read(consumer, cb, manual_ack=manual_ack)
    return JsSubscription(js, consumer, reader, ephemeral=ephemeral, with_callback=cb is not None)


def subscribe_bind(
    js: JsContext,
    stream: str,
    config: ConsumerConfig | None,
    consumer: str,
    cb: Callable[[JsMsg], None] | None = None,
    manual_ack: bool = False,
) -> JsSubscription:
    """See ``JetStream.subscribe_bind``."""
    if cb is not None and not callable(cb):
        raise InvalidArgumentError(f"cb must be callable, got {cb!r}")
    # The server's config, not the caller's copy, says where the messages go.
    bound = bind_push_consumer(js, stream, consumer, None)
    reader = _read(bound, cb, manual_ack=manual_ack)
    return JsSubscription(js, bound, reader, ephemeral=False, with_callback=cb is not None)


def _exists(js: JsContext, stream: str, name: str | None) -> bool:
    if not name:
        return False
    try:
        js.consumer_info(stream, name)
    except ConsumerNotFoundError:
        return False
    return True


def _create_push(
    js: JsContext,
    stream: str,
    subject: str,
    durable: str | None,
    queue: str | None,
    config: ConsumerConfig,
    deliver_policy: str | None,
) -> PushConsumer:
    """A push consumer as nats-py's ``subscribe`` makes one (``_made_fields``), the
    ``queue`` as its deliver group."""
    fields = _made_fields(config, subject, deliver_policy)
    if durable and not config.durable_name:
        fields["durable_name"] = durable
    if queue and not config.deliver_group:
        fields["deliver_group"] = queue
    return put_push_consumer(js, stream, config.replace(**fields), {}, "create", None)


def _made_fields(
    config: ConsumerConfig, subject: str, deliver_policy: str | None
) -> dict[str, Any]:
    """What nats-py's ``subscribe`` and ``pull_subscribe`` set on a consumer they make
    (pull or push), where ``config`` leaves it unset: a filter on ``subject``, explicit
    acks, and ``deliver_policy`` when given.

    Args:
        config: the caller's config (or an empty one).
        subject: the subscribed subject.
        deliver_policy: the ``deliver_policy`` argument of ``subscribe`` (None: none).

    Returns:
        The fields to replace in ``config``.
    """
    fields: dict[str, Any] = {}
    if not config.filter_subject and not config.filter_subjects:
        fields["filter_subject"] = subject
    if config.ack_policy is None:
        fields["ack_policy"] = "explicit"
    if deliver_policy and config.deliver_policy is None:
        fields["deliver_policy"] = deliver_policy
    return fields


def _check_group(consumer: PushConsumer, queue: str | None) -> None:
    """nats-py's rule: a queue subscription reads only a consumer of that deliver group,
    and a plain one only a consumer without."""
    group = consumer.cached_info.config.deliver_group
    if (queue or None) != (group or None):
        raise InvalidArgumentError(
            f"push consumer {consumer.name!r} has deliver group {group!r}; a subscription "
            f"in queue {queue!r} cannot read it"
        )


def _read(source: Any, cb: Callable[[JsMsg], None] | None, *, manual_ack: bool) -> Any:
    if cb is None:
        return source.messages()
    if manual_ack or _acks_none(source):
        return source.consume(cb)
    callback = cb

    def acking(msg: JsMsg) -> None:
        callback(msg)
        if not msg.is_acked:
            msg.ack()

    return source.consume(acking)


def _acks_none(source: Any) -> bool:
    """A push consumer that takes no acks is not acknowledged after ``cb`` (nats-py)."""
    return isinstance(source, PushConsumer) and source.cached_info.config.ack_policy == "none"


def _bind_or_create(
    js: JsContext,
    stream: str,
    subject: str,
    durable: str | None,
    config: ConsumerConfig | None,
    deliver_policy: str | None,
) -> tuple[PullConsumer | PushConsumer, bool]:
    """The consumer ``durable`` names, read as it is (pull or push), or a new pull
    consumer."""
    if durable:
        try:
            info = js.consumer_info(stream, durable)
        except ConsumerNotFoundError:
            pass
        else:
            if info.config.deliver_subject:
                return PushConsumer(js, stream, info), False
            return PullConsumer(js, stream, info), False
    base = config or ConsumerConfig()
    fields = _made_fields(base, subject, deliver_policy)
    if durable:
        fields["durable_name"] = durable
    consumer = put_consumer(js, stream, base.replace(**fields), {}, "create", None)
    return consumer, not durable


def _delete_quietly(js: JsContext, consumer: PullConsumer | PushConsumer) -> None:
    try:
        js.delete_consumer(consumer.stream_name, consumer.name)
    except (JetStreamError, core_errors.Error):
        pass  # gone already, or the connection is: the server expires it anyway

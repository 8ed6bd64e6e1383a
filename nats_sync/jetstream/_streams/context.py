"""The JetStream context: account info, stream and consumer management, and the door to
publishing (``publish``), reading (``Stream``, ``PullConsumer``, ``PushConsumer``,
``OrderedConsumer``), the buckets (``BucketCalls``) and the legacy nats-py names.

How it works: :class:`JetStream` is made by ``nc.jetstream(...)`` and holds only its
settings, the :class:`~nats_sync.jetstream._streams.wire.JsApi` and the publisher (which owns
the ``publish_async`` window and its lock). Management calls are API requests on the
caller's thread; nothing here starts a thread. Any thread may use one context at once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future
from datetime import datetime
from typing import Any, TypeAlias

from nats_sync import _defaults as d
from nats_sync._core.validate import check_timeout
from nats_sync._defaults import JS_ATOMIC_MAX_MESSAGES
from nats_sync.errors import InvalidArgumentError
from nats_sync.jetstream._consumers import compat as _compat
from nats_sync.jetstream._consumers.consumer import PullConsumer, bind_consumer, put_consumer
from nats_sync.jetstream._consumers.ordered import OrderedConsumer
from nats_sync.jetstream._consumers.push import (
    PushConsumer,
    bind_push_consumer,
    put_push_consumer,
)
from nats_sync.jetstream._publishing.atomic import AtomicBatch, publish_atomic
from nats_sync.jetstream._publishing.counter import Counter
from nats_sync.jetstream._publishing.fast import FastPublisher
from nats_sync.jetstream._publishing.publish import JsPublisher
from nats_sync.jetstream._publishing.schedule import publish_scheduled
from nats_sync.jetstream._streams.context_buckets import BucketCalls
from nats_sync.jetstream._streams.context_compat import NatsPyNames
from nats_sync.jetstream._streams.stream import Stream, bind_stream, put_stream
from nats_sync.jetstream._streams.wire import (
    CoreClient,
    Headers,
    JsApi,
    check_consumer_name,
    check_domain,
    check_stream_name,
    js_headers,
)
from nats_sync.jetstream.api import (
    AccountInfo,
    BatchAck,
    ConsumerConfig,
    ConsumerInfo,
    PubAck,
    StreamConfig,
    StreamInfo,
    config_with,
)
from nats_sync.jetstream.errors import JetStreamError, StreamNotFoundError


class JetStream(BucketCalls, NatsPyNames):
    """JetStream over one connection; made by :meth:`nats_sync.Client.jetstream`.

    Every method blocks and is safe from any thread. Admin calls take ``timeout``
    (seconds; the context's when None). It is also what ``nc.jsm()`` returns: it carries
    nats-py's JetStream manager names.
    """

    #: nats-py's ``JetStreamContext.PullSubscription``, what ``pull_subscribe`` returns.
    PullSubscription: TypeAlias = _compat.PullSubscription
    #: nats-py's ``JetStreamContext.PushSubscription``, what ``subscribe`` and
    #: ``subscribe_bind`` return (here one type, on a pull or a push consumer).
    PushSubscription: TypeAlias = _compat.JsSubscription

    def __init__(
        self,
        client: CoreClient,
        *,
        domain: str | None = None,
        api_prefix: str = d.DEFAULT_JS_API_PREFIX,
        timeout: float = d.DEFAULT_JS_TIMEOUT,
        max_pending_acks: int = d.DEFAULT_JS_MAX_PENDING_ACKS,
        stall_wait: float = d.DEFAULT_JS_STALL_WAIT,
    ) -> None:
        check_timeout(timeout)
        check_domain(domain)
        prefix = f"$JS.{domain}.API" if domain else api_prefix.rstrip(".")
        if not prefix:
            raise InvalidArgumentError("api_prefix must not be empty")
        self.client = client
        self.domain = domain
        self.timeout = float(timeout)
        self.api = JsApi(client, prefix, self.timeout)
        self._publisher = JsPublisher(self, max_pending_acks, stall_wait)
        # The per-message path without this class's own frame (same signature, held to
        # it by tests/unit/test_publish_options.py).
        self.publish_async = self._publisher.publish_async  # type: ignore[method-assign]
        self._api_level: int | None = None

    def __repr__(self) -> str:
        return f"<nats_sync.JetStream {self.api.prefix}>"

    # --- account ----------------------------------------------------------------------

    def account_info(self, timeout: float | None = None) -> AccountInfo:
        """The account's usage, limits and the API level."""
        info = AccountInfo.from_api(self.api.request("INFO", None, timeout))
        self._api_level = info.api_level
        return info

    def api_level(self, timeout: float | None = None) -> int:
        """The server's JetStream API level (asked once, then remembered): features are
        gated on it, not on the version string."""
        level = self._api_level
        if level is None:
            level = self.account_info(timeout).api_level
        return level

    # --- streams ----------------------------------------------------------------------

    def create_stream(
        self,
        config: StreamConfig | None = None,
        *,
        timeout: float | None = None,
        **fields: Any,
    ) -> Stream:
        """Creates a stream (the same config again is fine).

        Raises:
            StreamNameAlreadyInUseError: a stream of that name has another config.
        """
        return put_stream(
            self, "CREATE", config_with(StreamConfig, config, fields, "config"), timeout
        )

    def update_stream(
        self,
        config: StreamConfig | None = None,
        *,
        timeout: float | None = None,
        **fields: Any,
    ) -> Stream:
        """Changes a stream's config.

        Raises:
            StreamNotFoundError: there is no such stream.
        """
        return put_stream(
            self, "UPDATE", config_with(StreamConfig, config, fields, "config"), timeout
        )

    def create_or_update_stream(
        self,
        config: StreamConfig | None = None,
        *,
        timeout: float | None = None,
        **fields: Any,
    ) -> Stream:
        """Updates the stream, or creates it when it does not exist."""
        full = config_with(StreamConfig, config, fields, "config")
        try:
            return put_stream(self, "UPDATE", full, timeout)
        except StreamNotFoundError:
            return put_stream(self, "CREATE", full, timeout)

    def stream(self, name: str, timeout: float | None = None) -> Stream:
        """Binds to an existing stream.

        Raises:
            StreamNotFoundError: there is no such stream.
        """
        return bind_stream(self, name, timeout)

    def stream_info(
        self,
        name: str,
        subjects_filter: str | None = None,
        deleted_details: bool = False,
        *,
        timeout: float | None = None,
    ) -> StreamInfo:
        """A stream's config and state (the legacy nats-py name; see ``Stream.info``).

        With ``subjects_filter``, ``state.subjects`` holds every matching subject: the
        server answers at most 100,000 a page, so the pages are asked for one after
        the other (``offset``, as nats.go does); the rest of the state is the first
        page's.
        """
        subject = f"STREAM.INFO.{check_stream_name(name)}"
        body: dict[str, Any] = {}
        if subjects_filter:
            body["subjects_filter"] = subjects_filter
        if deleted_details:
            body["deleted_details"] = True
        reply = self.api.request(subject, body, timeout)
        info = StreamInfo.from_api(reply)
        subjects = info.state.subjects
        total = reply.get("total")
        while subjects_filter and subjects and isinstance(total, int) and len(subjects) < total:
            page = self.api.request(subject, {**body, "offset": len(subjects)}, timeout)
            more = (page.get("state") or {}).get("subjects") or {}
            if not more:
                break  # the stream changed between pages: what was read is what there is
            subjects.update(more)
            total = page.get("total")
        return info

    def delete_stream(self, name: str, timeout: float | None = None) -> None:
        """Deletes a stream and everything in it.

        Raises:
            StreamNotFoundError: there is no such stream.
        """
        self.api.request(f"STREAM.DELETE.{check_stream_name(name)}", None, timeout)

    def stream_names(
        self, subject: str | None = None, timeout: float | None = None
    ) -> Iterator[str]:
        """The names of the streams (those storing ``subject`` when given), page by page."""
        body = {"subject": subject} if subject else None
        yield from self.api.paged("STREAM.NAMES", "streams", body, timeout)

    def list_streams(
        self, subject: str | None = None, timeout: float | None = None
    ) -> Iterator[StreamInfo]:
        """Every stream's info (those storing ``subject`` when given), page by page."""
        body = {"subject": subject} if subject else None
        for item in self.api.paged("STREAM.LIST", "streams", body, timeout):
            yield StreamInfo.from_api(item)

    def stream_name_by_subject(self, subject: str, timeout: float | None = None) -> str:
        """The stream that stores ``subject``.

        Raises:
            StreamNotFoundError: no stream stores it.
        """
        for name in self.stream_names(subject, timeout):
            return str(name)
        raise StreamNotFoundError(
            f"no stream stores {subject!r}",
            code=404,
            err_code=10059,
            description="stream not found",
        )

    # --- consumers --------------------------------------------------------------------

    def create_consumer(
        self,
        stream: str,
        config: ConsumerConfig | None = None,
        *,
        timeout: float | None = None,
        **fields: Any,
    ) -> PullConsumer:
        """Creates a pull consumer (the same config again is fine).

        Raises:
            NotPullConsumerError: the config has a ``deliver_subject`` (use
                :meth:`create_push_consumer`).
            ConsumerExistsError: it exists with another config.
            StreamNotFoundError: there is no such stream.
        """
        return put_consumer(self, stream, config, fields, "create", timeout)

    def update_consumer(
        self,
        stream: str,
        config: ConsumerConfig | None = None,
        *,
        timeout: float | None = None,
        **fields: Any,
    ) -> PullConsumer:
        """Changes a consumer's config.

        Raises:
            ConsumerDoesNotExistError: there is no such consumer.
        """
        return put_consumer(self, stream, config, fields, "update", timeout)

    def create_or_update_consumer(
        self,
        stream: str,
        config: ConsumerConfig | None = None,
        *,
        timeout: float | None = None,
        **fields: Any,
    ) -> PullConsumer:
        """Creates the consumer, or updates it when it exists."""
        return put_consumer(self, stream, config, fields, "", timeout)

    def consumer(self, stream: str, name: str, timeout: float | None = None) -> PullConsumer:
        """Binds to an existing pull consumer.

        Raises:
            NotPullConsumerError: it is a push consumer (bind it with
                :meth:`push_consumer`).
            ConsumerNotFoundError: there is no such consumer.
            StreamNotFoundError: there is no such stream.
        """
        return bind_consumer(self, stream, name, timeout)

    def create_push_consumer(
        self,
        stream: str,
        config: ConsumerConfig | None = None,
        *,
        timeout: float | None = None,
        **fields: Any,
    ) -> PushConsumer:
        """Creates a push consumer: the server sends its messages to its
        ``deliver_subject`` (a new inbox when not given), in its ``deliver_group``
        when given, with ``flow_control`` and ``idle_heartbeat`` as set.

        Raises:
            ConsumerExistsError: it exists with another config.
            StreamNotFoundError: there is no such stream.
        """
        return put_push_consumer(self, stream, config, fields, "create", timeout)

    def create_or_update_push_consumer(
        self,
        stream: str,
        config: ConsumerConfig | None = None,
        *,
        timeout: float | None = None,
        **fields: Any,
    ) -> PushConsumer:
        """Creates the push consumer, or updates it when it exists (as
        :meth:`create_push_consumer`)."""
        return put_push_consumer(self, stream, config, fields, "", timeout)

    def push_consumer(self, stream: str, name: str, timeout: float | None = None) -> PushConsumer:
        """Binds to an existing push consumer (one with a ``deliver_subject``).

        Raises:
            NotPushConsumerError: it is a pull consumer (bind it with :meth:`consumer`).
            ConsumerNotFoundError: there is no such consumer.
        """
        return bind_push_consumer(self, stream, name, timeout)

    def consumer_info(
        self, stream: str, name: str, *, timeout: float | None = None
    ) -> ConsumerInfo:
        """A consumer's config and position."""
        call = f"CONSUMER.INFO.{check_stream_name(stream)}.{check_consumer_name(name)}"
        return ConsumerInfo.from_api(self.api.request(call, None, timeout))

    def delete_consumer(self, stream: str, name: str, timeout: float | None = None) -> None:
        """Deletes a consumer.

        Raises:
            ConsumerNotFoundError: there is no such consumer.
        """
        call = f"CONSUMER.DELETE.{check_stream_name(stream)}.{check_consumer_name(name)}"
        self.api.request(call, None, timeout)

    def consumer_names(self, stream: str, timeout: float | None = None) -> Iterator[str]:
        """The names of a stream's consumers, page by page."""
        yield from self.api.paged(
            f"CONSUMER.NAMES.{check_stream_name(stream)}", "consumers", None, timeout
        )

    def list_consumers(self, stream: str, timeout: float | None = None) -> Iterator[ConsumerInfo]:
        """Every consumer's info on a stream, page by page."""
        call = f"CONSUMER.LIST.{check_stream_name(stream)}"
        for item in self.api.paged(call, "consumers", None, timeout):
            yield ConsumerInfo.from_api(item)

    def ordered_consumer(
        self,
        stream: str,
        *,
        filter_subjects: Sequence[str] | None = None,
        deliver_policy: str = "all",
        opt_start_seq: int | None = None,
        opt_start_time: Any = None,
        headers_only: bool = False,
        replay_policy: str = "instant",
        inactive_threshold: float | None = None,
        max_reset_attempts: int | None = None,
        metadata: dict[str, str] | None = None,
        name_prefix: str | None = None,
    ) -> OrderedConsumer:
        """A consumer that delivers each stream message once, in order, and recreates
        itself after a gap, a missed heartbeat, a deleted consumer or a reconnect.

        The rest as nats.go's ``OrderedConsumerConfig``: ``replay_policy``
        (``"instant"`` or ``"original"``: at the pace they were stored),
        ``inactive_threshold`` (seconds the server keeps an idle consumer; default 5
        minutes), ``max_reset_attempts`` (tries at making the consumer, each time it is
        made again, before the read fails; None: until the read's timeout),
        ``metadata`` of the consumers and ``name_prefix`` (they are named
        ``<name_prefix>_<n>``; None: names the server picks).

        Raises:
            InvalidArgumentError: a value one of these cannot take.
        """
        return OrderedConsumer(
            self,
            check_stream_name(stream),
            filter_subjects=filter_subjects,
            deliver_policy=deliver_policy,
            opt_start_seq=opt_start_seq,
            opt_start_time=opt_start_time,
            headers_only=headers_only,
            replay_policy=replay_policy,
            inactive_threshold=inactive_threshold,
            max_reset_attempts=max_reset_attempts,
            metadata=metadata,
            name_prefix=name_prefix,
        )

    # --- publishing -------------------------------------------------------------------

    def publish(
        self,
        subject: str,
        payload: bytes = b"",
        *,
        headers: Headers = None,
        timeout: float | None = None,
        msg_id: str | None = None,
        expected_stream: str | None = None,
        expected_last_seq: int | None = None,
        expected_last_subject_seq: int | None = None,
        expected_last_msg_id: str | None = None,
        retry_attempts: int = d.DEFAULT_JS_PUBLISH_RETRY_ATTEMPTS,
        retry_wait: float = d.DEFAULT_JS_PUBLISH_RETRY_WAIT,
        ttl: float | str | None = None,
        expected_last_subject_seq_subject: str | None = None,
    ) -> PubAck:
        """Publishes to a stream and waits for its acknowledgement.

        ``expected_last_subject_seq`` checks the last sequence of the message's subject,
        or, with ``expected_last_subject_seq_subject`` (a filter, wildcards allowed), of
        that subject (nats-server 2.12+). ``timeout`` applies to each attempt; only "no
        responders" (no stream, or its leader changing) is retried, a timeout is not
        (without ``msg_id`` a retry could store the message twice). ``ttl``: seconds the
        message lives (>= 1, kept whole) or ``"never"``, sent as ``Nats-TTL``
        (per-message TTL, ADR-43; the stream needs ``allow_msg_ttl``).

        Raises:
            NoStreamResponseError: no stream stores the subject (after the retries).
            WrongLastSequenceError, WrongLastMsgIdError, StreamNotMatchError: an
                expectation did not hold.
            PublishAckTimeoutError: no acknowledgement in time.
            MsgTTLDisabledError: ``ttl`` to a stream without ``allow_msg_ttl``.
        """
        publisher = self._publisher
        timeout = publisher.check_options(timeout, retry_attempts, retry_wait)
        merged = js_headers(
            headers,
            msg_id,
            expected_stream,
            expected_last_seq,
            expected_last_subject_seq,
            expected_last_msg_id,
            ttl,
            expected_last_subject_seq_subject,
        )
        return publisher.publish(subject, payload, merged, timeout, retry_attempts, retry_wait)

    def publish_scheduled(
        self,
        subject: str,
        data: bytes = b"",
        *,
        schedule: datetime | str,
        target: str,
        ttl: float | str | None = None,
        source: str | None = None,
        time_zone: str | None = None,
        headers: Headers = None,
        timeout: float | None = None,
    ) -> PubAck:
        """Stores a schedule (ADR-51): the server publishes ``data`` to ``target`` then.

        ``subject`` holds the schedule (one per subject: publishing there again replaces
        it); ``target`` is another subject of the same stream, which needs
        ``allow_msg_schedules`` (nats-server 2.12+). The produced messages carry
        ``data`` and ``headers``. To stop a schedule, remove its message:
        ``js.stream(name).purge(subject=subject)``. ``nats_sync.jetstream._publishing.schedule``
        says how it works.

        Args:
            subject: the schedule's own subject.
            data: the body of the produced messages.
            schedule: an aware ``datetime`` (once, then the schedule is gone),
                ``"@at <RFC 3339>"``, ``"@every 5m"`` (a Go duration, >= 1s),
                ``"@hourly"`` (or ``@daily``, ``@weekly``...) or a 6-field cron
                (seconds first), all in UTC.
            target: where the server publishes (not ``subject``, no wildcards).
            ttl: the produced messages' TTL, as ``publish``'s (``Nats-Schedule-TTL``;
                the stream needs ``allow_msg_ttl``).
            source: publish the last message stored on this subject instead of
                ``data`` (``data`` when there is none).
            time_zone: an IANA zone (``Europe/Amsterdam``) for a cron schedule
                (nats-server 2.14+).
            headers: headers of the produced messages.
            timeout: seconds to wait for the ack (the context's when None).

        Raises:
            InvalidArgumentError: a naive datetime, a malformed schedule, a bad target,
                source, ttl or time_zone (nothing sent).
            SchedulesNotEnabledError: the stream has no ``allow_msg_schedules``.
            ScheduleInvalidError: the server refused the schedule.
            NoStreamResponseError: no stream stores ``subject``.
        """
        return publish_scheduled(
            self,
            subject,
            data,
            schedule=schedule,
            target=target,
            ttl=ttl,
            source=source,
            time_zone=time_zone,
            headers=headers,
            timeout=timeout,
        )

    def publish_async(
        self,
        subject: str,
        payload: bytes = b"",
        *,
        headers: Headers = None,
        timeout: float | None = None,
        msg_id: str | None = None,
        expected_stream: str | None = None,
        expected_last_seq: int | None = None,
        expected_last_subject_seq: int | None = None,
        expected_last_msg_id: str | None = None,
        retry_attempts: int = d.DEFAULT_JS_PUBLISH_RETRY_ATTEMPTS,
        retry_wait: float = d.DEFAULT_JS_PUBLISH_RETRY_WAIT,
        ttl: float | str | None = None,
        expected_last_subject_seq_subject: str | None = None,
    ) -> Future[PubAck]:
        """Publishes without waiting; the future gets the acknowledgement or the error.

        At most ``max_pending_acks`` acknowledgements are awaited at once; beyond that
        the caller waits up to ``stall_wait``, then gets ``TooManyStalledMsgsError``.
        The future fails with ``PublishAckTimeoutError`` when no ack came within
        ``timeout`` (not retried), ``NoStreamResponseError`` after the retries,
        the stream's refusal (``WrongLastSequenceError``, ...) or
        ``ConnectionClosedError`` when the client closes first. Done-callbacks run on
        the client's callback thread, in order, never on the reader: keep them short;
        they may publish again. ``ttl`` as with ``publish``.

        Raises:
            TooManyStalledMsgsError: no room within ``stall_wait``.
            InvalidArgumentError: a keyword has a value it cannot take.
            ConnectionClosedError: the client is closed.
        """
        return self._publisher.publish_async(
            subject,
            payload,
            headers=headers,
            timeout=timeout,
            msg_id=msg_id,
            expected_stream=expected_stream,
            expected_last_seq=expected_last_seq,
            expected_last_subject_seq=expected_last_subject_seq,
            expected_last_msg_id=expected_last_msg_id,
            retry_attempts=retry_attempts,
            retry_wait=retry_wait,
            ttl=ttl,
            expected_last_subject_seq_subject=expected_last_subject_seq_subject,
        )

    def publish_async_pending(self) -> int:
        """How many ``publish_async`` acknowledgements are still awaited."""
        return self._publisher.pending()

    def publish_async_completed(self, timeout: float | None = None) -> None:
        """Waits until every ``publish_async`` so far has its outcome.

        Raises:
            TimeoutError: some are still awaited after ``timeout`` seconds.
        """
        self._publisher.completed(timeout)

    def fast_publisher(
        self,
        *,
        flow: int = 100,
        max_outstanding_acks: int = 2,
        continue_on_gap: bool = False,
        ack_timeout: float | None = None,
        error_cb: Callable[[JetStreamError], None] | None = None,
    ) -> FastPublisher:
        """A fast-ingest batch (ADR-50; nats-server 2.14+, the stream needs
        ``allow_batched``): messages flow with an ack every ``flow`` or so, not one each.

        With gap ``fail`` (``continue_on_gap=False``, the default) a lost or refused
        message ends the batch: the stream holds its messages in order without a hole,
        the next ``add`` raises ``BatchClosedError`` and ``commit``/``close`` return the
        server's count of what was stored. With gap ``ok`` gaps and refusals go to
        ``error_cb`` (``BatchGapError``, ``BatchMessageError``) and the batch goes on.

        Args:
            flow: the most messages per ack (the server may choose fewer).
            max_outstanding_acks: acks awaited before ``add`` waits (1..10).
            continue_on_gap: gap ``ok`` instead of ``fail``.
            ack_timeout: seconds without an ack before ``add``/``commit`` give up
                (None: the context's timeout).
            error_cb: gets each gap and refused message, on the caller's thread.

        Raises:
            InvalidArgumentError: an argument has a value it cannot take.
        """
        return FastPublisher(
            self,
            flow=flow,
            max_outstanding_acks=max_outstanding_acks,
            continue_on_gap=continue_on_gap,
            ack_timeout=ack_timeout,
            error_cb=error_cb,
        )

    def publish_batch(
        self,
        subject: str,
        payloads: Sequence[bytes],
        *,
        headers: Headers = None,
        timeout: float | None = None,
    ) -> list[PubAck | Exception]:
        """Publishes many messages pipelined; each item is its ack or its error.

        At most ``max_pending_acks`` are awaited at once; nothing is retried (a late
        retry would reorder the stream) and one item's failure never raises.
        """
        return self._publisher.publish_batch(subject, payloads, headers=headers, timeout=timeout)

    def atomic_batch(
        self, *, timeout: float | None = None, max_messages: int = JS_ATOMIC_MAX_MESSAGES
    ) -> AtomicBatch:
        """Starts an atomic batch (ADR-50, nats-server 2.12+; the stream needs
        ``allow_atomic``): the stream stores every message added, at the commit, or none.

        Nothing is sent until the first ``add``, which checks that the stream takes
        atomic batches. Use it as a context manager: leaving the block without
        ``commit()`` discards the batch:

        ```python
        with js.atomic_batch() as batch:
            batch.add("orders.1", b"one")
            batch.add("orders.2", b"two", expected_last_subject_seq=0)
            ack = batch.commit()          # BatchAck(stream, seq, batch_id, count)
        ```

        Args:
            timeout: seconds to wait for the first message's reply and the commit's
                acknowledgement (the context's when None).
            max_messages: messages a batch may hold: the server's ``max_batch_size``
                (1,000 unless its config says otherwise); beyond it ``add`` raises
                ``BatchTooLargeError`` without sending.

        Raises:
            InvalidArgumentError: ``timeout`` or ``max_messages`` is not valid.
        """
        return AtomicBatch(self, timeout=timeout, max_messages=max_messages)

    def publish_atomic(
        self,
        messages: Iterable[tuple[str, bytes] | tuple[str, bytes, Headers]],
        *,
        timeout: float | None = None,
        max_messages: int = JS_ATOMIC_MAX_MESSAGES,
        ttl: float | str | None = None,
    ) -> BatchAck:
        """Publishes messages as one atomic batch: the stream stores all, or none.

        Every item is checked before anything is sent; the last one carries the commit.
        The stream needs ``allow_atomic`` (nats-server 2.12+).

        Args:
            messages: ``(subject, data)`` or ``(subject, data, headers)`` items, in
                order (``Nats-Msg-Id`` and ``Nats-Expected-*`` headers work as with
                ``publish``; ``Nats-Expected-Last-Sequence`` only on the first).
            timeout: seconds to wait for the first reply and the commit's
                acknowledgement (the context's when None).
            max_messages: the server's per-batch limit (1,000 by default).
            ttl: seconds every message lives (>= 1) or ``"never"`` (``Nats-TTL``).

        Returns:
            The ``BatchAck``: ``stream``, ``seq`` of the last message, ``batch_id`` and
            ``count``.

        Raises:
            InvalidArgumentError: no message, or an item that is not one (nothing sent).
            BatchTooLargeError: more than ``max_messages`` (nothing sent), or the
                server's smaller limit (nothing stored).
            AtomicBatchNotEnabledError: the stream does not allow atomic batches.
            WrongLastSequenceError, BatchDuplicateMsgIdError, APIError: the server
                refused the batch; nothing is stored.
            PublishAckTimeoutError: no acknowledgement of the commit in time: the batch
                may or may not be stored.
        """
        return publish_atomic(self, messages, timeout=timeout, max_messages=max_messages, ttl=ttl)

    def counter(self, stream: str, timeout: float | None = None) -> Counter:
        """The counters of ``stream`` (ADR-49, nats-server 2.12+): see :class:`Counter`.

        Raises:
            StreamNotFoundError: no such stream.
            CounterNotEnabledError: the stream has no ``allow_msg_counter``.
        """
        return Counter(self, self.stream(stream, timeout))

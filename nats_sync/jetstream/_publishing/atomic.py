"""Atomic batches (ADR-50, nats-server 2.12+): a stream stores every message of a batch,
or none of them.

How it works on the wire: each message of a batch carries ``Nats-Batch-Id`` (a random
32-character hex id; the server allows up to 64) and ``Nats-Batch-Sequence`` (1, 2, ...).
The server stages the messages and stores them only when the last one arrives with
``Nats-Batch-Commit: 1`` (a message that is stored as well) or ``Nats-Batch-Commit: eob``
(an end-of-batch marker that is not stored; nats-server 2.14+). It runs the checks
(``expected_last_subject_seq``, ``msg_id`` duplicates, TTL allowed, ...) for the whole
batch at the commit, under the stream's lock, and answers the commit with a PubAck
holding ``"batch"`` and ``"count"``, or with one error for the batch: nothing stored.

- The first message is a request: its empty reply (or error) tells whether the stream
  takes atomic batches at all (``AtomicBatchNotEnabledError``, 10174), before the caller
  sends the rest.
- Middle messages: the ADR lets them go without a reply subject. We give each one a reply
  subject but do not wait for it (pipelined): the server answers an empty ack, or an
  error when it refused that very message (too large for the stream, no stream on its
  subject, the stream sealed, ...). A refused message leaves a gap, so the server will
  abandon the batch anyway and answer the commit only "batch incomplete" (10176); the
  pipelined replies let us raise the real cause instead, at the next ``add`` (the batch
  ends there) or at the commit. Waiting for each reply would cost a round trip per
  message; sending none would hide the cause. Measured on one machine with a local
  server, 1,000 messages of 128 bytes: 30-36 ms with the replies, 22-25 ms without.
- The commit waits for its PubAck. When it comes late (``timeout``) the outcome is
  unknown: ``PublishAckTimeoutError`` says so (the only case where we cannot tell).
- Discard: the server has no discard request; a batch never committed is dropped by the
  server after 10 s without messages, and nothing of it is stored. ``discard()`` never
  sends the commit, which alone guarantees that nothing is stored; it also sends one
  message with a sequence gap (``Nats-Batch-Sequence`` = last + 2, no reply, empty
  payload). A gap makes the server abandon the batch at once (ADR-50: "any gap is
  detected the batch will be rejected"), so the batch's staged messages and its place
  among the 50 batches a stream may have in flight are freed now, not 10 s later. That
  message, like the end-of-batch commit, goes to the first message's subject: the
  stream confirmed it is one of its own. A batch that failed is discarded the same way.
- Limit: a batch holds at most 1,000 messages by default (the server's
  ``jetstream { limits { max_batch_size } }``; it is not published to clients). ``add``
  and ``commit`` refuse the message past ``max_messages`` (1,000 unless given) with
  ``BatchTooLargeError`` before sending it; a server with a smaller limit answers 10199,
  raised as the same error.
- ``expected_last_seq`` is checked by the server against the stream before the batch, so
  it is only allowed on the first message; later ones are refused here.

Threads and state: nothing here starts a thread. A batch owns one subscription without a
callback on ``<inbox>.*`` (made at the first message, ended when the batch ends); the
client's reader thread queues the replies there, and the caller's thread reads them (at
each ``add`` without waiting, at the first message and the commit waiting up to
``timeout``). The state (``_state``: open / committed / discarded / failed, the cause of
a failure, the count of messages sent, the first error a middle message got) is guarded
by ``_lock``, so a batch may be used from any thread, one call at a time.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any

from nats_sync import _defaults as d
from nats_sync._core.components.subscription import Subscription, unsubscribe_quietly
from nats_sync._core.validate import check_int, check_text, check_timeout
from nats_sync.errors import Error, InvalidArgumentError, TimeoutError
from nats_sync.jetstream._publishing.batch_replies import (
    status_error,
    subscribe_replies,
)
from nats_sync.jetstream._streams.wire import Headers, decode_reply, js_headers, ttl_header
from nats_sync.jetstream.api import BatchAck
from nats_sync.jetstream.errors import (
    BatchClosedError,
    BatchCommitInvalidError,
    BatchTooLargeError,
    JetStreamError,
    PublishAckTimeoutError,
)
from nats_sync.msg import Msg

if TYPE_CHECKING:
    from nats_sync.jetstream._streams.context_protocol import JsContext

__all__ = ["AtomicBatch", "publish_atomic"]


_BATCH_ID = "Nats-Batch-Id"
_BATCH_SEQ = "Nats-Batch-Sequence"
_BATCH_COMMIT = "Nats-Batch-Commit"
#: The batch's own headers: the user's headers cannot replace them.
_BATCH_HEADERS = frozenset(name.lower() for name in (_BATCH_ID, _BATCH_SEQ, _BATCH_COMMIT))

_OPEN = "open"
_COMMITTED = "committed"
_DISCARDED = "discarded"
_FAILED = "failed"


def _too_large(limit: int) -> BatchTooLargeError:
    detail = (
        f"an atomic batch holds at most {limit} messages (the server's "
        "max_batch_size, 1,000 by default); nothing more was sent"
    )
    return BatchTooLargeError(detail, code=400, err_code=10199, description=detail)


class AtomicBatch:
    """An atomic batch: every message is stored by the stream at the commit, or none is.

    Made by :meth:`JetStream.atomic_batch`. Use it as a context manager: leaving the
    block without :meth:`commit` discards the batch (nothing stored):

    ```python
    with js.atomic_batch() as batch:
        batch.add("orders.1", b"...")
        batch.add("orders.2", b"...", expected_last_subject_seq=0)
        ack = batch.commit()          # -> BatchAck(stream, seq, batch_id, count)
    ```

    The stream needs ``allow_atomic``. A batch holds at most ``max_messages`` (the
    server's limit, 1,000 by default) and is dropped by the server when no message came
    for 10 s. Safe from any thread, one call at a time.

    Args:
        js: the JetStream context it publishes through.
        timeout: seconds to wait for the first message's reply and for the commit's
            acknowledgement (the context's timeout when None).
        max_messages: messages allowed in the batch (the server's ``max_batch_size``).

    Raises:
        InvalidArgumentError: ``timeout`` or ``max_messages`` is not valid.
    """

    def __init__(
        self,
        js: JsContext,
        *,
        timeout: float | None = None,
        max_messages: int = d.JS_ATOMIC_MAX_MESSAGES,
    ) -> None:
        if timeout is not None:
            check_timeout(timeout)
        check_int(max_messages, "max_messages", 1)
        self._client = js.client
        self._timeout = js.timeout if timeout is None else float(timeout)
        self._max_messages = max_messages
        self._id = uuid.uuid4().hex
        self._lock = threading.Lock()
        self._state = _OPEN
        self._cause: BaseException | None = None
        #: The highest batch sequence published (a message refused before sending has none).
        self._seq = 0
        #: Messages taken into the batch (the first counts once its reply is an ack).
        self._added = 0
        #: Whether the server may hold staged messages of this batch (for discard).
        self._staged = False
        #: The subject of each message sent, by batch sequence - 1 (for error messages).
        self._subjects: list[str] = []
        #: The first error a middle message was answered with.
        self._refused: BaseException | None = None
        self._sub: Subscription | None = None
        self._prefix = ""

    # --- public ---------------------------------------------------------------------------

    @property
    def batch_id(self) -> str:
        """The batch's id (``Nats-Batch-Id``)."""
        return self._id

    @property
    def size(self) -> int:
        """How many messages were added so far (an end-of-batch commit adds none)."""
        return self._added

    @property
    def is_closed(self) -> bool:
        """Whether the batch ended: committed, discarded, or failed."""
        return self._state != _OPEN

    def add(
        self,
        subject: str,
        data: bytes = b"",
        *,
        headers: Headers = None,
        msg_id: str | None = None,
        expected_last_seq: int | None = None,
        expected_last_subject_seq: int | None = None,
        ttl: float | str | None = None,
        expected_last_subject_seq_subject: str | None = None,
    ) -> None:
        """Sends one message of the batch; it is stored only when the batch commits.

        The first message is a request: it waits (up to ``timeout``) for the stream to
        accept the batch. Later ones do not wait; an error the server answered for an
        earlier message is raised by the next ``add`` (the batch then ends, nothing
        stored). A message refused here, before sending (a bad argument, the limit),
        leaves the batch open.

        Args:
            subject: a subject of the stream.
            data: the payload.
            headers: extra headers (the batch's own ``Nats-Batch-*`` are set here).
            msg_id: ``Nats-Msg-Id``: the commit fails (``BatchDuplicateMsgIdError``)
                when the stream holds that id within its duplicate window, or when the
                batch holds it twice.
            expected_last_seq: the stream's last sequence before the batch (only on the
                first message).
            expected_last_subject_seq: the last sequence of ``subject`` before the batch
                (0: none); not for a subject that an earlier message of the batch writes.
            ttl: seconds the message lives (>= 1, whole seconds kept) or "never"; the
                stream needs ``allow_msg_ttl``.
            expected_last_subject_seq_subject: the subject (a filter, wildcards
                allowed) whose last sequence ``expected_last_subject_seq`` checks, in
                place of ``subject`` (nats-server 2.12+).

        Raises:
            BatchClosedError: the batch ended (committed, discarded or failed).
            BatchTooLargeError: the batch holds ``max_messages`` already (nothing sent).
            InvalidArgumentError: a bad argument, or ``expected_last_seq`` on a later
                message (nothing sent).
            AtomicBatchNotEnabledError: the stream does not allow atomic batches (first
                message).
            NoStreamResponseError: no stream stores the subject (first message).
            PublishAckTimeoutError: the first message got no reply in time.
            APIError: the server refused this (first) or an earlier message; the
                batch ended and nothing is stored.
        """
        with self._lock:
            self._check_open()
            prepared = self._prepare(
                subject,
                headers,
                msg_id,
                expected_last_seq,
                expected_last_subject_seq,
                ttl,
                expected_last_subject_seq_subject,
            )
            if self._added + 1 > self._max_messages:
                raise _too_large(self._max_messages)
            if self._seq == 0:
                self._start(subject, data, prepared)
                return
            self._take_replies()
            if self._refused is not None:
                self._fail(self._refused)
                raise self._refused
            self._send(subject, data, prepared)
            self._added += 1

    def commit(
        self,
        subject: str | None = None,
        data: bytes | None = None,
        *,
        headers: Headers = None,
        msg_id: str | None = None,
        expected_last_seq: int | None = None,
        expected_last_subject_seq: int | None = None,
        ttl: float | str | None = None,
        expected_last_subject_seq_subject: str | None = None,
    ) -> BatchAck:
        """Commits the batch: the stream stores every message, or none.

        With ``subject``, one last message (the keywords as :meth:`add`) is sent with
        the commit and stored too. Without, the commit is an end-of-batch marker that is
        not stored (nats-server 2.14+; an older server answers
        ``BatchCommitInvalidError``: pass the last message here instead).

        Returns:
            The ``BatchAck``: the stream, ``seq`` of the last message stored, the
            ``batch_id`` and ``count`` (the messages stored).

        Raises:
            BatchClosedError: the batch ended already.
            InvalidArgumentError: nothing to commit (no message added and none given),
                ``data``/keywords without ``subject``, or a bad argument.
            BatchTooLargeError: the last message would exceed ``max_messages``.
            WrongLastSequenceError: the server refused the batch; nothing is stored.
            BatchDuplicateMsgIdError: the server refused the batch; nothing is stored.
            BatchIncompleteError: the server refused the batch; nothing is stored.
            APIError: the server refused the batch otherwise; nothing is stored.
            NoStreamResponseError: no stream stores a message's subject; nothing stored.
            PublishAckTimeoutError: no acknowledgement within ``timeout``: the batch may
                or may not be stored.
        """
        with self._lock:
            self._check_open()
            if subject is None:
                if (
                    data is not None
                    or headers is not None
                    or msg_id is not None
                    or (
                        expected_last_seq is not None
                        or ttl is not None
                        or expected_last_subject_seq is not None
                        or expected_last_subject_seq_subject is not None
                    )
                ):
                    raise InvalidArgumentError(
                        "commit() without a subject sends no message: pass the subject "
                        "with data, headers or the other keywords"
                    )
                if self._added == 0:
                    raise InvalidArgumentError(
                        "the batch is empty: add a message or commit with one"
                    )
                prepared: dict[str, Any] = {_BATCH_ID: self._id, _BATCH_COMMIT: "eob"}
                # The first message's subject: the stream confirmed it is one of its own.
                subject = self._subjects[0]
                payload = b""
            else:
                prepared = self._prepare(
                    subject,
                    headers,
                    msg_id,
                    expected_last_seq,
                    expected_last_subject_seq,
                    ttl,
                    expected_last_subject_seq_subject,
                )
                if self._added + 1 > self._max_messages:
                    raise _too_large(self._max_messages)
                prepared[_BATCH_COMMIT] = "1"
                payload = b"" if data is None else data
            if self._seq:
                self._take_replies()
                if self._refused is not None:
                    self._fail(self._refused)
                    raise self._refused
            return self._commit(subject, payload, prepared)

    def discard(self) -> None:
        """Ends the batch without committing: nothing of it is stored.

        Does nothing when the batch ended already (so it is safe after ``commit``).
        The server is told at once (see the module's docstring); without that message
        it would drop the batch after 10 s, equally storing nothing.
        """
        with self._lock:
            if self._state != _OPEN:
                return
            self._state = _DISCARDED
            self._end()

    def __enter__(self) -> AtomicBatch:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.discard()

    def __repr__(self) -> str:
        return f"<nats_sync.AtomicBatch {self._id} {self._state}, {self._added} messages>"

    # --- sending ----------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._state == _OPEN:
            return
        error = BatchClosedError(f"the atomic batch {self._id} was {self._state}")
        raise error from self._cause

    def _prepare(
        self,
        subject: str,
        headers: Headers,
        msg_id: str | None,
        expected_last_seq: int | None,
        expected_last_subject_seq: int | None,
        ttl: float | str | None,
        expected_last_subject_seq_subject: str | None,
    ) -> dict[str, Any]:
        """The headers of one message but the batch sequence; validates everything that
        can be validated before sending."""
        check_text(subject, "subject")
        if headers is not None and not isinstance(headers, Mapping):
            raise InvalidArgumentError(
                f"headers must be a mapping of name -> value, got {type(headers).__name__}"
            )
        if expected_last_seq is not None and self._added:
            raise InvalidArgumentError(
                "expected_last_seq is only allowed on the first message of an atomic batch "
                "(the server checks it against the stream as it was before the batch); "
                "use expected_last_subject_seq on later messages"
            )
        merged = dict(
            js_headers(
                headers,
                msg_id=msg_id,
                expected_last_seq=expected_last_seq,
                expected_last_subject_seq=expected_last_subject_seq,
                ttl=ttl,
                expected_last_subject_seq_subject=expected_last_subject_seq_subject,
            )
            or {}
        )
        for name in list(merged):
            if name.lower() in _BATCH_HEADERS:
                raise InvalidArgumentError(f"header {name!r} is the batch's own; the batch sets it")
        merged[_BATCH_ID] = self._id
        return merged

    def _send(self, subject: str, data: bytes, headers: dict[str, Any]) -> None:
        """Publishes the next batch message (its reply subject ``<prefix><seq>``)."""
        seq = self._seq + 1
        headers[_BATCH_SEQ] = str(seq)
        if self._sub is None:
            self._prefix = self._client.new_inbox() + "."
            # No message limit: one reply per message sent, at most max_messages + 1.
            self._sub = subscribe_replies(self._client, self._prefix + "*", 0)
        self._client.publish(subject, data, self._prefix + str(seq), headers)
        self._seq = seq
        self._subjects.append(subject)
        self._staged = True

    def _start(self, subject: str, data: bytes, headers: dict[str, Any]) -> None:
        """The first message: a request; its reply is empty, or the server's error."""
        self._send(subject, data, headers)
        try:
            reply = self._wait_for(1)
        except Error as closed:  # the client closed meanwhile
            self._fail(closed)
            raise
        if reply is None:
            error: BaseException = PublishAckTimeoutError(
                f"no reply to the first message of atomic batch {self._id} on {subject!r} "
                f"within {self._timeout}s; the batch was discarded (nothing stored)"
            )
            self._fail(error)
            raise error
        failure = self._refusal(reply, 1)
        if failure is not None:
            self._staged = False  # the server refused to start the batch
            self._fail(failure)
            raise failure
        self._added = 1

    def _commit(self, subject: str, data: bytes, headers: dict[str, Any]) -> BatchAck:
        eob = headers[_BATCH_COMMIT] == "eob"
        self._send(subject, data, headers)
        try:
            reply = self._wait_for(self._seq)
        except Error as closed:  # the client closed meanwhile: the outcome is unknown
            self._fail(closed)
            raise
        if reply is None:
            if self._refused is not None:  # an earlier message failed: nothing stored
                self._fail(self._refused)
                raise self._refused
            error: BaseException = PublishAckTimeoutError(
                f"no acknowledgement of the commit of atomic batch {self._id} within "
                f"{self._timeout}s: the batch may or may not be stored (its messages carry "
                f"Nats-Batch-Id {self._id})"
            )
            self._state = _FAILED
            self._cause = error
            self._staged = False  # committed, or gone: a gap message would change nothing
            self._end()
            raise error
        self._staged = False  # the server ended the batch either way
        try:
            ack = self._batch_ack(reply)
        except Error as refused:
            if self._refused is not None:
                # A middle message's own error is the real cause; the commit's (often
                # "batch incomplete") stays attached as its context.
                self._fail(self._refused)
                raise self._refused  # noqa: B904
            self._fail(refused)
            if eob and isinstance(refused, BatchCommitInvalidError):
                hint = (
                    f"{refused.description}: the end-of-batch commit needs "
                    "nats-server 2.14+; commit with the last message instead (nothing "
                    "was stored)"
                )
                raise BatchCommitInvalidError(
                    hint, code=refused.code, err_code=refused.err_code, description=hint
                ) from refused
            raise
        if not eob:
            self._added += 1
        self._state = _COMMITTED
        self._end()
        return ack

    def _batch_ack(self, reply: Msg) -> BatchAck:
        failure = self._refusal(reply, self._seq)
        if failure is not None:
            raise failure
        decoded = decode_reply(reply.data, self._subjects[-1])
        stream = decoded.get("stream")
        seq = decoded.get("seq")
        if not isinstance(stream, str) or not isinstance(seq, int) or isinstance(seq, bool):
            raise JetStreamError(
                f"the reply to the commit of atomic batch {self._id} is "
                f"not an acknowledgement: {reply.data[:80]!r}"
            )
        return BatchAck.from_api(decoded, self._id)

    # --- replies ------------------------------------------------------------------------

    def _wait_for(self, seq: int) -> Msg | None:
        """The reply to message ``seq``, noting the refusals of others meanwhile; None
        after ``timeout``."""
        sub = self._sub
        assert sub is not None  # made by the first _send
        deadline = time.monotonic() + self._timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            try:
                msg = sub.next_msg(remaining)
            except TimeoutError:
                return None
            if self._reply_seq(msg) == seq:
                return msg
            self._note(msg)

    def _take_replies(self) -> None:
        """Reads the replies queued so far without waiting."""
        sub = self._sub
        if sub is None:
            return
        while sub.pending_msgs:
            try:
                msg = sub.next_msg(0)
            except TimeoutError:
                return
            self._note(msg)

    def _note(self, msg: Msg) -> None:
        """Keeps the first refusal among the middle messages' replies."""
        if self._refused is None:
            self._refused = self._refusal(msg, self._reply_seq(msg))

    def _reply_seq(self, msg: Msg) -> int:
        token = msg.subject[len(self._prefix) :]
        return int(token) if token.isdigit() else 0

    def _refusal(self, msg: Msg, seq: int) -> BaseException | None:
        """The error a reply carries (None for an ack, empty or a PubAck)."""
        if msg.status is not None:
            subject = self._subjects[seq - 1] if 0 < seq <= len(self._subjects) else "?"
            what = f"message {seq} of atomic batch {self._id}"
            return status_error(msg, subject, what, what, "; nothing of the batch is stored")
        if not msg.data:
            return None
        try:
            decode_reply(msg.data, msg.subject)
        except Error as error:
            return error
        return None

    # --- ending -----------------------------------------------------------------------------

    def _fail(self, cause: BaseException) -> None:
        self._state = _FAILED
        self._cause = cause
        self._end()

    def _end(self) -> None:
        """Tells the server to drop what it staged (a sequence gap), if anything, and ends
        the reply subscription. Failures are ignored: unsent, the commit is missing all
        the same and the server drops the batch after 10 s."""
        if self._staged and self._subjects:
            self._staged = False
            try:
                self._client.publish(
                    self._subjects[0],
                    b"",
                    "",
                    {_BATCH_ID: self._id, _BATCH_SEQ: str(self._seq + 2)},
                )
            except Error:
                pass
        sub, self._sub = self._sub, None
        unsubscribe_quietly(sub)


def publish_atomic(
    js: JsContext,
    messages: Iterable[Any],
    *,
    timeout: float | None = None,
    max_messages: int = d.JS_ATOMIC_MAX_MESSAGES,
    ttl: float | str | None = None,
) -> BatchAck:
    """See :meth:`JetStream.publish_atomic`: checks every item (and ``ttl``), then sends
    them as one batch, the last one with the commit."""
    if isinstance(messages, (bytes, bytearray, memoryview, str, Mapping)):
        raise InvalidArgumentError(
            "messages must be a sequence of (subject, data) or (subject, data, headers), "
            f"got one {type(messages).__name__}"
        )
    items = list(messages)
    if not items:
        raise InvalidArgumentError("publish_atomic needs at least one message")
    check_int(max_messages, "max_messages", 1)
    if len(items) > max_messages:
        raise _too_large(max_messages)
    checked = [_check_item(item, index) for index, item in enumerate(items)]
    if ttl is not None:
        ttl_header(ttl)  # a bad value is refused before the first message goes
    with AtomicBatch(js, timeout=timeout, max_messages=max_messages) as batch:
        for subject, data, headers in checked[:-1]:
            batch.add(subject, data, headers=headers, ttl=ttl)
        subject, data, headers = checked[-1]
        return batch.commit(subject, data, headers=headers, ttl=ttl)


def _check_item(item: Any, index: int) -> tuple[str, bytes, Headers]:
    """One ``publish_atomic`` item as (subject, data, headers), or InvalidArgumentError."""
    if not isinstance(item, (tuple, list)) or len(item) not in (2, 3):
        raise InvalidArgumentError(
            f"messages[{index}] must be (subject, data) or (subject, data, headers), "
            f"got {item!r:.80}"
        )
    subject, data = item[0], item[1]
    headers = item[2] if len(item) == 3 else None
    check_text(subject, f"the subject of messages[{index}]")
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise InvalidArgumentError(
            f"the data of messages[{index}] must be bytes, got {type(data).__name__}"
        )
    if headers is not None and not isinstance(headers, Mapping):
        raise InvalidArgumentError(
            f"the headers of messages[{index}] must be a mapping, got {type(headers).__name__}"
        )
    return subject, bytes(data), headers

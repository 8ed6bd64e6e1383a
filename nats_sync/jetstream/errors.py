"""JetStream errors: one tree under :class:`nats_sync.Error`, mapped from API replies.

The JetStream API answers a failed call with ``{"error": {"code", "err_code",
"description"}}``. :func:`api_error` picks the class by ``err_code`` first (the
description changes between server versions), then by the HTTP-like ``code``; the
specific classes derive from the generic ones (``StreamNotFoundError`` is a
``NotFoundError``), so ``except NotFoundError`` written for nats-py keeps working.

As in ``nats_sync.errors``, the detail is the one positional argument and the other
fields are keyword-only attributes, so every error pickles (Spark ships them).
"""

from __future__ import annotations

from typing import Any

from nats_sync._core.validate import int_or_zero
from nats_sync.errors import Error, InvalidArgumentError, TimeoutError

__all__ = [
    "APIError",
    "APIServerError",
    "AtomicBatchNotEnabledError",
    "AtomicBatchTooManyInflightError",
    "BadBucketError",
    "BadObjectMetaError",
    "BadRequestError",
    "BatchClosedError",
    "BatchCommitInvalidError",
    "BatchDuplicateMsgIdError",
    "BatchGapError",
    "BatchIdInvalidError",
    "BatchIncompleteError",
    "BatchMessageError",
    "BatchSequenceMissingError",
    "BatchTooLargeError",
    "BatchUnsupportedHeaderError",
    "BucketNotFoundError",
    "ConsumerDeletedError",
    "ConsumerDoesNotExistError",
    "ConsumerExistsError",
    "ConsumerNameInUseError",
    "ConsumerNotFoundError",
    "CounterBrokenError",
    "CounterError",
    "CounterIncrementInvalidError",
    "CounterIncrementMissingError",
    "CounterNotEnabledError",
    "CounterNotFoundError",
    "CounterPayloadError",
    "DigestMismatchError",
    "FastBatchInvalidPatternError",
    "FastBatchNotEnabledError",
    "FastBatchTooManyInflightError",
    "FastBatchUnknownError",
    "InvalidBucketNameError",
    "InvalidConsumerNameError",
    "InvalidGroupNameError",
    "InvalidKeyError",
    "InvalidObjectNameError",
    "InvalidPriorityGroupError",
    "InvalidStreamNameError",
    "JetStreamError",
    "JetStreamNotEnabledError",
    "KeyDeletedError",
    "KeyHistoryTooLargeError",
    "KeyNotFoundError",
    "KeyValueError",
    "KeyWrongLastSequenceError",
    "LimitMarkersNotSupportedError",
    "MaximumConsumersLimitError",
    "MessageNotFoundError",
    "MirrorWithCountersError",
    "MissedHeartbeatError",
    "MsgAlreadyAckdError",
    "MsgTTLDisabledError",
    "MsgTTLInvalidError",
    "NoHeartbeatError",
    "NoKeysError",
    "NoStreamResponseError",
    "NotFoundError",
    "NotJSMessageError",
    "NotPullConsumerError",
    "NotPushConsumerError",
    "ObjectDeletedError",
    "ObjectNotFoundError",
    "ObjectStoreError",
    "OrderedConsumerConcurrentRequestsError",
    "PinIdMismatchError",
    "PriorityGroupRequiredError",
    "PriorityPolicyError",
    "PublishAckTimeoutError",
    "ScheduleInvalidError",
    "SchedulesNotEnabledError",
    "ServerError",
    "ServiceUnavailableError",
    "StatusError",
    "StreamNameAlreadyInUseError",
    "StreamNotFoundError",
    "StreamNotMatchError",
    "TooManyStalledMsgsError",
    "WrongLastMsgIdError",
    "WrongLastSequenceError",
    "api_error",
]


class JetStreamError(Error):
    """Root of every JetStream, key-value and object store error."""

    label = "jetstream error"


# --- errors the JetStream API answers with -------------------------------------------


class APIError(JetStreamError):
    """The JetStream API refused a call.

    Attributes:
        code: the HTTP-like status (400, 404, 500, 503, ...).
        err_code: the server's error number (10059 = stream not found, ...).
        description: the server's words.
    """

    label = "jetstream api error"

    def __init__(
        self, detail: str = "", *, code: int = 0, err_code: int = 0, description: str = ""
    ) -> None:
        super().__init__(detail or description)
        self.code = code
        self.err_code = err_code
        self.description = description or detail

    def __str__(self) -> str:
        if not (self.code or self.err_code):
            return super().__str__()  # raised by the client itself (e.g. KeyNotFoundError)
        return (
            f"nats: {self.label}: code={self.code} err_code={self.err_code} "
            f"description={self.description!r}"
        )


class BadRequestError(APIError):
    """400: the request was refused as it is."""


class NotFoundError(APIError):
    """404: what the call names does not exist."""


class APIServerError(APIError):
    """500: the JetStream API failed to do it (a call the server took and could not
    carry out). Not a `nats_sync.ServerError`, which is the server's ``-ERR`` on the
    connection: JetStream's refusals are all :class:`APIError`."""


#: nats-py's name for :class:`APIServerError` (``nats.js.errors.ServerError``), kept:
#: the same class. ``nats_sync.ServerError`` is another one (a ``-ERR``).
ServerError = APIServerError


class ServiceUnavailableError(APIError):
    """503: JetStream cannot answer now (or is not enabled)."""


class StreamNameAlreadyInUseError(BadRequestError):
    """10058: a stream of that name exists with a different configuration."""


class WrongLastSequenceError(BadRequestError):
    """10071 (10164 on replicated streams): an expected last sequence did not match."""


class WrongLastMsgIdError(BadRequestError):
    """10070: the expected last message id did not match."""


class StreamNotMatchError(BadRequestError):
    """10060: the subject is stored by another stream than the expected one."""


class ConsumerExistsError(BadRequestError):
    """10148: create was asked for a consumer that exists with another configuration."""


class ConsumerDoesNotExistError(BadRequestError):
    """10149: update was asked for a consumer that does not exist."""


class ConsumerNameInUseError(BadRequestError):
    """10013: the consumer name is taken."""


class MaximumConsumersLimitError(BadRequestError):
    """10026: the stream has as many consumers as it may have."""


class StreamNotFoundError(NotFoundError):
    """10059: no stream of that name."""


class ConsumerNotFoundError(NotFoundError):
    """10014: no consumer of that name on the stream."""


class MessageNotFoundError(NotFoundError):
    """10037: no stored message matches."""


class JetStreamNotEnabledError(ServiceUnavailableError):
    """10076 / 10039: JetStream is not enabled (for the server, or for this account)."""


# --- priority groups (ADR-42, 2.11): also the refusals of a pull (code 400, no err_code) ---


class InvalidPriorityGroupError(BadRequestError):
    """10160 (or a pull answered ``400 Invalid Priority Group``): the group is not one
    of the consumer's ``priority_groups``."""


class PriorityGroupRequiredError(BadRequestError):
    """A pull without ``group`` to a consumer with priority groups (``400 Priority
    Group missing``)."""


class PriorityPolicyError(BadRequestError):
    """The consumer's priority policy does not take what was asked: a pull's criteria
    of another policy (``min_pending`` without ``overflow``, a pin id without
    ``pinned_client``), or a config mixing them up (10159: a policy without groups;
    10196/10197: groups or ``priority_timeout`` without a policy; 10178: a push
    consumer)."""


class InvalidGroupNameError(BadRequestError, InvalidArgumentError):
    """10161/10162: a priority group name is empty, longer than 16 characters, or holds
    something other than ``A-Z a-z 0-9 - _ / =`` (the client checks this before
    sending; also a ``ValueError``)."""

    label = "invalid priority group name"


# --- batch publishing (ADR-50): atomic batches (2.12) and fast ingest (2.14) -------------


class AtomicBatchNotEnabledError(BadRequestError):
    """10174: the stream does not allow atomic batches (``allow_atomic``)."""


class BatchSequenceMissingError(BadRequestError):
    """10175: an atomic batch message came without its batch sequence."""


class BatchIncompleteError(BadRequestError):
    """10176: the atomic batch had a gap (or timed out) and was abandoned: nothing stored."""


class BatchUnsupportedHeaderError(BadRequestError):
    """10177: a header atomic batches do not support (``Nats-Expected-Last-Msg-Id``)."""


class BatchIdInvalidError(BadRequestError):
    """10179 (atomic) / 10207 (fast ingest): the batch id is invalid (over 64 characters)."""


class BatchTooLargeError(BadRequestError):
    """10199: the atomic batch holds more messages than the server allows (1,000 by default).

    Also raised by the client before sending anything where it knows the limit.
    """


class BatchCommitInvalidError(BadRequestError):
    """10200: the atomic batch's commit header is invalid."""


class BatchDuplicateMsgIdError(BadRequestError):
    """10201: the atomic batch holds a ``msg_id`` the stream stored already (or twice)."""


class AtomicBatchTooManyInflightError(APIError):
    """10210 (429): the stream or server has as many atomic batches in flight as it allows."""


class FastBatchNotEnabledError(BadRequestError):
    """10205: the stream does not allow fast-ingest batches (``allow_batched``)."""


class FastBatchInvalidPatternError(BadRequestError):
    """10206: the fast-ingest reply subject is not one the server understands."""


class FastBatchUnknownError(BadRequestError):
    """10208: the server knows no fast-ingest batch of that id (abandoned after 10 s idle,
    or its leader changed)."""


class FastBatchTooManyInflightError(APIError):
    """10211 (429): the stream or server has as many fast-ingest batches as it allows."""


# --- per-message TTL (ADR-43, 2.11), schedules (ADR-51) and counters (ADR-49, 2.12) -------


class MsgTTLInvalidError(BadRequestError):
    """10165: the ``Nats-TTL`` value is not one the server takes (the client checks
    ``ttl=`` before sending, so this comes from headers given by hand)."""


class MsgTTLDisabledError(BadRequestError):
    """10166: a message with a TTL went to a stream without ``allow_msg_ttl``."""


class SchedulesNotEnabledError(BadRequestError):
    """10188: a message with a schedule (``Nats-Schedule``, ADR-51) went to a stream
    without ``allow_msg_schedules``."""


class ScheduleInvalidError(BadRequestError):
    """The server refused a schedule's headers (ADR-51): its pattern (10189), target
    (10190), TTL (10191), rollup (10192), source (10203), ``Nats-Scheduler`` (10212) or
    time zone (10223). ``js.publish_scheduled`` checks what it can before sending, so
    this comes from headers given by hand, or a zone the server's tzdata lacks."""


class CounterError(JetStreamError):
    """Root of the counter errors (``js.counter``, ADR-49)."""

    label = "counter error"


class CounterNotEnabledError(CounterError, BadRequestError):
    """The stream is not a counter stream (no ``allow_msg_counter``); also the
    server's 10168 for an increment sent to such a stream."""

    label = "counters not enabled"


class CounterNotFoundError(CounterError, NotFoundError):
    """The counter subject was never set (nothing stored on it)."""

    label = "counter not found"


class CounterIncrementMissingError(CounterError, BadRequestError):
    """10169: a message without ``Nats-Incr`` went to a counter stream."""


class CounterPayloadError(CounterError, BadRequestError):
    """10170: an increment carried a payload (counter messages have none)."""


class CounterIncrementInvalidError(CounterError, BadRequestError):
    """10171: the increment is not an integer, or came with a header counters refuse
    (``Nats-Rollup``, ``Nats-Expected-*``)."""


class CounterBrokenError(CounterError, BadRequestError):
    """10172: the counter's stored value is not one the server can add to."""


class MirrorWithCountersError(CounterError, BadRequestError):
    """10173: a mirror stream cannot also count (``allow_msg_counter``)."""


_BY_ERR_CODE: dict[int, type[APIError]] = {
    10058: StreamNameAlreadyInUseError,
    10071: WrongLastSequenceError,
    10164: WrongLastSequenceError,
    10070: WrongLastMsgIdError,
    10060: StreamNotMatchError,
    10148: ConsumerExistsError,
    10149: ConsumerDoesNotExistError,
    10013: ConsumerNameInUseError,
    10026: MaximumConsumersLimitError,
    10059: StreamNotFoundError,
    10014: ConsumerNotFoundError,
    10037: MessageNotFoundError,
    10076: JetStreamNotEnabledError,
    10039: JetStreamNotEnabledError,
    10160: InvalidPriorityGroupError,
    10159: PriorityPolicyError,
    10178: PriorityPolicyError,
    10196: PriorityPolicyError,
    10197: PriorityPolicyError,
    10161: InvalidGroupNameError,
    10162: InvalidGroupNameError,
    10174: AtomicBatchNotEnabledError,
    10175: BatchSequenceMissingError,
    10176: BatchIncompleteError,
    10177: BatchUnsupportedHeaderError,
    10179: BatchIdInvalidError,
    10199: BatchTooLargeError,
    10200: BatchCommitInvalidError,
    10201: BatchDuplicateMsgIdError,
    10210: AtomicBatchTooManyInflightError,
    10205: FastBatchNotEnabledError,
    10206: FastBatchInvalidPatternError,
    10207: BatchIdInvalidError,
    10208: FastBatchUnknownError,
    10211: FastBatchTooManyInflightError,
    10165: MsgTTLInvalidError,
    10166: MsgTTLDisabledError,
    10168: CounterNotEnabledError,
    10169: CounterIncrementMissingError,
    10170: CounterPayloadError,
    10171: CounterIncrementInvalidError,
    10172: CounterBrokenError,
    10173: MirrorWithCountersError,
    10188: SchedulesNotEnabledError,
    10189: ScheduleInvalidError,
    10190: ScheduleInvalidError,
    10191: ScheduleInvalidError,
    10192: ScheduleInvalidError,
    10203: ScheduleInvalidError,
    10212: ScheduleInvalidError,
    10223: ScheduleInvalidError,
}
_BY_CODE: dict[int, type[APIError]] = {
    400: BadRequestError,
    404: NotFoundError,
    500: APIServerError,
    503: ServiceUnavailableError,
}


def api_error(error: Any) -> APIError:
    """The exception for the ``"error"`` object of an API reply.

    Picks the class by ``err_code``, then by ``code``, else :class:`APIError`; a value
    that is not the expected object still gives an :class:`APIError` naming it.
    """
    if not isinstance(error, dict):
        return APIError(f"malformed error in a JetStream API reply: {error!r}")
    code = int_or_zero(error.get("code"))
    err_code = int_or_zero(error.get("err_code"))
    description = str(error.get("description", ""))
    cls = _BY_ERR_CODE.get(err_code) or _BY_CODE.get(code) or APIError
    return cls(description, code=code, err_code=err_code, description=description)


# --- errors of the client's own JetStream logic ----------------------------------------


class NoStreamResponseError(JetStreamError):
    """A JetStream publish got no answer: no stream stores that subject (after retries)."""

    label = "no response from stream"


class TooManyStalledMsgsError(JetStreamError):
    """``publish_async`` had ``max_pending_acks`` in flight for longer than ``stall_wait``."""

    label = "stalled with too many outstanding async published messages"


class PublishAckTimeoutError(JetStreamError, TimeoutError):
    """No publish acknowledgement came within the timeout (also a ``TimeoutError``)."""

    label = "timeout waiting for a publish ack"


class BatchClosedError(JetStreamError):
    """The batch ended already (committed, closed, or ended by the server after a gap or
    a failed check with gap ``fail``); ``__cause__`` is the error that ended it, if any."""

    label = "batch closed"


class BatchGapError(JetStreamError):
    """Fast ingest: the server saw a gap; messages ``expected_seq`` up to (not including)
    ``seq`` of the batch were lost. Given to ``error_cb`` with gap ``ok``.

    Attributes:
        expected_seq: the batch sequence the server expected next.
        seq: the batch sequence that came instead.
    """

    label = "fast batch gap"

    def __init__(self, detail: str = "", *, expected_seq: int = 0, seq: int = 0) -> None:
        super().__init__(detail or f"batch messages {expected_seq}..{seq - 1} were lost")
        self.expected_seq = expected_seq
        self.seq = seq


class BatchMessageError(JetStreamError):
    """Fast ingest: the server refused one message of the batch (a failed per-message
    check such as ``expected_last_subject_seq``). Given to ``error_cb`` with gap ``ok``;
    with gap ``fail`` it is the cause of the batch's end.

    Attributes:
        seq: the batch sequence of the refused message.
        error: the server's error (an :class:`APIError` subclass).
    """

    label = "fast batch message refused"

    def __init__(self, detail: str = "", *, seq: int = 0, error: APIError | None = None) -> None:
        super().__init__(detail or f"batch message {seq} refused: {error}")
        self.seq = seq
        self.error = error


class ConsumerDeletedError(JetStreamError):
    """The consumer being read was deleted (409 Consumer Deleted, or it is gone)."""

    label = "consumer deleted"


class NoHeartbeatError(JetStreamError):
    """No message and no idle heartbeat came for two heartbeat intervals."""

    label = "no heartbeat received"


class MissedHeartbeatError(NoHeartbeatError):
    """A push consumer sent nothing, not even an idle heartbeat, for two of its
    ``idle_heartbeat`` intervals while connected: the server, the route or the consumer
    may be gone. A warning: the reading goes on (``consume`` reports it to its
    ``error_cb``; ``messages()`` raises it from ``next()`` once per silence)."""

    label = "missed idle heartbeat"


class NotJSMessageError(JetStreamError):
    """The message was not delivered by a JetStream consumer (no ack subject)."""

    label = "not a JetStream message"


class MsgAlreadyAckdError(JetStreamError):
    """The message was acknowledged already (ack, nak or term happen once)."""

    label = "message was already acknowledged"


class OrderedConsumerConcurrentRequestsError(JetStreamError):
    """An ordered consumer reads from one place at a time."""

    label = "an ordered consumer allows one read at a time"


class StatusError(JetStreamError):
    """A pull request ended with a status that is not one of the expected ones.

    Attributes:
        status: the status code (e.g. 400, 409).
        description: the status text.
    """

    label = "unexpected status"

    def __init__(self, detail: str = "", *, status: int = 0, description: str = "") -> None:
        super().__init__(detail or f"{status} {description}".strip())
        self.status = status
        self.description = description


class PinIdMismatchError(StatusError):
    """A pull carried a ``Nats-Pin-Id`` that is no longer the pin (423): another reader
    holds the group now. Handled inside the readers, which drop the id and pull on
    as a standby; seen only by code reading pull statuses itself."""

    label = "pin id mismatch"


# --- key-value -------------------------------------------------------------------------


class KeyValueError(JetStreamError):
    """Root of the key-value errors."""

    label = "key-value error"


class BucketNotFoundError(KeyValueError, NotFoundError):
    """No key-value bucket of that name."""

    label = "bucket not found"


class BadBucketError(KeyValueError):
    """The stream is not a key-value bucket."""

    label = "bucket not valid key-value store"


class KeyNotFoundError(KeyValueError, NotFoundError):
    """The key has no value (never set, deleted or purged)."""

    label = "key not found"


class KeyDeletedError(KeyNotFoundError):
    """The key's latest entry is a delete or a purge."""

    label = "key was deleted"


class KeyWrongLastSequenceError(KeyValueError, WrongLastSequenceError):
    """A create or update lost the compare-and-swap on the key's revision."""

    label = "wrong last sequence"


class NoKeysError(KeyValueError):
    """The bucket has no keys (``keys()``, as nats-py and nats.go)."""

    label = "no keys found"


class LimitMarkersNotSupportedError(KeyValueError):
    """``limit_marker_ttl`` needs JetStream API level 1 (nats-server 2.11+)."""

    label = "limit markers not supported"


class KeyHistoryTooLargeError(KeyValueError):
    """A bucket keeps at most 64 values per key."""

    label = "history limited to a max of 64"


# --- object store ----------------------------------------------------------------------


class ObjectStoreError(JetStreamError):
    """Root of the object store errors."""

    label = "object store error"


class ObjectNotFoundError(ObjectStoreError, NotFoundError):
    """No object of that name."""

    label = "object not found"


class ObjectDeletedError(ObjectStoreError):
    """The object was deleted."""

    label = "object was deleted"


class DigestMismatchError(ObjectStoreError):
    """What was read does not match the object's SHA-256 digest."""

    label = "received a corrupt object, digests do not match"


class BadObjectMetaError(ObjectStoreError):
    """The object's meta information cannot be used."""

    label = "object-store meta information invalid"


# --- invalid names (also ValueError) ---------------------------------------------------


class InvalidStreamNameError(JetStreamError, InvalidArgumentError):
    """A stream name is empty or holds ``. * > / \\`` or whitespace."""

    label = "invalid stream name"


class InvalidConsumerNameError(JetStreamError, InvalidArgumentError):
    """A consumer name is empty or holds ``. * > / \\`` or whitespace."""

    label = "invalid consumer name"


class NotPullConsumerError(JetStreamError, InvalidArgumentError):
    """A push consumer (it has a ``deliver_subject``) was given where a pull consumer is
    made or bound: ``create_consumer`` with a ``deliver_subject``, or ``js.consumer`` on
    a push consumer. Use ``create_push_consumer`` or ``push_consumer``."""

    label = "not a pull consumer"


class NotPushConsumerError(JetStreamError, InvalidArgumentError):
    """``push_consumer`` named a pull consumer (no ``deliver_subject``): bind it with
    ``js.consumer``."""

    label = "not a push consumer"


class InvalidBucketNameError(KeyValueError, InvalidArgumentError):
    """A bucket name holds something other than letters, digits, ``-`` and ``_``."""

    label = "invalid bucket name"


class InvalidKeyError(KeyValueError, InvalidArgumentError):
    """A key is empty, starts or ends with ``.``, or holds a character keys may not."""

    label = "invalid key"


class InvalidObjectNameError(ObjectStoreError, InvalidArgumentError):
    """An object name is empty."""

    label = "invalid object name"

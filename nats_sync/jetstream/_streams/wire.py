"""The JetStream API on the wire: subjects, JSON requests, errors, units and names.

How it works: every JetStream admin call is a core request to ``<prefix>.<call>`` with a
JSON body (``$JS.API`` or ``$JS.<domain>.API``). :class:`JsApi` sends it with the
client's public ``request`` on the caller's thread, decodes the reply and raises the
mapped error (``errors.api_error``). It keeps no state beyond its settings, so any
thread may use it at once. The helpers convert units (float seconds <-> integer
nanoseconds, aware UTC ``datetime`` <-> RFC 3339 with nanoseconds, epoch nanoseconds
-> ``datetime``) and validate stream, consumer and bucket names. It is the one private
module of ``jetstream/`` that other packages (``spark``) may import: the wire's names
and units (``tests/unit/test_import_layers.py``).

Nothing here imports the client: what JetStream needs from it is :class:`CoreClient`
(its public API) and its port (``nats_sync._core.components.port.port_of``: status listeners, the
shared inbox, the timer, the instrumentation), which keeps the package's layers one-way
(``docs/ARCHITECTURE.md``).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any, Protocol

from nats_sync._core.components.subscription import MessageCallback, Subscription
from nats_sync._core.proto import subscribe_subject
from nats_sync._core.validate import check_int, check_text
from nats_sync.errors import InvalidArgumentError, NoRespondersError
from nats_sync.jetstream.errors import (
    InvalidBucketNameError,
    InvalidConsumerNameError,
    InvalidStreamNameError,
    JetStreamError,
    JetStreamNotEnabledError,
    api_error,
)
from nats_sync.msg import Msg

#: A key-value or object store bucket name.
_BUCKET_NAME = re.compile(r"^[a-zA-Z0-9_-]+$")

Headers = Mapping[str, "str | Sequence[str]"] | None


class CoreClient(Protocol):
    """What JetStream uses of :class:`nats_sync.Client`."""

    def request(
        self,
        subject: str,
        payload: bytes = b"",
        timeout: float = ...,
        headers: Headers = None,
    ) -> Msg:
        """A core request: the first reply."""
        ...

    def request_batch(
        self,
        subject: str,
        payloads: Sequence[bytes],
        timeout: float = ...,
        headers: Headers = None,
        max_in_flight: int = ...,
    ) -> list[Msg | BaseException]:
        """Pipelined core requests: each reply or error, in the payloads' order."""
        ...

    def publish(
        self, subject: str, payload: bytes = b"", reply: str = "", headers: Headers = None
    ) -> None:
        """A core publish."""

    def subscribe(
        self,
        subject: str,
        queue: str = "",
        cb: MessageCallback | None = None,
        max_msgs: int = 0,
        pending_msgs_limit: int = ...,
        pending_bytes_limit: int = ...,
    ) -> Subscription:
        """A core subscription."""
        ...

    def new_inbox(self) -> str:
        """A unique reply subject."""
        ...

    def flush(self, timeout: float = ...) -> None:
        """A PING/PONG round trip."""

    @property
    def is_closed(self) -> bool:
        """Whether the client is closed."""
        ...

    @property
    def is_connected(self) -> bool:
        """Whether the client has a live connection."""
        ...

    @property
    def max_payload(self) -> int:
        """The largest payload the server accepts."""
        ...


# --- units -------------------------------------------------------------------------------

_NS_PER_SECOND = 1_000_000_000


def to_ns(seconds: float) -> int:
    """Float seconds as the integer nanoseconds the server wants."""
    return round(seconds * _NS_PER_SECOND)


def from_ns(nanoseconds: int) -> float:
    """Integer nanoseconds from the server as float seconds."""
    return nanoseconds / _NS_PER_SECOND


_RFC3339 = re.compile(
    r"^(?P<base>\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2})(?:\.(?P<fraction>\d+))?"
    r"(?P<zone>[Zz]|[+-]\d{2}:\d{2})$"
)


def parse_time(text: str) -> datetime:
    """An RFC 3339 time (nanoseconds allowed, as the server writes them) as an aware UTC
    ``datetime`` (microseconds kept).

    Raises:
        JetStreamError: the text is not such a time.
    """
    match = _RFC3339.match(text)
    if match is None:
        raise JetStreamError(f"not an RFC 3339 time: {text!r}")
    fraction = (match["fraction"] or "")[:6].ljust(6, "0")
    zone = "+00:00" if match["zone"] in ("Z", "z") else match["zone"]
    parsed = datetime.fromisoformat(f"{match['base'].replace(' ', 'T')}.{fraction}{zone}")
    return parsed.astimezone(timezone.utc)


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def time_from_ns(nanoseconds: int) -> datetime:
    """Nanoseconds since the epoch (an ack subject's time stamp) as an aware UTC
    ``datetime``; integer arithmetic keeps the microseconds exact."""
    return _EPOCH + timedelta(microseconds=nanoseconds // 1000)


def ns_from_time(moment: datetime) -> int:
    """The inverse of `time_from_ns` for an aware ``datetime`` (exact, in integers)."""
    return (moment - _EPOCH) // timedelta(microseconds=1) * 1000


def format_time(moment: datetime) -> str:
    """An aware ``datetime`` as RFC 3339 in UTC (a naive one is taken as UTC)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


# --- headers ------------------------------------------------------------------------------


def header_value(headers: Mapping[str, Any] | None, name: str) -> str | None:
    """A header's value (the first of a repeated one), or None."""
    value = (headers or {}).get(name)
    if isinstance(value, list):
        return str(value[0]) if value else None
    return None if value is None else str(value)


def header_int(headers: Mapping[str, Any] | None, name: str) -> int | None:
    """A header holding a non-negative integer (``Nats-Sequence``, ...), or None."""
    value = header_value(headers, name)
    if value is None or not value.strip().isdigit():
        return None
    return int(value)


# --- names -------------------------------------------------------------------------------

_BAD_NAME_CHARACTERS = frozenset(".*>/\\")


def _check_name(name: object, what: str, error: type[JetStreamError]) -> str:
    if not isinstance(name, str) or not name:
        raise error(f"{what} must be a non-empty str, got {name!r}")
    bad = sorted({c for c in name if c in _BAD_NAME_CHARACTERS or c.isspace()})
    if bad:
        raise error(
            f"{what} {name!r} holds {''.join(bad)!r}: "
            "names may not contain '.', '*', '>', '/', '\\' or whitespace"
        )
    return name


def check_domain(domain: object) -> str | None:
    """Returns ``domain`` (None for no domain) if it can be a JetStream domain.

    Raises:
        InvalidArgumentError: not None and not a plain name: empty, not a str, or holding
            ``. * >`` or whitespace (it becomes one token of ``$JS.<domain>.API``).
    """
    if domain is None:
        return None
    if not isinstance(domain, str) or not domain or any(c in ".*>" or c.isspace() for c in domain):
        raise InvalidArgumentError(
            f"domain must be a plain non-empty name (no '.', '*', '>' or whitespace), "
            f"got {domain!r}"
        )
    return domain


def check_stream_name(name: object) -> str:
    """Returns ``name`` if it is a valid stream name.

    Raises:
        InvalidStreamNameError: empty, not a str, or holding ``. * > / \\`` or whitespace.
    """
    return _check_name(name, "stream name", InvalidStreamNameError)


def check_bucket_name(bucket: object) -> str:
    """Returns ``bucket`` if it is a valid bucket name.

    Raises:
        InvalidBucketNameError: not a non-empty str of letters, digits, ``-`` and ``_``.
    """
    if not isinstance(bucket, str) or not bucket:
        raise InvalidBucketNameError(f"bucket name must be a non-empty str, got {bucket!r}")
    if not _BUCKET_NAME.match(bucket):
        bad = "".join(sorted({c for c in bucket if not _BUCKET_NAME.match(c)}))
        raise InvalidBucketNameError(
            f"bucket name {bucket!r} holds {bad!r}: only letters, digits, '-' and '_' are allowed"
        )
    return bucket


def check_consumer_name(name: object) -> str:
    """Returns ``name`` if it is a valid consumer name.

    Raises:
        InvalidConsumerNameError: empty, not a str, or holding ``. * > / \\`` or whitespace.
    """
    return _check_name(name, "consumer name", InvalidConsumerNameError)


# --- requests ----------------------------------------------------------------------------


class JsApi:
    """Sends JetStream API requests and decodes their replies.

    Args:
        client: the connection.
        prefix: the API prefix without a trailing dot (``$JS.API``, ``$JS.<domain>.API``).
        timeout: the default seconds per call.
    """

    def __init__(self, client: CoreClient, prefix: str, timeout: float) -> None:
        self.client = client
        self.prefix = prefix
        self.timeout = timeout

    def subject(self, call: str) -> str:
        """The full API subject of ``call`` (e.g. ``STREAM.INFO.ORDERS``)."""
        return f"{self.prefix}.{call}"

    def request(
        self, call: str, body: Mapping[str, Any] | None = None, timeout: float | None = None
    ) -> dict[str, Any]:
        """Sends ``body`` (JSON) to ``call`` and returns the decoded reply.

        Raises:
            APIError: the server refused (the specific subclass by ``err_code``).
            JetStreamNotEnabledError: nobody answers the API (JetStream is off, or the
                prefix or domain is wrong).
            TimeoutError: no reply in time.
        """
        payload = json.dumps(body, separators=(",", ":")).encode() if body else b""
        subject = self.subject(call)
        try:
            reply = self.client.request(subject, payload, timeout=timeout or self.timeout)
        except NoRespondersError:
            raise JetStreamNotEnabledError(
                f"no JetStream API answers on {subject!r}: JetStream is not enabled, or the "
                "domain or API prefix is wrong",
                code=503,
                err_code=0,
            ) from None
        return decode_reply(reply.data, subject)

    def paged(
        self,
        call: str,
        key: str,
        body: Mapping[str, Any] | None = None,
        timeout: float | None = None,
    ) -> Iterator[Any]:
        """Yields the items under ``key`` of a paged list call, page after page."""
        offset = 0
        while True:
            reply = self.request(call, {**(body or {}), "offset": offset}, timeout)
            items = reply.get(key) or []
            yield from items
            offset += len(items)
            total = reply.get("total", 0)
            if not items or not isinstance(total, int) or offset >= total:
                return


def decode_reply(data: bytes, subject: str) -> dict[str, Any]:
    """The JSON object of an API reply, or the mapped error it carries.

    Raises:
        APIError: the reply holds ``"error"``.
        JetStreamError: the reply is not a JSON object.
    """
    try:
        decoded = json.loads(data)
    except ValueError:
        raise JetStreamError(f"the reply on {subject!r} is not JSON: {data[:80]!r}") from None
    if not isinstance(decoded, dict):
        raise JetStreamError(f"the reply on {subject!r} is not a JSON object: {data[:80]!r}")
    if "error" in decoded:
        raise api_error(decoded["error"])
    return decoded


# --- JetStream publish headers ------------------------------------------------------------

_MSG_ID = "Nats-Msg-Id"
_EXPECTED_STREAM = "Nats-Expected-Stream"
_EXPECTED_LAST_SEQ = "Nats-Expected-Last-Sequence"
_EXPECTED_LAST_SUBJECT_SEQ = "Nats-Expected-Last-Subject-Sequence"
_EXPECTED_LAST_SUBJECT_SEQ_SUBJECT = "Nats-Expected-Last-Subject-Sequence-Subject"
_EXPECTED_LAST_MSG_ID = "Nats-Expected-Last-Msg-Id"
_TTL = "Nats-TTL"
#: The longest TTL the server can keep: its deadline is nanoseconds in an int64 (Go's
#: longest ``time.Duration``, about 292 years); "never" is the way past it.
MAX_TTL_SECONDS = (2**63 - 1) // _NS_PER_SECOND


def ttl_header(ttl: object) -> str:
    """The ``Nats-TTL`` value for ``ttl`` (ADR-43), the one used by every publish path.

    ``ttl`` is seconds (an int or float, at least 1) or the str ``"never"`` (kept even
    past the stream's ``max_age``). Seconds are sent whole: the server keeps whole
    seconds and drops any fraction, so the stored header says what the server applies
    (``1.9`` is sent as ``"1"``).

    Raises:
        InvalidArgumentError: ``ttl`` is not a finite number of seconds from 1 to
            ``MAX_TTL_SECONDS``, nor ``"never"`` (the message names the value).
    """
    if ttl == "never":
        return "never"
    if (
        isinstance(ttl, bool)
        or not isinstance(ttl, (int, float))
        or not math.isfinite(ttl)
        or not 1 <= ttl <= MAX_TTL_SECONDS
    ):
        raise InvalidArgumentError(
            f'ttl must be a number of seconds from 1 to {MAX_TTL_SECONDS} or "never", got {ttl!r}'
        )
    return str(int(ttl))


def js_headers(
    headers: Headers,
    msg_id: str | None = None,
    expected_stream: str | None = None,
    expected_last_seq: int | None = None,
    expected_last_subject_seq: int | None = None,
    expected_last_msg_id: str | None = None,
    ttl: float | str | None = None,
    expected_last_subject_seq_subject: str | None = None,
) -> Headers:
    """The user's headers with the JetStream ones the keywords ask for (those win).

    ``expected_last_subject_seq_subject`` (a subject filter, wildcards allowed) is the
    subject whose last sequence ``expected_last_subject_seq`` checks instead of the
    message's own (``Nats-Expected-Last-Subject-Sequence-Subject``, nats-server 2.12+).

    Raises:
        InvalidArgumentError: a keyword's value is not a non-empty str (ids), an
            int >= 0 (sequences) or a TTL (`ttl_header`); ``InvalidStreamNameError``
            for ``expected_stream``; ``expected_last_subject_seq_subject`` without
            ``expected_last_subject_seq``, or not a subject filter.
    """
    extra: dict[str, str] = {}
    if msg_id is not None:
        extra[_MSG_ID] = check_text(msg_id, "msg_id")
    if expected_stream is not None:
        extra[_EXPECTED_STREAM] = check_stream_name(expected_stream)
    if expected_last_seq is not None:
        check_int(expected_last_seq, "expected_last_seq", 0)
        extra[_EXPECTED_LAST_SEQ] = str(expected_last_seq)
    if expected_last_subject_seq is not None:
        check_int(expected_last_subject_seq, "expected_last_subject_seq", 0)
        extra[_EXPECTED_LAST_SUBJECT_SEQ] = str(expected_last_subject_seq)
    if expected_last_subject_seq_subject is not None:
        extra[_EXPECTED_LAST_SUBJECT_SEQ_SUBJECT] = _check_seq_subject(
            expected_last_subject_seq_subject, expected_last_subject_seq
        )
    if expected_last_msg_id is not None:
        extra[_EXPECTED_LAST_MSG_ID] = check_text(expected_last_msg_id, "expected_last_msg_id")
    if ttl is not None:
        extra[_TTL] = ttl_header(ttl)
    if not extra:
        return headers
    if headers is None:
        return extra
    if not isinstance(headers, Mapping):
        raise InvalidArgumentError(
            f"headers must be a mapping of name -> value, got {type(headers).__name__}"
        )
    return {**headers, **extra}


def _check_seq_subject(subject: object, expected_last_subject_seq: int | None) -> str:
    if expected_last_subject_seq is None:
        raise InvalidArgumentError(
            "expected_last_subject_seq_subject names the subject whose last sequence "
            "expected_last_subject_seq checks: give expected_last_subject_seq too"
        )
    text = check_text(subject, "expected_last_subject_seq_subject")
    try:
        subscribe_subject(text)
    except InvalidArgumentError as bad:
        raise InvalidArgumentError(f"expected_last_subject_seq_subject: {bad}") from None
    return text


def publish_headers(
    headers: Headers,
    msg_id: str | None = None,
    expected_stream: str | None = None,
    expected_last_seq: int | None = None,
    expected_last_subject_seq: int | None = None,
    expected_last_msg_id: str | None = None,
    ttl: float | str | None = None,
    expected_last_subject_seq_subject: str | None = None,
) -> Headers | bytes:
    """The headers a JetStream publish sends for its keywords, encoded already where
    that is cheaper: the one builder of ``publish_async`` and fast ingest, whose
    messages go out through the client's port (which takes a dict or a block).

    - No keyword: ``headers`` as given (the publish that encodes them checks them).
    - Only ``msg_id``, no headers (the common keyed message): the block
      ``encode_headers({"Nats-Msg-Id": msg_id})`` makes, made here without a dict.
    - Otherwise: the dict of :func:`js_headers`, the merge ``publish`` and atomic
      batches use.

    Callers on a per-message path may skip the call when no keyword is given (the
    first case); ``tests/unit/test_publish_options.py`` holds every case to the merge.

    Raises:
        InvalidArgumentError: as :func:`js_headers`; the block also refuses a ``msg_id``
            holding CR or LF.
    """
    if (
        expected_stream is None
        and expected_last_seq is None
        and expected_last_subject_seq is None
        and expected_last_msg_id is None
        and ttl is None
        and expected_last_subject_seq_subject is None
    ):
        if msg_id is None:
            return headers
        if headers is None:  # one call per keyed message: the block made in place
            check_text(msg_id, "msg_id")
            if "\r" in msg_id or "\n" in msg_id:
                raise InvalidArgumentError(f"msg_id holds CR or LF: {msg_id!r}")
            return b"NATS/1.0\r\nNats-Msg-Id: %b\r\n\r\n" % msg_id.encode()
    return js_headers(
        headers,
        msg_id,
        expected_stream,
        expected_last_seq,
        expected_last_subject_seq,
        expected_last_msg_id,
        ttl,
        expected_last_subject_seq_subject,
    )

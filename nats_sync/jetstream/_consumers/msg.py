"""Messages delivered by a JetStream consumer: :class:`JsMsg`, its metadata and its acks.

How it works: a pull consumer hands out each delivered core :class:`~nats_sync.msg.Msg`
wrapped in a :class:`JsMsg`, which adds the connection and the default timeout the acks
need. Everything about the delivery is in the message's reply subject, the *ack subject*
(notes §2.5):

```text
v1 (9 tokens):  $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ns>.<pending>
v2 (11 or 12):  $JS.ACK.<domain>.<account>.<stream>.<consumer>.<delivered>.<sseq>
                .<cseq>.<ns>.<pending>[.<random>]
```

:func:`parse_metadata` reads it (``_`` as the domain means none); the acks are core
publishes to it (``+ACK``, ``-NAK``, ``+WPI``, ``+TERM``), except ``double_ack``, a
request the server answers with an empty payload once the ack is stored.

Threads: a ``JsMsg`` is used by whichever thread holds it (often the one that read it,
or a ``consume`` callback). Its one mutable field, whether it was acknowledged, is
changed under a module lock, so two threads acking the same message at once still get
exactly one ack and one ``MsgAlreadyAckdError``; the metadata is parsed once, on first
use (a race only parses it twice).
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from nats_sync._core.validate import check_timeout
from nats_sync.jetstream._streams.wire import time_from_ns, to_ns
from nats_sync.jetstream.errors import MsgAlreadyAckdError, NotJSMessageError

if TYPE_CHECKING:
    from nats_sync._core.proto import Headers
    from nats_sync.jetstream._streams.wire import CoreClient
    from nats_sync.msg import Msg

_ACK = b"+ACK"
_NAK = b"-NAK"
_WPI = b"+WPI"
_TERM = b"+TERM"
#: The ack subject's layout, written once: the index of ``<stream>`` by the number of
#: tokens (v1: 9; v2: 11 or 12, with ``<domain>.<account>`` before it), then the place of
#: each number after ``<stream>.<consumer>``.
_V2_STREAM_AT = 4
_STREAM_AT = {9: 2, 11: _V2_STREAM_AT, 12: _V2_STREAM_AT}
_DELIVERED, _SSEQ, _CSEQ, _STAMP, _PENDING = range(2, 7)
_NOT_A_NUMBER = "ack subject {!r} has a token that is not a number where one should be"
_NO_DOMAIN = "_"
#: One lock for every message's acknowledged flag: held for a test-and-set only.
_ACK_LOCK = threading.Lock()


@dataclass(frozen=True)
class SequencePair:
    """A message's position: in the stream and in the consumer's deliveries.

    Attributes:
        stream: the stream sequence (stable: the message's address in the stream).
        consumer: the consumer sequence (grows with every delivery, redeliveries too).
    """

    stream: int
    consumer: int


@dataclass(frozen=True)
class MsgMetadata:
    """What the ack subject of a delivered message says about it.

    Attributes:
        stream: the stream it was stored in.
        consumer: the consumer that delivered it.
        domain: the JetStream domain, or None.
        num_delivered: how many times it was delivered (1 on the first delivery).
        num_pending: how many messages the consumer still has after this one.
        timestamp: when it was stored (aware UTC).
        sequence: its stream and consumer sequences.
    """

    stream: str
    consumer: str
    domain: str | None
    num_delivered: int
    num_pending: int
    timestamp: datetime
    sequence: SequencePair


def parse_metadata(reply: str) -> MsgMetadata:
    """The metadata in a JetStream ack subject (layout v1 or v2).

    Raises:
        NotJSMessageError: ``reply`` is not an ack subject: it does not start with
            ``$JS.ACK``, has another number of tokens than 9, 11 or 12, or a token that
            should be a number is not one.
    """
    tokens = reply.split(".")
    if len(tokens) < 2 or tokens[0] != "$JS" or tokens[1] != "ACK":
        raise NotJSMessageError(f"not a JetStream ack subject: {reply!r}")
    at = _STREAM_AT.get(len(tokens))
    if at is None:
        raise NotJSMessageError(
            f"ack subject {reply!r} has {len(tokens)} tokens; v1 has 9, v2 has 11 or 12"
        )
    stream, consumer = tokens[at], tokens[at + 1]
    if not stream or not consumer:
        raise NotJSMessageError(f"ack subject {reply!r} names no stream or consumer")
    domain = tokens[2] if at == _V2_STREAM_AT and tokens[2] not in ("", _NO_DOMAIN) else None
    numbers = tokens[at + _DELIVERED : at + _PENDING + 1]
    if not all(token.isdigit() for token in numbers) or not "".join(numbers).isascii():
        raise NotJSMessageError(_NOT_A_NUMBER.format(reply))
    delivered, stream_seq, consumer_seq, stamp, pending = map(int, numbers)
    return MsgMetadata(
        stream=stream,
        consumer=consumer,
        domain=domain,
        num_delivered=delivered,
        num_pending=pending,
        timestamp=time_from_ns(stamp),
        sequence=SequencePair(stream=stream_seq, consumer=consumer_seq),
    )


def ack_sequence_time_pending(reply: str) -> tuple[int, int, int]:
    """The stream sequence, the time stamp (ns since the epoch) and the pending count
    from an ack subject, without the rest of `parse_metadata` (one message of a large
    read costs a split and three ints).

    Raises:
        NotJSMessageError: ``reply`` is not an ack subject of layout v1 or v2.
    """
    tokens = reply.split(".")
    at = _STREAM_AT.get(len(tokens), 0)
    if not at or tokens[0] != "$JS" or tokens[1] != "ACK":
        raise NotJSMessageError(f"not a JetStream ack subject: {reply!r}")
    seq, stamp, pending = tokens[at + _SSEQ], tokens[at + _STAMP], tokens[at + _PENDING]
    # int() alone would also take "+1" or "1_0"; the server writes plain digits.
    if not (
        seq.isdigit()
        and stamp.isdigit()
        and pending.isdigit()
        and (seq + stamp + pending).isascii()
    ):
        raise NotJSMessageError(_NOT_A_NUMBER.format(reply))
    return int(seq), int(stamp), int(pending)


class JsMsg:
    """A message delivered by a JetStream consumer, with its acknowledgements.

    ``ack``, ``nak`` and ``term`` may happen once per message (``in_progress`` as often
    as wanted before them); acking again raises ``MsgAlreadyAckdError``.

    Args:
        msg: the core message as received.
        client: the connection the acks go through.
        timeout: the default seconds ``double_ack`` waits.
    """

    __slots__ = ("_acked", "_client", "_meta", "_msg", "_timeout")

    def __init__(self, msg: Msg, client: CoreClient, timeout: float) -> None:
        self._msg = msg
        self._client = client
        self._timeout = timeout
        self._acked = False
        self._meta: MsgMetadata | None = None

    # --- the message ------------------------------------------------------------------

    @property
    def subject(self) -> str:
        """The subject it was stored under."""
        return self._msg.subject

    @property
    def data(self) -> bytes:
        """The payload."""
        return self._msg.data

    @property
    def headers(self) -> Headers | None:
        """None, or name -> value (a list for a repeated name)."""
        return self._msg.headers

    @property
    def reply(self) -> str:
        """The ack subject ("" for a message that did not come from a consumer)."""
        return self._msg.reply

    @property
    def msg(self) -> Msg:
        """The core message as received."""
        return self._msg

    @property
    def metadata(self) -> MsgMetadata:
        """Stream, consumer, sequences, delivery count, pending count and timestamp.

        Raises:
            NotJSMessageError: the message has no JetStream ack subject.
        """
        meta = self._meta
        if meta is None:
            meta = self._meta = parse_metadata(self._checked_reply())
        return meta

    @property
    def is_acked(self) -> bool:
        """Whether ``ack``, ``double_ack``, ``nak`` or ``term`` was done."""
        return self._acked

    # --- acknowledgements ---------------------------------------------------------------

    def ack(self) -> None:
        """Acknowledges the message (fire and forget).

        Raises:
            MsgAlreadyAckdError: it was acknowledged, nak'd or terminated already.
            NotJSMessageError: the message has no JetStream ack subject.
        """
        self._send(_ACK)

    def double_ack(self, timeout: float | None = None) -> None:
        """Acknowledges the message and waits until the server confirms it stored the ack.

        Args:
            timeout: seconds to wait (None: the context's timeout).

        Raises:
            MsgAlreadyAckdError: it was acknowledged, nak'd or terminated already.
            NotJSMessageError: the message has no JetStream ack subject.
            TimeoutError: no confirmation in time (the message stays un-acked here,
                so the call may be retried).
            NoRespondersError: nobody took the ack (the consumer is gone).
        """
        reply = self._checked_reply()
        self._claim()
        try:
            self._client.request(reply, _ACK, timeout=timeout or self._timeout)
        except BaseException:
            self._acked = False  # not confirmed: the caller may try again
            raise

    ack_sync = double_ack

    def nak(self, delay: float | None = None) -> None:
        """Tells the server to redeliver the message (after ``delay`` seconds if given).

        Raises:
            MsgAlreadyAckdError: it was acknowledged, nak'd or terminated already.
            NotJSMessageError: the message has no JetStream ack subject.
            InvalidArgumentError: ``delay`` is not a number of seconds >= 0.
        """
        if delay is None:
            self._send(_NAK)
            return
        check_timeout(delay, "delay", zero_ok=True)
        self._send(_NAK + b" " + json.dumps({"delay": to_ns(delay)}).encode())

    def nak_with_delay(self, delay: float) -> None:
        """nats.go's name for ``nak(delay)``."""
        self.nak(delay)

    def in_progress(self) -> None:
        """Tells the server the message is still being worked on: its ``ack_wait``
        starts again. May be sent any number of times before the final ack.

        Raises:
            MsgAlreadyAckdError: it was acknowledged, nak'd or terminated already.
            NotJSMessageError: the message has no JetStream ack subject.
        """
        reply = self._checked_reply()
        if self._acked:
            raise MsgAlreadyAckdError(f"message on {self.subject!r} was already acknowledged")
        self._client.publish(reply, _WPI)

    def term(self, reason: str | None = None) -> None:
        """Tells the server never to redeliver the message.

        Args:
            reason: text for the server's termination advisory.

        Raises:
            MsgAlreadyAckdError: it was acknowledged, nak'd or terminated already.
            NotJSMessageError: the message has no JetStream ack subject.
        """
        self._send(_TERM + b" " + reason.encode() if reason else _TERM)

    def term_with_reason(self, reason: str) -> None:
        """nats.go's name for ``term(reason)``."""
        self.term(reason)

    def _send(self, body: bytes) -> None:
        reply = self._checked_reply()
        self._claim()
        try:
            self._client.publish(reply, body)
        except BaseException:
            self._acked = False  # never sent
            raise

    def _claim(self) -> None:
        with _ACK_LOCK:
            if self._acked:
                raise MsgAlreadyAckdError(f"message on {self.subject!r} was already acknowledged")
            self._acked = True

    def _checked_reply(self) -> str:
        reply = self._msg.reply
        if not reply.startswith("$JS.ACK."):
            raise NotJSMessageError(
                f"message on {self._msg.subject!r} has no JetStream ack subject (reply {reply!r})"
            )
        return reply

    def __repr__(self) -> str:
        data = self._msg.data
        shown = data if len(data) <= 32 else data[:32] + b"..."
        return f"<JsMsg subject={self._msg.subject!r} reply={self._msg.reply!r} data={shown!r}>"

"""Publishing: encoding a message and queueing (or sending) its frame.

How it works: the :class:`Publisher` runs on whichever thread publishes: user threads,
the callback and delivery threads (``Msg.respond``), and requesting threads.
``publish`` is the public entry and the hot path: a message without reply or headers
is built from the cached ``PUB <subject> <size>\\r\\n`` line and appended to the
outbox under its lock (``Outbox.put_messages`` inlined: a call is a tenth of this
path's cost; ``tests/unit/test_fast_paths_agree.py`` holds the two to the same
result). ``publish_request`` carries the request multiplexer's own inbox, which needs
no validation, and may write from the caller's thread when the writer is idle
(``direct``). Nothing here starts a thread or waits, except for room in a full outbox
(``pending_size``).

State: ``accepting`` and ``max_payload`` are written by the handler (under its lock)
and read here without one; ``_pub_lines`` entries are replaced whole, so any thread
reads a consistent entry. The outbox has its own lock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from nats_sync import _defaults as d
from nats_sync._core import proto
from nats_sync._core.threads.outbox import Outbox
from nats_sync.errors import MaxPayloadError

if TYPE_CHECKING:
    from nats_sync._core.threads.connection import Connection

HeadersArg = Mapping[str, "str | Sequence[str]"] | None
#: Headers, or a header block our own code encoded already (``NATS/1.0`` ... the empty
#: line): JetStream's per-message ``Nats-Msg-Id``, made without a dict.
HeadersOrBlock = HeadersArg | bytes

_LARGE_PAYLOAD = d.LARGE_PAYLOAD_THRESHOLD
_UNCACHED = d.UNCACHED_SUBJECT_PREFIXES
_CRLF = proto.CRLF


def _payload_bytes(payload: Any) -> bytes:
    if isinstance(payload, (bytearray, memoryview)):
        return bytes(payload)
    raise TypeError(
        f"payload must be bytes, got {type(payload).__name__}"
        + ("; encode the str first" if isinstance(payload, str) else "")
    )


class PublishHost(Protocol):
    """What the publisher needs from the handler."""

    def check_can_publish(self) -> None:
        """Raises the reason publishing is refused (closed, draining, forked)."""

    def connection(self) -> Connection | None:
        """The live connection, for a direct send; None while there is none."""


class Publisher:
    """Encodes messages and queues their frames in the outbox.

    Args:
        outbox: where frames wait for the writer.
        host: the handler's side (see :class:`PublishHost`).
    """

    __slots__ = ("_host", "_pub_lines", "accepting", "max_payload", "outbox", "strict_subjects")

    def __init__(self, outbox: Outbox, host: PublishHost, strict_subjects: bool = True) -> None:
        self.outbox = outbox
        self._host = host
        #: False with ``skip_subject_validation``: subjects are only checked for framing.
        self.strict_subjects = strict_subjects
        #: False once the client stops taking publishes (drained or closed): the hot
        #: path then asks the handler why, which raises.
        self.accepting = True
        self.max_payload = d.DEFAULT_MAX_PAYLOAD
        # subject -> (b"PUB <subject> ", size, b"PUB <subject> <size>\r\n") for the last
        # size published there.
        self._pub_lines: dict[str, tuple[bytes, int, bytes]] = {}

    def publish(
        self, subject: str, payload: bytes = b"", reply: str = "", headers: HeadersArg = None
    ) -> None:
        """Encodes one message and queues it; see ``Client.publish``."""
        if not self.accepting:
            self._host.check_can_publish()
        if not reply and not headers and type(payload) is bytes:
            size = len(payload)
            if size < _LARGE_PAYLOAD and size <= self.max_payload:
                entry = self._pub_lines.get(subject)
                if entry is not None and entry[1] == size:
                    frame = entry[2] + payload + _CRLF
                else:
                    frame = self._pub_line(subject, size, entry) + payload + _CRLF
                outbox = self.outbox
                length = len(frame)
                # ``with``, not acquire() then try: Ctrl-C right after acquire() returns
                # would leave the lock held for ever (the one place ``with`` is immune).
                with outbox.lock:
                    if outbox.size + length <= outbox.limit or (
                        not outbox.size and outbox.connected
                    ):
                        outbox.frames.append(frame)
                        outbox.size += length
                        outbox.out_msgs += 1
                        outbox.out_bytes += size
                        if outbox.writer_waiting:
                            outbox.wake_writer()
                        return
                # Full: waits for room outside the lock (safe to interrupt there).
                outbox.put_when_room((frame,), length, size)
                return
        if type(reply) is not str:
            raise TypeError(f"reply must be a str subject, got {type(reply).__name__}")
        self._encode_and_queue(
            subject, payload, proto.reply_subject(reply, self.strict_subjects), headers, False
        )

    def publish_request(
        self, subject: str, payload: bytes, inbox: bytes, headers: HeadersArg, direct: bool
    ) -> None:
        """Publishes a request whose reply subject is our own ``inbox`` (not validated).

        With ``direct``, a small message is written from this thread when the writer is
        idle, saving a thread switch on the request's round trip.
        """
        if not self.accepting:
            self._host.check_can_publish()
        self._encode_and_queue(subject, payload, inbox, headers, direct)

    def publish_inbox(
        self, subject: str, payload: bytes, inbox: bytes, headers: HeadersOrBlock = None
    ) -> None:
        """Publishes with our own ``inbox`` as the reply subject, queued for the writer.

        The per-message path of JetStream's ``publish_async`` and fast-ingest batches:
        the reply is not validated, and the subject's validated ``b"PUB <subject> "``
        comes from the line cache (``HPUB`` is the same with an ``H`` in front), so a
        message costs one format and the outbox append of :meth:`publish` (inlined as
        there; ``tests/unit/test_fast_paths_agree.py`` holds it to ``_encode_and_queue``).
        """
        if not self.accepting:
            self._host.check_can_publish()
        if type(payload) is not bytes:
            self._encode_and_queue(subject, payload, inbox, headers, False)
            return
        size = len(payload)
        entry = self._pub_lines.get(subject)
        if entry is None:
            self._pub_line(subject, size, None)  # validates the subject and caches it
            entry = self._pub_lines.get(subject)
        if headers:
            block = headers if isinstance(headers, bytes) else proto.encode_headers(headers)
            total = len(block) + size
            if entry is None or total >= _LARGE_PAYLOAD or total > self.max_payload:
                self._encode_and_queue(subject, payload, inbox, headers, False)
                return
            frame = b"H%b%b %d %d\r\n%b%b\r\n" % (
                entry[0],
                inbox,
                len(block),
                total,
                block,
                payload,
            )
        else:
            if entry is None or size >= _LARGE_PAYLOAD or size > self.max_payload:
                # never cached (an inbox, an ack), large, or too large (raises there)
                self._encode_and_queue(subject, payload, inbox, headers, False)
                return
            frame = b"%b%b %d\r\n%b\r\n" % (entry[0], inbox, size, payload)
        outbox = self.outbox
        length = len(frame)
        with outbox.lock:  # not acquire() then try: see publish()
            if outbox.size + length <= outbox.limit or (not outbox.size and outbox.connected):
                outbox.frames.append(frame)
                outbox.size += length
                outbox.out_msgs += 1
                outbox.out_bytes += size
                if outbox.writer_waiting:
                    outbox.wake_writer()
                return
        outbox.put_when_room((frame,), length, size)  # full: see publish()

    def queue_messages(self, frames: list[bytes], size: int, payload_size: int) -> None:
        """Queues encoded PUB frames as they are (``request_batch``)."""
        if not self.accepting:
            self._host.check_can_publish()
        self.outbox.put_messages(frames, size, payload_size)

    def _encode_and_queue(
        self,
        subject: str,
        payload: bytes,
        reply: bytes,
        headers: HeadersOrBlock,
        direct: bool,
    ) -> None:
        if type(payload) is not bytes:
            payload = _payload_bytes(payload)
        size = len(payload)
        if size > self.max_payload:
            raise MaxPayloadError(
                f"payload of {size} bytes exceeds the server's max_payload of {self.max_payload}"
            )
        if headers:
            subject_bytes = proto.publish_subject(subject, self.strict_subjects)
            block = headers if isinstance(headers, bytes) else proto.encode_headers(headers)
            if size + len(block) > self.max_payload:
                raise MaxPayloadError(
                    f"message of {size + len(block)} bytes with headers exceeds the server's "
                    f"max_payload of {self.max_payload}"
                )
            line = proto.encode_hpub_line(subject_bytes, reply, len(block), len(block) + size)
            prefix = line + block
        else:
            prefix = proto.pub_line(proto.pub_prefix(subject, self.strict_subjects), reply, size)
        if size < _LARGE_PAYLOAD:
            frame = prefix + payload + _CRLF
            conn = self._host.connection() if direct else None
            if conn is not None and conn.send_direct(frame, size):
                return
            self.outbox.put_messages([frame], len(frame), size)
        else:
            self.outbox.put_messages([[prefix, payload, _CRLF]], len(prefix) + size + 2, size)

    def _pub_line(self, subject: str, size: int, entry: tuple[bytes, int, bytes] | None) -> bytes:
        """``PUB <subject> <size>\\r\\n``, validating ``subject`` unless cached."""
        prefix = proto.pub_prefix(subject, self.strict_subjects) if entry is None else entry[0]
        # proto.pub_line without a reply, inlined: replies (Msg.respond to an inbox) and
        # subjects published with changing sizes come here for every message.
        line = b"%b%d\r\n" % (prefix, size)
        if subject.startswith(_UNCACHED):
            return line  # used once (an inbox, an ack): caching it only evicts the rest
        if entry is None and len(self._pub_lines) >= d.SUBJECT_CACHE_SIZE:
            self._pub_lines.clear()
        self._pub_lines[subject] = (prefix, size, line)
        return line

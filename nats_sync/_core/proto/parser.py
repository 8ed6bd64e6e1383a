"""The sans-IO parser of server ops: ``feed(bytes)``, then ``next_op()`` until None
(or ``next_ops()`` for every complete op at once).

How it works: no threads, no I/O, no clock. The reader thread owns one ``Parser`` and is
the only caller. Fed chunks wait in a list and are joined into ``_buf`` only when the op
at hand needs bytes beyond it, so a large payload that arrives in many reads is joined
once, not once per read. A ``MSG``/``HMSG`` whose body has not fully arrived is kept as
``_pending`` (its control line already consumed), so the line is never parsed twice.

Bounds: a control line may be at most ``max_control_line`` bytes; a message body at most
``max_message_size`` (raised as soon as the control line is read, before any payload is
buffered); every step consumes input or returns None, so the parser cannot loop.

Speed: messages are built as ``message_type`` (a tuple type laid out like ``MsgOp``),
so a client gets its final message object in one allocation. ``next_ops`` splits a
chunk on CRLF in C and takes message after message whose payload length matches its
``MSG`` line (a line parsed before comes from the cache: a subscription's messages
repeat theirs); anything else goes through ``next_op``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from nats_sync import _defaults as d
from nats_sync._core.proto.headers import decode_headers
from nats_sync._core.proto.ops import (
    OK,
    PING,
    PONG,
    ErrOp,
    InfoOp,
    MsgOp,
    ServerOp,
)
from nats_sync._defaults import (
    DEFAULT_MAX_PAYLOAD,
    MAX_CONTROL_LINE,
    MAX_PAYLOAD_HEADROOM,
)
from nats_sync.errors import ProtocolError

_CRLF = b"\r\n"
_MSG_PREFIX = b"MSG "
#: Builds a message without NamedTuple's Python-level __new__ (half the cost per message).
#: Typed as MsgOp: whatever ``message_type`` is, it has MsgOp's layout.
_new_tuple: Callable[..., MsgOp] = tuple.__new__


def _shown(data: bytes, limit: int = 64) -> str:
    """A short, printable rendering of raw bytes for error messages."""
    return repr(data if len(data) <= limit else data[:limit] + b"...")


def _size(field: bytes, what: str, op: str) -> int:
    if not field.isdigit():
        raise ProtocolError(f"{op} {what} must be a non-negative integer, got {_shown(field)}")
    try:
        return int(field)
    except ValueError:  # more digits than int() converts (sys.get_int_max_str_digits)
        raise ProtocolError(f"{op} {what} has too many digits: {_shown(field)}") from None


def _text(field: bytes, what: str, op: str) -> str:
    try:
        return field.decode()
    except UnicodeDecodeError:
        raise ProtocolError(f"{op} {what} is not valid UTF-8: {_shown(field)}") from None


class Parser:
    """Turns the server's byte stream into :mod:`~nats_sync._core.proto.ops` values.

    Args:
        max_payload: the largest payload to accept; ``max_message_size`` becomes this
            plus room for a header block. Call :meth:`set_max_payload` when INFO arrives.
        max_control_line: the longest control line accepted without its CRLF.
        message_type: the tuple type messages are built as (see
            :meth:`set_message_type`).
        context: the last field of every message built.
    """

    __slots__ = (
        "_buf",
        "_chunks",
        "_chunks_len",
        "_context",
        "_failed",
        "_max_control_line",
        "_message_type",
        "_msg_lines",
        "_pending",
        "_pos",
        "max_message_size",
    )

    def __init__(
        self,
        max_payload: int = DEFAULT_MAX_PAYLOAD,
        max_control_line: int = MAX_CONTROL_LINE,
        message_type: type[tuple[Any, ...]] = MsgOp,
        context: Any = None,
    ) -> None:
        self._message_type = message_type
        self._context = context
        #: An error found by next_ops after other ops, raised by the next call.
        self._failed: ProtocolError | None = None
        self._buf = b""
        self._pos = 0
        self._chunks: list[bytes] = []
        self._chunks_len = 0
        self._pending: tuple[str, int, str, int, int] | None = None
        #: Parsed ``MSG`` control lines (subject, sid, reply, size): a subscription's
        #: messages often repeat the same line, and parsing it is most of the cost.
        self._msg_lines: dict[bytes, tuple[str, int, str, int]] = {}
        self._max_control_line = max_control_line
        self.max_message_size = max_payload + MAX_PAYLOAD_HEADROOM

    def set_message_type(self, message_type: type[tuple[Any, ...]], context: Any) -> None:
        """Builds messages as ``message_type`` from now on, with ``context`` last.

        ``message_type`` must be a tuple type with ``MsgOp``'s layout: (subject, sid,
        reply, payload, headers, status, description, size, context).
        """
        self._message_type = message_type
        self._context = context

    def set_max_payload(self, max_payload: int) -> None:
        """Accepts messages up to ``max_payload`` (plus header room) from now on."""
        self.max_message_size = max_payload + MAX_PAYLOAD_HEADROOM
        self._msg_lines.clear()  # they were checked against the old limit

    @property
    def buffered(self) -> int:
        """Bytes fed but not yet returned as ops."""
        return len(self._buf) - self._pos + self._chunks_len

    def reset(self) -> None:
        """Forgets everything buffered (a new connection starts a new stream)."""
        self._buf = b""
        self._pos = 0
        self._chunks.clear()
        self._chunks_len = 0
        self._pending = None
        self._failed = None

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Adds bytes received from the server. The parser keeps its own copy."""
        if not data:
            return
        chunk = bytes(data)
        if self._pos >= len(self._buf) and not self._chunks:
            self._buf = chunk
            self._pos = 0
        else:
            self._chunks.append(chunk)
            self._chunks_len += len(chunk)

    def _gather(self, needed: int) -> bool:
        """Makes ``_buf[_pos:]`` hold at least ``needed`` bytes if they were fed."""
        available = len(self._buf) - self._pos
        if available >= needed:
            return True
        if not self._chunks or available + self._chunks_len < needed:
            return False
        self._join()
        return True

    def _join(self) -> None:
        self._chunks.insert(0, self._buf[self._pos :])
        self._buf = b"".join(self._chunks)
        self._pos = 0
        self._chunks.clear()
        self._chunks_len = 0

    def next_op(self) -> ServerOp | None:
        """Returns the next complete op, or None when more data is needed.

        Raises:
            ProtocolError: the stream is not valid NATS protocol; the connection
                carrying it cannot be trusted any more.
        """
        if self._failed is not None:
            raise self._failed
        if self._pending is not None:
            return self._finish_message(*self._pending)
        buf = self._buf
        pos = self._pos
        end = buf.find(_CRLF, pos)
        if end < 0:
            if self._chunks:
                self._join()
                buf = self._buf
                pos = 0
                end = buf.find(_CRLF)
            if end < 0:
                waiting = len(buf) - pos
                if buf.endswith(b"\r"):
                    waiting -= 1  # possibly the first half of the CRLF: not line content
                if waiting > self._max_control_line:
                    raise ProtocolError(
                        f"control line longer than {self._max_control_line} bytes without "
                        f"CRLF: {_shown(buf[pos : pos + 64])}"
                    )
                return None
        if end - pos > self._max_control_line:
            raise ProtocolError(
                f"control line of {end - pos} bytes exceeds {self._max_control_line}: "
                f"{_shown(buf[pos : pos + 64])}"
            )
        line = buf[pos:end]
        start = end + 2
        self._pos = start
        if line[:4] != _MSG_PREFIX:
            return self._control(line)
        parsed = self._msg_lines.get(line)
        if parsed is None:
            parsed = self._msg_line(line)
        subject, sid, reply, total = parsed
        stop = start + total
        if buf[stop : stop + 2] == _CRLF:  # the whole body is here: the common case
            self._pos = stop + 2
            return _new_tuple(
                self._message_type,
                (subject, sid, reply, buf[start:stop], None, None, "", total, self._context),
            )
        return self._finish_message(subject, sid, reply, 0, total)

    def next_ops(self) -> list[ServerOp]:
        """Every op complete in what was fed so far, in order (``next_op`` in a loop).

        Raises:
            ProtocolError: as :meth:`next_op`, but only once every op before the bad
                one was returned (by this call, the error then comes on the next).
        """
        if self._failed is not None:
            raise self._failed
        if self._pos >= len(self._buf) and not self._chunks and self._pending is None:
            return []  # everything fed was returned (the reader's second call, usually)
        ops: list[ServerOp] = []
        try:
            self._collect(ops)
        except ProtocolError as err:
            if not ops:
                raise
            self._failed = err
        return ops

    def _collect(self, ops: list[ServerOp]) -> None:
        append = ops.append
        next_op = self.next_op
        while self._pending is not None:  # a body still arriving: only its size says
            op = next_op()
            if op is None:
                return
            append(op)
        if self._chunks:
            self._join()  # the unparsed tail of the last read, and this read
        buf = self._buf
        pos = self._pos
        # Split once: parts alternate control line and payload while messages are plain;
        # every op ends with CRLF, so after any op ``pos`` is again at a part's start.
        parts = buf[pos:].split(_CRLF) if pos else buf.split(_CRLF)
        last = len(parts) - 2  # parts[-1] is not terminated yet
        lines = self._msg_lines
        message_type = self._message_type
        context = self._context
        index = 0
        while True:
            while index < last:
                line = parts[index]
                parsed = lines.get(line)
                if parsed is None:
                    # A MSG line seen for the first time (a reply to a request): parse
                    # it here rather than leave the run; anything else goes to next_op.
                    if line[:4] != _MSG_PREFIX or len(line) > self._max_control_line:
                        break
                    parsed = self._msg_line(line)
                payload = parts[index + 1]
                total = parsed[3]
                if len(payload) != total:
                    break  # CRLF inside the payload: next_op reads it by its size
                append(
                    _new_tuple(
                        message_type,
                        (parsed[0], parsed[1], parsed[2], payload, None, None, "", total, context),
                    )
                )
                pos += len(line) + total + 4
                index += 2
            self._pos = pos
            op = next_op()
            if op is None:
                return
            append(op)
            consumed = self._pos
            while pos < consumed and index < len(parts):
                pos += len(parts[index]) + 2
                index += 1
            if pos != consumed or self._buf is not buf:  # lost step: finish the slow way
                while (op := next_op()) is not None:
                    append(op)
                return

    def _msg_line(self, line: bytes) -> tuple[str, int, str, int]:
        """Parses and checks a ``MSG`` control line, remembering it for next time."""
        args = line.split()
        count = len(args)
        if count == 4:
            reply = ""
        elif count == 5:
            reply = _text(args[3], "reply subject", "MSG")
        else:
            raise ProtocolError(
                f"MSG takes 3 or 4 arguments, got {count - 1}: {_shown(b' '.join(args))}"
            )
        total = _size(args[-1], "size", "MSG")
        if total > self.max_message_size:
            raise ProtocolError(
                f"MSG size {total} exceeds the limit of {self.max_message_size} bytes"
            )
        parsed = (_text(args[1], "subject", "MSG"), _size(args[2], "sid", "MSG"), reply, total)
        if len(self._msg_lines) >= d.MSG_LINE_CACHE_SIZE:
            self._msg_lines.clear()
        self._msg_lines[line] = parsed
        return parsed

    def _control(self, line: bytes) -> ServerOp | None:
        parts = line.split(None, 1)
        if not parts:
            raise ProtocolError("empty control line")
        head = parts[0]
        rest = parts[1] if len(parts) == 2 else b""
        name = head.upper()
        if name == b"MSG":
            return self._start_message(line.split(), "MSG")
        if name == b"HMSG":
            return self._start_message(line.split(), "HMSG")
        if name == b"PING":
            return PING
        if name == b"PONG":
            return PONG
        if name == b"+OK":
            return OK
        if name == b"-ERR":
            text = rest.strip().decode("utf-8", "replace")
            if len(text) >= 2 and text[0] == text[-1] == "'":
                text = text[1:-1]
            return ErrOp(text)
        if name == b"INFO":
            return InfoOp(self._info(rest))
        raise ProtocolError(f"unknown op {_shown(head)}")

    @staticmethod
    def _info(body: bytes) -> dict[str, Any]:
        try:
            info = json.loads(body)
        except (ValueError, UnicodeDecodeError) as err:
            raise ProtocolError(f"INFO is not valid JSON ({err}): {_shown(body)}") from None
        except RecursionError:
            raise ProtocolError(f"INFO JSON is nested too deeply: {_shown(body)}") from None
        if not isinstance(info, dict):
            raise ProtocolError(f"INFO JSON is not an object: {_shown(body)}")
        if "max_payload" in info:
            # Checked here so no layer above ever meets an unusable limit; a bool is
            # an int to Python but not to the server.
            limit = info["max_payload"]
            if type(limit) is not int or limit < 0:
                raise ProtocolError(
                    f"INFO max_payload must be a non-negative integer, got {repr(limit)[:64]}"
                )
        return info

    def _start_message(self, args: list[bytes], op: str) -> MsgOp | None:
        count = len(args)
        if op == "MSG":
            if count == 4:
                reply = ""
            elif count == 5:
                reply = _text(args[3], "reply subject", op)
            else:
                raise ProtocolError(
                    f"MSG takes 3 or 4 arguments, got {count - 1}: {_shown(b' '.join(args))}"
                )
            header_size = 0
            total = _size(args[-1], "size", op)
        else:
            if count == 5:
                reply = ""
            elif count == 6:
                reply = _text(args[3], "reply subject", op)
            else:
                raise ProtocolError(
                    f"HMSG takes 4 or 5 arguments, got {count - 1}: {_shown(b' '.join(args))}"
                )
            header_size = _size(args[-2], "header size", op)
            total = _size(args[-1], "total size", op)
            if header_size > total:
                raise ProtocolError(
                    f"HMSG header size {header_size} is larger than its total size {total}"
                )
        if total > self.max_message_size:
            raise ProtocolError(
                f"{op} size {total} exceeds the limit of {self.max_message_size} bytes"
            )
        subject = _text(args[1], "subject", op)
        sid = _size(args[2], "sid", op)
        return self._finish_message(subject, sid, reply, header_size, total)

    def _finish_message(
        self, subject: str, sid: int, reply: str, header_size: int, total: int
    ) -> MsgOp | None:
        if not self._gather(total + 2):
            self._pending = (subject, sid, reply, header_size, total)
            return None
        self._pending = None
        buf = self._buf
        start = self._pos
        stop = start + total
        if buf[stop : stop + 2] != _CRLF:
            raise ProtocolError(
                f"message body for {subject!r} is not followed by CRLF: "
                f"{_shown(buf[stop : stop + 16])}"
            )
        self._pos = stop + 2
        if header_size:
            headers, status, description = decode_headers(buf[start : start + header_size])
            payload = buf[start + header_size : stop]
            return _new_tuple(
                self._message_type,
                (subject, sid, reply, payload, headers, status, description, total, self._context),
            )
        return _new_tuple(
            self._message_type,
            (subject, sid, reply, buf[start:stop], None, None, "", total, self._context),
        )

"""Typed, immutable server ops produced by :class:`~nats_sync._core.proto.parser.Parser`.

How it works: plain data, no threads and no I/O. ``MSG`` and ``HMSG`` share one type,
:class:`MsgOp` (``headers`` is None for ``MSG``), so the reader dispatches on a single
``type(op) is MsgOp`` check on its hot path. The argument-free ops are singletons.
"""

from __future__ import annotations

from typing import Any, NamedTuple, TypeAlias

#: Parsed headers: a key seen once maps to a str, a repeated key to a list of str.
Headers: TypeAlias = "dict[str, str | list[str]]"


class InfoOp(NamedTuple):
    """``INFO {json}``: the server's description of itself, parsed."""

    info: dict[str, Any]


class MsgOp(NamedTuple):
    """``MSG`` or ``HMSG``: a message delivered to subscription ``sid``."""

    subject: str
    sid: int
    reply: str
    payload: bytes
    headers: Headers | None
    status: int | None
    description: str
    #: Bytes the message took on the wire after its control line (headers + payload).
    size: int
    #: Whatever the parser's owner attached to every message (see ``Parser``); None here.
    context: Any = None


class ErrOp(NamedTuple):
    """``-ERR 'text'``: the server's error text, with its quotes removed."""

    message: str


class _Singleton:
    __slots__ = ()
    _name = ""

    def __repr__(self) -> str:
        return self._name


class PingOp(_Singleton):
    """``PING``: the server asks for a ``PONG``."""

    __slots__ = ()
    _name = "PING"


class PongOp(_Singleton):
    """``PONG``: the answer to one of our ``PING``s."""

    __slots__ = ()
    _name = "PONG"


class OkOp(_Singleton):
    """``+OK``: sent only in verbose mode."""

    __slots__ = ()
    _name = "+OK"


PING = PingOp()
PONG = PongOp()
OK = OkOp()

ServerOp: TypeAlias = "InfoOp | MsgOp | ErrOp | PingOp | PongOp | OkOp"

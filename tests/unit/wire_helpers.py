"""Helpers shared by the protocol tests: build server frames, feed a parser as the reader does."""

from __future__ import annotations

from collections.abc import Iterable

from nats_sync._core.proto import Parser, ServerOp


def drain(parser: Parser, into: list[ServerOp] | None = None) -> list[ServerOp]:
    """Every op the parser can return right now, as the reader takes them
    (``next_ops`` until it returns nothing; test_parser_batch checks it against
    ``next_op`` one at a time).

    The ops go into ``into`` (a new list when None) as each call returns them, and that
    list is returned. ``next_ops`` returns the ops before a bad one and raises
    ``ProtocolError`` on the next call: pass ``into`` to keep those ops when it does (the
    reader has handed them on by then), since the return value is lost with the raise.
    """
    ops: list[ServerOp] = [] if into is None else into
    while batch := parser.next_ops():
        ops.extend(batch)
    return ops


def drain_one_by_one(parser: Parser, into: list[ServerOp] | None = None) -> list[ServerOp]:
    """Every op the parser can return right now, by ``next_op`` until None; ``into`` as
    for :func:`drain` (it holds the ops returned before a call that raised)."""
    ops: list[ServerOp] = [] if into is None else into
    while (op := parser.next_op()) is not None:
        ops.append(op)
    return ops


def parse_chunks(
    chunks: Iterable[bytes], parser: Parser | None = None, into: list[ServerOp] | None = None
) -> list[ServerOp]:
    """Feeds ``chunks`` one by one, draining after each, as the reader thread does;
    ``into`` as for :func:`drain` (it holds every op returned before a call that raised,
    those of earlier chunks included)."""
    parser = parser if parser is not None else Parser()
    ops: list[ServerOp] = [] if into is None else into
    for chunk in chunks:
        parser.feed(chunk)
        drain(parser, ops)
    return ops


def hmsg(subject: str, sid: int, reply: str, block: bytes, payload: bytes) -> bytes:
    """A server ``HMSG`` frame with both sizes computed from the actual bytes."""
    args = [b"HMSG", subject.encode(), str(sid).encode()]
    if reply:
        args.append(reply.encode())
    args += [str(len(block)).encode(), str(len(block) + len(payload)).encode()]
    return b" ".join(args) + b"\r\n" + block + payload + b"\r\n"


def msg(subject: str, sid: int, reply: str, payload: bytes) -> bytes:
    """A server ``MSG`` frame with its size computed from the payload."""
    args = [b"MSG", subject.encode(), str(sid).encode()]
    if reply:
        args.append(reply.encode())
    args.append(str(len(payload)).encode())
    return b" ".join(args) + b"\r\n" + payload + b"\r\n"


def client_to_server(frame: bytes, sid: int) -> bytes:
    """Rewrites one client ``PUB``/``HPUB`` frame into the server's ``MSG``/``HMSG`` form.

    ``PUB <subject> [reply] <size>`` becomes ``MSG <subject> <sid> [reply] <size>`` and
    ``HPUB <subject> [reply] <hdr> <total>`` becomes ``HMSG <subject> <sid> [reply] <hdr>
    <total>``; the body after the control line is kept byte for byte.
    """
    line, sep, body = frame.partition(b"\r\n")
    assert sep, "frame has no control line"
    op, *args = line.split(b" ")
    sizes = 1 if op == b"PUB" else 2
    assert op in (b"PUB", b"HPUB"), op
    subject, rest = args[0], args[1:]
    reply, numbers = rest[:-sizes], rest[-sizes:]
    assert len(reply) <= 1, line
    new_op = b"MSG" if op == b"PUB" else b"HMSG"
    return b" ".join([new_op, subject, str(sid).encode(), *reply, *numbers]) + b"\r\n" + body

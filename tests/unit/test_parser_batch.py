"""``Parser.next_ops`` (the reader's batch path) against ``next_op`` one at a time.

The batch path takes runs of messages whose control line it has parsed before by
splitting the buffer on CRLF; these streams repeat lines so that path is taken, and mix
in what must leave it (a CRLF inside a payload, HMSG, PING, INFO, a new line, a body cut
by the end of a read).
"""

from __future__ import annotations

import itertools
from typing import Any, NamedTuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from wire_helpers import drain_one_by_one, hmsg, msg, parse_chunks

from nats_sync._core.proto import MsgOp, Parser
from nats_sync.errors import ProtocolError

PAYLOADS = st.sampled_from(
    [b"", b"x", b"0123456789abcdef", b"a\r\nb", b"\r\n", b"\r", b"\n", b"MSG a 1 3\r\n", b"y" * 300]
)
FRAMES = st.one_of(
    st.builds(lambda sid, payload: msg("a.b", sid, "", payload), st.sampled_from([1, 2]), PAYLOADS),
    st.builds(lambda payload: msg("a.b", 1, "_INBOX.x", payload), PAYLOADS),
    st.builds(lambda payload: hmsg("h", 3, "", b"NATS/1.0\r\nk: v\r\n\r\n", payload), PAYLOADS),
    st.sampled_from([b"PING\r\n", b"PONG\r\n", b"+OK\r\n", b'INFO {"a":1}\r\n']),
)


def _cut(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({0, len(data), *(c % (len(data) + 1) for c in cuts)})
    return [data[a:b] for a, b in itertools.pairwise(points)]


def _batched(chunks: list[bytes], parser: Parser) -> list[Any]:
    return list(parse_chunks(chunks, parser))  # next_ops, as the reader


def _one_by_one(chunks: list[bytes], parser: Parser) -> list[Any]:
    ops: list[Any] = []
    for chunk in chunks:
        parser.feed(chunk)
        drain_one_by_one(parser, ops)  # into ops: kept if a later call raises
    return ops


@settings(max_examples=300, deadline=None)
@given(st.lists(FRAMES, min_size=1, max_size=60), st.lists(st.integers(0, 10**6), max_size=6))
def test_next_ops_returns_what_next_op_returns(frames: list[bytes], cuts: list[int]) -> None:
    data = b"".join(frames)
    chunks = _cut(data, cuts)
    assert _batched(chunks, Parser()) == _one_by_one(chunks, Parser())


def test_a_long_run_of_known_lines_comes_out_whole_and_in_order() -> None:
    frames = [msg("a.b", 1, "", b"%05d" % n) for n in range(5_000)]
    data = b"".join(frames)
    parser = Parser()
    ops = _batched(_cut(data, [7, 40_000, 40_003, 77_777]), parser)
    assert [op.payload for op in ops] == [b"%05d" % n for n in range(5_000)]
    assert parser.buffered == 0


class Custom(NamedTuple):
    subject: str
    sid: int
    reply: str
    payload: bytes
    headers: Any
    status: Any
    description: str
    size: int
    context: Any


def test_messages_are_built_as_the_message_type_with_the_context() -> None:
    parser = Parser(message_type=Custom, context="ctx")
    data = msg("a", 1, "r", b"hi") * 3 + hmsg("h", 2, "", b"NATS/1.0\r\nk: v\r\n\r\n", b"p")
    ops = _batched([data], parser)
    assert [type(op) for op in ops] == [Custom] * 4
    assert {op.context for op in ops} == {"ctx"}
    assert ops[0] == Custom("a", 1, "r", b"hi", None, None, "", 2, "ctx")
    assert ops[3].headers == {"k": "v"} and ops[3].payload == b"p"
    parser.set_message_type(MsgOp, None)
    parser.feed(msg("a", 1, "r", b"hi"))
    assert parser.next_ops() == [MsgOp("a", 1, "r", b"hi", None, None, "", 2)]


def test_an_error_comes_after_every_op_before_it() -> None:
    parser = Parser()
    parser.feed(msg("a", 1, "", b"x") * 3)
    assert len(parser.next_ops()) == 3  # the line is known now
    parser.feed(msg("a", 1, "", b"y") * 2 + b"BOGUS\r\n" + msg("a", 1, "", b"z"))
    ops = parser.next_ops()
    assert [op.payload for op in ops] == [b"y", b"y"]
    with pytest.raises(ProtocolError, match="unknown op"):
        parser.next_ops()
    with pytest.raises(ProtocolError, match="unknown op"):
        parser.next_op()  # the parser stays failed
    parser.reset()
    parser.feed(b"PING\r\n")
    assert len(parser.next_ops()) == 1


def test_a_wrong_size_on_a_known_line_is_still_an_error() -> None:
    parser = Parser()
    parser.feed(msg("a", 1, "", b"abc"))
    assert len(parser.next_ops()) == 1
    parser.feed(b"MSG a 1 3\r\nabcd\r\n")  # known line, body one byte longer
    with pytest.raises(ProtocolError, match="not followed by CRLF"):
        parser.next_ops()

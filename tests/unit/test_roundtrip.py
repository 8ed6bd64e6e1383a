"""Property tests: whatever the encoder writes, the parser reads back unchanged."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from wire_helpers import client_to_server, parse_chunks

from nats_sync._core.proto import (
    PING_OP,
    MsgOp,
    Parser,
    ServerOp,
    decode_headers,
    encode_headers,
    encode_hpub,
    encode_pub,
)

EXAMPLES = settings(max_examples=200, deadline=None)

# Any character a subject token may hold: no ASCII space/control, no '.', no surrogates.
TOKEN_CHARS = st.characters(min_codepoint=0x21, exclude_characters=".\x7f", codec="utf-8")
TOKENS = st.text(TOKEN_CHARS, min_size=1, max_size=8).filter(lambda token: token not in ("*", ">"))
SUBJECTS = st.lists(TOKENS, min_size=1, max_size=5).map(".".join)
REPLIES = st.one_of(st.just(""), SUBJECTS)

NAMES = st.text(
    st.characters(min_codepoint=0x21, exclude_characters=":\x7f", codec="utf-8"),
    min_size=1,
    max_size=12,
)
# Values: anything but CR/LF; no space or tab at either end (the decoder trims those).
VALUES = st.text(st.characters(exclude_characters="\r\n", codec="utf-8"), max_size=20).filter(
    lambda value: value == value.strip(" \t")
)
HEADER_VALUES = st.one_of(VALUES, st.lists(VALUES, min_size=2, max_size=4))
HEADERS = st.dictionaries(NAMES, HEADER_VALUES, max_size=5)

# Binary payloads, often built around CRLFs and protocol-looking bytes.
PAYLOADS = st.one_of(
    st.binary(max_size=300),
    st.lists(
        st.sampled_from([b"\r\n", b"\r", b"\n", b"MSG a 1 0\r\n", b"NATS/1.0\r\n\r\n", b"x"]),
        max_size=10,
    ).map(b"".join),
)
SIDS = st.integers(min_value=1, max_value=2**64 - 1)


def random_split(data: st.DataObject, wire: bytes) -> list[bytes]:
    """``wire`` cut at a few random points (possibly none, possibly adjacent)."""
    cuts = sorted(
        data.draw(st.lists(st.integers(min_value=0, max_value=len(wire)), max_size=8), "cuts")
    )
    bounds = [0, *cuts, len(wire)]
    return [wire[start:stop] for start, stop in itertools.pairwise(bounds)]


def parse_all_ways(data: st.DataObject, wire: bytes) -> list[MsgOp]:
    """Parses ``wire`` whole and in random chunks, checks both agree, returns the ops."""
    whole = parse_chunks([wire])
    split = parse_chunks(random_split(data, wire))
    assert split == whole
    assert all(isinstance(op, MsgOp) for op in whole)
    return [op for op in whole if isinstance(op, MsgOp)]


@EXAMPLES
@given(subject=SUBJECTS, reply=REPLIES, payload=PAYLOADS, sid=SIDS, data=st.data())
def test_pub_round_trip(
    subject: str, reply: str, payload: bytes, sid: int, data: st.DataObject
) -> None:
    wire = client_to_server(encode_pub(subject, payload, reply), sid)
    (op,) = parse_all_ways(data, wire)
    assert op == MsgOp(subject, sid, reply, payload, None, None, "", len(payload))


@EXAMPLES
@given(
    subject=SUBJECTS,
    reply=REPLIES,
    headers=HEADERS,
    payload=PAYLOADS,
    sid=SIDS,
    data=st.data(),
)
def test_hpub_round_trip(
    subject: str,
    reply: str,
    headers: dict[str, str | list[str]],
    payload: bytes,
    sid: int,
    data: st.DataObject,
) -> None:
    frame = encode_hpub(subject, payload, headers, reply)
    (op,) = parse_all_ways(data, client_to_server(frame, sid))
    assert op.subject == subject
    assert op.sid == sid
    assert op.reply == reply
    assert op.payload == payload
    assert op.headers == (headers or None)
    assert op.status is None
    assert op.description == ""
    assert op.size == len(encode_headers(headers)) + len(payload)


@EXAMPLES
@given(
    frames=st.lists(
        st.tuples(SUBJECTS, REPLIES, st.one_of(st.none(), HEADERS), PAYLOADS), max_size=6
    ),
    data=st.data(),
)
def test_stream_of_messages_round_trip(
    frames: list[tuple[str, str, dict[str, str | list[str]] | None, bytes]],
    data: st.DataObject,
) -> None:
    wire = b""
    for sid, (subject, reply, headers, payload) in enumerate(frames, start=1):
        if headers is None:
            frame = encode_pub(subject, payload, reply)
        else:
            frame = encode_hpub(subject, payload, headers, reply)
        wire += client_to_server(frame, sid) + b"PING\r\n"
    parser = Parser()
    ops = parse_chunks(random_split(data, wire), parser)
    assert parser.buffered == 0
    assert len(ops) == 2 * len(frames)
    for index, (subject, reply, headers, payload) in enumerate(frames):
        op, ping = ops[2 * index], ops[2 * index + 1]
        assert ping is PING_OP
        assert isinstance(op, MsgOp)
        assert (op.subject, op.sid, op.reply, op.payload) == (subject, index + 1, reply, payload)
        assert op.headers == (headers or None)


@EXAMPLES
@given(
    headers=HEADERS,
    status=st.one_of(st.none(), st.integers(min_value=100, max_value=999)),
    description=VALUES,
)
def test_header_block_round_trip(
    headers: dict[str, str | list[str]], status: int | None, description: str
) -> None:
    expected_description = description if status is not None else ""
    # A description's own spaces are kept; only the ends are trimmed.
    assert decode_headers(encode_headers(headers, status, description)) == (
        headers or None,
        status,
        expected_description,
    )


# Fragments that look like protocol, so random streams reach deep into the parser.
FRAGMENTS = st.one_of(
    st.sampled_from(
        [
            b"MSG ",
            b"HMSG ",
            b"msg\t",
            b"PING",
            b"PONG",
            b"+OK",
            b"-ERR ",
            b"INFO ",
            b"{}",
            b" ",
            b"\t",
            b"\r\n",
            b"\r",
            b"0",
            b"1",
            b"12",
            b"-1",
            b"a",
            b"a.b",
            b"NATS/1.0",
            b"NATS/1.0 503",
            b"K: v",
            b":",
            b"\xff",
        ]
    ),
    st.binary(max_size=3),
)


def outcome(chunks: list[bytes]) -> tuple[list[ServerOp], str]:
    """The ops ``chunks`` parse into, fed and drained as the reader does, and the name of
    the error that stopped them ("" when none did). The ops returned before an error are
    kept: the reader has handed them on before the call that raised."""
    ops: list[ServerOp] = []
    try:
        parse_chunks(chunks, into=ops)
    except Exception as err:
        return ops, type(err).__name__
    return ops, ""


@EXAMPLES
@given(wire=st.lists(FRAGMENTS, max_size=30).map(b"".join), data=st.data())
def test_arbitrary_bytes_never_crash_the_parser_differently(
    wire: bytes, data: st.DataObject
) -> None:
    # Random input either parses or raises ProtocolError, the same way in any split.
    whole = outcome([wire])
    split = outcome(random_split(data, wire))
    assert whole[1] in ("", "ProtocolError")
    assert split == whole


@pytest.mark.parametrize("cut", range(len(b"PING\r\n\r\n") + 1))
def test_the_ops_before_an_error_are_the_same_in_any_split(cut: int) -> None:
    # Issue 39: the property test above found this one in about 1 seed in 20. Whole, the
    # PING comes in the call before the error; cut at 6, in the drain before the chunk
    # holding the error. Both ways it was parsed, then the error came.
    wire = b"PING\r\n\r\n"
    assert outcome([wire[:cut], wire[cut:]]) == ([PING_OP], "ProtocolError")

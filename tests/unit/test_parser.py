"""Parser tests: every valid server op, fed whole, split at every byte, and byte by byte."""

from __future__ import annotations

import tracemalloc
from typing import Any

import pytest
from wire_helpers import drain, hmsg, msg, parse_chunks

from nats_sync._core.proto import (
    OK,
    PING_OP,
    PONG_OP,
    ErrOp,
    InfoOp,
    MsgOp,
    OkOp,
    Parser,
    PingOp,
    PongOp,
    ServerOp,
)
from nats_sync._defaults import DEFAULT_MAX_PAYLOAD, MAX_CONTROL_LINE, MAX_PAYLOAD_HEADROOM
from nats_sync.errors import ProtocolError

INFO_JSON = (
    b'{"server_id":"NABC","version":"2.10.7","proto":1,"headers":true,'
    b'"max_payload":1048576,"connect_urls":["10.0.0.1:4222","10.0.0.2:4222"],'
    b'"tls_required":false,"nested":{"a":[1,2,{"b":null}]}}'
)
INFO_DICT: dict[str, Any] = {
    "server_id": "NABC",
    "version": "2.10.7",
    "proto": 1,
    "headers": True,
    "max_payload": 1048576,
    "connect_urls": ["10.0.0.1:4222", "10.0.0.2:4222"],
    "tls_required": False,
    "nested": {"a": [1, 2, {"b": None}]},
}


def plain(subject: str, sid: int, reply: str, payload: bytes) -> MsgOp:
    """The MsgOp expected for a MSG frame."""
    return MsgOp(subject, sid, reply, payload, None, None, "", len(payload))


def with_headers(
    subject: str,
    sid: int,
    reply: str,
    block: bytes,
    payload: bytes,
    headers: dict[str, str | list[str]] | None,
    status: int | None = None,
    description: str = "",
) -> MsgOp:
    """The MsgOp expected for an HMSG frame."""
    return MsgOp(
        subject, sid, reply, payload, headers, status, description, len(block) + len(payload)
    )


BLOCK_MULTI = b"NATS/1.0\r\nA: 1\r\nB: two words\r\nA: 2\r\nA: 3\r\n\r\n"
BLOCK_FOLDED = b"NATS/1.0\r\nLong: first part\r\n  second part\r\n\tthird\r\nX: y\r\n\r\n"
BLOCK_FOLDED_REPEATED = b"NATS/1.0\r\nK: a\r\nK: b\r\n continued\r\n\r\n"

# (id, wire bytes, expected ops)
CASES: list[tuple[str, bytes, list[ServerOp]]] = [
    ("ping", b"PING\r\n", [PING_OP]),
    ("pong", b"PONG\r\n", [PONG_OP]),
    ("ok", b"+OK\r\n", [OK]),
    ("ping-lower", b"ping\r\n", [PING_OP]),
    ("pong-mixed", b"PoNg\r\n", [PONG_OP]),
    ("ok-lower", b"+ok\r\n", [OK]),
    ("info", b"INFO " + INFO_JSON + b"\r\n", [InfoOp(INFO_DICT)]),
    ("info-lower-tab", b"info\t{}\r\n", [InfoOp({})]),
    ("info-spaces", b'INFO   \t {"a": 1}  \r\n', [InfoOp({"a": 1})]),
    ("err-quoted", b"-ERR 'Authorization Violation'\r\n", [ErrOp("Authorization Violation")]),
    (
        "err-permissions",
        b"-ERR 'Permissions Violation for Publish to \"x.y\"'\r\n",
        [ErrOp('Permissions Violation for Publish to "x.y"')],
    ),
    ("err-unquoted", b"-ERR Unknown Protocol Operation\r\n", [ErrOp("Unknown Protocol Operation")]),
    ("err-lower", b"-err 'Stale Connection'\r\n", [ErrOp("Stale Connection")]),
    ("err-empty", b"-ERR\r\n", [ErrOp("")]),
    ("msg", msg("foo.bar", 1, "", b"hello"), [plain("foo.bar", 1, "", b"hello")]),
    ("msg-reply", msg("foo", 42, "_INBOX.abc", b"hi"), [plain("foo", 42, "_INBOX.abc", b"hi")]),
    ("msg-empty", msg("foo", 7, "", b""), [plain("foo", 7, "", b"")]),
    ("msg-empty-reply", msg("foo", 7, "r", b""), [plain("foo", 7, "r", b"")]),
    (
        "msg-crlf-payload",
        msg("foo", 1, "", b"\r\nMSG foo 1 3\r\nabc\r\n\r\n"),
        [plain("foo", 1, "", b"\r\nMSG foo 1 3\r\nabc\r\n\r\n")],
    ),
    ("msg-only-crlf", msg("foo", 1, "", b"\r\n"), [plain("foo", 1, "", b"\r\n")]),
    ("msg-binary", msg("bin", 3, "", bytes(range(256))), [plain("bin", 3, "", bytes(range(256)))]),
    ("msg-lower", b"msg foo 1 2\r\nhi\r\n", [plain("foo", 1, "", b"hi")]),
    ("msg-mixed-case", b"Msg foo 1 r 2\r\nhi\r\n", [plain("foo", 1, "r", b"hi")]),
    ("msg-tabs", b"MSG\tfoo\t1\t2\r\nhi\r\n", [plain("foo", 1, "", b"hi")]),
    ("msg-runs", b"MSG  foo \t 1\t\t reply   2\r\nhi\r\n", [plain("foo", 1, "reply", b"hi")]),
    ("msg-trailing-space", b"MSG foo 1 2 \r\nhi\r\n", [plain("foo", 1, "", b"hi")]),
    (
        "msg-utf8-subject",
        msg("grüße.日本", 9, "", b"x"),
        [plain("grüße.日本", 9, "", b"x")],
    ),
    (
        "hmsg",
        hmsg("foo", 1, "", b"NATS/1.0\r\nA: b\r\n\r\n", b"data"),
        [with_headers("foo", 1, "", b"NATS/1.0\r\nA: b\r\n\r\n", b"data", {"A": "b"})],
    ),
    (
        "hmsg-reply",
        hmsg("foo", 2, "reply.to", b"NATS/1.0\r\nA: b\r\n\r\n", b"data"),
        [with_headers("foo", 2, "reply.to", b"NATS/1.0\r\nA: b\r\n\r\n", b"data", {"A": "b"})],
    ),
    (
        "hmsg-empty-payload",
        hmsg("foo", 1, "", b"NATS/1.0\r\nA: b\r\n\r\n", b""),
        [with_headers("foo", 1, "", b"NATS/1.0\r\nA: b\r\n\r\n", b"", {"A": "b"})],
    ),
    (
        "hmsg-crlf-payload",
        hmsg("foo", 1, "", b"NATS/1.0\r\nA: b\r\n\r\n", b"\r\n\r\nNATS/1.0\r\n"),
        [
            with_headers(
                "foo", 1, "", b"NATS/1.0\r\nA: b\r\n\r\n", b"\r\n\r\nNATS/1.0\r\n", {"A": "b"}
            )
        ],
    ),
    (
        "hmsg-repeated",
        hmsg("foo", 1, "", BLOCK_MULTI, b"p"),
        [with_headers("foo", 1, "", BLOCK_MULTI, b"p", {"A": ["1", "2", "3"], "B": "two words"})],
    ),
    (
        "hmsg-folded",
        hmsg("foo", 1, "", BLOCK_FOLDED, b"p"),
        [
            with_headers(
                "foo",
                1,
                "",
                BLOCK_FOLDED,
                b"p",
                {"Long": "first part second part third", "X": "y"},
            )
        ],
    ),
    (
        "hmsg-folded-repeated",
        hmsg("foo", 1, "", BLOCK_FOLDED_REPEATED, b""),
        [with_headers("foo", 1, "", BLOCK_FOLDED_REPEATED, b"", {"K": ["a", "b continued"]})],
    ),
    (
        "hmsg-503",
        hmsg("_INBOX.x", 5, "", b"NATS/1.0 503\r\n\r\n", b""),
        [with_headers("_INBOX.x", 5, "", b"NATS/1.0 503\r\n\r\n", b"", None, 503, "")],
    ),
    (
        "hmsg-408-description",
        hmsg("_INBOX.x", 5, "", b"NATS/1.0 408 Request Timeout\r\n\r\n", b""),
        [
            with_headers(
                "_INBOX.x",
                5,
                "",
                b"NATS/1.0 408 Request Timeout\r\n\r\n",
                b"",
                None,
                408,
                "Request Timeout",
            )
        ],
    ),
    (
        "hmsg-status-and-headers",
        hmsg("s", 5, "", b"NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 7\r\n\r\n", b""),
        [
            with_headers(
                "s",
                5,
                "",
                b"NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 7\r\n\r\n",
                b"",
                {"Nats-Last-Consumer": "7"},
                100,
                "Idle Heartbeat",
            )
        ],
    ),
    (
        "hmsg-no-header-lines",
        hmsg("foo", 1, "", b"NATS/1.0\r\n\r\n", b"x"),
        [with_headers("foo", 1, "", b"NATS/1.0\r\n\r\n", b"x", None)],
    ),
    (
        "hmsg-lower-tabs",
        b"hmsg\tfoo \t3\t\t18  19\r\nNATS/1.0\r\nA: b\r\n\r\nx\r\n",
        [with_headers("foo", 3, "", b"NATS/1.0\r\nA: b\r\n\r\n", b"x", {"A": "b"})],
    ),
]

PARAMS = [pytest.param(wire, ops, id=case_id) for case_id, wire, ops in CASES]
ALL_WIRE = b"".join(wire for _, wire, _ in CASES)
ALL_OPS: list[ServerOp] = [op for _, _, ops in CASES for op in ops]


def test_case_ids_are_unique() -> None:
    ids = [case_id for case_id, _, _ in CASES]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize(("wire", "expected"), PARAMS)
def test_fed_whole(wire: bytes, expected: list[ServerOp]) -> None:
    parser = Parser()
    parser.feed(wire)
    assert drain(parser) == expected
    assert parser.buffered == 0
    assert parser.next_op() is None


@pytest.mark.parametrize(("wire", "expected"), PARAMS)
def test_split_at_every_byte_boundary(wire: bytes, expected: list[ServerOp]) -> None:
    for cut in range(1, len(wire)):
        parser = Parser()
        ops = parse_chunks([wire[:cut], wire[cut:]], parser)
        assert ops == expected, f"split at {cut}"
        assert parser.buffered == 0


@pytest.mark.parametrize(("wire", "expected"), PARAMS)
def test_one_byte_at_a_time(wire: bytes, expected: list[ServerOp]) -> None:
    parser = Parser()
    ops = parse_chunks([wire[i : i + 1] for i in range(len(wire))], parser)
    assert ops == expected
    assert parser.buffered == 0


@pytest.mark.parametrize(("wire", "expected"), PARAMS)
def test_incomplete_op_returns_none(wire: bytes, expected: list[ServerOp]) -> None:
    assert len(expected) == 1
    for cut in range(len(wire)):
        parser = Parser()
        parser.feed(wire[:cut])
        assert parser.next_op() is None, f"op returned from only {cut} bytes"


def test_several_ops_in_one_chunk() -> None:
    parser = Parser()
    parser.feed(ALL_WIRE)
    assert drain(parser) == ALL_OPS
    assert parser.buffered == 0


def test_several_ops_split_at_every_byte_boundary() -> None:
    for cut in range(1, len(ALL_WIRE)):
        assert parse_chunks([ALL_WIRE[:cut], ALL_WIRE[cut:]]) == ALL_OPS, f"split at {cut}"


def test_several_ops_one_byte_at_a_time() -> None:
    chunks = [ALL_WIRE[i : i + 1] for i in range(len(ALL_WIRE))]
    assert parse_chunks(chunks) == ALL_OPS


def test_several_ops_in_uneven_chunks() -> None:
    for size in (2, 3, 5, 7, 13, 64, 1000):
        chunks = [ALL_WIRE[i : i + size] for i in range(0, len(ALL_WIRE), size)]
        assert parse_chunks(chunks) == ALL_OPS, f"chunks of {size}"


def test_ops_arrive_one_by_one_when_drained_lazily() -> None:
    parser = Parser()
    parser.feed(b"PING\r\nPONG\r\n+OK\r\n")
    assert parser.next_op() is PING_OP
    assert parser.buffered == len(b"PONG\r\n+OK\r\n")
    assert parser.next_op() is PONG_OP
    assert parser.next_op() is OK
    assert parser.next_op() is None


def test_feed_after_partial_drain_keeps_order() -> None:
    parser = Parser()
    parser.feed(b"PING\r\nMSG a 1 3\r\nab")
    assert parser.next_op() is PING_OP
    assert parser.next_op() is None
    parser.feed(b"c\r\nPONG\r\n")
    assert drain(parser) == [plain("a", 1, "", b"abc"), PONG_OP]


def test_argument_free_ops_are_singletons_of_their_types() -> None:
    assert isinstance(PING_OP, PingOp)
    assert isinstance(PONG_OP, PongOp)
    assert isinstance(OK, OkOp)
    assert parse_chunks([b"PING\r\nPING\r\n"]) == [PING_OP, PING_OP]
    assert all(op is PING_OP for op in parse_chunks([b"PING\r\nping\r\n"]))
    assert (repr(PING_OP), repr(PONG_OP), repr(OK)) == ("PING", "PONG", "+OK")


def test_ops_are_immutable() -> None:
    message = parse_chunks([msg("foo", 1, "r", b"x")])[0]
    assert isinstance(message, MsgOp)
    with pytest.raises(AttributeError):
        message.subject = "bar"  # type: ignore[misc]
    info = parse_chunks([b"INFO {}\r\n"])[0]
    with pytest.raises(AttributeError):
        info.info = {}  # type: ignore[misc, union-attr]
    with pytest.raises(AttributeError):
        PING_OP.extra = 1  # type: ignore[attr-defined]
    with pytest.raises(AttributeError):
        OK.extra = 1  # type: ignore[attr-defined]


def test_msg_op_fields() -> None:
    block = b"NATS/1.0\r\nA: b\r\n\r\n"
    (op,) = parse_chunks([hmsg("sub.ject", 12, "re.ply", block, b"payload")])
    assert isinstance(op, MsgOp)
    assert op.subject == "sub.ject"
    assert op.sid == 12
    assert op.reply == "re.ply"
    assert op.payload == b"payload"
    assert type(op.payload) is bytes
    assert op.headers == {"A": "b"}
    assert op.size == len(block) + len(b"payload")


def test_msg_without_headers_has_none_headers_and_status() -> None:
    (op,) = parse_chunks([msg("a", 1, "", b"xyz")])
    assert isinstance(op, MsgOp)
    assert op.headers is None
    assert op.status is None
    assert op.description == ""
    assert op.size == 3


def test_large_sid_and_payload() -> None:
    payload = bytes(range(256)) * 4000  # 1 MB, below the default limit
    (op,) = parse_chunks([msg("big", 2**63, "", payload)])
    assert isinstance(op, MsgOp)
    assert op.sid == 2**63
    assert op.payload == payload


def test_large_payload_in_many_chunks() -> None:
    payload = bytes(range(256)) * 2000
    wire = msg("big", 1, "", payload) + b"PING\r\n"
    chunks = [wire[i : i + 1000] for i in range(0, len(wire), 1000)]
    parser = Parser()
    assert parse_chunks(chunks, parser) == [plain("big", 1, "", payload), PING_OP]
    assert parser.buffered == 0


def test_feed_accepts_bytearray_and_memoryview_and_copies() -> None:
    parser = Parser()
    data = bytearray(b"MSG a 1 3\r\nabc\r\n")
    parser.feed(data)
    data[11:14] = b"XYZ"  # the parser must have kept its own copy
    parser.feed(memoryview(b"PING\r\n"))
    assert drain(parser) == [plain("a", 1, "", b"abc"), PING_OP]


def test_feeding_nothing_changes_nothing() -> None:
    parser = Parser()
    parser.feed(b"")
    assert parser.buffered == 0
    assert parser.next_op() is None
    parser.feed(b"PI")
    parser.feed(b"")
    parser.feed(bytearray())
    assert parser.buffered == 2
    parser.feed(b"NG\r\n")
    assert drain(parser) == [PING_OP]


def test_buffered_counts_unreturned_bytes() -> None:
    parser = Parser()
    assert parser.buffered == 0
    parser.feed(b"PING\r\nMSG a 1 5\r\nab")
    assert parser.buffered == 6 + 11 + 2
    assert parser.next_op() is PING_OP
    assert parser.buffered == 11 + 2
    assert parser.next_op() is None
    parser.feed(b"c")
    parser.feed(b"de\r\n")
    assert parser.buffered == 5 + 2
    assert parser.next_op() == plain("a", 1, "", b"abcde")
    assert parser.buffered == 0


def test_reset_forgets_a_partial_control_line() -> None:
    parser = Parser()
    parser.feed(b"MSG a 1")
    assert parser.next_op() is None
    parser.reset()
    assert parser.buffered == 0
    parser.feed(b"PONG\r\n")
    assert drain(parser) == [PONG_OP]


def test_reset_forgets_a_pending_message_body() -> None:
    parser = Parser()
    parser.feed(b"MSG a 1 10\r\nabc")
    assert parser.next_op() is None
    parser.feed(b"de")
    parser.reset()
    assert parser.buffered == 0
    parser.feed(b"PING\r\n")
    assert drain(parser) == [PING_OP]


def test_default_limits() -> None:
    parser = Parser()
    assert parser.max_message_size == DEFAULT_MAX_PAYLOAD + MAX_PAYLOAD_HEADROOM
    assert Parser(max_payload=10).max_message_size == 10 + MAX_PAYLOAD_HEADROOM


def test_set_max_payload_lowers_the_limit() -> None:
    parser = Parser()
    limit = 100 + MAX_PAYLOAD_HEADROOM
    body = b"x" * limit
    parser.set_max_payload(100)
    assert parser.max_message_size == limit
    assert parse_chunks([msg("a", 1, "", body)], parser) == [plain("a", 1, "", body)]
    parser.feed(b"MSG a 1 %d\r\n" % (limit + 1))
    with pytest.raises(ProtocolError, match="exceeds the limit"):
        parser.next_op()


def test_set_max_payload_raises_the_limit() -> None:
    parser = Parser(max_payload=0)
    too_big = msg("a", 1, "", b"y" * (MAX_PAYLOAD_HEADROOM + 1))
    parser.feed(too_big)
    with pytest.raises(ProtocolError, match="exceeds the limit"):
        parser.next_op()
    parser = Parser(max_payload=0)
    parser.set_max_payload(DEFAULT_MAX_PAYLOAD)
    assert parse_chunks([too_big], parser) == [plain("a", 1, "", b"y" * (MAX_PAYLOAD_HEADROOM + 1))]


def test_hmsg_total_size_is_held_to_the_limit() -> None:
    parser = Parser(max_payload=0)
    block = b"NATS/1.0\r\n\r\n"
    at_limit = hmsg("a", 1, "", block, b"z" * (MAX_PAYLOAD_HEADROOM - len(block)))
    assert len(parse_chunks([at_limit], parser)) == 1
    parser.feed(b"HMSG a 1 12 %d\r\n" % (MAX_PAYLOAD_HEADROOM + 1))
    with pytest.raises(ProtocolError, match="HMSG size"):
        parser.next_op()


def test_control_line_of_exactly_the_limit_is_accepted_in_any_split() -> None:
    # A 4096-byte control line followed by CRLF is valid however the CRLF is split.
    text = b"e" * (MAX_CONTROL_LINE - len(b"-ERR ''"))
    line = b"-ERR '" + text + b"'"
    assert len(line) == MAX_CONTROL_LINE
    wire = line + b"\r\n"
    expected = [ErrOp(text.decode())]
    for cut in (len(line) - 1, len(line), len(line) + 1):
        assert parse_chunks([wire[:cut], wire[cut:]]) == expected, f"split at {cut}"
    assert parse_chunks([wire[i : i + 1] for i in range(len(wire))]) == expected


def test_long_subject_msg_at_the_control_line_limit() -> None:
    head = b"MSG  1 0"
    subject = "s" * (MAX_CONTROL_LINE - len(head))
    wire = msg(subject, 1, "", b"")
    assert wire.index(b"\r\n") == MAX_CONTROL_LINE
    assert parse_chunks([wire[i : i + 100] for i in range(0, len(wire), 100)]) == [
        plain(subject, 1, "", b"")
    ]


def test_custom_max_control_line() -> None:
    parser = Parser(max_control_line=10)
    assert parse_chunks([b"PING\r\n-ERR 'abc'\r\n"], parser) == [PING_OP, ErrOp("abc")]
    parser.feed(b"-ERR 'abcd'\r\n")
    with pytest.raises(ProtocolError, match="exceeds 10"):
        parser.next_op()


def test_awaiting_a_huge_body_allocates_nothing_for_it() -> None:
    # The control line of an accepted but not yet arrived message must not reserve room
    # for its body: only bytes that were actually fed are held.
    parser = Parser(max_payload=10**12)
    tracemalloc.start()
    try:
        parser.feed(b"MSG a 1 999999999999\r\n")
        assert parser.next_op() is None
        parser.feed(b"x" * 100)
        assert parser.next_op() is None
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000
    assert parser.buffered == 100

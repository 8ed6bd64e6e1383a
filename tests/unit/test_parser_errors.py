"""Parser tests for bad input: every problem raises ProtocolError naming the problem.

After a ProtocolError the parser promises nothing about its state (the client closes the
connection that carried the bad bytes); ``reset()`` is documented to forget everything,
so these tests only check that a reset parser parses a fresh stream again.
"""

from __future__ import annotations

import json

import pytest
from wire_helpers import drain, hmsg, parse_chunks

from nats_sync._core.proto import PING_OP, MsgOp, Parser
from nats_sync._defaults import MAX_CONTROL_LINE
from nats_sync.errors import Error, ProtocolError

NESTED = "INFO (JSON is nested too deeply|is not valid JSON)"

BAD: list[tuple[str, bytes, str]] = [
    ("unknown-op", b"FOO bar\r\n", "unknown op b'FOO'"),
    ("unknown-op-prefix", b"PINGPONG\r\n", "unknown op"),
    ("client-op-from-server", b"PUB foo 0\r\n\r\n", "unknown op b'PUB'"),
    ("empty-line", b"\r\n", "empty control line"),
    ("blank-line", b" \t \r\n", "empty control line"),
    ("msg-too-few", b"MSG foo 1\r\n", "MSG takes 3 or 4 arguments, got 2"),
    ("msg-one-arg", b"MSG foo\r\n", "MSG takes 3 or 4 arguments, got 1"),
    ("msg-no-args", b"MSG\r\n", "MSG takes 3 or 4 arguments, got 0"),
    ("msg-too-many", b"MSG foo 1 r x 5\r\n", "MSG takes 3 or 4 arguments, got 5"),
    ("msg-size-word", b"MSG foo 1 five\r\n", "MSG size must be a non-negative integer"),
    ("msg-size-negative", b"MSG foo 1 -1\r\n", "MSG size must be a non-negative integer"),
    ("msg-size-plus", b"MSG foo 1 +3\r\nabc\r\n", "MSG size must be a non-negative integer"),
    ("msg-size-float", b"MSG foo 1 1.5\r\n", "MSG size must be a non-negative integer"),
    ("msg-sid-word", b"MSG foo one 3\r\nabc\r\n", "MSG sid must be a non-negative integer"),
    ("msg-sid-negative", b"MSG foo -1 3\r\nabc\r\n", "MSG sid must be a non-negative integer"),
    ("msg-lower-bad", b"msg foo 1 x\r\n", "MSG size must be a non-negative integer"),
    ("hmsg-too-few", b"HMSG foo 1 5\r\n", "HMSG takes 4 or 5 arguments, got 3"),
    ("hmsg-too-many", b"HMSG foo 1 r x 5 5\r\n", "HMSG takes 4 or 5 arguments, got 6"),
    ("hmsg-header-size-word", b"HMSG foo 1 x 5\r\n", "HMSG header size must be"),
    ("hmsg-header-size-negative", b"HMSG foo 1 -2 5\r\n", "HMSG header size must be"),
    ("hmsg-total-size-word", b"HMSG foo 1 2 y\r\n", "HMSG total size must be"),
    ("hmsg-total-size-negative", b"HMSG foo 1 2 -5\r\n", "HMSG total size must be"),
    (
        "hmsg-header-larger-than-total",
        b"HMSG foo 1 10 5\r\n",
        "HMSG header size 10 is larger than its total size 5",
    ),
    ("msg-over-limit", b"MSG a 1 999999999999\r\n", "MSG size 999999999999 exceeds the limit"),
    (
        "hmsg-over-limit",
        b"HMSG a 1 12 999999999999\r\n",
        "HMSG size 999999999999 exceeds the limit",
    ),
    ("msg-subject-not-utf8", b"MSG \xff\xfe 1 0\r\n\r\n", "MSG subject is not valid UTF-8"),
    ("msg-reply-not-utf8", b"MSG a 1 \xc3( 0\r\n\r\n", "MSG reply subject is not valid UTF-8"),
    (
        "hmsg-subject-not-utf8",
        b"HMSG \x80 1 12 12\r\nNATS/1.0\r\n\r\n\r\n",
        "HMSG subject is not valid UTF-8",
    ),
    ("info-not-json", b"INFO {nope\r\n", "INFO is not valid JSON"),
    ("info-empty", b"INFO\r\n", "INFO is not valid JSON"),
    ("info-truncated", b'INFO {"a": 1\r\n', "INFO is not valid JSON"),
    ("info-not-utf8", b'INFO {"a": "\xff"}\r\n', "INFO is not valid JSON"),
    ("info-array", b"INFO [1, 2]\r\n", "INFO JSON is not an object"),
    ("info-string", b'INFO "server"\r\n', "INFO JSON is not an object"),
    ("info-null", b"INFO null\r\n", "INFO JSON is not an object"),
    ("info-max-payload-string", b'INFO {"max_payload":"1"}\r\n', "INFO max_payload"),
    ("info-max-payload-null", b'INFO {"max_payload":null}\r\n', "INFO max_payload"),
    ("info-max-payload-float", b'INFO {"max_payload":1.5}\r\n', "INFO max_payload"),
    ("info-max-payload-infinite", b'INFO {"max_payload":1e400}\r\n', "INFO max_payload"),
    ("info-max-payload-negative", b'INFO {"max_payload":-1}\r\n', "INFO max_payload"),
    ("info-max-payload-bool", b'INFO {"max_payload":true}\r\n', "INFO max_payload"),
    # Nesting deep enough to exhaust the JSON decoder's recursion (CPython 3.11 raises
    # RecursionError; a decoder that copes reports the unclosed arrays instead).
    ("info-nested-arrays", b"INFO " + b"[" * 4000 + b"\r\n", NESTED),
    ("info-nested-in-object", b'INFO {"a":' + b"[" * 4000 + b"\r\n", NESTED),
    ("msg-no-crlf-after-payload", b"MSG a 1 3\r\nabcXY", "is not followed by CRLF: b'XY'"),
    ("msg-payload-longer-than-size", b"MSG a 1 3\r\nabcd\r\n", "is not followed by CRLF"),
    ("msg-lf-only-after-payload", b"MSG a 1 3\r\nabc\n\r\n", "is not followed by CRLF"),
    (
        "hmsg-no-crlf-after-payload",
        b"HMSG a 1 12 14\r\nNATS/1.0\r\n\r\nxyZZ",
        "message body for 'a' is not followed by CRLF",
    ),
    ("hmsg-bad-version", b"HMSG a 1 5 5\r\nHELLO\r\n", "header block does not start with NATS/1.0"),
    (
        "hmsg-bad-status",
        hmsg("a", 1, "", b"NATS/1.0 5x3\r\n\r\n", b""),
        "bad status code '5x3'",
    ),
    ("hmsg-bad-header-line", hmsg("a", 1, "", b"NATS/1.0\r\nnocolon\r\n\r\n", b""), "bad header"),
    (
        "hmsg-orphan-continuation",
        hmsg("a", 1, "", b"NATS/1.0\r\n folded\r\n\r\n", b""),
        "continuation line with no header before",
    ),
    (
        "line-too-long-with-crlf",
        b"-ERR '" + b"x" * MAX_CONTROL_LINE + b"'\r\n",
        # whole: "control line of N bytes exceeds"; in small chunks: "longer than".
        f"control line (of {len(b'-ERR ') + 2 + MAX_CONTROL_LINE} bytes exceeds|longer than) "
        f"{MAX_CONTROL_LINE}",
    ),
    (
        "line-too-long-without-crlf",
        b"MSG " + b"s" * MAX_CONTROL_LINE,
        f"control line longer than {MAX_CONTROL_LINE} bytes without CRLF",
    ),
    (
        "info-deeply-nested-over-the-line-limit",
        b"INFO " + b"[" * 100_000,
        "control line longer than",
    ),
]
PARAMS = [pytest.param(wire, match, id=case_id) for case_id, wire, match in BAD]


def test_case_ids_are_unique() -> None:
    ids = [case_id for case_id, _, _ in BAD]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize(("wire", "match"), PARAMS)
def test_bad_input_fed_whole(wire: bytes, match: str) -> None:
    parser = Parser()
    parser.feed(wire)
    with pytest.raises(ProtocolError, match=match) as caught:
        parser.next_op()
    assert isinstance(caught.value, Error)
    assert str(caught.value).startswith("nats: protocol error: ")


@pytest.mark.parametrize(("wire", "match"), PARAMS)
def test_bad_input_fed_one_byte_at_a_time(wire: bytes, match: str) -> None:
    parser = Parser()
    with pytest.raises(ProtocolError, match=match):
        parse_chunks((wire[i : i + 1] for i in range(len(wire))), parser)


@pytest.mark.parametrize(("wire", "match"), PARAMS)
def test_bad_input_after_a_good_op(wire: bytes, match: str) -> None:
    parser = Parser()
    parser.feed(b"PING\r\n" + wire)
    assert parser.next_op() is PING_OP
    with pytest.raises(ProtocolError, match=match):
        parser.next_op()


@pytest.mark.parametrize(("wire", "match"), PARAMS)
def test_reset_parser_is_usable_after_an_error(wire: bytes, match: str) -> None:
    parser = Parser()
    parser.feed(wire)
    with pytest.raises(ProtocolError, match=match):
        drain(parser)
    parser.reset()
    assert parser.buffered == 0
    parser.feed(b"MSG a 1 2\r\nok\r\nPING\r\n")
    assert drain(parser) == [MsgOp("a", 1, "", b"ok", None, None, "", 2), PING_OP]


def test_size_over_limit_raises_before_any_payload() -> None:
    parser = Parser()
    parser.feed(b"MSG a 1 999999999999\r\n")
    # The control line alone is enough: the parser does not wait for the payload.
    with pytest.raises(ProtocolError, match="exceeds the limit of"):
        parser.next_op()


def test_size_just_over_limit() -> None:
    parser = Parser(max_payload=0)
    limit = parser.max_message_size
    parser.feed(b"MSG a 1 %d\r\n" % (limit + 1))
    with pytest.raises(ProtocolError, match=f"exceeds the limit of {limit} bytes"):
        parser.next_op()


def test_long_line_raises_as_soon_as_it_is_clearly_too_long() -> None:
    parser = Parser()
    fed = 0
    with pytest.raises(ProtocolError, match="without CRLF"):
        for _ in range(10_000):
            parser.feed(b"x" * 7)
            fed += 7
            assert parser.next_op() is None
    # Raised on the first chunk that took the line past the limit, not later.
    assert MAX_CONTROL_LINE < fed <= MAX_CONTROL_LINE + 7


def test_long_line_in_one_huge_chunk_raises_at_once() -> None:
    parser = Parser()
    parser.feed(b"y" * 1_000_000)
    with pytest.raises(ProtocolError, match=f"longer than {MAX_CONTROL_LINE} bytes"):
        parser.next_op()


def test_long_line_one_byte_at_a_time_stops_at_the_limit() -> None:
    parser = Parser()
    for count in range(1, MAX_CONTROL_LINE + 1):
        parser.feed(b"z")
        assert parser.next_op() is None, count
    parser.feed(b"z")
    with pytest.raises(ProtocolError, match="without CRLF"):
        parser.next_op()


def test_line_at_the_limit_ending_in_cr_waits_for_lf() -> None:
    # 4096 bytes and a CR may still be a valid line whose LF has not arrived.
    parser = Parser()
    parser.feed(b"+" * MAX_CONTROL_LINE + b"\r")
    assert parser.next_op() is None
    parser.feed(b"x")
    with pytest.raises(ProtocolError, match="without CRLF"):
        parser.next_op()


def test_long_line_limit_is_configurable() -> None:
    parser = Parser(max_control_line=16)
    parser.feed(b"PING" + b" " * 12)
    assert parser.next_op() is None
    parser.feed(b" ")
    with pytest.raises(ProtocolError, match="longer than 16 bytes"):
        parser.next_op()


def test_long_message_body_without_crlf_is_not_a_control_line_error() -> None:
    # A body may be far longer than a control line; only its trailing CRLF is checked.
    parser = Parser()
    body = b"b" * (MAX_CONTROL_LINE * 3)
    parser.feed(b"MSG a 1 %d\r\n" % len(body) + body[:-1])
    assert parser.next_op() is None
    parser.feed(body[-1:] + b"\r\n")
    op = parser.next_op()
    assert isinstance(op, MsgOp)
    assert op.payload == body


def test_deeply_nested_info_beyond_the_line_limit_is_a_protocol_error() -> None:
    parser = Parser(max_control_line=1_000_000)
    parser.feed(b"INFO " + b"[" * 100_000 + b"\r\n")
    with pytest.raises(ProtocolError, match=NESTED):
        parser.next_op()


def test_recursion_error_from_the_json_decoder_becomes_a_protocol_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def too_deep(body: bytes) -> object:
        raise RecursionError("maximum recursion depth exceeded while decoding a JSON array")

    monkeypatch.setattr(json, "loads", too_deep)  # the parser calls json.loads
    parser = Parser()
    parser.feed(b"INFO [[[[\r\n")
    with pytest.raises(ProtocolError, match=r"INFO JSON is nested too deeply: b'\[\[\[\['"):
        parser.next_op()


def test_number_too_long_for_int_is_a_protocol_error() -> None:
    # int() refuses more than 4300 digits; with a long enough line limit that must
    # still surface as a ProtocolError, not a ValueError.
    parser = Parser(max_control_line=20_000)
    parser.feed(b"MSG a " + b"1" * 5000 + b" 1\r\nx\r\n")
    with pytest.raises(ProtocolError, match="MSG sid has too many digits"):
        parser.next_op()


def test_missing_crlf_is_detected_across_chunks() -> None:
    parser = Parser()
    parser.feed(b"MSG a 1 3\r\nab")
    assert parser.next_op() is None
    parser.feed(b"c\r")
    assert parser.next_op() is None
    parser.feed(b"X")
    with pytest.raises(ProtocolError, match=r"not followed by CRLF: b'\\rX'"):
        parser.next_op()


def test_error_message_shortens_long_input() -> None:
    parser = Parser()
    parser.feed(b"NOPE" + b"q" * 1000 + b"\r\n")
    with pytest.raises(ProtocolError, match="unknown op") as caught:
        parser.next_op()
    assert len(str(caught.value)) < 200
    assert "..." in str(caught.value)

"""Header codec tests: NATS/1.0 blocks, status lines, repeated and folded headers."""

from __future__ import annotations

from typing import Any

import pytest

from nats_sync._core.proto import decode_headers, encode_headers
from nats_sync._core.proto.headers import VERSION_LINE
from nats_sync.errors import BadHeaderError, Error, ProtocolError


def test_encode_single_header() -> None:
    assert encode_headers({"Foo": "bar"}) == b"NATS/1.0\r\nFoo: bar\r\n\r\n"


def test_encode_empty_headers() -> None:
    assert encode_headers({}) == b"NATS/1.0\r\n\r\n"
    assert encode_headers({}).startswith(VERSION_LINE)


def test_encode_repeated_keys_in_order() -> None:
    block = encode_headers({"A": ["3", "1", "2"], "B": "x", "C": ("t1", "t2")})
    assert block == b"NATS/1.0\r\nA: 3\r\nA: 1\r\nA: 2\r\nB: x\r\nC: t1\r\nC: t2\r\n\r\n"


def test_encode_empty_list_writes_no_line() -> None:
    assert encode_headers({"A": [], "B": "x"}) == b"NATS/1.0\r\nB: x\r\n\r\n"


def test_encode_status_and_description() -> None:
    assert encode_headers({}, status=503) == b"NATS/1.0 503\r\n\r\n"
    assert (
        encode_headers({}, status=408, description="Request Timeout")
        == b"NATS/1.0 408 Request Timeout\r\n\r\n"
    )
    assert encode_headers({"K": "v"}, status=100, description="Idle Heartbeat") == (
        b"NATS/1.0 100 Idle Heartbeat\r\nK: v\r\n\r\n"
    )
    assert encode_headers({}, description="ignored without a status") == b"NATS/1.0\r\n\r\n"


def test_encode_utf8_values() -> None:
    assert encode_headers({"K": "日本"}) == "NATS/1.0\r\nK: 日本\r\n\r\n".encode()


@pytest.mark.parametrize(
    ("name", "match"),
    [
        ("a:b", "contains ':'"),
        (":", "contains ':'"),
        ("a b", "whitespace or a control character"),
        ("a\tb", "whitespace or a control character"),
        ("a\r\nb", "whitespace or a control character"),
        (" a", "whitespace or a control character"),
        ("a\x00", "whitespace or a control character"),
        ("a\x7f", "whitespace or a control character"),
        ("", "header name is empty"),
    ],
)
def test_bad_header_name(name: str, match: str) -> None:
    with pytest.raises(BadHeaderError, match=match):
        encode_headers({name: "v"})


@pytest.mark.parametrize("name", [1, None, b"K"])
def test_header_name_must_be_str(name: Any) -> None:
    with pytest.raises(BadHeaderError, match="header name must be a str"):
        encode_headers({name: "v"})


@pytest.mark.parametrize("value", ["a\rb", "a\nb", "a\r\nInjected: yes", "\n", "x\r"])
def test_bad_header_value(value: str) -> None:
    with pytest.raises(BadHeaderError, match="value contains CR or LF"):
        encode_headers({"K": value})
    with pytest.raises(BadHeaderError, match="value contains CR or LF"):
        encode_headers({"K": ["ok", value]})


@pytest.mark.parametrize("value", [None, b"bytes", 5, ["ok", None], [b"x"]])
def test_header_value_must_be_str(value: Any) -> None:
    with pytest.raises(BadHeaderError, match="must be a str or a list of str"):
        encode_headers({"K": value})


def test_bad_status_description() -> None:
    with pytest.raises(BadHeaderError, match="CR or LF"):
        encode_headers({}, status=503, description="No\r\nResponders")


def test_lone_surrogate_is_a_bad_header() -> None:
    with pytest.raises(BadHeaderError, match="UTF-8 cannot encode"):
        encode_headers({"K": "v\ud800"})
    with pytest.raises(BadHeaderError, match="UTF-8 cannot encode"):
        encode_headers({"K\udc00": "v"})


def test_bad_header_error_family() -> None:
    with pytest.raises(ValueError, match="contains ':'") as caught:
        encode_headers({"a:b": "v"})
    assert isinstance(caught.value, Error)
    assert str(caught.value).startswith("nats: invalid header: ")


# --- decoding ------------------------------------------------------------------------


def test_decode_simple() -> None:
    assert decode_headers(b"NATS/1.0\r\nFoo: bar\r\n\r\n") == ({"Foo": "bar"}, None, "")


def test_decode_no_headers_gives_none() -> None:
    assert decode_headers(b"NATS/1.0\r\n\r\n") == (None, None, "")


@pytest.mark.parametrize(
    ("block", "status", "description"),
    [
        (b"NATS/1.0 503\r\n\r\n", 503, ""),
        (b"NATS/1.0 408 Request Timeout\r\n\r\n", 408, "Request Timeout"),
        (b"NATS/1.0 404 No Messages\r\n\r\n", 404, "No Messages"),
        (b"NATS/1.0 100 Idle Heartbeat\r\n\r\n", 100, "Idle Heartbeat"),
        (b"NATS/1.0   409   Consumer Deleted  \r\n\r\n", 409, "Consumer Deleted"),
        (b"NATS/1.0\t503\r\n\r\n", 503, ""),
        (b"NATS/1.0 \r\n\r\n", None, ""),
    ],
)
def test_decode_status_line(block: bytes, status: int | None, description: str) -> None:
    assert decode_headers(block) == (None, status, description)


def test_decode_status_with_headers() -> None:
    block = b"NATS/1.0 100 FlowControl Request\r\nNats-Consumer-Stalled: abc\r\n\r\n"
    assert decode_headers(block) == ({"Nats-Consumer-Stalled": "abc"}, 100, "FlowControl Request")


def test_decode_repeated_keys_as_lists_in_order() -> None:
    block = b"NATS/1.0\r\nA: 3\r\nB: x\r\nA: 1\r\nA: 2\r\n\r\n"
    headers, _, _ = decode_headers(block)
    assert headers == {"A": ["3", "1", "2"], "B": "x"}
    assert headers is not None
    assert list(headers) == ["A", "B"]


def test_decode_keys_are_case_sensitive() -> None:
    headers, _, _ = decode_headers(b"NATS/1.0\r\nKey: 1\r\nkey: 2\r\n\r\n")
    assert headers == {"Key": "1", "key": "2"}


def test_decode_folded_continuation_lines() -> None:
    block = b"NATS/1.0\r\nLong: one\r\n two\r\n\t three \r\nNext: n\r\n\r\n"
    assert decode_headers(block) == ({"Long": "one two three", "Next": "n"}, None, "")


def test_decode_folded_line_continues_the_last_repeated_value() -> None:
    block = b"NATS/1.0\r\nK: a\r\nK: b\r\n  more\r\n\r\n"
    assert decode_headers(block) == ({"K": ["a", "b more"]}, None, "")


def test_decode_trims_spaces_and_tabs_around_names_and_values() -> None:
    block = b"NATS/1.0\r\nK:v\r\nL :  \t spaced \t \r\nEmpty:\r\n\r\n"
    assert decode_headers(block) == ({"K": "v", "L": "spaced", "Empty": ""}, None, "")


def test_decode_value_keeps_colons() -> None:
    headers, _, _ = decode_headers(b"NATS/1.0\r\nUrl: http://x:80/a\r\n\r\n")
    assert headers == {"Url": "http://x:80/a"}


def test_decode_keeps_other_whitespace_in_values() -> None:
    # Only the spaces and tabs around the value are trimmed, never other characters.
    headers = {"A": "x\u00a0", "B": "\x0by", "C\u2003": "\u2028z\x1f"}
    assert decode_headers(encode_headers(headers)) == (headers, None, "")


def test_decode_stops_at_the_empty_line() -> None:
    headers, _, _ = decode_headers(b"NATS/1.0\r\nA: 1\r\n\r\nB: 2\r\n\r\n")
    assert headers == {"A": "1"}


def test_decode_bad_utf8_becomes_replacement_character() -> None:
    headers, status, description = decode_headers(
        b"NATS/1.0 503 No \xffResponders\r\nK\xfe: v\xc3(\r\n\r\n"
    )
    assert headers == {"K\ufffd": "v\ufffd("}
    assert status == 503
    assert description == "No \ufffdResponders"


@pytest.mark.parametrize(
    ("block", "match"),
    [
        (b"HTTP/1.1 200 OK\r\n\r\n", "does not start with NATS/1.0"),
        (b"\r\nNATS/1.0\r\n\r\n", "does not start with NATS/1.0"),
        (b"", "does not start with NATS/1.0"),
        (b"NATS/1.01\r\n\r\n", "bad header version line"),
        (b"NATS/1.0x 503\r\n\r\n", "bad header version line"),
        (b"NATS/1.0 50\r\n\r\n", "bad status code '50'"),
        (b"NATS/1.0 5034 Too Long\r\n\r\n", "bad status code '5034'"),
        (b"NATS/1.0 abc\r\n\r\n", "bad status code 'abc'"),
        ("NATS/1.0 \uff15\uff10\uff13\r\n\r\n".encode(), "bad status code"),  # fullwidth
        (b"NATS/1.0\r\nno colon here\r\n\r\n", "bad header line 'no colon here'"),
        (b"NATS/1.0\r\n: empty name\r\n\r\n", "bad header line"),
        (b"NATS/1.0\r\n \t: blank name\r\n\r\n", "continuation line with no header before"),
        (b"NATS/1.0\r\n continued\r\n\r\n", "continuation line with no header before"),
    ],
)
def test_decode_bad_blocks(block: bytes, match: str) -> None:
    with pytest.raises(ProtocolError, match=match):
        decode_headers(block)


@pytest.mark.parametrize(
    ("headers", "status", "description"),
    [
        ({"A": "1"}, None, ""),
        ({"A": ["1", "2"], "B": "x"}, None, ""),
        ({"Nats-Msg-Id": "abc", "Trace": ["a", "b", "c"]}, 409, "Conflict"),
        ({"Empty": ""}, 503, ""),
        ({"Ünïcode-Ñame": "値"}, None, ""),
        ({"K": "value: with colon and  inner   spaces"}, None, ""),
    ],
)
def test_round_trip(
    headers: dict[str, str | list[str]], status: int | None, description: str
) -> None:
    assert decode_headers(encode_headers(headers, status, description)) == (
        headers,
        status,
        description,
    )


def test_round_trip_single_item_list_becomes_str() -> None:
    assert decode_headers(encode_headers({"K": ["only"]})) == ({"K": "only"}, None, "")

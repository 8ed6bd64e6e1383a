"""Msg: a read-only tuple the parser builds in one step; what users rely on still holds."""

from __future__ import annotations

import pickle

import pytest

from nats_sync import Error, Msg
from nats_sync._core.proto import Parser


def test_fields_by_keyword_and_from_the_parser_agree() -> None:
    sent: list[tuple[object, ...]] = []
    made = Msg(
        "a.b",
        reply="r.1",
        data=b"hi",
        headers={"k": "v"},
        sid=7,
        status=None,
        description="",
        publish=lambda *args: sent.append(args),
    )
    assert (
        made.subject,
        made.reply,
        made.data,
        made.headers,
        made.sid,
        made.status,
        made.description,
    ) == ("a.b", "r.1", b"hi", {"k": "v"}, 7, None, "")
    parser = Parser(message_type=Msg, context=made._publish)
    parser.feed(b"MSG a.b 7 r.1 2\r\nhi\r\n")
    (parsed,) = parser.next_ops()
    assert type(parsed) is Msg
    assert (parsed.subject, parsed.reply, parsed.data, parsed.sid) == ("a.b", "r.1", b"hi", 7)
    parsed.respond(b"answer")
    assert sent == [("r.1", b"answer", "", None)]


def test_read_only_identity_equality_and_hashable() -> None:
    first = Msg("s", data=b"x", headers={"a": "b"})
    second = Msg("s", data=b"x", headers={"a": "b"})
    with pytest.raises(AttributeError):
        first.data = b"y"  # type: ignore[misc]
    assert first == first and first != second  # the same message only if the same object
    assert len({first, second}) == 2  # hashable even with a headers dict


def test_respond_errors_and_no_responders() -> None:
    with pytest.raises(Error, match="no reply subject"):
        Msg("s", data=b"x").respond(b"y")
    with pytest.raises(Error, match="not received by a client"):
        Msg("s", reply="r").respond(b"y")
    assert Msg("s", status=503).is_no_responders
    assert not Msg("s", data=b"x", status=503).is_no_responders


def test_pickles_without_its_client() -> None:
    msg = Msg("s", reply="r", data=b"payload", headers={"k": ["1", "2"]}, sid=3, publish=print)
    back = pickle.loads(pickle.dumps(msg))
    assert (back.subject, back.reply, back.data, back.headers, back.sid) == (
        "s",
        "r",
        b"payload",
        {"k": ["1", "2"]},
        3,
    )
    assert back._publish is None
    assert repr(back) == "<Msg subject='s' reply='r' data=b'payload'>"

"""Encoder tests: CONNECT, PUB, HPUB, SUB, UNSUB, PING, PONG and the subject rules."""

from __future__ import annotations

import json
from typing import Any

import pytest

from nats_sync._core.proto import (
    CRLF,
    PING,
    PONG,
    connect_fields,
    encode_connect,
    encode_hpub,
    encode_hpub_line,
    encode_pub,
    encode_sub,
    encode_unsub,
    pub_line,
    pub_prefix,
    publish_subject,
    queue_group,
    reply_subject,
    subscribe_subject,
)
from nats_sync._core.proto import encoder as encoder_module
from nats_sync._defaults import SUBJECT_CACHE_SIZE
from nats_sync.errors import BadHeaderError, BadSubjectError, Error

AUTH_KEYS = ("user", "pass", "auth_token", "jwt", "nkey", "sig")


def connect_json(frame: bytes) -> dict[str, Any]:
    """The JSON object of a CONNECT frame, after checking its framing."""
    assert frame.startswith(b"CONNECT ")
    assert frame.endswith(CRLF)
    assert frame.count(b"\r\n") == 1
    fields = json.loads(frame[len(b"CONNECT ") : -2])
    assert isinstance(fields, dict)
    return fields


# --- CONNECT -------------------------------------------------------------------------


def test_connect_default_fields() -> None:
    fields = connect_json(encode_connect(connect_fields(version="1.2.3")))
    assert fields == {
        "verbose": False,
        "pedantic": False,
        "tls_required": False,
        "lang": "python",
        "version": "1.2.3",
        "protocol": 1,
        "headers": True,
        "no_responders": True,
        "echo": True,
    }
    for key in (*AUTH_KEYS, "name"):
        assert key not in fields


def test_connect_options_are_carried() -> None:
    fields = connect_json(
        encode_connect(
            connect_fields(
                version="0.1.0",
                verbose=True,
                pedantic=True,
                echo=False,
                name="worker-7",
                tls_required=True,
            )
        )
    )
    assert fields["verbose"] is True
    assert fields["pedantic"] is True
    assert fields["echo"] is False
    assert fields["name"] == "worker-7"
    assert fields["tls_required"] is True
    assert fields["version"] == "0.1.0"
    assert fields["lang"] == "python"
    assert fields["protocol"] == 1
    assert fields["headers"] is True
    assert fields["no_responders"] is True


def test_connect_empty_name_is_omitted() -> None:
    assert "name" not in connect_fields(version="1", name="")
    assert "name" not in connect_fields(version="1", name=None)


@pytest.mark.parametrize(
    "auth",
    [
        {"user": "alice", "pass": "s3cret"},
        {"auth_token": "tok"},
        {"nkey": "UABC", "sig": "c2ln"},
        {"jwt": "eyJ.x.y", "sig": "c2ln"},
    ],
)
def test_connect_auth_fields_when_given(auth: dict[str, str]) -> None:
    fields = connect_json(encode_connect(connect_fields(version="1", auth=auth)))
    for key, value in auth.items():
        assert fields[key] == value
    for key in AUTH_KEYS:
        if key not in auth:
            assert key not in fields


def test_connect_empty_auth_adds_nothing() -> None:
    assert connect_fields(version="1", auth={}) == connect_fields(version="1")


def test_connect_stays_on_one_line() -> None:
    # CR/LF in a field is escaped by JSON, so the frame still has a single CRLF.
    fields = connect_json(encode_connect(connect_fields(version="1", name="a\r\nb")))
    assert fields["name"] == "a\r\nb"


def test_connect_is_compact_json() -> None:
    frame = encode_connect({"a": 1, "b": [True, None]})
    assert frame == b'CONNECT {"a":1,"b":[true,null]}\r\n'


# --- PUB / HPUB ----------------------------------------------------------------------


def test_pub() -> None:
    assert encode_pub("foo", b"hello") == b"PUB foo 5\r\nhello\r\n"


def test_pub_with_reply() -> None:
    assert encode_pub("foo.bar", b"hi", reply="_INBOX.x") == b"PUB foo.bar _INBOX.x 2\r\nhi\r\n"


def test_pub_empty_payload() -> None:
    assert encode_pub("foo") == b"PUB foo 0\r\n\r\n"
    assert encode_pub("foo", b"", "r") == b"PUB foo r 0\r\n\r\n"


def test_pub_payload_with_crlf_is_counted_not_escaped() -> None:
    payload = b"\r\nPUB x 1\r\n\r\n"
    assert encode_pub("a", payload) == b"PUB a %d\r\n" % len(payload) + payload + b"\r\n"


def test_pub_utf8_subject_is_encoded() -> None:
    assert encode_pub("grüße", b"x") == "PUB grüße 1\r\nx\r\n".encode()


def test_pub_and_hpub_lines() -> None:
    assert pub_line(b"PUB s ", b"", 3) == b"PUB s 3\r\n"
    assert pub_line(b"PUB s ", b"r", 0) == b"PUB s r 0\r\n"
    assert pub_line(pub_prefix("a.b"), b"_INBOX.x", 12) == b"PUB a.b _INBOX.x 12\r\n"
    assert encode_hpub_line(b"s", b"", 12, 15) == b"HPUB s 12 15\r\n"
    assert encode_hpub_line(b"s", b"r", 12, 12) == b"HPUB s r 12 12\r\n"


def test_hpub_exact_sizes() -> None:
    frame = encode_hpub("foo", b"hi", {"A": "b"})
    block = b"NATS/1.0\r\nA: b\r\n\r\n"
    assert frame == b"HPUB foo %d %d\r\n" % (len(block), len(block) + 2) + block + b"hi\r\n"
    assert frame.startswith(b"HPUB foo 18 20\r\n")


def test_hpub_with_reply_and_repeated_header() -> None:
    frame = encode_hpub("foo", b"xyz", {"K": ["1", "2"], "Other": "v"}, reply="re")
    block = b"NATS/1.0\r\nK: 1\r\nK: 2\r\nOther: v\r\n\r\n"
    assert frame == b"HPUB foo re %d %d\r\n" % (len(block), len(block) + 3) + block + b"xyz\r\n"


def test_hpub_sizes_count_bytes_not_characters() -> None:
    frame = encode_hpub("s", "é".encode(), {"K": "ü日本"})
    line, _, rest = frame.partition(b"\r\n")
    _, _, header_size, total_size = line.split(b" ")
    body = rest[:-2]
    assert int(total_size) == len(body)
    assert body[: int(header_size)] == "NATS/1.0\r\nK: ü日本\r\n\r\n".encode()
    assert body[int(header_size) :] == "é".encode()


def test_hpub_without_headers_has_the_bare_block() -> None:
    assert encode_hpub("s", b"p") == b"HPUB s 12 13\r\nNATS/1.0\r\n\r\np\r\n"
    assert encode_hpub("s", b"p", {}) == encode_hpub("s", b"p", None)


def test_hpub_bad_header_is_rejected() -> None:
    with pytest.raises(BadHeaderError, match="contains ':'"):
        encode_hpub("s", b"", {"a:b": "x"})
    with pytest.raises(BadHeaderError, match="CR or LF"):
        encode_hpub("s", b"", {"a": "x\r\nInjected: 1"})


# --- SUB / UNSUB / PING / PONG -------------------------------------------------------


def test_sub() -> None:
    assert encode_sub("foo.*", 1) == b"SUB foo.* 1\r\n"
    assert encode_sub("foo.>", 22) == b"SUB foo.> 22\r\n"


def test_sub_with_queue() -> None:
    assert encode_sub("foo", 3, "workers") == b"SUB foo workers 3\r\n"
    assert encode_sub("foo", 3, "") == b"SUB foo 3\r\n"


def test_sub_bad_queue_is_rejected() -> None:
    with pytest.raises(BadSubjectError, match="queue group"):
        encode_sub("foo", 1, "a b")


def test_unsub() -> None:
    assert encode_unsub(5) == b"UNSUB 5\r\n"
    assert encode_unsub(5, 0) == b"UNSUB 5\r\n"
    assert encode_unsub(5, 10) == b"UNSUB 5 10\r\n"


def test_ping_pong() -> None:
    assert PING == b"PING\r\n"
    assert PONG == b"PONG\r\n"
    assert CRLF == b"\r\n"


# --- subject rules -------------------------------------------------------------------

VALID_PUBLISH = [
    "foo",
    "foo.bar.baz",
    "_INBOX.abc123",
    "a*",  # a partial wildcard is a literal token
    "foo.b>",
    "*a.>b",
    "$JS.API.INFO",
    "grüße.日本",
    "a-b_c~d",
    "x" * 1000,
]

BAD_SUBJECTS = [
    ("", "is empty"),
    ("a..b", "empty token"),
    (".a", "empty token"),
    ("a.", "empty token"),
    (".", "empty token"),
    ("a b", "whitespace or a control character"),
    ("a\tb", "whitespace or a control character"),
    ("a\rb", "whitespace or a control character"),
    ("a\nb", "whitespace or a control character"),
    ("a\x00b", "whitespace or a control character"),
    ("a\x7fb", "whitespace or a control character"),
    (" a", "whitespace or a control character"),
    ("a ", "whitespace or a control character"),
]

WILDCARD_SUBJECTS = ["*", ">", "a.*", "a.>", "*.b", "a.*.c"]


@pytest.mark.parametrize("subject", VALID_PUBLISH)
def test_valid_publish_subject(subject: str) -> None:
    assert publish_subject(subject) == subject.encode()
    assert publish_subject(subject) == subject.encode()  # second call: from the cache
    assert subscribe_subject(subject) == subject.encode()
    assert reply_subject(subject) == subject.encode()


@pytest.mark.parametrize(("subject", "match"), BAD_SUBJECTS)
def test_bad_subject_everywhere(subject: str, match: str) -> None:
    for check in (publish_subject, subscribe_subject, reply_subject):
        if check is reply_subject and subject == "":
            continue  # "" means "no reply subject"
        with pytest.raises(BadSubjectError, match=match):
            check(subject)
        # Not cached: the second attempt is refused too.
        with pytest.raises(BadSubjectError):
            check(subject)


@pytest.mark.parametrize(("subject", "match"), BAD_SUBJECTS)
def test_bad_subject_in_frames(subject: str, match: str) -> None:
    with pytest.raises(BadSubjectError, match=match):
        encode_pub(subject, b"x")
    with pytest.raises(BadSubjectError, match=match):
        encode_hpub(subject, b"x", {"a": "b"})
    with pytest.raises(BadSubjectError, match=match):
        encode_sub(subject, 1)
    if subject:
        with pytest.raises(BadSubjectError, match=f"reply subject .*{match}"):
            encode_pub("ok", b"x", reply=subject)


@pytest.mark.parametrize("subject", WILDCARD_SUBJECTS)
def test_wildcards_not_allowed_in_publish(subject: str) -> None:
    with pytest.raises(BadSubjectError, match="has a wildcard; only SUB takes those"):
        publish_subject(subject)
    with pytest.raises(BadSubjectError, match="wildcard"):
        encode_pub(subject, b"")
    with pytest.raises(BadSubjectError, match=r"reply subject .* has a wildcard"):
        reply_subject(subject)


@pytest.mark.parametrize("subject", WILDCARD_SUBJECTS)
def test_wildcards_allowed_in_sub(subject: str) -> None:
    assert subscribe_subject(subject) == subject.encode()
    assert encode_sub(subject, 9) == b"SUB %b 9\r\n" % subject.encode()


@pytest.mark.parametrize("subject", [">.a", "a.>.b", ">.>", "a.>.*"])
def test_full_wildcard_only_last_in_sub(subject: str) -> None:
    with pytest.raises(BadSubjectError, match="'>' before its last token"):
        subscribe_subject(subject)


@pytest.mark.parametrize("subject", [None, b"foo", 1, 1.5])
def test_subject_must_be_str(subject: Any) -> None:
    with pytest.raises(BadSubjectError, match="subject must be a str"):
        publish_subject(subject)
    with pytest.raises(BadSubjectError, match="subject must be a str"):
        subscribe_subject(subject)
    with pytest.raises(BadSubjectError, match="reply subject must be a str"):
        reply_subject(subject)


def test_subject_with_lone_surrogate_is_a_bad_subject() -> None:
    with pytest.raises(BadSubjectError, match="cannot be encoded as UTF-8"):
        publish_subject("a\ud800")
    with pytest.raises(BadSubjectError, match="cannot be encoded as UTF-8"):
        subscribe_subject("\udfff.>")
    with pytest.raises(BadSubjectError, match=r"reply subject .* cannot be encoded"):
        reply_subject("r\ud800")
    with pytest.raises(BadSubjectError, match=r"queue group .* cannot be encoded"):
        queue_group("q\ud800")


def test_empty_reply_means_none() -> None:
    assert reply_subject("") == b""


def test_bad_subject_errors_are_value_errors_of_the_family() -> None:
    with pytest.raises(ValueError, match="empty token") as caught:
        publish_subject("a..b")
    assert isinstance(caught.value, BadSubjectError)
    assert isinstance(caught.value, Error)
    assert str(caught.value) == "nats: invalid subject: subject 'a..b' has an empty token"


def test_subject_caches_stay_bounded() -> None:
    for index in range(SUBJECT_CACHE_SIZE + 10):
        publish_subject(f"bound.{index}")
        subscribe_subject(f"bound.{index}.*")
    assert 0 < len(encoder_module._publish_cache) <= SUBJECT_CACHE_SIZE
    assert 0 < len(encoder_module._subscribe_cache) <= SUBJECT_CACHE_SIZE
    # Still correct after the cache was cleared.
    assert publish_subject("bound.0") == b"bound.0"
    with pytest.raises(BadSubjectError):
        publish_subject("bound.*")


def test_subjects_used_once_are_validated_but_not_cached() -> None:
    for subject in ("_INBOX.once.1", "$JS.ACK.S.c.1.7.7.1795428846239480290.0"):
        assert publish_subject(subject) == subject.encode()
        assert subject not in encoder_module._publish_cache
    with pytest.raises(BadSubjectError):
        publish_subject("$JS.ACK..bad")


def test_wildcard_subject_validated_for_sub_is_not_publishable() -> None:
    assert subscribe_subject("shared.*") == b"shared.*"
    with pytest.raises(BadSubjectError, match="wildcard"):
        publish_subject("shared.*")


# --- queue groups --------------------------------------------------------------------


@pytest.mark.parametrize("queue", ["q", "workers.eu", "grüße", "a*", "Q-1_x"])
def test_valid_queue_group(queue: str) -> None:
    assert queue_group(queue) == queue.encode()


def test_empty_queue_group_means_none() -> None:
    assert queue_group("") == b""


@pytest.mark.parametrize("queue", ["a b", "a\tb", "a\rb", "a\nb", " q", "q\x00", "q\x7f"])
def test_bad_queue_group(queue: str) -> None:
    with pytest.raises(BadSubjectError, match=r"queue group .* contains whitespace"):
        queue_group(queue)


@pytest.mark.parametrize("queue", [None, b"q", 3])
def test_queue_group_must_be_str(queue: Any) -> None:
    with pytest.raises(BadSubjectError, match="queue group must be a str"):
        queue_group(queue)

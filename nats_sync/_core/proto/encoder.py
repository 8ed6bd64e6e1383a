"""Client op encoders and the NATS subject rules.

How it works: pure functions returning bytes, no I/O. Validated subjects are cached
(publish hits the same few subjects over and over), so the hot path is one dict lookup
and one bytes format. The cache is a plain dict: a racing thread at worst validates a
subject twice.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from nats_sync._core.proto.headers import HeadersInput, encode_headers
from nats_sync._defaults import SUBJECT_CACHE_SIZE, UNCACHED_SUBJECT_PREFIXES
from nats_sync.errors import BadSubjectError

CRLF = b"\r\n"
PING = b"PING\r\n"
PONG = b"PONG\r\n"

_WHITESPACE_OR_CONTROL = frozenset("\x7f" + "".join(chr(c) for c in range(33)))
_publish_cache: dict[str, bytes] = {}
_subscribe_cache: dict[str, bytes] = {}


def _check_framing(subject: object, what: str) -> str:
    """The checks that keep a subject one word of its protocol line: a non-empty str
    without whitespace or control characters (what ``skip_subject_validation`` keeps)."""
    if not isinstance(subject, str):
        raise BadSubjectError(f"{what} must be a str, got {type(subject).__name__}")
    if not subject:
        raise BadSubjectError(f"{what} is empty")
    if not _WHITESPACE_OR_CONTROL.isdisjoint(subject):
        raise BadSubjectError(f"{what} {subject!r} contains whitespace or a control character")
    return subject


def _check_subject(
    subject: object, *, wildcards: bool, what: str = "subject", strict: bool = True
) -> bytes:
    subject = _check_framing(subject, what)
    if not strict:
        return _utf8(subject, what)
    if (
        "*" not in subject
        and ">" not in subject
        and ".." not in subject
        and subject[0] != "."
        and subject[-1] != "."
    ):
        # No empty token and no wildcard token can be in it: the token loop below would
        # pass it (a reply to an inbox, checked for every reply, is the usual case).
        return _utf8(subject, what)
    tokens = subject.split(".")
    last = len(tokens) - 1
    for index, token in enumerate(tokens):
        if not token:
            raise BadSubjectError(f"{what} {subject!r} has an empty token")
        if token in {">", "*"}:
            if not wildcards:
                raise BadSubjectError(f"{what} {subject!r} has a wildcard; only SUB takes those")
            if token == ">" and index != last:
                raise BadSubjectError(f"{what} {subject!r} has '>' before its last token")
    return _utf8(subject, what)


def _utf8(text: str, what: str) -> bytes:
    try:
        return text.encode()
    except UnicodeEncodeError:  # a lone surrogate
        raise BadSubjectError(f"{what} {text!r} cannot be encoded as UTF-8") from None


def publish_subject(subject: str, strict: bool = True) -> bytes:
    """Validates a subject to publish to (no wildcards) and returns it encoded.

    With ``strict`` False (``skip_subject_validation``) only the framing is checked
    (a non-empty str without whitespace or control characters), and nothing is cached.

    Raises:
        BadSubjectError: empty, whitespace, an empty token, or a wildcard token.
    """
    encoded = _publish_cache.get(subject)
    if encoded is None:
        if not strict:
            return _check_subject(subject, wildcards=False, strict=False)
        encoded = _check_subject(subject, wildcards=False)
        if subject.startswith(UNCACHED_SUBJECT_PREFIXES):
            return encoded  # a reply inbox is used once: caching it only evicts the rest
        if len(_publish_cache) >= SUBJECT_CACHE_SIZE:
            _publish_cache.clear()
        _publish_cache[subject] = encoded
    return encoded


def reply_subject(reply: str, strict: bool = True) -> bytes:
    """Validates an optional reply subject ("" means none) and returns it encoded
    (``strict`` as for :func:`publish_subject`)."""
    if reply == "":
        return b""
    encoded = _publish_cache.get(reply)
    if encoded is None:
        encoded = _check_subject(reply, wildcards=False, what="reply subject", strict=strict)
    return encoded


def subscribe_subject(subject: str, strict: bool = True) -> bytes:
    """Validates a subscription subject (``*`` anywhere, ``>`` only last); ``strict``
    as for :func:`publish_subject`.

    Raises:
        BadSubjectError: empty, whitespace, an empty token, or a misplaced ``>``.
    """
    encoded = _subscribe_cache.get(subject)
    if encoded is None:
        if not strict:
            return _check_subject(subject, wildcards=True, strict=False)
        encoded = _check_subject(subject, wildcards=True)
        if len(_subscribe_cache) >= SUBJECT_CACHE_SIZE:
            _subscribe_cache.clear()
        _subscribe_cache[subject] = encoded
    return encoded


def queue_group(queue: str) -> bytes:
    """Validates an optional queue group name ("" means none) and returns it encoded."""
    if not isinstance(queue, str):
        raise BadSubjectError(f"queue group must be a str, got {type(queue).__name__}")
    if not _WHITESPACE_OR_CONTROL.isdisjoint(queue):
        raise BadSubjectError(f"queue group {queue!r} contains whitespace or a control character")
    return _utf8(queue, "queue group")


def encode_connect(fields: Mapping[str, Any]) -> bytes:
    """Encodes ``CONNECT {json}``; ``fields`` usually comes from :func:`connect_fields`."""
    return b"CONNECT " + json.dumps(dict(fields), separators=(",", ":")).encode() + CRLF


def connect_fields(
    *,
    version: str,
    verbose: bool = False,
    pedantic: bool = False,
    echo: bool = True,
    name: str | None = None,
    tls_required: bool = False,
    auth: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The CONNECT JSON object nats_sync sends.

    Args:
        version: the client version.
        verbose: ask the server for ``+OK`` after every op.
        pedantic: ask the server for strict checking.
        echo: whether the server delivers our own publishes to our subscriptions.
        name: the client name shown in the server's monitoring.
        tls_required: whether this connection uses TLS.
        auth: fields such as ``user``/``pass``, ``auth_token``, ``nkey``/``sig``, ``jwt``.

    Returns:
        A dict ready for :func:`encode_connect`.
    """
    fields: dict[str, Any] = {
        "verbose": verbose,
        "pedantic": pedantic,
        "tls_required": tls_required,
        "lang": "python",
        "version": version,
        "protocol": 1,
        "headers": True,
        "no_responders": True,
        "echo": echo,
    }
    if name:
        fields["name"] = name
    if auth:
        fields.update(auth)
    return fields


def pub_line(prefix: bytes, reply: bytes, size: int) -> bytes:
    """``PUB <subject> [<reply>] <size>\\r\\n`` from :func:`pub_prefix`'s
    ``b"PUB <subject> "`` and an already validated reply: every PUB line is made here
    (``Publisher._pub_line`` inlines the form without a reply)."""
    if reply:
        return b"%b%b %d\r\n" % (prefix, reply, size)
    return b"%b%d\r\n" % (prefix, size)


def pub_prefix(subject: str, strict: bool = True) -> bytes:
    """``b"PUB <subject> "`` for a validated publish subject (the publish hot path
    caches it with the size appended); ``strict`` as for :func:`publish_subject`.

    Raises:
        BadSubjectError: the subject breaks the subject rules.
    """
    return b"PUB " + publish_subject(subject, strict) + b" "


def encode_hpub_line(subject: bytes, reply: bytes, header_size: int, total_size: int) -> bytes:
    """The ``HPUB`` control line for already validated subject and reply."""
    if reply:
        return b"HPUB %b %b %d %d\r\n" % (subject, reply, header_size, total_size)
    return b"HPUB %b %d %d\r\n" % (subject, header_size, total_size)


def encode_pub(subject: str, payload: bytes = b"", reply: str = "") -> bytes:
    """Encodes a whole ``PUB`` frame: control line, payload, CRLF.

    Raises:
        BadSubjectError: the subject or reply breaks the subject rules.
    """
    line = pub_line(pub_prefix(subject), reply_subject(reply), len(payload))
    return line + payload + CRLF


def encode_hpub(
    subject: str, payload: bytes = b"", headers: HeadersInput | None = None, reply: str = ""
) -> bytes:
    """Encodes a whole ``HPUB`` frame (header block counted exactly in both sizes).

    Raises:
        BadSubjectError: the subject or reply breaks the subject rules.
        BadHeaderError: a header name or value cannot be written.
    """
    block = encode_headers(headers or {})
    line = encode_hpub_line(
        publish_subject(subject), reply_subject(reply), len(block), len(block) + len(payload)
    )
    return line + block + payload + CRLF


def encode_sub(subject: str, sid: int, queue: str = "", strict: bool = True) -> bytes:
    """Encodes ``SUB <subject> [queue] <sid>``; ``strict`` as for
    :func:`publish_subject` (a queue group is only ever checked for its framing).

    Raises:
        BadSubjectError: the subject or queue group breaks the rules.
    """
    encoded = subscribe_subject(subject, strict)
    if queue:
        return b"SUB %b %b %d\r\n" % (encoded, queue_group(queue), sid)
    return b"SUB %b %d\r\n" % (encoded, sid)


def encode_unsub(sid: int, max_msgs: int = 0) -> bytes:
    """Encodes ``UNSUB <sid> [max]``; ``max_msgs`` 0 means unsubscribe now."""
    if max_msgs > 0:
        return b"UNSUB %d %d\r\n" % (sid, max_msgs)
    return b"UNSUB %d\r\n" % sid

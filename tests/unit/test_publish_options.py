"""The JetStream publish options are one set: the signatures that spell them out agree,
their defaults are ``_defaults``', and the header builder's shortcuts agree with the
full merge (the house rule: a fast path that duplicates a slow one is held to it).

- ``JetStream.publish``, ``JetStream.publish_async`` and the window's ``publish_async``
  (which the context binds on each instance in its own place, to save a frame per
  message) have the same parameters, in the same order, with the same defaults.
- ``publish_headers`` (the builder of ``publish_async`` and fast ingest) gives, for
  every keyword alone and for all of them at once, with and without the user's headers,
  what ``js_headers`` (the merge of ``publish`` and atomic batches) gives, once both
  are encoded; it refuses what the merge refuses; and with no keyword it hands back the
  user's headers themselves, which is what ``publish_async`` and ``FastPublisher.add``
  use without calling it.
- ``publish_async`` sends, for every keyword, the headers the builder makes (over a fake
  client; the fast publisher's side is in tests/integration/test_js_fast_headers.py).
"""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from nats_sync import _defaults as d
from nats_sync import errors as core
from nats_sync._core.proto import encode_headers
from nats_sync.jetstream import JetStream
from nats_sync.jetstream._publishing.acks import AsyncPublisher
from nats_sync.jetstream._publishing.fast import FastPublisher
from nats_sync.jetstream._streams.wire import js_headers, publish_headers

pytestmark = pytest.mark.timeout(20)

#: One good value of every header keyword.
KEYWORDS: dict[str, Any] = {
    "msg_id": "m-1",
    "expected_stream": "ORDERS",
    "expected_last_seq": 0,
    "expected_last_subject_seq": 7,
    "expected_last_msg_id": "m-0",
    "ttl": 60,
    "expected_last_subject_seq_subject": "orders.*",
}
#: One bad value of every header keyword.
BAD_KEYWORDS: dict[str, Any] = {
    "msg_id": "",
    "expected_stream": "A.B",
    "expected_last_seq": -1,
    "expected_last_subject_seq": 1.5,
    "expected_last_msg_id": 3,
    "ttl": 0.5,
    "expected_last_subject_seq_subject": "orders..a",
}
USER_HEADERS = {"K": "v", "Nats-Msg-Id": "replaced when msg_id is given"}


def parameters(function: Any) -> list[tuple[str, Any, Any]]:
    """(name, kind, default) of each parameter but ``self``."""
    return [
        (p.name, p.kind, p.default)
        for p in inspect.signature(function).parameters.values()
        if p.name != "self"
    ]


def encoded(headers: Any) -> bytes | None:
    """What goes on the wire for a builder's result (a block is sent as it is)."""
    if headers is None or isinstance(headers, bytes):
        return headers
    return encode_headers(headers)


def test_the_publish_signatures_are_one_set() -> None:
    publish = parameters(JetStream.publish)
    assert parameters(JetStream.publish_async) == publish
    assert parameters(AsyncPublisher.publish_async) == publish
    defaults = {name: default for name, _, default in publish}
    assert defaults["retry_attempts"] == d.DEFAULT_JS_PUBLISH_RETRY_ATTEMPTS == 2
    assert defaults["retry_wait"] == d.DEFAULT_JS_PUBLISH_RETRY_WAIT == 0.25
    # The header keywords are the builder's and the merge's, in their order.
    header_keywords = [name for name in defaults if name in KEYWORDS or name == "headers"]
    assert [name for name, _, _ in parameters(publish_headers)] == header_keywords
    assert [name for name, _, _ in parameters(js_headers)] == header_keywords
    assert set(KEYWORDS) == set(header_keywords) - {"headers"}


def test_the_fast_publisher_takes_a_subset_of_the_set() -> None:
    publish = {name: (kind, default) for name, kind, default in parameters(JetStream.publish)}
    for method in (FastPublisher.add, FastPublisher.commit):
        for name, kind, default in parameters(method):
            if name in publish:
                assert publish[name] == (kind, default), (method, name)


def alone(keyword: str) -> dict[str, Any]:
    """One keyword's good value, with what it needs beside it."""
    given = {keyword: KEYWORDS[keyword]}
    if keyword == "expected_last_subject_seq_subject":  # names what the sequence checks
        given["expected_last_subject_seq"] = KEYWORDS["expected_last_subject_seq"]
    return given


@pytest.mark.parametrize("headers", [None, USER_HEADERS], ids=["no-headers", "headers"])
@pytest.mark.parametrize("given", [*(alone(k) for k in KEYWORDS), KEYWORDS], ids=[*KEYWORDS, "all"])
def test_the_builder_agrees_with_the_merge(headers: Any, given: dict[str, Any]) -> None:
    merged = js_headers(headers, **given)
    assert encoded(publish_headers(headers, **given)) == encoded(merged)
    assert merged is not None and merged is not headers  # a keyword always adds a header


def test_the_builder_makes_a_block_only_for_a_lone_msg_id() -> None:
    assert publish_headers(None, msg_id="m-1") == b"NATS/1.0\r\nNats-Msg-Id: m-1\r\n\r\n"
    assert isinstance(publish_headers(USER_HEADERS, msg_id="m-1"), dict)
    assert isinstance(publish_headers(None, msg_id="m-1", ttl=60), dict)


@pytest.mark.parametrize("headers", [None, USER_HEADERS], ids=["no-headers", "headers"])
def test_with_no_keyword_the_builder_hands_back_the_headers_themselves(headers: Any) -> None:
    # What publish_async and FastPublisher.add use without the call.
    assert publish_headers(headers) is headers
    assert js_headers(headers) is headers


@pytest.mark.parametrize(("keyword", "value"), list(BAD_KEYWORDS.items()))
@pytest.mark.parametrize("headers", [None, USER_HEADERS], ids=["no-headers", "headers"])
def test_the_builder_refuses_what_the_merge_refuses(keyword: str, value: Any, headers: Any) -> None:
    with pytest.raises(core.InvalidArgumentError) as merge_refused:
        js_headers(headers, **{keyword: value})
    with pytest.raises(core.InvalidArgumentError) as builder_refused:
        publish_headers(headers, **{keyword: value})
    assert type(builder_refused.value) is type(merge_refused.value)
    assert str(builder_refused.value) == str(merge_refused.value)


def test_a_sequence_subject_without_its_sequence_is_refused_by_both() -> None:
    for build in (js_headers, publish_headers):
        with pytest.raises(core.InvalidArgumentError, match="give expected_last_subject_seq"):
            build(None, expected_last_subject_seq_subject="orders.*")


def test_headers_that_are_not_a_mapping_are_refused_by_both() -> None:
    for build in (js_headers, publish_headers):
        with pytest.raises(core.InvalidArgumentError, match="headers must be a mapping"):
            build([("K", "v")], msg_id="x")  # type: ignore[arg-type]

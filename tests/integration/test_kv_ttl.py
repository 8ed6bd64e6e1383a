"""Key-value limit markers and per-key TTLs (ADR-48 on ADR-43, nats-server 2.11+)
against a real ``nats-server -js`` (2.15): ``limit_marker_ttl`` on the bucket's stream,
``kv.create(..., ttl=)`` expiring into a server marker that ``get`` and watchers read
as a purge, ``kv.purge(..., ttl=)`` leaving a marker that goes away, and the errors."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

import nats_sync
from nats_sync.errors import InvalidArgumentError
from nats_sync.jetstream import (
    Entry,
    JetStream,
    KeyNotFoundError,
    KeyValue,
    KeyWrongLastSequenceError,
    MessageNotFoundError,
    MsgTTLDisabledError,
)
from nats_sync.jetstream._kv.watch import operation_of
from nats_sync.testing import NatsServer

pytestmark = pytest.mark.timeout(60)

ClientFactory = Callable[..., nats_sync.Client]
#: Longest wait for the server to remove an expired value or marker.
EXPIRY_WAIT = 10.0


@pytest.fixture
def js(jetstream_server: NatsServer, connect: ClientFactory) -> JetStream:
    return connect(servers=jetstream_server.url).jetstream()


@pytest.fixture
def kv(js: JetStream) -> KeyValue:
    return js.create_key_value(bucket="marked", limit_marker_ttl=1)


def header(entry_headers: dict[str, object] | None, name: str) -> object:
    value = (entry_headers or {}).get(name)
    return value[0] if isinstance(value, list) else value


def wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + EXPIRY_WAIT
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    pytest.fail(f"{what} did not happen within {EXPIRY_WAIT}s")


def test_limit_marker_ttl_sets_the_streams_ttl_fields(js: JetStream, kv: KeyValue) -> None:
    config = js.stream("KV_marked").info().config
    assert config.allow_msg_ttl is True
    assert config.subject_delete_marker_ttl == 1.0
    assert kv.status().limit_marker_ttl == 1.0
    plain = js.create_key_value(bucket="plain")
    assert plain.status().limit_marker_ttl == 0.0
    assert not js.stream("KV_plain").info().config.allow_msg_ttl
    for bad in (0.5, 0, -1, True, "1s"):
        with pytest.raises(InvalidArgumentError, match="limit_marker_ttl"):
            js.create_key_value(bucket="bad", limit_marker_ttl=bad)


def test_create_with_ttl_expires_into_a_marker_watchers_see(js: JetStream, kv: KeyValue) -> None:
    with kv.watch("k") as watcher:
        assert watcher.updates(timeout=5) is None  # nothing yet
        revision = kv.create("k", b"short", ttl=1)
        stored = js.stream("KV_marked").get_msg(revision)
        assert header(stored.headers, "Nats-TTL") == "1"
        assert kv.get("k").value == b"short"
        put = watcher.updates(timeout=5)
        assert put is not None and (put.operation, put.value) == ("PUT", b"short")
        marker = watcher.updates(timeout=EXPIRY_WAIT)
    assert isinstance(marker, Entry)
    assert (marker.key, marker.operation, marker.value) == ("k", "PURGE", b"")
    assert marker.revision > revision
    with pytest.raises(KeyNotFoundError):
        kv.get("k")
    assert kv.create("k", b"again") > marker.revision  # a purged key can be created


def test_create_with_ttl_still_refuses_an_existing_key(kv: KeyValue) -> None:
    kv.put("taken", b"v")
    with pytest.raises(KeyWrongLastSequenceError):
        kv.create("taken", b"w", ttl=5)
    kv.delete("taken")
    revision = kv.create("taken", b"w", ttl="never")  # on the delete marker's revision
    assert kv.get("taken").revision == revision


def test_purge_with_ttl_leaves_a_marker_that_goes_away(js: JetStream, kv: KeyValue) -> None:
    kv.put("p", b"1")
    kv.put("p", b"2")
    kv.purge("p", ttl=1)
    stream = js.stream("KV_marked")
    marker = stream.get_last_msg("$KV.marked.p")
    assert header(marker.headers, "KV-Operation") == "PURGE"
    assert header(marker.headers, "Nats-TTL") == "1"
    with pytest.raises(KeyNotFoundError):
        kv.get("p")

    def gone() -> bool:
        try:
            stream.get_last_msg("$KV.marked.p")
        except MessageNotFoundError:
            return True
        return False

    wait_until(gone, "the purge marker's removal")
    assert "p" not in kv.get_many(["p"])


def test_ttl_on_a_bucket_without_limit_markers_is_refused(js: JetStream) -> None:
    plain = js.create_key_value(bucket="plain")
    with pytest.raises(MsgTTLDisabledError):
        plain.create("k", b"v", ttl=5)
    plain.put("k", b"v")
    with pytest.raises(MsgTTLDisabledError):
        plain.purge("k", ttl=5)
    assert plain.get("k").value == b"v"


def test_a_bad_ttl_is_refused_before_sending(kv: KeyValue) -> None:
    for bad in (0, 0.5, True, "soon"):
        with pytest.raises(InvalidArgumentError, match="ttl"):
            kv.create("k", b"v", ttl=bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgumentError, match="ttl"):
            kv.purge("k", ttl=bad)  # type: ignore[arg-type]
    assert kv.status().values == 0


def test_server_marker_reasons_read_as_the_adr_says() -> None:
    assert operation_of({"Nats-Marker-Reason": "MaxAge"}) == "PURGE"
    assert operation_of({"Nats-Marker-Reason": "Purge"}) == "PURGE"
    assert operation_of({"Nats-Marker-Reason": "Remove"}) == "DEL"
    assert operation_of({"Nats-Marker-Reason": ["MaxAge"], "Nats-TTL": "1s"}) == "PURGE"
    assert operation_of({"KV-Operation": "DEL"}) == "DEL"
    assert operation_of({"Other": "x"}) == "PUT"

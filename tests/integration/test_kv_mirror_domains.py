"""Key-value buckets that mirror or source others, and buckets in another JetStream
domain (ADR-8, ADR-19), against real nats-servers: a mirror reads the origin's keys and
puts to the origin; a sourcing bucket takes the keys of its sources in; a client on a
leaf node creates, writes and reads a bucket of the hub's domain, and a client on the hub
reads it. The stream configs are checked against the layout nats.go's
``prepareKeyValueConfig`` makes."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import nats_sync
from nats_sync.errors import InvalidArgumentError
from nats_sync.jetstream import JetStream, KeyNotFoundError, KeyValue, StreamSource
from nats_sync.jetstream.errors import JetStreamNotEnabledError
from nats_sync.testing import NatsServer, _free_port

pytestmark = pytest.mark.timeout(60)


def _eventually(
    check: Callable[[], Any],
    what: str,
    seconds: float = 10.0,
    not_yet: tuple[type[Exception], ...] = (KeyNotFoundError,),
) -> Any:
    """``check()``'s first truthy answer within ``seconds``; ``not_yet`` errors mean "ask
    again" (a key not copied yet; for the leaf link, no hub API answering yet)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            found = check()
        except not_yet:
            found = None
        if found:
            return found
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.fixture
def js(jetstream_server: NatsServer) -> Iterator[JetStream]:
    with nats_sync.connect(jetstream_server.url) as nc:
        yield nc.jetstream()


def test_a_mirror_reads_the_origins_keys_and_puts_to_the_origin(js: JetStream) -> None:
    origin = js.create_key_value(bucket="prices", history=5)
    origin.put("apple", b"1.20")
    mirror = js.create_key_value(bucket="prices_copy", mirror=StreamSource(name="prices"))
    assert _eventually(lambda: mirror.get("apple").value, "the mirror") == b"1.20"
    revision = mirror.put("pear", b"0.90")  # goes to the origin, the mirror follows
    assert origin.get("pear").value == b"0.90" and origin.get("pear").revision == revision
    assert _eventually(lambda: mirror.get("pear").value, "the put to reach the mirror")
    assert sorted(_eventually(lambda: mirror.keys() if len(mirror.keys()) == 2 else None, "keys"))
    # The stream nats.go makes for KeyValueConfig{Mirror: &StreamSource{Name: "prices"}}.
    config = js.stream_info("KV_prices_copy").config
    assert config.mirror == {"name": "KV_prices"}
    assert config.mirror_direct is True and not config.subjects
    # A rebound handle knows it is a mirror from the stream.
    again: KeyValue = js.key_value("prices_copy")
    again.put("plum", b"2.00")
    assert origin.get("plum").value == b"2.00"
    assert again.status().config.mirror == StreamSource(name="prices")


def test_a_bucket_takes_the_keys_of_its_sources(js: JetStream) -> None:
    east = js.create_key_value(bucket="stock_east")
    west = js.create_key_value(bucket="stock_west")
    east.put("bolts", b"10")
    west.put("nuts", b"20")
    everything = js.create_key_value(
        bucket="stock_all",
        sources=[StreamSource(name="stock_east"), StreamSource(name="KV_stock_west")],
    )
    assert _eventually(lambda: everything.get("bolts").value, "east's key") == b"10"
    assert _eventually(lambda: everything.get("nuts").value, "west's key") == b"20"
    config = js.stream_info("KV_stock_all").config
    assert config.subjects == ["$KV.stock_all.>"]
    assert config.sources == [
        {
            "name": "KV_stock_east",
            "subject_transforms": [{"src": "$KV.stock_east.>", "dest": "$KV.stock_all.>"}],
        },
        {
            "name": "KV_stock_west",
            "subject_transforms": [{"src": "$KV.stock_west.>", "dest": "$KV.stock_all.>"}],
        },
    ]


def test_a_mirror_with_sources_or_a_source_that_is_not_one_is_refused(js: JetStream) -> None:
    with pytest.raises(InvalidArgumentError, match="a mirror takes no sources"):
        js.create_key_value(
            bucket="both", mirror=StreamSource(name="a"), sources=[StreamSource(name="b")]
        )
    with pytest.raises(InvalidArgumentError, match="StreamSource"):
        js.create_key_value(bucket="bad", sources=[{"name": "a"}])  # type: ignore[list-item]


def test_a_source_in_another_domain_names_its_api() -> None:
    assert StreamSource(name="KV_x", domain="hub").to_api() == {
        "name": "KV_x",
        "external": {"api": "$JS.hub.API"},
    }


@pytest.fixture
def hub_and_leaf() -> Iterator[tuple[NatsServer, NatsServer]]:
    """A hub with JetStream domain ``hub`` and a leaf node (domain ``leaf``) on it."""
    leaf_port = _free_port()
    hub = NatsServer(
        jetstream=True,
        config=f'jetstream {{ domain: hub }}\nleafnodes {{ listen: "127.0.0.1:{leaf_port}" }}\n',
    ).start()
    leaf = NatsServer(
        jetstream=True,
        config=(
            "jetstream { domain: leaf }\n"
            f'leafnodes {{ remotes = [ {{ url: "nats-leaf://127.0.0.1:{leaf_port}" }} ] }}\n'
        ),
    ).start()
    try:
        with nats_sync.connect(leaf.url) as nc:  # the leaf reaches the hub's domain
            _eventually(
                lambda: nc.jetstream(domain="hub").account_info(timeout=1),
                "the link",
                # Until the leaf's link to the hub is up, nobody answers the hub's API.
                not_yet=(JetStreamNotEnabledError, nats_sync.errors.TimeoutError),
            )
        yield hub, leaf
    finally:
        leaf.cleanup()
        hub.cleanup()


def test_a_client_on_a_leaf_writes_and_reads_a_bucket_of_the_hubs_domain(
    hub_and_leaf: tuple[NatsServer, NatsServer],
) -> None:
    hub, leaf = hub_and_leaf
    with nats_sync.connect(leaf.url) as on_leaf, nats_sync.connect(hub.url) as on_hub:
        remote = on_leaf.jetstream(domain="hub")
        config = remote.create_key_value(bucket="settings", history=3)
        first = config.put("mode", b"fast")
        assert config.update("mode", b"safe", last=first) > first
        assert config.get("mode").value == b"safe"
        config.delete("old-key")
        # Stored on the hub: a client there reads what the leaf wrote.
        assert on_hub.jetstream().key_value("settings").get("mode").value == b"safe"
        # The leaf's own domain has no such bucket.
        assert "settings" not in set(on_leaf.jetstream(domain="leaf").key_value_bucket_names())
        # A mirror on the leaf of the hub's bucket: reads locally, puts to the hub.
        local = on_leaf.jetstream().create_key_value(
            bucket="settings_here", mirror=StreamSource(name="settings", domain="hub")
        )
        assert _eventually(lambda: local.get("mode").value, "the leaf's mirror") == b"safe"
        local.put("mode", b"fastest")
        assert on_hub.jetstream().key_value("settings").get("mode").value == b"fastest"


def test_an_object_store_of_the_hubs_domain_from_a_leaf(
    hub_and_leaf: tuple[NatsServer, NatsServer],
) -> None:
    hub, leaf = hub_and_leaf
    with nats_sync.connect(leaf.url) as on_leaf, nats_sync.connect(hub.url) as on_hub:
        files = on_leaf.jetstream(domain="hub").create_object_store("files")
        files.put("report.txt", b"x" * 300_000)
        assert files.get("report.txt").data == b"x" * 300_000
        assert on_hub.jetstream().object_store("files").get("report.txt").data == b"x" * 300_000
        assert "files" in set(on_leaf.jetstream(domain="hub").object_store_names())

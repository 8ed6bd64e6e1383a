"""Object store links (ADR-20) against a real nats-server -js: links to objects in this
bucket and another, links to buckets, the rules nats.go and ADR-20 set, the stored
layout against nats.go's ``object.go``, records written raw as Go writes them, and
nats-py following our links."""

from __future__ import annotations

import asyncio
import base64
import io
import json
from collections.abc import Callable

import pytest

import nats_sync
from nats_sync.errors import InvalidArgumentError
from nats_sync.jetstream import (
    BucketNotFoundError,
    InvalidObjectNameError,
    JetStream,
    ObjectNotFoundError,
    ObjectStore,
    ObjectStoreError,
)
from nats_sync.testing import NatsServer

pytestmark = pytest.mark.timeout(60)

ClientFactory = Callable[..., nats_sync.Client]


@pytest.fixture
def js(jetstream_server: NatsServer, connect: ClientFactory) -> JetStream:
    return connect(servers=jetstream_server.url).jetstream()


@pytest.fixture
def root(js: JetStream) -> ObjectStore:
    store = js.create_object_store("ROOT")
    store.put("A", b"AAA")
    store.put("B", b"BBB")
    return store


def meta_subject(bucket: str, name: str) -> str:
    return f"$O.{bucket}.M.{base64.urlsafe_b64encode(name.encode()).decode()}"


def stored_meta(js: JetStream, bucket: str, name: str) -> tuple[bytes, dict[str, object]]:
    """The raw meta message of ``name``: its payload and its headers."""
    msg = js.stream(f"OBJ_{bucket}").get_last_msg(meta_subject(bucket, name))
    return msg.data, dict(msg.headers or {})


def test_links_in_this_bucket_and_another(js: JetStream, root: ObjectStore) -> None:
    link = root.add_link("LA", root.get_info("A"))
    assert link.options == {"link": {"bucket": "ROOT", "name": "A"}}
    assert (link.name, link.bucket, link.size, link.chunks, link.digest) == (
        "LA",
        "ROOT",
        0,
        0,
        None,
    )
    assert len(link.nuid) == 22 and link.mtime is not None
    got = root.get("LA")
    assert got.data == b"AAA" and got.info.name == "A"  # the linked object's info

    other = js.create_object_store("DIR")
    other.put("DIR/B", b"DIR-BBB")
    root.add_link("DBL", other.get_info("DIR/B"))
    assert root.get("DBL").data == b"DIR-BBB"
    fresh = js.object_store("ROOT")  # another handle follows the stored link alike
    assert fresh.get("DBL").info.bucket == "DIR"

    # get_info is the link's own info; list and watch show links as they are.
    assert root.get_info("LA").options == {"link": {"bucket": "ROOT", "name": "A"}}
    assert sorted(info.name for info in root.list()) == ["A", "B", "DBL", "LA"]

    # A link is replaced by another link to another object.
    root.add_link("LA", root.get_info("B"))
    assert root.get("LA").data == b"BBB"


def test_bucket_links_are_refused_by_get(js: JetStream, root: ObjectStore) -> None:
    other = js.create_object_store("DIR")
    link = root.add_bucket_link("dir", other)
    assert link.options == {"link": {"bucket": "DIR"}}
    with pytest.raises(
        ObjectStoreError, match=r"'dir' in bucket 'ROOT' is a link to the bucket 'DIR'"
    ):
        root.get("dir")
    with pytest.raises(ObjectStoreError, match="link to the bucket"):
        root.get_into("dir", io.BytesIO())
    # A bucket link may be replaced by another.
    assert root.add_bucket_link("dir", root).options == {"link": {"bucket": "ROOT"}}


def test_link_rules(js: JetStream, root: ObjectStore) -> None:
    info_a = root.get_info("A")
    link = root.add_link("LA", info_a)
    with pytest.raises(ObjectStoreError, match="is a link itself"):
        root.add_link("LALA", link)
    with pytest.raises(ObjectStoreError, match="an object of that name exists"):
        root.add_link("B", info_a)  # B is an object
    with pytest.raises(ObjectStoreError, match="an object of that name exists"):
        root.add_bucket_link("B", root)
    assert root.get("B").data == b"BBB"  # untouched
    with pytest.raises(InvalidObjectNameError):
        root.add_link("", info_a)
    with pytest.raises(InvalidObjectNameError):
        root.add_bucket_link("", root)
    with pytest.raises(InvalidArgumentError, match="ObjectInfo"):
        root.add_link("none", None)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="ObjectInfo"):
        root.add_link("nameless", info_a.replace(name=""))
    with pytest.raises(InvalidArgumentError, match="ObjectStore"):
        root.add_bucket_link("nobucket", "ROOT")  # type: ignore[arg-type]

    root.delete("A")
    # A stale info still links (as nats.go), and get finds the link broken ...
    root.add_link("stale", info_a)
    with pytest.raises(ObjectNotFoundError, match="'A' in bucket 'ROOT' was deleted"):
        root.get("stale")
    with pytest.raises(ObjectNotFoundError):
        root.get("LA")
    # ... but a link to an info that says deleted is refused.
    with pytest.raises(ObjectStoreError, match="it is deleted"):
        root.add_link("fresh", root.get_info("A", show_deleted=True))
    # A deleted object's name may become a link (ADR-20).
    root.add_link("A", root.get_info("B"))
    assert root.get("A").data == b"BBB"


def test_what_we_store_is_nats_go_s_layout(js: JetStream, root: ObjectStore) -> None:
    link = root.add_link("LA", root.get_info("A"))
    data, headers = stored_meta(js, "ROOT", "LA")
    assert headers.get("Nats-Rollup") == "sub"
    # nats.go's json.Marshal of the ObjectInfo AddLink makes, field for field and in
    # its order, without "mtime", which ADR-20 says is never stored (nats.go writes
    # Go's zero time there, which readers replace with the message's time); no
    # description, headers, metadata, digest or deleted (all omitempty), no
    # max_chunk_size in options; size and chunks written as 0.
    assert data == (
        b'{"name":"LA","options":{"link":{"bucket":"ROOT","name":"A"}},'
        b'"bucket":"ROOT","nuid":"' + link.nuid.encode() + b'","size":0,"chunks":0}'
    )
    root.add_bucket_link("dir", root)
    data, _ = stored_meta(js, "ROOT", "dir")
    record = json.loads(data)
    assert list(record) == ["name", "options", "bucket", "nuid", "size", "chunks"]
    assert record["options"] == {"link": {"bucket": "ROOT"}}  # link.name omitempty


def test_records_written_raw_as_go_writes_them(js: JetStream, root: ObjectStore) -> None:
    other = js.create_object_store("DIR")
    other.put("DIR/B", b"DIR-BBB")

    def publish_as_go(name: str, link: dict[str, str]) -> None:
        record = {
            "name": name,
            "options": {"link": link},
            "bucket": "ROOT",
            "nuid": "GoLinkNuid0000000000ab",
            "size": 0,
            "mtime": "0001-01-01T00:00:00Z",
            "chunks": 0,
        }
        js.publish(
            meta_subject("ROOT", name),
            json.dumps(record, separators=(",", ":")).encode(),
            headers={"Nats-Rollup": "sub"},
        )

    publish_as_go("go-link", {"bucket": "DIR", "name": "DIR/B"})
    publish_as_go("go-same", {"bucket": "ROOT", "name": "A"})
    publish_as_go("go-dir", {"bucket": "DIR"})
    publish_as_go("go-gone", {"bucket": "NOPE", "name": "x"})
    assert root.get("go-link").data == b"DIR-BBB"
    assert root.get("go-same").data == b"AAA"
    info = root.get_info("go-link")
    assert info.options == {"link": {"bucket": "DIR", "name": "DIR/B"}}
    assert info.mtime is not None and info.mtime.year > 2000  # the message's time
    with pytest.raises(ObjectStoreError, match="'go-dir' in bucket 'ROOT' is a link to the bucket"):
        root.get("go-dir")
    with pytest.raises(BucketNotFoundError, match="NOPE"):
        root.get("go-gone")
    # Links made by hand into a loop are refused, not followed for ever.
    publish_as_go("loop-1", {"bucket": "ROOT", "name": "loop-2"})
    publish_as_go("loop-2", {"bucket": "ROOT", "name": "loop-1"})
    with pytest.raises(ObjectStoreError, match="a loop of links"):
        root.get("loop-1")


def test_nats_py_follows_our_links(
    js: JetStream, root: ObjectStore, jetstream_server: NatsServer
) -> None:
    import nats

    other = js.create_object_store("DIR")
    other.put("DIR/B", b"DIR-BBB")
    root.add_link("LA", root.get_info("A"))
    root.add_link("DBL", other.get_info("DIR/B"))

    async def read() -> tuple[bytes, bytes, str]:
        nc = await nats.connect(jetstream_server.url)
        try:
            theirs = await nc.jetstream().object_store("ROOT")
            same = await theirs.get("LA")
            cross = await theirs.get("DBL")
            info = await theirs.get_info("LA")
            assert info.options is not None and info.options.link is not None
            return bytes(same.data or b""), bytes(cross.data or b""), str(info.options.link.name)
        finally:
            await nc.close()

    assert asyncio.run(read()) == (b"AAA", b"DIR-BBB", "A")

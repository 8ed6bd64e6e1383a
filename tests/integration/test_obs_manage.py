"""Managing live object store buckets against a real nats-server -js (issue 40): update
and create-or-update keep the objects, the stream config is the one create makes, the
buckets and their statuses are listed, and nats-py still reads an updated bucket."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

import nats_sync
from nats_sync.errors import InvalidArgumentError
from nats_sync.jetstream import BucketNotFoundError, JetStream, JetStreamError
from nats_sync.testing import NatsServer

pytestmark = pytest.mark.timeout(60)

ClientFactory = Callable[..., nats_sync.Client]


@pytest.fixture
def js(jetstream_server: NatsServer, connect: ClientFactory) -> JetStream:
    return connect(servers=jetstream_server.url).jetstream()


def test_update_changes_ttl_max_bytes_description_keeping_objects(js: JetStream) -> None:
    obs = js.create_object_store("docs", description="before")
    obs.put("a.txt", b"a" * 300_000, chunk_size=100_000)
    updated = js.update_object_store(
        "docs", ttl=3600.0, max_bytes=10 << 20, description="after", metadata={"team": "x"}
    )
    stream = js.stream("OBJ_docs").cached_info.config
    assert (stream.max_age, stream.max_bytes, stream.description) == (3600.0, 10 << 20, "after")
    assert stream.subjects == ["$O.docs.C.>", "$O.docs.M.>"]
    assert stream.allow_rollup_hdrs and stream.allow_direct and stream.discard == "new"
    status = updated.status()
    assert (status.ttl, status.description) == (3600.0, "after")
    assert (status.metadata or {}).get("team") == "x"  # beside the server's own keys
    assert updated.get("a.txt").data == b"a" * 300_000
    assert [info.name for info in updated.list()] == ["a.txt"]
    # The settings are taken whole: what is not given goes back to its default.
    js.update_object_store("docs")
    stream = js.stream("OBJ_docs").cached_info.config
    assert (stream.max_age, stream.description) == (0.0, None)
    assert stream.max_bytes in (None, -1)


def test_update_of_a_missing_bucket_and_bad_settings(js: JetStream) -> None:
    with pytest.raises(BucketNotFoundError, match="'nothing'"):
        js.update_object_store("nothing", ttl=60.0)
    assert list(js.object_store_names()) == []
    js.create_object_store("there")
    with pytest.raises(InvalidArgumentError, match=r"update_object_store.*tll"):
        js.update_object_store("there", tll=60.0)
    with pytest.raises(JetStreamError):  # a stream's storage cannot change
        js.update_object_store("there", storage="memory")
    assert js.object_store("there").status().storage == "file"


def test_create_or_update(js: JetStream) -> None:
    made = js.create_or_update_object_store("either", description="one")
    made.put("x", b"x")
    with pytest.raises(JetStreamError):
        js.create_object_store("either", description="two")
    again = js.create_or_update_object_store("either", description="two")
    assert again.status().description == "two"
    assert again.get("x").data == b"x"


def test_object_stores_and_names_list_only_object_stores(js: JetStream) -> None:
    js.create_object_store("one", ttl=60.0).put("f", b"12345")
    js.create_object_store("two", compression=True)
    js.create_key_value(bucket="kv")
    js.create_stream(name="plain", subjects=["plain.>"])
    assert sorted(js.object_store_names()) == ["one", "two"]
    statuses = {status.bucket: status for status in js.object_stores()}
    assert sorted(statuses) == ["one", "two"]
    assert statuses["one"].ttl == 60.0 and statuses["one"].size > 5
    assert statuses["two"].compressed and not statuses["two"].sealed
    assert statuses["one"].info.config.name == "OBJ_one"


def test_nats_py_reads_an_updated_bucket(js: JetStream, jetstream_server: NatsServer) -> None:
    import nats

    js.create_object_store("shared").put("hello.txt", b"hello")
    js.update_object_store("shared", description="now with a description", ttl=600.0)

    async def read() -> tuple[bytes, str]:
        nc = await nats.connect(jetstream_server.url)
        try:
            theirs = await nc.jetstream().object_store("shared")
            got = await theirs.get("hello.txt")
            status = await theirs.status()
            return bytes(got.data or b""), str(status.description)
        finally:
            await nc.close()

    assert asyncio.run(read()) == (b"hello", "now with a description")

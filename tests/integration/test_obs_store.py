"""The object store against a real ``nats-server -js``: buckets, put/get in chunks with
digests, overwrite and delete cleanup, a failed put, names, watch, seal, nats-py interop."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import io
import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import nats_sync
from nats_sync.errors import InvalidArgumentError
from nats_sync.jetstream import (
    APIError,
    BucketNotFoundError,
    DigestMismatchError,
    InvalidBucketNameError,
    InvalidObjectNameError,
    ObjectDeletedError,
    ObjectInfo,
    ObjectNotFoundError,
    ObjectStore,
    ObjectStoreError,
    Stream,
)
from nats_sync.testing import NatsServer

pytestmark = pytest.mark.timeout(60)

Connect = Callable[..., nats_sync.Client]
CHUNK = 128 * 1024


def sha256_digest(data: bytes) -> str:
    return "SHA-256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode()


def store(
    connect: Connect, server: NatsServer, bucket: str = "files", **fields: Any
) -> ObjectStore:
    nc = connect(servers=server.url)
    return nc.jetstream().create_object_store(bucket, **fields)


def bucket_stream(connect: Connect, server: NatsServer, bucket: str = "files") -> Stream:
    return connect(servers=server.url).jetstream().stream(f"OBJ_{bucket}")


def pattern(size: int) -> bytes:
    return bytes((n * 7 + n // 251) % 256 for n in range(size))


def test_bucket_create_bind_status_delete(jetstream_server: NatsServer, connect: Connect) -> None:
    js = connect(servers=jetstream_server.url).jetstream()
    obs = js.create_object_store("docs", description="papers", storage="memory")
    info = js.stream("OBJ_docs").info().config
    assert info.subjects == ["$O.docs.C.>", "$O.docs.M.>"]
    assert info.allow_rollup_hdrs and info.allow_direct and info.discard == "new"
    assert js.create_object_store("docs", description="papers", storage="memory").bucket == "docs"
    bound = js.object_store("docs")
    bound.put("a", b"hello")
    status = obs.status()
    assert (status.bucket, status.description, status.storage, status.sealed) == (
        "docs",
        "papers",
        "memory",
        False,
    )
    assert status.size > 5
    js.delete_object_store("docs")
    with pytest.raises(BucketNotFoundError):
        js.object_store("docs")
    with pytest.raises(BucketNotFoundError):
        js.delete_object_store("docs")


@pytest.mark.parametrize("size", [0, 1, CHUNK, CHUNK + 1])
def test_put_get_sizes_match_digest(
    jetstream_server: NatsServer, connect: Connect, size: int
) -> None:
    obs = store(connect, jetstream_server)
    data = pattern(size)
    put = obs.put(
        "blob.bin",
        data,
        description="d",
        metadata={"k": "v"},
        headers={"Content-Type": "application/octet-stream"},
    )
    assert put.size == size and put.chunks == -(-size // CHUNK)
    assert put.digest == sha256_digest(data)
    got = obs.get("blob.bin")
    assert got.data == data
    assert got.info.digest == put.digest and got.info.nuid == put.nuid
    assert got.info.description == "d" and got.info.metadata == {"k": "v"}
    assert got.info.headers == {"Content-Type": ["application/octet-stream"]}
    assert got.info.mtime is not None and got.info.mtime.tzinfo is not None
    # The info sits on the base64url name, the chunks on the nuid, as ADR-20 says.
    stream = bucket_stream(connect, jetstream_server)
    meta = stream.get_last_msg("$O.files.M." + base64.urlsafe_b64encode(b"blob.bin").decode())
    assert json.loads(meta.data)["digest"] == put.digest
    chunks = list(stream.get_msgs(subject=f"$O.files.C.{put.nuid}"))
    assert b"".join(c.data for c in chunks) == data and len(chunks) == put.chunks


def test_five_mib_from_a_file_into_a_file(
    jetstream_server: NatsServer, connect: Connect, tmp_path: Path
) -> None:
    obs = store(connect, jetstream_server)
    data = pattern(5 * 1024 * 1024 + 3)
    source = tmp_path / "in.bin"
    source.write_bytes(data)
    with source.open("rb") as f:
        put = obs.put("big", f)
    assert put.size == len(data) and put.chunks == 41 and put.digest == sha256_digest(data)
    target = tmp_path / "out.bin"
    with target.open("wb") as f:
        info = obs.get_into("big", f)
    assert target.read_bytes() == data and info.digest == put.digest
    assert obs.get("big").data == data


def test_short_reads_make_full_chunks(jetstream_server: NatsServer, connect: Connect) -> None:
    class Trickle(io.RawIOBase):
        def __init__(self, data: bytes) -> None:
            self.data = data

        def readable(self) -> bool:
            return True

        def read(self, size: int = -1) -> bytes:
            take = min(size, 1000)
            part, self.data = self.data[:take], self.data[take:]
            return part

    obs = store(connect, jetstream_server)
    data = pattern(10_000)
    put = obs.put("t", Trickle(data), chunk_size=4096)
    assert put.chunks == 3 and obs.get("t").data == data


def test_overwrite_purges_the_old_chunks(jetstream_server: NatsServer, connect: Connect) -> None:
    obs = store(connect, jetstream_server)
    stream = bucket_stream(connect, jetstream_server)
    first = obs.put("x", pattern(1024 * 1024))
    size_one = stream.info().state.bytes
    second = obs.put("x", pattern(1024 * 1024)[::-1])
    assert first.nuid != second.nuid
    state = stream.info().state
    # One object's worth (plus its info), not two.
    assert state.bytes < size_one + 64 * 1024
    assert list(stream.get_msgs(subject=f"$O.files.C.{first.nuid}")) == []
    assert obs.get("x").data == pattern(1024 * 1024)[::-1]


def test_wrong_digest_raises(jetstream_server: NatsServer, connect: Connect) -> None:
    obs = store(connect, jetstream_server)
    info = obs.put("doc", b"the real bytes")
    nc = connect(servers=jetstream_server.url)
    forged = {**info.to_api(), "digest": sha256_digest(b"other bytes")}
    nc.jetstream().publish(
        "$O.files.M." + base64.urlsafe_b64encode(b"doc").decode(),
        json.dumps(forged).encode(),
        headers={"Nats-Rollup": "sub"},
    )
    with pytest.raises(DigestMismatchError, match="digest"):
        obs.get("doc")
    with pytest.raises(DigestMismatchError):
        obs.get_into("doc", io.BytesIO())


def test_failed_put_leaves_no_chunks(jetstream_server: NatsServer, connect: Connect) -> None:
    obs = store(connect, jetstream_server, max_bytes=300 * 1024)
    stream = bucket_stream(connect, jetstream_server)
    with pytest.raises(APIError):
        obs.put("too-big", pattern(2 * 1024 * 1024))
    assert stream.info().state.messages == 0
    with pytest.raises(ObjectNotFoundError):
        obs.get_info("too-big")

    class Broken(io.RawIOBase):
        def __init__(self) -> None:
            self.calls = 0

        def readable(self) -> bool:
            return True

        def read(self, size: int = -1) -> bytes:
            self.calls += 1
            if self.calls > 1:
                raise OSError("disk gone")
            return b"x" * size

    with pytest.raises(OSError, match="disk gone"):
        obs.put("broken", Broken(), chunk_size=1024)
    assert stream.info().state.messages == 0
    assert obs.put("fits", b"small").size == 5


def test_invalid_names(jetstream_server: NatsServer, connect: Connect) -> None:
    js = connect(servers=jetstream_server.url).jetstream()
    for bad in ("", "a.b", "a b", "a*", "x>", None):
        with pytest.raises(InvalidBucketNameError) as caught:
            js.create_object_store(bad)  # type: ignore[arg-type]
        assert isinstance(caught.value, ValueError)
    with pytest.raises(InvalidBucketNameError):
        js.object_store("no.dots")
    obs = js.create_object_store("ok")
    for bad_name in ("", None, 5):
        with pytest.raises(InvalidObjectNameError):
            obs.put(bad_name, b"x")  # type: ignore[arg-type]
        with pytest.raises(InvalidObjectNameError):
            obs.get(bad_name)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="chunk_size"):
        obs.put("a", b"x", chunk_size=0)
    with pytest.raises(InvalidArgumentError, match="data must be bytes"):
        obs.put("a", "text")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="no_such"):
        js.create_object_store("b", no_such=1)
    # Any other name is fine: dots, spaces, slashes and unicode are encoded.
    assert obs.put("dir/a b.txt ü", b"1").name == "dir/a b.txt ü"
    assert obs.get("dir/a b.txt ü").data == b"1"


def test_info_list_delete_update_meta(jetstream_server: NatsServer, connect: Connect) -> None:
    obs = store(connect, jetstream_server)
    obs.put("a", b"1")
    obs.put("b", b"22", description="two")
    obs.put("c", b"333")
    assert [i.name for i in obs.list()] == ["a", "b", "c"]
    gone = obs.delete("a")
    assert gone.deleted and gone.size == 0 and gone.digest is None
    assert [i.name for i in obs.list()] == ["b", "c"]
    assert [i.name for i in obs.list(show_deleted=True)] == ["b", "c", "a"]  # last written
    with pytest.raises(ObjectNotFoundError, match="deleted"):
        obs.get("a")
    assert obs.get_info("a", show_deleted=True).deleted
    with pytest.raises(ObjectNotFoundError):
        obs.delete("a")
    with pytest.raises(ObjectDeletedError):
        obs.update_meta("a", description="late")
    with pytest.raises(ObjectNotFoundError):
        obs.get_info("never")

    updated = obs.update_meta("b", description="deux", metadata={"lang": "fr"})
    assert updated.description == "deux" and obs.get_info("b").metadata == {"lang": "fr"}
    renamed = obs.update_meta("b", name="b2")
    assert renamed.name == "b2" and renamed.description == "deux"
    assert obs.get("b2").data == b"22"
    with pytest.raises(ObjectNotFoundError):
        obs.get_info("b")
    with pytest.raises(ObjectStoreError, match="exists"):
        obs.update_meta("b2", name="c")
    assert sorted(i.name for i in obs.list()) == ["b2", "c"]


def test_seal(jetstream_server: NatsServer, connect: Connect) -> None:
    obs = store(connect, jetstream_server)
    obs.put("kept", b"forever")
    assert obs.seal().sealed and obs.status().sealed
    with pytest.raises(APIError):
        obs.put("new", b"no")
    assert obs.get("kept").data == b"forever"


def test_watch_sees_puts_and_deletes(jetstream_server: NatsServer, connect: Connect) -> None:
    obs = store(connect, jetstream_server)
    obs.put("before", b"0")
    with obs.watch() as watcher:
        first = watcher.updates(timeout=5)
        assert first is not None and first.name == "before"
        assert watcher.updates(timeout=5) is None  # the end of the current infos
        obs.put("new", b"1")
        got = watcher.updates(timeout=5)
        assert got is not None and got.name == "new" and got.size == 1
        obs.delete("before")
        got = watcher.updates(timeout=5)
        assert got is not None and got.name == "before" and got.deleted
        with pytest.raises(nats_sync.TimeoutError):
            watcher.updates(timeout=0.3)

    with obs.watch(ignore_deletes=True) as watcher:
        assert watcher.updates(timeout=5) is not None  # "new"
        assert watcher.updates(timeout=5) is None


def test_watch_empty_bucket_and_iteration(jetstream_server: NatsServer, connect: Connect) -> None:
    obs = store(connect, jetstream_server)
    watcher = obs.watch()
    assert watcher.updates(timeout=5) is None
    seen: list[ObjectInfo] = []

    def read() -> None:
        for info in watcher:
            seen.append(info)
            if len(seen) == 2:
                return

    reader = threading.Thread(target=read)
    reader.start()
    obs.put("one", b"1")
    obs.put("two", b"2")
    reader.join(10)
    watcher.stop()
    assert [info.name for info in seen] == ["one", "two"]


def test_interop_with_nats_py(jetstream_server: NatsServer, connect: Connect) -> None:
    import nats

    data = pattern(300_000)
    obs = store(connect, jetstream_server, bucket="shared")
    ours = obs.put("from-sync", data)

    async def other_side() -> tuple[bytes, str, str]:
        nc = await nats.connect(jetstream_server.url)
        try:
            js = nc.jetstream()
            theirs = await js.object_store("shared")
            got = await theirs.get("from-sync")
            put = await theirs.put("from-py", data[::-1])
            return got.data, str(got.info.digest), str(put.digest)
        finally:
            await nc.close()

    their_read, their_digest_of_ours, their_digest = asyncio.run(other_side())
    assert their_read == data and their_digest_of_ours == ours.digest
    got = obs.get("from-py")
    assert got.data == data[::-1] and got.info.digest == their_digest
    assert their_digest == sha256_digest(data[::-1])


def test_bucket_made_by_nats_py(jetstream_server: NatsServer, connect: Connect) -> None:
    import nats

    async def make() -> str:
        nc = await nats.connect(jetstream_server.url)
        try:
            js = nc.jetstream()
            theirs = await js.create_object_store("pybucket")
            info = await theirs.put("hello.txt", b"hello world")
            return str(info.digest)
        finally:
            await nc.close()

    digest = asyncio.run(make())
    obs = connect(servers=jetstream_server.url).jetstream().object_store("pybucket")
    got = obs.get("hello.txt")
    assert got.data == b"hello world" and got.info.digest == digest
    assert [i.name for i in obs.list()] == ["hello.txt"]

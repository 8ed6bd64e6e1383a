"""Object store puts as fast-ingest batches (ADR-50) where the bucket's stream has
``allow_batched``, and the publish_async path where it has not, against a real
``nats-server -js``: what comes back (ours and nats-py's), counts, and failed puts."""

from __future__ import annotations

import asyncio
import io
from collections.abc import Iterator
from typing import Any

import pytest

import nats_sync
from nats_sync.jetstream import (
    APIError,
    BatchAck,
    FastPublisher,
    JetStream,
    ObjectNotFoundError,
    ObjectStore,
)
from nats_sync.testing import NatsServer

pytestmark = pytest.mark.timeout(60)

CHUNK = 128 * 1024


def pattern(size: int) -> bytes:
    return bytes((n * 7 + n // 251) % 256 for n in range(size))


@pytest.fixture
def js(jetstream_server: NatsServer) -> Iterator[JetStream]:
    with nats_sync.connect(jetstream_server.url) as nc:
        yield nc.jetstream()


@pytest.fixture
def commits(monkeypatch: pytest.MonkeyPatch) -> list[BatchAck]:
    """Every fast batch's final ack (``FastPublisher.commit`` still runs as it is)."""
    seen: list[BatchAck] = []
    real_commit = FastPublisher.commit

    def commit(self: FastPublisher, *args: Any, **kwargs: Any) -> BatchAck:
        final = real_commit(self, *args, **kwargs)
        seen.append(final)
        return final

    monkeypatch.setattr(FastPublisher, "commit", commit)
    return seen


def batched_store(js: JetStream, bucket: str = "fast", **fields: Any) -> ObjectStore:
    """A bucket whose stream allows fast batches, bound afresh (the store reads the
    stream's config when bound)."""
    js.create_object_store(bucket, **fields)
    config = js.stream_info(f"OBJ_{bucket}").config
    js.update_stream(config.replace(allow_batched=True))
    return js.object_store(bucket)


def messages(js: JetStream, bucket: str) -> int:
    return js.stream_info(f"OBJ_{bucket}").state.messages


@pytest.mark.parametrize("size", [0, 1, CHUNK, CHUNK + 1, 5 * CHUNK + 3])
def test_a_batched_put_stores_the_chunks_and_the_info_in_one_batch(
    js: JetStream, commits: list[BatchAck], size: int
) -> None:
    obs = batched_store(js)
    data = pattern(size)
    info = obs.put("doc", data)
    chunks = -(-size // CHUNK)
    assert (info.size, info.chunks) == (size, chunks)
    assert len(commits) == 1 and commits[0].count == chunks + 1  # chunks, then the info
    assert commits[0].seq == chunks + 1 == messages(js, "fast")
    got = obs.get("doc")
    assert got.data == data and got.info.digest == info.digest


def test_a_bucket_without_allow_batched_puts_as_before(
    js: JetStream, commits: list[BatchAck]
) -> None:
    obs = js.create_object_store("plain")
    data = pattern(3 * CHUNK)
    obs.put("doc", data)
    assert commits == []
    assert obs.get("doc").data == data and messages(js, "plain") == 4


def test_a_batched_overwrite_purges_the_old_chunks(js: JetStream, commits: list[BatchAck]) -> None:
    obs = batched_store(js)
    obs.put("doc", pattern(3 * CHUNK))
    obs.put("doc", pattern(2 * CHUNK)[::-1])
    assert [final.count for final in commits] == [4, 3]
    # The first info and its chunks are gone (rollup, purge): the second's remain.
    assert messages(js, "fast") == 3
    assert obs.get("doc").data == pattern(2 * CHUNK)[::-1]


def test_a_refused_batched_put_leaves_nothing(js: JetStream) -> None:
    obs = batched_store(js, max_bytes=300 * 1024)
    with pytest.raises(APIError):
        obs.put("too-big", pattern(2 * 1024 * 1024))
    assert messages(js, "fast") == 0
    with pytest.raises(ObjectNotFoundError):
        obs.get_info("too-big")
    assert obs.put("fits", b"small").size == 5
    assert messages(js, "fast") == 2


def test_a_failing_reader_ends_the_batch_and_leaves_nothing(js: JetStream) -> None:
    obs = batched_store(js)

    class Broken(io.RawIOBase):
        def __init__(self) -> None:
            self.calls = 0

        def readable(self) -> bool:
            return True

        def read(self, size: int = -1) -> bytes:
            self.calls += 1
            if self.calls > 50:
                raise OSError("disk gone")
            return b"x" * size

    with pytest.raises(OSError, match="disk gone"):
        obs.put("broken", Broken(), chunk_size=1024)  # type: ignore[arg-type]  # a raw file
    assert messages(js, "fast") == 0
    with pytest.raises(ObjectNotFoundError):
        obs.get_info("broken")


def test_nats_py_reads_a_batched_put(js: JetStream, jetstream_server: NatsServer) -> None:
    import nats

    obs = batched_store(js, bucket="shared")
    data = pattern(700_000)
    ours = obs.put("from-fast", data, description="fast ingest")

    async def read() -> tuple[bytes, str, str]:
        nc = await nats.connect(jetstream_server.url)
        try:
            theirs = await nc.jetstream().object_store("shared")
            got = await theirs.get("from-fast")
            return got.data or b"", str(got.info.digest), str(got.info.description)
        finally:
            await nc.close()

    assert asyncio.run(read()) == (data, ours.digest, "fast ingest")


def test_allow_batched_at_creation_makes_puts_batched(
    js: JetStream, commits: list[BatchAck]
) -> None:
    obs = js.create_object_store("made-batched", allow_batched=True)
    assert js.stream_info("OBJ_made-batched").config.allow_batched is True
    data = pattern(2 * CHUNK + 5)
    obs.put("doc", data)
    assert [final.count for final in commits] == [4]
    assert obs.get("doc").data == data

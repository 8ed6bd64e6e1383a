"""Managing live key-value buckets against a real nats-server -js (issue 40): update and
create-or-update keep the values, the stream config is the one create makes, statuses
are listed, nats-py still reads an updated bucket, and watchers resume from a revision."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

import nats_sync
from nats_sync.errors import InvalidArgumentError
from nats_sync.jetstream import (
    BucketNotFoundError,
    Entry,
    JetStream,
    JetStreamError,
    KeyHistoryTooLargeError,
    KeyValueConfig,
    KeyWatcher,
)
from nats_sync.testing import NatsServer

pytestmark = pytest.mark.timeout(60)

ClientFactory = Callable[..., nats_sync.Client]


@pytest.fixture
def js(jetstream_server: NatsServer, connect: ClientFactory) -> JetStream:
    return connect(servers=jetstream_server.url).jetstream()


def initial(watcher: KeyWatcher) -> list[Entry]:
    """The entries up to the end marker."""
    got: list[Entry] = []
    while (entry := watcher.updates(timeout=5)) is not None:
        got.append(entry)
    return got


# --- update and create-or-update ----------------------------------------------------------


def test_update_changes_history_ttl_max_bytes_description_keeping_values(
    js: JetStream,
) -> None:
    kv = js.create_key_value(bucket="live", description="before")
    kv.put("a", b"1")
    kv.put("a", b"2")  # history 1: revision 1 is gone
    kv.put("b", b"x")
    config = kv.status().config
    assert (config.bucket, config.history, config.description) == ("live", 1, "before")

    updated = js.update_key_value(
        config, history=5, ttl=3600.0, max_bytes=1 << 20, description="after"
    )
    stream = js.stream("KV_live").cached_info.config
    assert (stream.max_msgs_per_subject, stream.max_age, stream.max_bytes) == (5, 3600.0, 1 << 20)
    assert stream.description == "after"
    # The rest of the mapping is create's: the duplicate window follows a short ttl,
    # and the bucket's invariants stay.
    assert stream.subjects == ["$KV.live.>"] and stream.discard == "new"
    assert stream.allow_rollup_hdrs and stream.deny_delete and stream.allow_direct
    assert stream.duplicate_window == 120.0

    assert updated.bucket == "live"
    assert updated.get("a").value == b"2" and updated.get("b").value == b"x"
    for value in (b"3", b"4", b"5"):
        updated.put("a", value)
    assert [e.value for e in updated.history("a")] == [b"2", b"3", b"4", b"5"]
    status = updated.status()
    assert (status.history, status.ttl, status.values) == (5, 3600.0, 5)
    assert status.config == KeyValueConfig(
        bucket="live", description="after", history=5, ttl=3600.0, max_bytes=1 << 20
    )


def test_update_takes_the_config_whole(js: JetStream) -> None:
    js.create_key_value(bucket="whole", history=4, description="kept?")
    js.update_key_value(bucket="whole", ttl=30.0)
    stream = js.stream("KV_whole").cached_info.config
    # Fields not given go back to their defaults, as nats.go's UpdateKeyValue does.
    assert (stream.max_msgs_per_subject, stream.description) == (1, None)
    assert (stream.max_age, stream.duplicate_window) == (30.0, 30.0)


def test_update_of_a_missing_bucket_and_bad_configs(js: JetStream) -> None:
    with pytest.raises(BucketNotFoundError, match="'nobucket'"):
        js.update_key_value(bucket="nobucket", history=2)
    assert list(js.key_value_bucket_names()) == []  # the update made nothing
    js.create_key_value(bucket="kept", history=2)
    with pytest.raises(KeyHistoryTooLargeError):
        js.update_key_value(bucket="kept", history=65)
    with pytest.raises(InvalidArgumentError, match="needs a name"):
        js.update_key_value(history=2)
    with pytest.raises(InvalidArgumentError, match="unknown KeyValueConfig field"):
        js.update_key_value(bucket="kept", histroy=2)
    # The server refuses what a stream cannot change, and the bucket stays as it was.
    with pytest.raises(JetStreamError):
        js.update_key_value(bucket="kept", history=2, storage="memory")
    assert js.key_value("kept").status().history == 2


def test_create_or_update(js: JetStream) -> None:
    made = js.create_or_update_key_value(bucket="either", history=2)
    made.put("k", b"v")
    assert made.status().history == 2
    with pytest.raises(JetStreamError):  # create with another config is refused...
        js.create_key_value(bucket="either", history=3)
    again = js.create_or_update_key_value(KeyValueConfig(bucket="either", history=3))
    assert again.status().history == 3  # ...create-or-update changes it
    assert again.get("k").value == b"v"


def test_key_value_stores_lists_every_bucket_s_status(js: JetStream) -> None:
    js.create_key_value(bucket="one", history=3, ttl=60.0)
    js.create_key_value(bucket="two", compression=True).put("k", b"v")
    js.create_stream(name="plain", subjects=["plain.>"])
    js.create_object_store("files")
    statuses = {status.bucket: status for status in js.key_value_stores()}
    assert sorted(statuses) == ["one", "two"]
    assert (statuses["one"].history, statuses["one"].ttl, statuses["one"].values) == (3, 60.0, 0)
    assert statuses["two"].is_compressed and statuses["two"].values == 1
    assert statuses["two"].info.config.name == "KV_two"
    assert statuses["one"].config == js.key_value("one").status().config


def test_nats_py_reads_an_updated_bucket(js: JetStream, jetstream_server: NatsServer) -> None:
    import nats

    kv = js.create_key_value(bucket="shared", history=1)
    kv.put("k", b"one")
    kv = js.update_key_value(kv.status().config, history=3)
    kv.put("k", b"two")

    async def read() -> tuple[bytes, int, int]:
        nc = await nats.connect(jetstream_server.url)
        try:
            theirs = await nc.jetstream().key_value("shared")
            entry = await theirs.get("k")
            history = await theirs.history("k")
            status = await theirs.status()
            assert entry.value is not None
            return entry.value, len(history), int(status.history)
        finally:
            await nc.close()

    assert asyncio.run(read()) == (b"two", 2, 3)


# --- resumed watches -----------------------------------------------------------------------


def test_a_restarted_watcher_resumes_without_replaying(js: JetStream) -> None:
    kv = js.create_key_value(bucket="resume", history=10)
    for n in range(3):
        kv.put(f"k{n}", b"old")
    with kv.watch_all() as watcher:
        seen = initial(watcher)
    last = seen[-1].revision
    assert last == 3
    # While no watcher runs: an update of a seen key, a new key and a delete.
    kv.put("k0", b"new")
    kv.put("k9", b"new")
    kv.delete("k1")
    with kv.watch_all(resume_from_revision=last + 1) as watcher:
        resumed = initial(watcher)
        assert [(e.key, e.revision, e.operation) for e in resumed] == [
            ("k0", 4, "PUT"),
            ("k9", 5, "PUT"),
            ("k1", 6, "DEL"),
        ]
        assert [e.delta for e in resumed] == [2, 1, 0]
        kv.put("k2", b"live")
        live = watcher.updates(timeout=5)
        assert live is not None and (live.key, live.revision) == ("k2", 7)


def test_resume_gives_every_kept_revision_from_n_on_with_filters(js: JetStream) -> None:
    kv = js.create_key_value(bucket="filtered", history=10)
    for value in (b"1", b"2", b"3"):
        kv.put("a", value)  # revisions 1, 3, 5
        kv.put("b", value)  # revisions 2, 4, 6
    with kv.watch("a", resume_from_revision=2) as watcher:
        assert [(e.value, e.revision) for e in initial(watcher)] == [(b"2", 3), (b"3", 5)]
    with kv.watch_all(resume_from_revision=6, ignore_deletes=True, meta_only=True) as watcher:
        assert [(e.key, e.value, e.revision) for e in initial(watcher)] == [("b", b"", 6)]


def test_resume_beyond_the_end_and_with_updates_only(js: JetStream) -> None:
    kv = js.create_key_value(bucket="ahead", history=5)
    kv.put("a", b"1")
    with kv.watch_all(resume_from_revision=2) as watcher:
        assert watcher.updates(timeout=5) is None  # caught up at once
        kv.put("a", b"2")
        entry = watcher.updates(timeout=5)
        assert entry is not None and entry.revision == 2
    kv.put("a", b"3")
    with kv.watch_all(resume_from_revision=2, updates_only=True) as watcher:
        # From revision 2 on, with no end marker (updates_only).
        assert watcher.init_done
        got = [watcher.updates(timeout=5), watcher.updates(timeout=5)]
        assert [e.revision for e in got if e is not None] == [2, 3]
        with pytest.raises(nats_sync.TimeoutError):
            watcher.updates(timeout=0.3)


@pytest.mark.parametrize("bad", [0, -1, 1.5, "3", True])
def test_resume_from_a_bad_revision_raises(js: JetStream, bad: object) -> None:
    kv = js.create_key_value(bucket="bad")
    with pytest.raises(InvalidArgumentError, match="resume_from_revision"):
        kv.watch_all(resume_from_revision=bad)  # type: ignore[arg-type]


def test_a_codec_bucket_resumes_too(js: JetStream) -> None:
    from nats_sync.jetstream import kvcodec

    kv = kvcodec.wrap(js.create_key_value(bucket="coded"), key_codec=kvcodec.Base64Codec())
    last = kv.put("a b", b"1")
    kv.put("c d", b"2")
    with kv.watch_all(resume_from_revision=last + 1) as watcher:
        got = watcher.updates(timeout=5)
        assert got is not None and (got.key, got.revision) == ("c d", 2)
        assert watcher.updates(timeout=5) is None
    with kv.watch("a b", resume_from_revision=last) as watcher:
        got = watcher.updates(timeout=5)
        assert got is not None and (got.key, got.value) == ("a b", b"1")

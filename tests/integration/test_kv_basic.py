"""Key-value buckets against a real nats-server -js: management, get/put/create/update,
delete and purge markers, history, keys, status, names, and buckets shared with nats-py."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

import pytest

import nats_sync
from nats_sync.jetstream import (
    BucketNotFoundError,
    InvalidBucketNameError,
    InvalidKeyError,
    JetStream,
    KeyDeletedError,
    KeyHistoryTooLargeError,
    KeyNotFoundError,
    KeyValue,
    KeyValueConfig,
    KeyWrongLastSequenceError,
    NoKeysError,
    WrongLastSequenceError,
)
from nats_sync.testing import NatsServer

pytestmark = pytest.mark.timeout(60)

ClientFactory = Callable[..., nats_sync.Client]


@pytest.fixture
def js(jetstream_server: NatsServer, connect: ClientFactory) -> JetStream:
    return connect(servers=jetstream_server.url).jetstream()


def test_bucket_management(js: JetStream) -> None:
    kv = js.create_key_value(
        bucket="conf",
        history=5,
        ttl=3600.0,
        max_value_size=1024,
        max_bytes=1 << 20,
        storage="memory",
        compression=True,
        description="settings",
    )
    config = js.stream("KV_conf").cached_info.config
    assert config.subjects == ["$KV.conf.>"]
    assert (config.max_msgs_per_subject, config.max_age, config.max_msg_size) == (5, 3600.0, 1024)
    assert (config.storage, config.compression, config.description) == ("memory", "s2", "settings")
    assert config.allow_direct and config.allow_rollup_hdrs and config.deny_delete
    assert config.discard == "new"
    # The same config again is fine; a KeyValueConfig works as well as fields.
    js.create_key_value(KeyValueConfig(bucket="other"))
    assert kv.bucket == "conf"
    assert sorted(js.key_value_bucket_names()) == ["conf", "other"]
    assert js.key_value("conf").bucket == "conf"
    status = kv.status()
    assert (status.bucket, status.history, status.ttl, status.values) == ("conf", 5, 3600.0, 0)
    assert status.is_compressed and status.backing_store == "JetStream"
    js.delete_key_value("conf")
    with pytest.raises(BucketNotFoundError):
        js.key_value("conf")
    with pytest.raises(BucketNotFoundError):
        js.delete_key_value("conf")
    assert list(js.key_value_bucket_names()) == ["other"]


def test_invalid_names_and_config(js: JetStream) -> None:
    for bad in ("", "a.b", "a b", "a*", "ü"):
        with pytest.raises(InvalidBucketNameError) as info:
            js.create_key_value(bucket=bad)
        assert isinstance(info.value, ValueError)
    with pytest.raises(InvalidBucketNameError, match=r"a\.b"):
        js.key_value("a.b")
    with pytest.raises(KeyHistoryTooLargeError):
        js.create_key_value(bucket="big", history=65)
    with pytest.raises(ValueError, match="history"):
        js.create_key_value(bucket="big", history=0)
    with pytest.raises(ValueError, match="colour"):
        js.create_key_value(bucket="big", colour="red")
    kv = js.create_key_value(bucket="names")
    for bad in ("", ".a", "a.", "a..b", "a b", "a*", "a>", "k\u00e9y"):
        with pytest.raises(InvalidKeyError) as err:
            kv.put(bad, b"x")
        assert isinstance(err.value, ValueError)
    with pytest.raises(InvalidKeyError, match="reserved"):
        kv.put("_kv_x", b"x")
    for bad_filter in ("a b", "a*", "a.>.b", "a..b", ""):
        with pytest.raises(InvalidKeyError):
            kv.keys([bad_filter])
    with pytest.raises(ValueError, match="bytes"):
        kv.put("k", "text")  # type: ignore[arg-type]
    kv.put("a-b/c_d=e.f", b"ok")
    assert kv.get("a-b/c_d=e.f").value == b"ok"


def test_revisions_get_create_update_delete_purge(js: JetStream) -> None:
    kv = js.create_key_value(bucket="b", history=10)
    with pytest.raises(KeyNotFoundError):
        kv.get("k")
    assert kv.put("k", b"1") == 1
    assert kv.put("other", b"x") == 2
    assert kv.put("k", b"2") == 3
    entry = kv.get("k")
    assert (entry.bucket, entry.key, entry.value, entry.revision, entry.operation) == (
        "b",
        "k",
        b"2",
        3,
        "PUT",
    )
    assert entry.created is not None and entry.delta == 0
    assert kv.get("k", revision=1).value == b"1"
    with pytest.raises(KeyNotFoundError, match="revision 2"):
        kv.get("k", revision=2)  # the revision of another key
    with pytest.raises(KeyNotFoundError):
        kv.get("k", revision=99)

    with pytest.raises(KeyWrongLastSequenceError) as lost:
        kv.create("k", b"again")
    assert isinstance(lost.value, WrongLastSequenceError) and lost.value.err_code == 10071
    assert kv.update("k", b"3", last=3) == 4
    with pytest.raises(KeyWrongLastSequenceError):
        kv.update("k", b"stale", last=3)

    with pytest.raises(KeyWrongLastSequenceError):
        kv.delete("k", last=3)
    kv.delete("k", last=4)
    with pytest.raises(KeyDeletedError):
        kv.get("k")
    assert kv.create("k", b"reborn") == 6  # create works again after a delete
    kv.purge("k")
    with pytest.raises(KeyNotFoundError):
        kv.get("k")
    assert kv.create("k", b"after purge") == 8
    history = kv.history("k")
    # The purge rolled up everything before it.
    assert [(e.revision, e.operation, e.value) for e in history] == [
        (7, "PURGE", b""),
        (8, "PUT", b"after purge"),
    ]
    assert [e.delta for e in history] == [1, 0]


def test_history_keeps_delete_markers(js: JetStream) -> None:
    kv = js.create_key_value(bucket="h", history=5)
    for n in range(3):
        kv.put("k", b"%d" % n)
    kv.delete("k")
    kv.put("k", b"last")
    kv.put("x", b"other key")
    history = kv.history("k")
    assert [(e.revision, e.operation, e.value) for e in history] == [
        (1, "PUT", b"0"),
        (2, "PUT", b"1"),
        (3, "PUT", b"2"),
        (4, "DEL", b""),
        (5, "PUT", b"last"),
    ]
    assert [e.delta for e in history] == [4, 3, 2, 1, 0]
    for _ in range(5):
        kv.put("k", b"more")
    assert len(kv.history("k")) == 5  # history=5 keeps five
    with pytest.raises(KeyNotFoundError):
        kv.history("never")


def test_keys_and_filters(js: JetStream) -> None:
    kv = js.create_key_value(bucket="keys")
    with pytest.raises(NoKeysError):
        kv.keys()
    assert list(kv.list_keys()) == []
    for key in ("a.1", "a.2", "b.1", "c"):
        kv.put(key, b"v")
    kv.put("a.1", b"twice")
    kv.put("gone", b"v")
    kv.delete("gone")
    kv.put("purged", b"v")
    kv.purge("purged")
    assert sorted(kv.keys()) == ["a.1", "a.2", "b.1", "c"]
    assert sorted(kv.keys(["a.*"])) == ["a.1", "a.2"]
    assert sorted(kv.list_keys(["a.>", "c"])) == ["a.1", "a.2", "c"]
    with pytest.raises(NoKeysError):
        kv.keys(["zzz.>"])
    # history=1: one entry per key, the delete and purge markers included.
    assert kv.status().values == 6


def test_purge_deletes(js: JetStream) -> None:
    kv = js.create_key_value(bucket="pd", history=5)
    kv.put("a", b"1")
    kv.put("b", b"1")
    kv.put("b", b"2")
    kv.delete("b")
    kv.put("c", b"1")
    kv.purge("c")
    kv.purge_deletes()  # markers are newer than 30 minutes: they stay, alone
    assert [e.operation for e in kv.history("b")] == ["DEL"]
    kv.purge_deletes(older_than=0)
    with pytest.raises(KeyNotFoundError):
        kv.history("b")
    with pytest.raises(KeyNotFoundError):
        kv.history("c")
    assert kv.keys() == ["a"]


def test_update_race_has_one_winner_per_round(
    js: JetStream, connect: ClientFactory, jetstream_server: NatsServer
) -> None:
    js.create_key_value(bucket="race", history=1)
    buckets = [
        connect(servers=jetstream_server.url).jetstream().key_value("race") for _ in range(10)
    ]
    last = buckets[0].put("counter", b"0")
    for round_number in range(10):
        wins, losses = contend_round(buckets, last)
        assert len(wins) == 1 and len(losses) == 9, round_number
        last = wins[0]
        assert buckets[0].get("counter").revision == last


def contend_round(buckets: list[KeyValue], last: int) -> tuple[list[int], list[BaseException]]:
    """Ten threads update one key with the same last revision at once."""
    barrier = threading.Barrier(len(buckets))
    wins: list[int] = []
    losses: list[BaseException] = []
    lock = threading.Lock()

    def contend(index: int) -> None:
        barrier.wait()
        try:
            revision = buckets[index].update("counter", b"%d" % index, last)
        except KeyWrongLastSequenceError as err:
            with lock:
                losses.append(err)
        else:
            with lock:
                wins.append(revision)

    threads = [threading.Thread(target=contend, args=(i,)) for i in range(len(buckets))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    return wins, losses


def test_create_race_has_one_winner(js: JetStream) -> None:
    kv = js.create_key_value(bucket="cr")
    results: list[int | BaseException] = []
    barrier = threading.Barrier(8)

    def create() -> None:
        barrier.wait()
        try:
            results.append(kv.create("lock", b"mine"))
        except KeyWrongLastSequenceError as err:
            results.append(err)

    threads = [threading.Thread(target=create) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sum(isinstance(r, int) for r in results) == 1 and len(results) == 8


def test_bucket_made_by_natspy_legacy(js: JetStream, jetstream_server: NatsServer) -> None:
    import nats
    from nats.js.api import KeyValueConfig as NatsPyConfig

    async def make() -> None:
        nc = await nats.connect(jetstream_server.url)
        try:
            kv = await nc.jetstream().create_key_value(NatsPyConfig(bucket="legacy", history=3))
            await kv.put("from.natspy", b"hello")
        finally:
            await nc.close()

    asyncio.run(make())
    assert not js.stream("KV_legacy").cached_info.config.allow_direct
    kv = js.key_value("legacy")
    assert kv.get("from.natspy").value == b"hello"  # by STREAM.MSG.GET
    revision = kv.put("from.natspy", b"changed")
    assert kv.get("from.natspy").revision == revision
    assert kv.get("from.natspy", revision=1).value == b"hello"
    kv.delete("from.natspy")
    with pytest.raises(KeyDeletedError):
        kv.get("from.natspy")
    assert [e.operation for e in kv.history("from.natspy")] == ["PUT", "PUT", "DEL"]
    kv.put("x", b"1")
    assert kv.keys() == ["x"]


def test_bucket_made_here_read_by_natspy(js: JetStream, jetstream_server: NatsServer) -> None:
    import nats

    kv = js.create_key_value(bucket="ours", history=2)
    kv.put("k", b"one")
    kv.put("k", b"two")
    kv.put("gone", b"x")
    kv.delete("gone")

    async def read() -> tuple[bytes, int, list[str], bool]:
        nc = await nats.connect(jetstream_server.url)
        try:
            theirs = await nc.jetstream().key_value("ours")
            entry = await theirs.get("k")
            history = await theirs.history("k")
            keys = await theirs.keys()
            deleted = False
            try:
                await theirs.get("gone")
            except nats.js.errors.KeyNotFoundError:
                deleted = True
            await theirs.put("k", b"three")
            assert entry.value is not None and entry.revision is not None
            return entry.value, len(history), keys, deleted
        finally:
            await nc.close()

    value, length, keys, deleted = asyncio.run(read())
    assert (value, length, keys, deleted) == (b"two", 2, ["k"], True)
    assert kv.get("k").value == b"three"


def test_ttl_expires_values(js: JetStream) -> None:
    kv = js.create_key_value(bucket="short", ttl=1.0)
    kv.put("k", b"v")
    assert kv.get("k").value == b"v"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            kv.get("k")
        except KeyNotFoundError:
            break
        time.sleep(0.2)
    else:
        pytest.fail("the value outlived its ttl")

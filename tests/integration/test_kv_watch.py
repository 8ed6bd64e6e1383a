"""Key-value watchers against a real nats-server -js: the initial values and their end
marker, every option, stop and close, and a server restart without loss or repeat."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

import nats_sync
from nats_sync.jetstream import Entry, JetStream, KeyValue, KeyWatcher
from nats_sync.testing import NatsServer

pytestmark = pytest.mark.timeout(60)

ClientFactory = Callable[..., nats_sync.Client]


@pytest.fixture
def kv(jetstream_server: NatsServer, connect: ClientFactory) -> KeyValue:
    js: JetStream = connect(servers=jetstream_server.url).jetstream()
    return js.create_key_value(bucket="w", history=10)


def initial(watcher: KeyWatcher) -> list[Entry]:
    """The entries up to the end marker; fails naming those that came when it does not."""
    got: list[Entry] = []
    try:
        while (entry := watcher.updates(timeout=5)) is not None:
            got.append(entry)
    except nats_sync.TimeoutError as err:  # the entries would be lost with the raise
        keys = [entry.key for entry in got]
        raise AssertionError(f"no end marker within 5 s after {len(got)} entries: {keys}") from err
    return got


def test_empty_bucket_gives_the_marker_at_once_then_updates(kv: KeyValue) -> None:
    with kv.watch_all() as watcher:
        assert not watcher.init_done
        assert watcher.updates(timeout=5) is None
        assert watcher.init_done
        with pytest.raises(nats_sync.TimeoutError):
            watcher.updates(timeout=0.3)
        kv.put("a", b"1")
        entry = watcher.updates(timeout=5)
        assert entry is not None and (entry.key, entry.value, entry.revision) == ("a", b"1", 1)


def test_latest_values_then_one_marker_then_live(kv: KeyValue) -> None:
    kv.put("a", b"1")
    kv.put("b", b"1")
    kv.put("a", b"2")
    kv.delete("b")
    kv.put("c.x", b"1")
    with kv.watch_all() as watcher:
        got = initial(watcher)
        assert [(e.key, e.value, e.operation) for e in got] == [
            ("a", b"2", "PUT"),
            ("b", b"", "DEL"),
            ("c.x", b"1", "PUT"),
        ]
        assert [e.delta for e in got] == [2, 1, 0]
        kv.put("a", b"3")
        kv.purge("c.x")
        live = [watcher.updates(timeout=5), watcher.updates(timeout=5)]
        assert [(e.key, e.operation, e.revision) for e in live if e] == [
            ("a", "PUT", 6),
            ("c.x", "PURGE", 7),
        ]
        with pytest.raises(nats_sync.TimeoutError):
            watcher.updates(timeout=0.3)  # the marker came once only


def test_include_history_ignore_deletes_meta_only_and_filters(kv: KeyValue) -> None:
    kv.put("a", b"1")
    kv.put("a", b"2")
    kv.delete("a")
    kv.put("b.1", b"x")
    kv.put("b.2", b"y")
    with kv.watch("a", include_history=True) as watcher:
        assert [(e.value, e.operation) for e in initial(watcher)] == [
            (b"1", "PUT"),
            (b"2", "PUT"),
            (b"", "DEL"),
        ]
    with kv.watch_all(include_history=True, ignore_deletes=True) as watcher:
        assert [(e.key, e.value) for e in initial(watcher)] == [
            ("a", b"1"),
            ("a", b"2"),
            ("b.1", b"x"),
            ("b.2", b"y"),
        ]
    with kv.watch("b.*", meta_only=True) as watcher:
        got = initial(watcher)
        assert [(e.key, e.value) for e in got] == [("b.1", b""), ("b.2", b"")]
        kv.put("b.3", b"zzz")
        kv.put("other", b"not watched")
        live = watcher.updates(timeout=5)
        assert live is not None and (live.key, live.value) == ("b.3", b"")
    with kv.watch(["a", "b.2"], ignore_deletes=True) as watcher:
        # a's last entry is a delete: left out, yet the marker still comes.
        assert [e.key for e in initial(watcher)] == ["b.2"]


def test_ignore_deletes_still_ends_the_initial_values(kv: KeyValue) -> None:
    kv.put("a", b"1")
    kv.delete("a")
    with kv.watch_all(ignore_deletes=True) as watcher:
        assert watcher.updates(timeout=5) is None


def test_updates_only_has_no_marker_and_no_old_values(kv: KeyValue) -> None:
    kv.put("a", b"old")
    with kv.watch_all(updates_only=True) as watcher:
        assert watcher.init_done
        kv.put("a", b"new")
        entry = watcher.updates(timeout=5)
        assert entry is not None and entry.value == b"new"
        with pytest.raises(nats_sync.TimeoutError):
            watcher.updates(timeout=0.3)
    with pytest.raises(ValueError, match="exclude"):
        kv.watch_all(include_history=True, updates_only=True)
    with pytest.raises(ValueError, match="filter"):
        kv.watch("a b")


def test_iteration_never_yields_none_and_stop_ends_it(kv: KeyValue) -> None:
    kv.put("a", b"1")
    watcher = kv.watch_all()
    got: list[Entry | None] = []
    done = threading.Event()

    def read() -> None:
        for entry in watcher:
            got.append(entry)
        done.set()

    reader = threading.Thread(target=read)
    reader.start()
    kv.put("b", b"2")
    deadline = time.monotonic() + 5
    while len(got) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    stopped_at = time.monotonic()
    watcher.stop()
    assert done.wait(3), "stop() did not end the iteration"
    assert time.monotonic() - stopped_at < 2.5
    reader.join(5)
    assert [e.key for e in got if e is not None] == ["a", "b"] and None not in got
    with pytest.raises(nats_sync.ConnectionClosedError):
        watcher.updates(timeout=1)


def test_client_close_ends_the_watch(jetstream_server: NatsServer, connect: ClientFactory) -> None:
    nc = connect(servers=jetstream_server.url)
    kv = nc.jetstream().create_key_value(bucket="closing")
    watcher = kv.watch_all()
    assert watcher.updates(timeout=5) is None
    ended = threading.Event()

    def read() -> None:
        for _ in watcher:
            pass
        ended.set()

    reader = threading.Thread(target=read)
    reader.start()
    time.sleep(0.2)
    nc.close()
    assert ended.wait(3), "the client's close did not end the watch"
    reader.join(5)


def test_a_watcher_survives_a_server_restart(
    jetstream_server: NatsServer, connect: ClientFactory
) -> None:
    nc = connect(servers=jetstream_server.url, max_reconnect_attempts=-1, reconnect_time_wait=0.1)
    kv = nc.jetstream().create_key_value(bucket="durable", history=5)
    kv.put("k", b"0")
    watcher = kv.watch_all()
    seen: list[int] = []
    marker_count = 0
    stop_reading = threading.Event()

    def read() -> None:
        nonlocal marker_count
        while not stop_reading.is_set():
            try:
                entry = watcher.updates(timeout=0.5)
            except nats_sync.TimeoutError:
                continue
            except nats_sync.ConnectionClosedError:
                return
            if entry is None:
                marker_count += 1
            else:
                seen.append(int(entry.value))

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for n in range(1, 6):
            kv.put("k", b"%d" % n)
        jetstream_server.restart()
        # Right after it is back, then later.
        for n in range(6, 11):
            put_retrying(kv, n)
        time.sleep(2)
        for n in range(11, 16):
            put_retrying(kv, n)
        deadline = time.monotonic() + 30
        while len(seen) < 16 and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        stop_reading.set()
        watcher.stop()
        reader.join(10)
    assert seen == list(range(16))
    assert marker_count == 1


def put_retrying(kv: KeyValue, n: int) -> None:
    """A put while the client reconnects and the stream recovers."""
    deadline = time.monotonic() + 20
    while True:
        try:
            kv.put("k", b"%d" % n)
            return
        except nats_sync.Error:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)

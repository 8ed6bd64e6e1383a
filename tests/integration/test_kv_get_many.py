"""KeyValue.get_many against a real nats-server -js: present, missing, deleted, purged and
empty values, history, several requests, requests continued past their byte limit, the
one-by-one fallback (no direct gets, direct gets turned off, no batched gets), invalid
keys, threads at once, and agreement with ``get`` key by key on thousands of keys."""

from __future__ import annotations

import dataclasses
import json
import random
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import nats_sync
from nats_sync import _defaults as d
from nats_sync.errors import InvalidArgumentError, NoRespondersError
from nats_sync.jetstream import (
    Entry,
    InvalidKeyError,
    JetStream,
    KeyNotFoundError,
    KeyValue,
)
from nats_sync.testing import NatsServer

pytestmark = pytest.mark.timeout(90)

ClientFactory = Callable[..., nats_sync.Client]
DIRECT_GET = "$JS.API.DIRECT.GET."


@pytest.fixture
def nc(jetstream_server: NatsServer, connect: ClientFactory) -> nats_sync.Client:
    return connect(servers=jetstream_server.url)


@pytest.fixture
def js(nc: nats_sync.Client) -> JetStream:
    return nc.jetstream()


class Spy:
    """Counts ``kv.get`` calls and the batched requests ``nc`` publishes."""

    def __init__(self, nc: nats_sync.Client, kv: KeyValue, monkeypatch: pytest.MonkeyPatch) -> None:
        self.gets = 0
        self.requests: list[dict[str, Any]] = []
        publish, get = nc.publish, kv.get

        def counting_publish(subject: str, payload: bytes = b"", *args: Any, **kwargs: Any) -> None:
            if subject.startswith(DIRECT_GET) and payload:
                self.requests.append(json.loads(payload))
            publish(subject, payload, *args, **kwargs)

        def counting_get(*args: Any, **kwargs: Any) -> Entry:
            self.gets += 1
            return get(*args, **kwargs)

        monkeypatch.setattr(nc, "publish", counting_publish)
        monkeypatch.setattr(kv, "get", counting_get)

    @property
    def resumed(self) -> int:
        return sum(1 for body in self.requests if "seq" in body)


def _fill(js: JetStream, bucket: str, values: dict[str, bytes]) -> None:
    futures = [js.publish_async(f"$KV.{bucket}.{key}", value) for key, value in values.items()]
    for future in futures:
        future.result(20)


def _one_by_one(kv: KeyValue, keys: list[str]) -> dict[str, bytes]:
    found: dict[str, bytes] = {}
    for key in keys:
        try:
            found[key] = kv.get(key).value
        except KeyNotFoundError:
            pass
    return found


def test_present_missing_deleted_purged_and_empty_values(
    nc: nats_sync.Client, js: JetStream, monkeypatch: pytest.MonkeyPatch
) -> None:
    kv = js.create_key_value(bucket="many")
    kv.put("a", b"1")
    kv.put("b", b"2")
    kv.put("gone", b"x")
    kv.delete("gone")
    kv.put("purged", b"y")
    kv.purge("purged")
    kv.put("empty", b"")
    kv.put("dir/sub.key=1", b"z")
    spy = Spy(nc, kv, monkeypatch)
    found = kv.get_many(["a", "missing", "gone", "purged", "empty", "a", "dir/sub.key=1", "b"])
    assert found == {"a": b"1", "empty": b"", "dir/sub.key=1": b"z", "b": b"2"}
    assert spy.gets == 0 and len(spy.requests) == 1  # one batched request, no get
    assert spy.requests[0]["multi_last"] == [  # a repeated key is asked for once
        "$KV.many.a",
        "$KV.many.missing",
        "$KV.many.gone",
        "$KV.many.purged",
        "$KV.many.empty",
        "$KV.many.dir/sub.key=1",
        "$KV.many.b",
    ]
    # Nothing has a value (the server answers 404), and no keys at all asks nothing.
    assert kv.get_many(["missing", "gone", "purged"]) == {}
    assert kv.get_many([]) == {}
    assert kv.get_many(iter(())) == {}
    assert len(spy.requests) == 2
    # A key set again after its delete or purge has its new value.
    kv.put("gone", b"back")
    kv.create("purged", b"again")
    assert kv.get_many(k for k in ("gone", "purged")) == {"gone": b"back", "purged": b"again"}


def test_a_history_bucket_gives_each_key_s_latest_value(js: JetStream) -> None:
    kv = js.create_key_value(bucket="hist", history=10)
    for n in range(5):
        kv.put("a", b"a%d" % n)
        kv.put("b", b"b%d" % n)
    kv.delete("b")
    kv.put("c", b"c0")
    kv.purge("c")
    kv.put("c", b"c1")
    kv.put("d", b"d0")
    kv.delete("d")
    assert kv.get_many(["a", "b", "c", "d"]) == {"a": b"a4", "c": b"c1"}


def test_more_keys_than_one_request_takes_go_in_several_requests(
    nc: nats_sync.Client, js: JetStream, monkeypatch: pytest.MonkeyPatch
) -> None:
    kv = js.create_key_value(bucket="wide")
    count = 5 * d.KV_MULTI_LAST_MAX_KEYS + 300
    _fill(js, "wide", {f"k{n}": b"v%d" % n for n in range(0, count, 2)})  # even keys only
    spy = Spy(nc, kv, monkeypatch)
    found = kv.get_many(f"k{n}" for n in range(count))
    assert found == {f"k{n}": b"v%d" % n for n in range(0, count, 2)}
    # Six requests of at most 1,024 keys, more than KV_MULTI_LAST_IN_FLIGHT: slots were reused.
    assert [len(body["multi_last"]) for body in spy.requests] == [1024] * 5 + [300]
    assert len(spy.requests) > d.KV_MULTI_LAST_IN_FLIGHT
    assert spy.gets == 0


def test_long_keys_make_smaller_requests_under_a_quarter_of_max_payload(
    nc: nats_sync.Client, js: JetStream, monkeypatch: pytest.MonkeyPatch
) -> None:
    kv = js.create_key_value(bucket="long")
    keys = [f"{n:04d}/" + "x" * 400 for n in range(1_500)]
    _fill(js, "long", {key: key[:4].encode() for key in keys[::3]})
    spy = Spy(nc, kv, monkeypatch)
    assert kv.get_many(keys) == {key: key[:4].encode() for key in keys[::3]}
    sizes = [len(json.dumps(body["multi_last"], separators=(",", ":"))) for body in spy.requests]
    assert len(sizes) == 3 and max(sizes) <= nc.max_payload // 4
    assert sum(len(body["multi_last"]) for body in spy.requests) == 1_500


def test_values_past_a_request_s_byte_limit_are_continued(
    nc: nats_sync.Client, js: JetStream, monkeypatch: pytest.MonkeyPatch
) -> None:
    kv = js.create_key_value(bucket="big")
    size = 900 * 1024  # under the default 1 MiB max_payload with the headers
    count = d.KV_MULTI_LAST_MAX_BYTES // size + 4  # ~11.7 MB in one request
    big = {f"big{n}": bytes([n]) * size for n in range(count)}
    for key, value in big.items():
        kv.put(key, value)
    kv.put("small", b"s")
    kv.delete("big0")
    spy = Spy(nc, kv, monkeypatch)
    found = kv.get_many([*big, "small", "missing"])
    expected = {key: value for key, value in big.items() if key != "big0"}
    expected["small"] = b"s"
    assert found.keys() == expected.keys()
    assert all(found[key] == value for key, value in expected.items())
    assert len(spy.requests) >= 2 and spy.resumed >= 1 and spy.gets == 0
    # The continuation is read from the first request's snapshot, up to its last sequence.
    first, *rest = spy.requests
    assert "seq" not in first and all(body["up_to_seq"] >= 1 for body in rest)


def test_many_requests_each_continued_many_times(
    nc: nats_sync.Client, js: JetStream, monkeypatch: pytest.MonkeyPatch
) -> None:
    kv = js.create_key_value(bucket="paused", history=3)
    values = {f"k{n}": b"value-%05d" % n for n in range(2_100)}
    _fill(js, "paused", values)
    kv.put("k7", b"newer")
    kv.delete("k8")
    values.update({"k7": b"newer"})
    del values["k8"]
    monkeypatch.setattr(d, "KV_MULTI_LAST_MAX_BYTES", 2_000)  # a few dozen values a round
    spy = Spy(nc, kv, monkeypatch)
    assert kv.get_many([*values, "k8", "missing"]) == values
    assert spy.resumed > 20 and spy.gets == 0


def test_a_bucket_without_direct_gets_is_read_key_by_key(
    nc: nats_sync.Client, js: JetStream, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A bucket as nats-py's legacy create_key_value makes it: no allow_direct.
    js.create_stream(
        name="KV_legacy",
        subjects=["$KV.legacy.>"],
        max_msgs_per_subject=3,
        allow_rollup_hdrs=True,
        deny_delete=True,
        allow_direct=False,
    )
    kv = js.key_value("legacy")
    kv.put("a", b"1")
    kv.put("a", b"2")
    kv.put("b", b"x")
    kv.delete("b")
    kv.put("c", b"3")
    kv.put("p", b"4")
    kv.purge("p")
    spy = Spy(nc, kv, monkeypatch)
    assert kv.get_many(["a", "b", "c", "d", "p", "a"]) == {"a": b"2", "c": b"3"}
    assert spy.requests == [] and spy.gets == 5


def test_direct_gets_turned_off_after_the_bind_fall_back_to_get(
    nc: nats_sync.Client, js: JetStream, monkeypatch: pytest.MonkeyPatch
) -> None:
    kv = js.create_key_value(bucket="switch")
    kv.put("a", b"1")
    kv.put("b", b"2")
    config = js.stream("KV_switch").cached_info.config
    js.update_stream(dataclasses.replace(config, allow_direct=False))
    deadline = time.monotonic() + 10
    while True:  # until the server has dropped its direct-get responders
        try:
            nc.request(f"{DIRECT_GET}KV_switch.$KV.switch.a", timeout=1)
        except NoRespondersError:
            break
        assert time.monotonic() < deadline, "direct gets still answered"
        time.sleep(0.05)
    spy = Spy(nc, kv, monkeypatch)
    assert kv.get_many(["a", "b", "c"]) == {"a": b"1", "b": b"2"}
    assert len(spy.requests) == 1 and spy.gets == 3
    # The bucket handle remembers: no batched request any more.
    assert kv.get_many(["b", "c"]) == {"b": b"2"}
    assert len(spy.requests) == 1 and spy.gets == 5


def test_a_server_without_batched_direct_gets_is_read_key_by_key(
    nc: nats_sync.Client, js: JetStream, monkeypatch: pytest.MonkeyPatch
) -> None:
    kv = js.create_key_value(bucket="old")
    kv.put("a", b"1")
    kv.put("b", b"2")
    kv.delete("b")
    monkeypatch.setattr(js, "api_level", lambda timeout=None: 0)  # as nats-server 2.10
    spy = Spy(nc, kv, monkeypatch)
    assert kv.get_many(["a", "b", "c"]) == {"a": b"1"}
    assert spy.requests == [] and spy.gets == 3


def test_an_invalid_key_raises_naming_it_and_nothing_is_looked_up(
    nc: nats_sync.Client, js: JetStream, monkeypatch: pytest.MonkeyPatch
) -> None:
    kv = js.create_key_value(bucket="strict")
    kv.put("a", b"1")
    spy = Spy(nc, kv, monkeypatch)
    for bad in ("a..b", "a b", ".a", "a.", "", "k\u00e9y", "a*", "a>"):
        with pytest.raises(InvalidKeyError) as err:
            kv.get_many(["a", bad])
        assert repr(bad) in str(err.value)
    with pytest.raises(InvalidKeyError, match="None"):
        kv.get_many(["a", None])  # type: ignore[list-item]
    with pytest.raises(InvalidArgumentError, match="single str"):
        kv.get_many("a")
    with pytest.raises(InvalidArgumentError, match="single bytes"):
        kv.get_many(b"a")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="timeout"):
        kv.get_many(["a"], timeout=0)
    assert spy.requests == [] and spy.gets == 0
    assert kv.get_many(["_kv_reserved_but_readable", "a"], timeout=2) == {"a": b"1"}


def test_threads_look_up_at_once_on_one_bucket_handle(js: JetStream) -> None:
    kv = js.create_key_value(bucket="shared")
    values = {f"k{n}": b"v%d" % n for n in range(3_000)}
    _fill(js, "shared", values)
    results: list[dict[str, bytes] | BaseException] = []

    def look(seed: int) -> None:
        keys = random.Random(seed).sample(sorted(values), 2_000)
        try:
            found = kv.get_many(keys)
            results.append(
                found
                if found == {k: values[k] for k in keys}
                else AssertionError(f"thread {seed} got other values")
            )
        except BaseException as err:  # handed to the test thread
            results.append(err)

    threads = [threading.Thread(target=look, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(results) == 4
    assert [r for r in results if isinstance(r, BaseException)] == []


@pytest.fixture
def mixed(js: JetStream) -> Iterator[tuple[KeyValue, list[str]]]:
    """Bucket "mixed" (history 4) of 4,000 keys written, rewritten, deleted, purged and
    recreated at random, and the keys to look up (with 500 never written)."""
    kv = js.create_key_value(bucket="mixed", history=4)
    rng = random.Random(2024)
    keys = [f"user/{n}.{rng.choice('abc')}" for n in range(4_000)]
    _fill(js, "mixed", {key: b"first-" + key.encode() for key in keys})
    for key in rng.sample(keys, 1_500):
        kv.put(key, rng.randbytes(rng.randrange(0, 64)))
    for key in rng.sample(keys, 600):
        kv.delete(key)
    for key in rng.sample(keys, 300):
        kv.purge(key)
    for key in rng.sample(keys, 200):
        kv.put(key, b"recreated")
    wanted = keys + [f"never/{n}" for n in range(500)]
    rng.shuffle(wanted)
    yield kv, wanted


def test_get_many_agrees_with_get_one_by_one_on_thousands_of_keys(
    nc: nats_sync.Client, mixed: tuple[KeyValue, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    kv, keys = mixed
    slow = _one_by_one(kv, keys)
    spy = Spy(nc, kv, monkeypatch)
    fast = kv.get_many(keys)
    assert spy.gets == 0 and len(spy.requests) == 5  # 4,500 keys, 1,024 a request
    assert fast == slow
    assert 2_000 < len(fast) < 4_000 and b"recreated" in fast.values()

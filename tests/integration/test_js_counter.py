"""Counters (ADR-49, nats-server 2.12+) against a real ``nats-server -js`` (2.15):
``js.counter(stream)``, ``add`` (negative, zero, beyond 64 bits), ``get``, ``get_many``
with wildcards (batched direct get, the 413 fallback, a stream without direct gets),
eight threads adding at once, the errors, and nats-py reading and writing the same
counters."""

from __future__ import annotations

import asyncio
import json
import pickle
import threading
import time
from collections.abc import Callable

import pytest

import nats_sync
from nats_sync.errors import InvalidArgumentError
from nats_sync.jetstream import (
    BadRequestError,
    Counter,
    CounterError,
    CounterIncrementMissingError,
    CounterNotEnabledError,
    CounterNotFoundError,
    CounterPayloadError,
    JetStream,
    NotFoundError,
    StreamNotFoundError,
)
from nats_sync.testing import NatsServer

pytestmark = pytest.mark.timeout(60)

ClientFactory = Callable[..., nats_sync.Client]


@pytest.fixture
def js(jetstream_server: NatsServer, connect: ClientFactory) -> JetStream:
    context = connect(servers=jetstream_server.url).jetstream()
    context.create_stream(
        name="HITS", subjects=["hits.>"], allow_msg_counter=True, allow_direct=True
    )
    return context


@pytest.fixture
def hits(js: JetStream) -> Counter:
    return js.counter("HITS")


def test_add_returns_the_new_value_and_get_reads_it(hits: Counter) -> None:
    assert hits.add("hits.page1", 5) == 5
    assert hits.add("hits.page1", -2) == 3
    assert hits.add("hits.page1", 0) == 3
    assert hits.get("hits.page1") == 3
    assert hits.add("hits.page2", -7) == -7  # a counter may start below zero
    assert hits.get("hits.page2") == -7
    assert hits.stream_name == "HITS" and "HITS" in repr(hits)


def test_values_beyond_64_bits_are_exact(hits: Counter) -> None:
    big = 2**64 + 1
    assert hits.add("hits.big", 2**70) == 2**70
    assert hits.add("hits.big", big) == 2**70 + big
    assert hits.add("hits.big", -(2**80)) == 2**70 + big - 2**80
    assert hits.get("hits.big") == 2**70 + big - 2**80
    assert hits.get_many(["hits.big"]) == {"hits.big": 2**70 + big - 2**80}


def test_what_the_stream_stores_is_the_adr_layout(js: JetStream, hits: Counter) -> None:
    hits.add("hits.raw", 2**65)
    hits.add("hits.raw", -1)
    stored = js.stream("HITS").get_last_msg("hits.raw")
    assert json.loads(stored.data) == {"val": str(2**65 - 1)}
    assert stored.headers is not None and int(stored.headers["Nats-Incr"]) == -1


def test_eight_threads_adding_at_once_sum_exactly(js: JetStream, hits: Counter) -> None:
    per_thread = 60
    returned: list[int] = []
    lock = threading.Lock()
    errors: list[BaseException] = []

    def work(index: int) -> None:
        try:
            counter = js.counter("HITS")  # each thread its own, one connection
            for n in range(per_thread):
                value = counter.add("hits.together", index + 1 if n % 2 else 2**64)
                with lock:
                    returned.append(value)
        except BaseException as err:  # surfaced below, not lost in a thread
            errors.append(err)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not errors
    expected = sum((i + 1) * (per_thread // 2) + 2**64 * (per_thread // 2) for i in range(8))
    assert hits.get("hits.together") == expected
    assert len(returned) == 8 * per_thread
    assert len(set(returned)) == len(returned)  # each add saw its own new total
    assert max(returned) == expected


def test_get_many_takes_wildcards(hits: Counter) -> None:
    for subject, value in (("hits.a", 1), ("hits.b", 2), ("hits.c.x", 3), ("hits.c.y", 4)):
        hits.add(subject, value)
    hits.add("hits.a", 10)
    assert hits.get_many(["hits.*"]) == {"hits.a": 11, "hits.b": 2}
    assert hits.get_many(["hits.>"]) == {"hits.a": 11, "hits.b": 2, "hits.c.x": 3, "hits.c.y": 4}
    assert hits.get_many(["hits.c.*", "hits.b", "hits.b"]) == {
        "hits.b": 2,
        "hits.c.x": 3,
        "hits.c.y": 4,
    }
    assert hits.get_many(["hits.none", "hits.zzz.*"]) == {}
    assert hits.get_many([]) == {}
    with pytest.raises(InvalidArgumentError):
        hits.get_many("hits.*")


def test_get_many_matching_more_than_one_request_holds(js: JetStream, hits: Counter) -> None:
    count = 1100  # one multi_last request answers at most 1,024 subjects (413 beyond)
    futures = [
        js.publish_async(f"hits.many.{n}", headers={"Nats-Incr": str(n)}) for n in range(count)
    ]
    for future in futures:
        future.result(timeout=10)
    values = hits.get_many(["hits.many.*"])
    assert values == {f"hits.many.{n}": n for n in range(count)}


def test_a_stream_without_direct_gets_still_reads_many(js: JetStream) -> None:
    js.create_stream(name="SLOW", subjects=["slow.>"], allow_msg_counter=True)
    slow = js.counter("SLOW")
    slow.add("slow.a", 1)
    slow.add("slow.b.c", 2**66)
    assert slow.get("slow.b.c") == 2**66
    assert slow.get_many(["slow.*", "slow.>"]) == {"slow.a": 1, "slow.b.c": 2**66}


def test_errors(js: JetStream, hits: Counter) -> None:
    js.create_stream(name="PLAIN", subjects=["plain.>"])
    with pytest.raises(CounterNotEnabledError) as not_enabled:
        js.counter("PLAIN")
    assert isinstance(not_enabled.value, CounterError)
    with pytest.raises(StreamNotFoundError):
        js.counter("NOPE")
    with pytest.raises(CounterNotFoundError) as not_found:
        hits.get("hits.never")
    assert isinstance(not_found.value, NotFoundError)
    assert "hits.never" in str(not_found.value)
    for bad in (1.5, True, "3", None):
        with pytest.raises(InvalidArgumentError):
            hits.add("hits.x", bad)  # type: ignore[arg-type]
    for subject in ("hits.*", "hits.>"):
        with pytest.raises(InvalidArgumentError, match="get_many"):
            hits.get(subject)
        with pytest.raises(InvalidArgumentError):
            hits.add(subject, 1)
    # What the server says, mapped by err_code.
    with pytest.raises(CounterNotEnabledError) as refused:
        js.publish("plain.x", headers={"Nats-Incr": "+1"})
    assert refused.value.err_code == 10168 and isinstance(refused.value, BadRequestError)
    with pytest.raises(CounterIncrementMissingError):
        js.publish("hits.x", b"")
    with pytest.raises(CounterPayloadError):
        js.publish("hits.x", b"payload", headers={"Nats-Incr": "+1"})
    for error in (not_enabled.value, not_found.value, refused.value):
        copy = pickle.loads(pickle.dumps(error))
        assert type(copy) is type(error) and str(copy) == str(error)


def test_nats_py_reads_and_adds_to_the_same_counter(
    hits: Counter, jetstream_server: NatsServer
) -> None:
    import nats

    hits.add("hits.shared", 2**64 + 5)

    async def their_side() -> tuple[bytes, dict[str, str], str | None]:
        nc = await nats.connect(jetstream_server.url)
        try:
            theirs = nc.jetstream()
            msg = await theirs.get_last_msg("HITS", "hits.shared")
            ack = await nc.request("hits.shared", b"", headers={"Nats-Incr": "-5"})
            return msg.data or b"", dict(msg.headers or {}), json.loads(ack.data).get("val")
        finally:
            await nc.close()

    data, headers, their_value = asyncio.run(their_side())
    assert json.loads(data) == {"val": str(2**64 + 5)}
    assert int(headers["Nats-Incr"]) == 2**64 + 5
    assert their_value == str(2**64)
    assert hits.get("hits.shared") == 2**64


def test_counter_value_refuses_what_is_not_one() -> None:
    from nats_sync.jetstream._publishing.counter import counter_value

    assert counter_value(b'{"val":"-12"}', "s") == -12
    for data in (b"", b"{}", b'{"val":"x"}', b"[1]", b'{"val":null}'):
        with pytest.raises(CounterError):
            counter_value(data, "s")


def test_get_entry_gives_the_value_and_the_increment_that_made_it(hits: Counter) -> None:
    hits.add("hits.entry", 2**66)
    hits.add("hits.entry", -5)
    entry = hits.get_entry("hits.entry")
    assert (entry.subject, entry.value, entry.increment) == ("hits.entry", 2**66 - 5, -5)
    assert entry.sources == {}
    assert entry.seq > 0
    with pytest.raises(CounterNotFoundError):
        hits.get_entry("hits.never")
    with pytest.raises(InvalidArgumentError, match="no wildcards"):
        hits.get_entry("hits.*")


def test_a_sourcing_counter_says_what_each_source_gave(js: JetStream, hits: Counter) -> None:
    """ADR-49 rev 6: a counter stream that sources counter streams adds up their values
    and keeps each source's last one in Nats-Counter-Sources (the layout orbit.go's
    counters.Get reads: {"<source>": {"<subject>": "<decimal>"}})."""
    js.create_stream(
        name="HITS_EU", subjects=["eu.hits.>"], allow_msg_counter=True, allow_direct=True
    )
    js.create_stream(
        name="HITS_ALL",
        allow_msg_counter=True,
        allow_direct=True,
        sources=[
            {"name": "HITS", "subject_transforms": [{"src": "hits.>", "dest": "all.>"}]},
            {"name": "HITS_EU", "subject_transforms": [{"src": "eu.hits.>", "dest": "all.>"}]},
        ],
    )
    hits.add("hits.home", 3)
    js.counter("HITS_EU").add("eu.hits.home", 4)
    total = js.counter("HITS_ALL")
    deadline = time.monotonic() + 10
    while True:
        try:
            entry = total.get_entry("all.home")
        except CounterNotFoundError:
            entry = None
        if entry is not None and entry.value == 7:
            break
        assert time.monotonic() < deadline, f"sourcing did not sum: {entry}"
        time.sleep(0.05)
    assert entry.sources == {"HITS": {"hits.home": 3}, "HITS_EU": {"eu.hits.home": 4}}
    stored = js.stream("HITS_ALL").get_last_msg("all.home")
    assert stored.headers is not None
    raw = json.loads(stored.headers["Nats-Counter-Sources"])
    assert raw == {"HITS": {"hits.home": "3"}, "HITS_EU": {"eu.hits.home": "4"}}

"""nats-py's JetStream manager names on ``nc.jsm()`` (the JetStream context), against a
real nats-server with JetStream: listing streams and consumers, pausing, resuming and
resetting a consumer, and binding an existing pull consumer."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta, timezone

import pytest

import nats_sync
from nats_sync.jetstream import ConsumerNotFoundError, JetStream
from nats_sync.testing import NatsServer

pytestmark = pytest.mark.timeout(60)

ClientFactory = Callable[..., nats_sync.Client]


@pytest.fixture
def jsm(jetstream_server: NatsServer, connect: ClientFactory) -> JetStream:
    jsm = connect(servers=jetstream_server.url).jsm(timeout=5)
    for name in ("A", "B", "C"):
        jsm.add_stream(name=name, subjects=[f"{name.lower()}.>"])
    return jsm


def test_streams_and_consumers_info(jsm: JetStream) -> None:
    assert sorted(info.config.name or "" for info in jsm.streams_info()) == ["A", "B", "C"]
    assert len(jsm.streams_info(offset=1)) == 2
    assert sorted(info.config.name or "" for info in jsm.streams_info_iterator()) == ["A", "B", "C"]
    for name in ("c1", "c2"):
        jsm.add_consumer("A", durable_name=name, ack_policy="explicit")
    assert sorted(info.name for info in jsm.consumers_info("A")) == ["c1", "c2"]
    assert len(jsm.consumers_info("A", offset=1)) == 1
    assert jsm.consumers_info("B") == []
    with pytest.raises(nats_sync.InvalidArgumentError, match="offset"):
        jsm.streams_info(offset=-1)


def test_pause_and_resume_a_consumer(jsm: JetStream) -> None:
    jsm.add_consumer("A", durable_name="p", ack_policy="explicit")
    until = datetime.now(timezone.utc) + timedelta(minutes=5)
    paused = jsm.pause_consumer("A", "p", until)
    assert paused.paused and paused.pause_until is not None
    assert abs((paused.pause_until - until).total_seconds()) < 1
    assert paused.pause_remaining is not None and 200 < paused.pause_remaining <= 300
    assert jsm.consumer_info("A", "p").paused
    jsm.client.publish("a.x", b"held")
    assert list(jsm.consumer("A", "p").fetch(1, max_wait=0.5)) == []  # nothing while paused
    resumed = jsm.resume_consumer("A", "p")
    assert not resumed.paused
    assert [m.data for m in jsm.consumer("A", "p").fetch(1, max_wait=5)] == [b"held"]
    # RFC 3339 text, as nats-py takes it.
    assert jsm.pause_consumer("A", "p", "2999-01-01T00:00:00Z").paused
    with pytest.raises(ConsumerNotFoundError):
        jsm.pause_consumer("A", "nobody", until)


def test_reset_a_consumer_to_a_sequence(jsm: JetStream) -> None:
    js = jsm
    for n in range(1, 6):
        js.publish("a.r", b"%d" % n)
    consumer = js.create_consumer("A", durable_name="r", ack_policy="explicit")
    for msg in consumer.fetch(5, max_wait=5):
        msg.ack_sync()
    assert list(consumer.fetch(1, max_wait=0.3)) == []
    reset = jsm.reset_consumer("A", "r", seq=2)
    assert reset.reset_seq == 2 and reset.info.name == "r"
    assert [m.data for m in consumer.fetch(2, max_wait=5)] == [b"2", b"3"]


def test_pull_subscribe_bind_reads_an_existing_consumer(jsm: JetStream) -> None:
    jsm.add_consumer("C", durable_name="bound", ack_policy="explicit")
    jsm.publish("c.one", b"bound")
    psub = jsm.pull_subscribe_bind("bound", "C")
    assert isinstance(psub, JetStream.PullSubscription)
    assert [m.data for m in psub.fetch(1, timeout=5)] == [b"bound"]
    assert jsm.pull_subscribe_bind(durable="bound", stream="C").consumer.name == "bound"
    with pytest.raises(nats_sync.InvalidArgumentError, match="needs the stream"):
        jsm.pull_subscribe_bind("bound")
    with pytest.raises(ConsumerNotFoundError):
        jsm.pull_subscribe_bind("missing", "C")

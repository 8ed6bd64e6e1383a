"""Push consumers through nats-py's names (subscribe, subscribe_bind), and with
nats-py itself on the other side: each reads the push consumers the other makes."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

import pytest

import nats_sync
from nats_sync.jetstream import ConsumerConfig, JetStream, JsMsg, NotPullConsumerError
from nats_sync.testing import NatsServer

pytestmark = pytest.mark.timeout(90)

ClientFactory = Callable[..., nats_sync.Client]


@pytest.fixture
def js(jetstream_server: NatsServer, connect: ClientFactory) -> JetStream:
    js = connect(servers=jetstream_server.url).jetstream()
    js.create_stream(name="C", subjects=["c.>"])
    return js


def store(js: JetStream, count: int, subject: str = "c.a") -> None:
    for n in range(count):
        js.publish(subject, b"%d" % n)


def wait_for(check: Callable[[], bool], seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True


def test_subscribe_with_a_deliver_subject_makes_and_reads_a_push_consumer(
    js: JetStream,
) -> None:
    store(js, 3)
    sub = js.subscribe("c.a", durable="np", config=ConsumerConfig(deliver_subject="deliver.np"))
    try:
        info = sub.consumer_info()
        assert info.config.deliver_subject == "deliver.np"
        assert info.config.filter_subject == "c.a"
        assert info.config.ack_policy == "explicit"
        msgs = [sub.next_msg(timeout=5) for _ in range(3)]
        assert [m.data for m in msgs] == [b"0", b"1", b"2"]
        for msg in msgs:
            msg.ack()
    finally:
        sub.unsubscribe()
    assert wait_for(lambda: js.consumer_info("C", "np").num_ack_pending == 0)


def test_subscribe_reads_the_push_consumer_its_durable_names_and_acks_after_cb(
    js: JetStream,
) -> None:
    js.create_push_consumer("C", durable_name="made", ack_policy="explicit")
    store(js, 5)
    seen: list[bytes] = []
    sub = js.subscribe("c.a", durable="made", cb=lambda m: seen.append(m.data))
    try:
        assert wait_for(lambda: len(seen) == 5)
        assert sub.consumer_info().config.deliver_subject  # the push consumer, not a new one
        assert wait_for(lambda: js.consumer_info("C", "made").num_ack_pending == 0)
    finally:
        sub.unsubscribe()
    assert list(js.consumer_names("C")) == ["made"]  # a durable is kept
    with pytest.raises(NotPullConsumerError):
        js.pull_subscribe("c.a", durable="made")


def test_a_queue_subscription_reads_only_its_deliver_group(js: JetStream) -> None:
    js.create_push_consumer("C", durable_name="q", deliver_group="q")
    store(js, 4)
    sub = js.subscribe("c.a", queue="q", manual_ack=True)
    try:
        assert [sub.next_msg(timeout=5).data for _ in range(4)] == [b"0", b"1", b"2", b"3"]
    finally:
        sub.unsubscribe()
    js.create_push_consumer("C", durable_name="nogroup")
    with pytest.raises(nats_sync.InvalidArgumentError, match="deliver group"):
        js.subscribe("c.a", durable="q")  # q has a group: a plain subscription may not
    with pytest.raises(nats_sync.InvalidArgumentError):
        js.subscribe("c.a", queue="x", durable="nogroup")


def test_subscribe_bind_reads_an_existing_push_consumer(js: JetStream) -> None:
    made = js.create_push_consumer("C", durable_name="bound", ack_policy="explicit")
    store(js, 3)
    seen: list[bytes] = []
    done = threading.Event()

    def on_msg(msg: JsMsg) -> None:
        seen.append(msg.data)
        if len(seen) == 3:
            done.set()

    sub = js.subscribe_bind("C", made.cached_info.config, "bound", cb=on_msg)
    try:
        assert done.wait(10)
        assert wait_for(lambda: js.consumer_info("C", "bound").num_ack_pending == 0)
    finally:
        sub.unsubscribe()
    assert seen == [b"0", b"1", b"2"]


# --- nats-py on the other side ---------------------------------------------------------


def test_we_read_a_push_consumer_nats_py_made_with_a_deliver_group(
    js: JetStream, jetstream_server: NatsServer
) -> None:
    nats = pytest.importorskip("nats")
    from nats.js.api import AckPolicy
    from nats.js.api import ConsumerConfig as PyConsumerConfig

    async def make() -> None:
        nc = await nats.connect(jetstream_server.url)
        try:
            await nc.jetstream().add_consumer(
                "C",
                PyConsumerConfig(
                    durable_name="theirs",
                    deliver_subject="deliver.theirs",
                    deliver_group="pool",
                    ack_policy=AckPolicy.EXPLICIT,
                    filter_subject="c.py",
                ),
            )
        finally:
            await nc.close()

    asyncio.run(asyncio.wait_for(make(), 30))
    push = js.push_consumer("C", "theirs")
    assert push.cached_info.config.deliver_group == "pool"
    store(js, 20, "c.py")
    seqs: list[int] = []
    lock = threading.Lock()

    def on_msg(msg: JsMsg) -> None:
        with lock:
            seqs.append(msg.metadata.sequence.stream)
        msg.ack()

    # Two readers of the group in one process: each message goes to one of them.
    first = push.consume(on_msg)
    second = js.push_consumer("C", "theirs").consume(on_msg)
    try:
        assert wait_for(lambda: len(seqs) >= 20)
        time.sleep(0.2)
    finally:
        first.stop()
        second.stop()
        first.join(5)
        second.join(5)
    assert sorted(seqs) == list(range(1, 21))
    assert wait_for(lambda: js.consumer_info("C", "theirs").num_ack_pending == 0)


def test_nats_py_subscribe_bind_reads_a_push_consumer_we_made(
    js: JetStream, jetstream_server: NatsServer
) -> None:
    nats = pytest.importorskip("nats")
    made = js.create_push_consumer(
        "C",
        durable_name="ours",
        filter_subject="c.ours",
        ack_policy="explicit",
        flow_control=True,
        idle_heartbeat=1.0,
    )
    count = 200
    store(js, count, "c.ours")

    async def read() -> list[bytes]:
        from nats.js.api import ConsumerConfig as PyConsumerConfig

        nc = await nats.connect(jetstream_server.url)
        try:
            their_js = nc.jetstream()
            info = await their_js.consumer_info("C", "ours")
            assert isinstance(info.config, PyConsumerConfig)
            got: list[bytes] = []
            finished = asyncio.Event()

            async def on_msg(msg: object) -> None:
                got.append(msg.data)  # type: ignore[attr-defined]
                if len(got) == count:
                    finished.set()

            sub = await their_js.subscribe_bind("C", info.config, "ours", cb=on_msg)
            await asyncio.wait_for(finished.wait(), 20)
            await nc.flush()  # their auto-acks are out before the check below
            await sub.unsubscribe()
            return got
        finally:
            await nc.close()

    got = asyncio.run(asyncio.wait_for(read(), 40))
    assert got == [b"%d" % n for n in range(count)]
    assert made.cached_info.config.deliver_subject
    assert wait_for(lambda: made.info().num_ack_pending == 0)

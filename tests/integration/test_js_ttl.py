"""Per-message TTL (ADR-43, nats-server 2.11+) against a real ``nats-server -js`` (2.15):
``ttl=`` on every publish path (``publish``, ``publish_async``, fast ingest, atomic
batches) sent as ``Nats-TTL`` by one helper, a message gone after its TTL, ``"never"``
outliving the stream's ``max_age``, bad values refused before anything is sent, and
``MsgTTLDisabledError`` from a stream without ``allow_msg_ttl``."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

import nats_sync
from nats_sync.errors import InvalidArgumentError
from nats_sync.jetstream import (
    BadRequestError,
    JetStream,
    MessageNotFoundError,
    MsgTTLDisabledError,
)
from nats_sync.jetstream._streams.wire import MAX_TTL_SECONDS, ttl_header
from nats_sync.testing import NatsServer

pytestmark = pytest.mark.timeout(60)

ClientFactory = Callable[..., nats_sync.Client]
#: Longest wait for the server to remove an expired message (its TTL timer is coarse).
EXPIRY_WAIT = 10.0
BAD_TTLS = [
    0,
    0.5,
    0.999,
    -1,
    float("inf"),
    float("nan"),
    True,
    "forever",
    "5s",
    "1h",
    MAX_TTL_SECONDS + 1,
]


@pytest.fixture
def js(jetstream_server: NatsServer, connect: ClientFactory) -> JetStream:
    context = connect(servers=jetstream_server.url).jetstream()
    context.create_stream(
        name="TTL", subjects=["ttl.>"], allow_msg_ttl=True, allow_batched=True, allow_atomic=True
    )
    return context


def ttl_of(js: JetStream, seq: int, stream: str = "TTL") -> str | None:
    headers = js.stream(stream).get_msg(seq).headers or {}
    value = headers.get("Nats-TTL")
    return value[0] if isinstance(value, list) else value


def wait_gone(js: JetStream, seq: int, stream: str = "TTL") -> None:
    """Returns once the message at ``seq`` is gone (fails after EXPIRY_WAIT)."""
    deadline = time.monotonic() + EXPIRY_WAIT
    while time.monotonic() < deadline:
        try:
            js.stream(stream).get_msg(seq)
        except MessageNotFoundError:
            return
        time.sleep(0.1)
    pytest.fail(f"message {seq} still stored {EXPIRY_WAIT}s after its TTL")


def test_the_one_helper_formats_whole_seconds_and_never() -> None:
    assert ttl_header(5) == "5"
    assert ttl_header(2.0) == "2"
    assert ttl_header(1.5) == "1"  # the server keeps whole seconds: the header says so
    assert ttl_header(MAX_TTL_SECONDS) == str(MAX_TTL_SECONDS)
    assert ttl_header("never") == "never"


@pytest.mark.parametrize("ttl", BAD_TTLS)
def test_the_helper_names_a_bad_value(ttl: object) -> None:
    with pytest.raises(InvalidArgumentError, match="ttl") as raised:
        ttl_header(ttl)
    assert repr(ttl) in str(raised.value)


def test_every_publish_path_sends_nats_ttl(js: JetStream) -> None:
    js.publish("ttl.publish", b"1", ttl=60)
    js.publish_async("ttl.async", b"2", ttl=2.5).result(timeout=5)
    js.publish_async("ttl.async", b"3", msg_id="m-3", ttl="never").result(timeout=5)
    with js.fast_publisher() as fp:
        fp.add("ttl.fast", b"4", ttl=90)
    assert fp.close().count == 1
    with js.atomic_batch() as batch:
        batch.add("ttl.atomic", b"5", ttl=30.9)
        batch.commit("ttl.atomic", b"6", ttl="never")
    js.publish("ttl.plain", b"7")
    assert [ttl_of(js, seq) for seq in range(1, 8)] == [
        "60",
        "2",
        "never",
        "90",
        "30",
        "never",
        None,
    ]
    assert js.stream("TTL").get_msg(3).headers["Nats-Msg-Id"] == "m-3"  # type: ignore[index]


def test_a_message_is_gone_after_its_ttl(js: JetStream) -> None:
    ack = js.publish("ttl.short", b"short-lived", ttl=1)
    kept = js.publish("ttl.kept", b"no ttl")
    assert js.stream("TTL").get_msg(ack.seq).data == b"short-lived"
    assert ttl_of(js, ack.seq) == "1"
    wait_gone(js, ack.seq)
    assert js.stream("TTL").get_msg(kept.seq).data == b"no ttl"


def test_never_outlives_the_streams_max_age(js: JetStream) -> None:
    js.create_stream(name="AGED", subjects=["aged.>"], allow_msg_ttl=True, max_age=1.0)
    plain = js.publish("aged.plain", b"ages out")
    forever = js.publish("aged.forever", b"stays", ttl="never")
    wait_gone(js, plain.seq, "AGED")
    time.sleep(1.5)  # well past max_age for the second message too
    assert js.stream("AGED").get_msg(forever.seq).data == b"stays"
    assert ttl_of(js, forever.seq, "AGED") == "never"


@pytest.mark.parametrize("ttl", [0, 0.5, -1, float("nan"), True, "forever", "5s"])
def test_a_bad_ttl_is_refused_before_sending_on_every_path(
    js: JetStream, connect: ClientFactory, jetstream_server: NatsServer, ttl: object
) -> None:
    watcher = connect(servers=jetstream_server.url)
    sub = watcher.subscribe("ttl.>")
    watcher.flush()
    fp = js.fast_publisher()
    batch = js.atomic_batch()
    calls: list[Callable[[], object]] = [
        lambda: js.publish("ttl.x", b"x", ttl=ttl),  # type: ignore[arg-type]
        lambda: js.publish_async("ttl.x", b"x", ttl=ttl),  # type: ignore[arg-type]
        lambda: fp.add("ttl.x", b"x", ttl=ttl),  # type: ignore[arg-type]
        lambda: batch.add("ttl.x", b"x", ttl=ttl),  # type: ignore[arg-type]
    ]
    for call in calls:
        with pytest.raises(InvalidArgumentError, match="ttl"):
            call()
    batch.discard()
    js.client.flush()
    watcher.flush()
    assert sub.pending_msgs == 0
    assert js.stream("TTL").info().state.messages == 0


def test_a_stream_without_allow_msg_ttl_raises_msg_ttl_disabled(js: JetStream) -> None:
    js.create_stream(name="PLAIN", subjects=["plain.>"])
    with pytest.raises(MsgTTLDisabledError) as raised:
        js.publish("plain.x", b"x", ttl=5)
    assert raised.value.err_code == 10166
    assert isinstance(raised.value, BadRequestError)
    future = js.publish_async("plain.y", b"y", ttl="never")
    with pytest.raises(MsgTTLDisabledError):
        future.result(timeout=5)
    assert js.stream("PLAIN").info().state.messages == 0


def test_publish_atomic_gives_every_message_the_ttl(js: JetStream) -> None:
    ack = js.publish_atomic([("ttl.a", b"1"), ("ttl.b", b"2", {"K": "v"})], ttl=45)
    assert ack.count == 2
    assert [ttl_of(js, seq) for seq in (1, 2)] == ["45", "45"]
    assert js.stream("TTL").get_msg(2).headers["K"] == "v"  # type: ignore[index]
    with pytest.raises(InvalidArgumentError, match="ttl"):
        js.publish_atomic([("ttl.c", b"3")], ttl=0.5)
    assert js.stream("TTL").info().state.messages == 2

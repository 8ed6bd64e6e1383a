"""Priority groups (ADR-42) against a real ``nats-server -js`` (2.15): the config fields,
the overflow, pinned_client and prioritized policies, the refusals, unpin and the
command line's ``consumer next --group``."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator

import pytest

import nats_sync
from nats_sync.cli import main
from nats_sync.errors import InvalidArgumentError
from nats_sync.jetstream import (
    ConsumerNotFoundError,
    InvalidGroupNameError,
    InvalidPriorityGroupError,
    JetStream,
    MessageStream,
    PriorityGroupRequiredError,
    PriorityPolicyError,
    PullConsumer,
)
from nats_sync.testing import NatsServer

pytestmark = pytest.mark.timeout(90)

ClientFactory = Callable[..., nats_sync.Client]
#: Seconds the pinned_client consumers wait for a silent pinned reader.
PIN_TIMEOUT = 2.0


@pytest.fixture
def js(jetstream_server: NatsServer, connect: ClientFactory) -> JetStream:
    js = connect(servers=jetstream_server.url).jetstream()
    js.create_stream(name="S", subjects=["s.>"])
    return js


def store(js: JetStream, count: int) -> list[int]:
    """Stores ``count`` messages by core requests (the stream answers with its ack)."""
    return [
        int(json.loads(js.client.request("s.a", b"m%d" % i, timeout=5).data)["seq"])
        for i in range(count)
    ]


def grouped(js: JetStream, policy: str, name: str = "C", **fields: object) -> PullConsumer:
    return js.create_consumer(
        "S",
        durable_name=name,
        ack_policy="explicit",
        priority_groups=["g"],
        priority_policy=policy,
        **fields,
    )


def seqs(batch: object) -> list[int]:
    return [msg.metadata.sequence.stream for msg in batch]  # type: ignore[attr-defined]


# --- config ----------------------------------------------------------------------------------


def test_the_config_fields_round_trip(js: JetStream) -> None:
    consumer = grouped(js, "pinned_client", priority_timeout=PIN_TIMEOUT)
    config = consumer.info().config
    assert (config.priority_groups, config.priority_policy, config.priority_timeout) == (
        ["g"],
        "pinned_client",
        PIN_TIMEOUT,
    )
    assert config.to_api()["priority_timeout"] == 2_000_000_000
    assert grouped(js, "overflow", "O").cached_info.config.priority_policy == "overflow"
    prioritized = grouped(js, "prioritized", "P").cached_info.config
    assert prioritized.priority_policy == "prioritized" and prioritized.priority_groups == ["g"]
    updated = js.update_consumer("S", consumer.info().config.replace(priority_timeout=5.0))
    assert updated.cached_info.config.priority_timeout == 5.0
    state = consumer.info().priority_groups
    assert state is not None and [item.group for item in state] == ["g"]
    assert state[0].pinned_client_id in (None, "")  # no reader pinned yet


@pytest.mark.parametrize(
    ("fields", "error", "err_code"),
    [
        ({"priority_groups": ["g"]}, PriorityPolicyError, 10196),
        ({"priority_policy": "overflow"}, PriorityPolicyError, 10159),
        ({"priority_timeout": 3.0}, PriorityPolicyError, 10197),
        (
            {"priority_policy": "overflow", "priority_groups": ["bad name"]},
            InvalidGroupNameError,
            10162,
        ),
        ({"priority_policy": "overflow", "priority_groups": [""]}, InvalidGroupNameError, 10161),
    ],
)
def test_config_refusals_have_their_classes(
    js: JetStream, fields: dict[str, object], error: type[Exception], err_code: int
) -> None:
    with pytest.raises(error) as caught:
        js.create_consumer("S", durable_name="X", ack_policy="explicit", **fields)
    assert caught.value.err_code == err_code  # type: ignore[attr-defined]


# --- overflow ---------------------------------------------------------------------------------


def test_overflow_serves_a_pull_only_past_its_min_pending(js: JetStream) -> None:
    consumer = grouped(js, "overflow")
    store(js, 3)
    start = time.monotonic()
    early = consumer.fetch(10, max_wait=1.0, group="g", min_pending=5)
    assert seqs(early) == [] and early.error is None  # 3 pending < 5: nothing
    assert time.monotonic() - start >= 0.9  # it waited: the pull was held, not refused
    # A pull waiting with min_pending=5 is served once the 5th message is stored.
    waiting = consumer.fetch(1, max_wait=10.0, group="g", min_pending=5)
    time.sleep(0.3)
    assert consumer.info().num_waiting == 1
    store(js, 2)
    assert seqs(waiting) == [1] and waiting.error is None
    # Without a minimum the same group is served at once.
    rest = consumer.fetch(10, max_wait=2.0, group="g")
    assert seqs(rest) == [2, 3, 4, 5]


def test_overflow_min_ack_pending(js: JetStream) -> None:
    consumer = grouped(js, "overflow")
    store(js, 4)
    held = consumer.fetch(2, max_wait=2.0, group="g")
    assert seqs(held) == [1, 2]  # not acknowledged: 2 ack pending
    assert seqs(consumer.fetch(1, max_wait=1.0, group="g", min_ack_pending=3)) == []
    assert seqs(consumer.fetch(1, max_wait=2.0, group="g", min_ack_pending=2)) == [3]
    for msg in held:
        msg.ack_sync()


# --- prioritized ------------------------------------------------------------------------------


def test_prioritized_serves_the_lowest_number_first(js: JetStream) -> None:
    consumer = grouped(js, "prioritized")
    low = consumer.fetch(1, max_wait=10.0, group="g", priority=5)  # waiting first
    high = consumer.fetch(1, max_wait=10.0, group="g", priority=0)
    middle = consumer.fetch(1, max_wait=10.0, group="g", priority=2)
    time.sleep(0.3)
    assert consumer.info().num_waiting == 3
    store(js, 1)
    assert seqs(high) == [1]
    store(js, 1)
    assert seqs(middle) == [2]
    store(js, 1)
    assert seqs(low) == [3]


# --- pinned_client ------------------------------------------------------------------------------


class Reader:
    """A ``messages()`` of its own ``PullConsumer`` object read on a thread, acking and
    recording every stream sequence it gets."""

    def __init__(self, js: JetStream, name: str) -> None:
        self.name = name
        self.consumer = js.consumer("S", "C")
        self.got: list[int] = []
        self.stream: MessageStream = self.consumer.messages(
            max_messages=10, max_wait=1.0, group="g"
        )
        self.thread = threading.Thread(target=self._run, name=f"test-reader-{name}")
        self.thread.start()

    def _run(self) -> None:
        for msg in self.stream:
            self.got.append(msg.metadata.sequence.stream)
            msg.ack()

    def stop(self) -> None:
        self.stream.stop()
        self.thread.join(10)


@pytest.fixture
def readers(js: JetStream) -> Iterator[tuple[Reader, Reader]]:
    grouped(js, "pinned_client", priority_timeout=PIN_TIMEOUT, ack_wait=2.0)
    a, b = Reader(js, "a"), Reader(js, "b")
    yield a, b
    a.stop()
    b.stop()


def wait_for(check: Callable[[], bool], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def pin_of(js: JetStream) -> str | None:
    state = js.consumer("S", "C").info().priority_groups
    return state[0].pinned_client_id if state else None


def test_pinned_client_goes_to_one_reader_until_unpinned_or_silent(
    js: JetStream, readers: tuple[Reader, Reader]
) -> None:
    a, b = readers
    time.sleep(0.3)
    store(js, 10)
    wait_for(lambda: len(a.got) + len(b.got) == 10)
    first, other = (a, b) if a.got else (b, a)
    assert first.got == list(range(1, 11)) and other.got == []  # one reader has it all
    pin = pin_of(js)
    assert pin and first.consumer._pins.get("g") == pin

    # Unpinned: the other reader (waiting without a pin id) is pinned next.
    first.consumer.unpin("g")
    store(js, 10)
    wait_for(lambda: len(a.got) + len(b.got) == 20)
    assert other.got == list(range(11, 21)) and first.got == list(range(1, 11))
    assert pin_of(js) not in (None, "", pin)

    # The pinned reader stops pulling: after priority_timeout the first one takes over.
    other.stop()
    stopped = time.monotonic()
    store(js, 10)
    wait_for(lambda: len(first.got) >= 20)
    # The pin's clock started at the stopped reader's last pull (it pulls every max_wait
    # = 1 s while idle), so the switch comes 1-2 s after the stop, never at once.
    assert time.monotonic() - stopped >= PIN_TIMEOUT - 1.0 - 0.3
    # Every message was received (the stopped reader drained nothing it had not acked).
    assert sorted(set(a.got + b.got)) == list(range(1, 31))
    assert first.got[10:] == list(range(21, 31))


def test_a_fetch_that_lost_its_pin_goes_on_without_it(js: JetStream) -> None:
    grouped(js, "pinned_client", priority_timeout=10.0)
    mine, theirs = js.consumer("S", "C"), js.consumer("S", "C")
    store(js, 4)
    assert seqs(mine.fetch(1, max_wait=2.0, group="g")) == [1]
    old = mine._pins.get("g")
    assert old and old == pin_of(js)
    # Unpinned, my next fetch still carries the old id: answered 423 (Nats-Wrong-Pin-Id
    # when a message comes), it pulls again without it and is pinned afresh.
    mine.unpin("g")
    batch = mine.fetch(1, max_wait=3.0, group="g")
    assert seqs(batch) == [2] and batch.error is None
    new = mine._pins.get("g")
    assert new and new != old and new == pin_of(js)
    # Another reader takes the pin; my stale id is refused at once (Nats-Pin-Id
    # mismatch): the fetch drops it and waits on as a standby, empty, no error.
    mine.unpin("g")
    assert seqs(theirs.fetch(1, max_wait=2.0, group="g")) == [3]
    start = time.monotonic()
    empty = mine.fetch(1, max_wait=1.5, group="g")
    assert seqs(empty) == [] and empty.error is None
    assert time.monotonic() - start >= 1.0  # pulled again and waited, not ended at once
    assert mine._pins.get("g") is None
    assert seqs(theirs.fetch(1, max_wait=2.0, group="g")) == [4]


def test_unpin(js: JetStream) -> None:
    consumer = grouped(js, "pinned_client")
    consumer.unpin("g")  # nobody pinned: fine
    store(js, 1)
    assert seqs(consumer.fetch(1, max_wait=2.0, group="g")) == [1]
    assert pin_of(js)
    consumer.unpin("g")
    assert pin_of(js) in (None, "")
    with pytest.raises(InvalidPriorityGroupError) as caught:
        consumer.unpin("other")
    assert caught.value.err_code == 10160
    with pytest.raises(InvalidGroupNameError):
        consumer.unpin("bad name")  # refused before sending
    js.delete_consumer("S", "C")
    with pytest.raises(ConsumerNotFoundError):
        consumer.unpin("g")


# --- refusals ----------------------------------------------------------------------------


def test_client_side_checks_raise_before_sending(js: JetStream) -> None:
    consumer = grouped(js, "prioritized")
    calls: list[Callable[[], object]] = [
        lambda: consumer.fetch(1, max_wait=1.0, group="bad name"),
        lambda: consumer.fetch(1, max_wait=1.0, group="x" * 17),
        lambda: consumer.fetch(1, max_wait=1.0, group="g", priority=10),
        lambda: consumer.fetch_nowait(1, group="g", priority=-1),
        lambda: consumer.fetch_bytes(100, max_wait=1.0, group="g", min_pending=-1),
        lambda: consumer.next(1.0, min_ack_pending=3),  # criteria without a group
        lambda: consumer.messages(group="a.b"),
        lambda: consumer.consume(lambda msg: None, group="g", priority=99),
    ]
    for call in calls:
        start = time.monotonic()
        with pytest.raises(InvalidArgumentError):
            call()
        assert time.monotonic() - start < 0.5
    assert consumer.info().num_waiting == 0  # nothing was sent


def test_server_refusals_have_their_classes(js: JetStream) -> None:
    overflow = grouped(js, "overflow", "O")
    prioritized = grouped(js, "prioritized", "P")
    store(js, 1)
    missing = overflow.fetch(1, max_wait=1.0)
    assert seqs(missing) == [] and isinstance(missing.error, PriorityGroupRequiredError)
    with pytest.raises(InvalidPriorityGroupError):
        overflow.next(1.0, group="other")
    with pytest.raises(PriorityPolicyError):
        prioritized.next(1.0, group="g", min_pending=1)  # overflow's criterion
    with pytest.raises(PriorityGroupRequiredError):
        prioritized.messages(max_wait=1.0).next(timeout=5)
    errors: list[BaseException] = []
    ctx = prioritized.consume(lambda msg: None, max_wait=1.0, error_cb=errors.append, group="nope")
    assert ctx.join(10) and isinstance(ctx.error, InvalidPriorityGroupError)
    assert errors == [ctx.error]
    # With the group the same reads work.
    assert prioritized.next(2.0, group="g").metadata.sequence.stream == 1


def test_every_read_takes_the_group(js: JetStream) -> None:
    consumer = grouped(js, "prioritized")
    store(js, 4)
    assert seqs(consumer.fetch_nowait(1, group="g", priority=1)) == [1]
    assert seqs(consumer.fetch_bytes(60, max_wait=2.0, group="g", priority=9)) == [2]
    assert consumer.next(2.0, group="g").metadata.sequence.stream == 3
    got: list[int] = []
    done = threading.Event()

    def cb(msg: object) -> None:
        got.append(msg.metadata.sequence.stream)  # type: ignore[attr-defined]
        done.set()

    with consumer.consume(cb, max_wait=1.0, group="g", priority=3):
        assert done.wait(10)
    assert got == [4]


def test_a_consumer_without_groups_ignores_the_group(js: JetStream) -> None:
    consumer = js.create_consumer("S", durable_name="plain", ack_policy="explicit")
    store(js, 1)
    assert consumer.next(2.0, group="g").metadata.sequence.stream == 1


# --- the command line ---------------------------------------------------------------------


def test_cli_consumer_next_group(
    js: JetStream, jetstream_server: NatsServer, capsys: pytest.CaptureFixture[str]
) -> None:
    url = jetstream_server.url
    grouped(js, "prioritized")
    store(js, 2)
    status = main(
        [
            "consumer",
            "next",
            "S",
            "C",
            "--group",
            "g",
            "--priority",
            "1",
            "--timeout",
            "2",
            "-s",
            url,
        ]
    )
    out, err = capsys.readouterr()
    assert status == 0, err
    assert "[s.a] stream seq 1, delivered 1x\nm0\n" in out
    status = main(["consumer", "next", "S", "C", "--timeout", "2", "-s", url])
    out, err = capsys.readouterr()
    assert status == 1 and "Priority Group missing" in err
    status = main(["consumer", "next", "S", "C", "--group", "bad name", "-s", url])
    out, err = capsys.readouterr()
    assert status != 0 and "priority group" in err

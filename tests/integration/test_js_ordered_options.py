"""The ordered consumer's options beyond where to start (nats.go's
``OrderedConsumerConfig``: ``replay_policy``, ``inactive_threshold``,
``max_reset_attempts``, ``metadata``, ``name_prefix``), against a real ``nats-server -js``:
what the server-side consumers are made with, and a read that gives up."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

import nats_sync
from nats_sync.errors import InvalidArgumentError
from nats_sync.jetstream import JetStream, JetStreamError
from nats_sync.testing import NatsServer

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def js(jetstream_server: NatsServer) -> Iterator[JetStream]:
    with nats_sync.connect(jetstream_server.url) as nc:
        context = nc.jetstream()
        context.create_stream(name="AUDIT", subjects=["audit.>"])
        for n in range(5):
            context.publish("audit.event", str(n).encode())
        yield context


def test_the_consumers_are_made_with_the_options_and_named_by_the_prefix(js: JetStream) -> None:
    ordered = js.ordered_consumer(
        "AUDIT",
        replay_policy="original",
        inactive_threshold=30.0,
        metadata={"team": "audit"},
        name_prefix="auditor",
    )
    assert ordered.next(max_wait=5).data == b"0"
    (info,) = list(js.list_consumers("AUDIT"))
    assert info.name == "auditor_1"
    assert info.config.replay_policy == "original"
    assert info.config.inactive_threshold == 30.0
    assert info.config.metadata is not None and info.config.metadata["team"] == "audit"
    # Deleted under it: made again as the next name, from where it was.
    js.delete_consumer("AUDIT", "auditor_1")
    assert ordered.next(max_wait=10).data == b"1"
    assert [c.name for c in js.list_consumers("AUDIT")] == ["auditor_2"]


def test_max_reset_attempts_makes_a_read_give_up(js: JetStream) -> None:
    js.create_stream(name="FULL", subjects=["full.>"], max_consumers=1)
    js.publish("full.x", b"x")
    js.create_consumer("FULL", durable_name="the_only_one")  # no room for another
    ordered = js.ordered_consumer("FULL", max_reset_attempts=2)
    started = time.monotonic()
    with pytest.raises(JetStreamError, match=r"in 2 attempts \(max_reset_attempts\)"):
        ordered.next(max_wait=30)
    assert time.monotonic() - started < 30  # it gave up: it did not wait out max_wait


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"replay_policy": "fast"}, "replay_policy"),
        ({"inactive_threshold": 0}, "inactive_threshold"),
        ({"max_reset_attempts": 0}, "max_reset_attempts"),
        ({"metadata": {"k": 1}}, "metadata"),
        ({"name_prefix": "a.b"}, "consumer name"),
    ],
)
def test_bad_options_are_refused(js: JetStream, options: dict[str, object], says: str) -> None:
    with pytest.raises(InvalidArgumentError, match=says):
        js.ordered_consumer("AUDIT", **options)  # type: ignore[arg-type]

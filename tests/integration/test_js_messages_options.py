"""``messages()`` and ``consume()``'s pull thresholds, ``stop_after`` and missed heartbeats
raised as errors (nats.go's ``PullThresholdMessages``/``Bytes``, ``StopAfter``,
``WithMessagesErrOnMissingHeartbeat``), against a real ``nats-server -js``. The pulls
themselves are watched by a second client subscribed to the consumer's pull subject."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

import nats_sync
from nats_sync.errors import InvalidArgumentError
from nats_sync.jetstream import JetStream, JsMsg, NoHeartbeatError, PullConsumer
from nats_sync.testing import NatsServer

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def js(jetstream_server: NatsServer) -> Iterator[JetStream]:
    with nats_sync.connect(jetstream_server.url) as nc:
        context = nc.jetstream()
        context.create_stream(name="WORK", subjects=["work.>"])
        for n in range(300):
            context.publish_async("work.item", str(n).encode())
        context.publish_async_completed(timeout=20)
        yield context


def _consumer(js: JetStream, name: str) -> PullConsumer:
    return js.create_consumer("WORK", durable_name=name, ack_policy="explicit")


class _Pulls:
    """Every pull request a consumer gets, as (batch, max_bytes)."""

    def __init__(self, url: str, consumer: str) -> None:
        self.batches: list[int] = []
        self._nc = nats_sync.connect(url)
        sub = self._nc.subscribe(f"$JS.API.CONSUMER.MSG.NEXT.WORK.{consumer}", cb=self._seen)
        self._sub = sub
        self._nc.flush()

    def _seen(self, msg: nats_sync.Msg) -> None:
        self.batches.append(int(json.loads(msg.data)["batch"]))

    def wait_for_total(self, total: int, timeout: float = 5.0) -> None:
        """Waits until the pulls seen ask for ``total`` messages, then a little more.

        The watcher is another connection: a pull may be answered before the watcher's
        copy of it is read, so the count is awaited, then held, before it is judged.
        """
        deadline = time.monotonic() + timeout
        while sum(self.batches) < total and time.monotonic() < deadline:
            time.sleep(0.01)
        self._nc.flush()
        time.sleep(0.2)

    def close(self) -> None:
        self._nc.close()


def _read(stream: Iterator[JsMsg], count: int) -> list[int]:
    got = []
    for msg in stream:
        msg.ack()
        got.append(int(msg.data))
        if len(got) == count:
            break
    return got


@pytest.mark.parametrize(("threshold", "pulls_after_15"), [(None, 1), (90, 2)])
def test_a_threshold_decides_when_the_next_pull_goes(
    js: JetStream, jetstream_server: NatsServer, threshold: int | None, pulls_after_15: int
) -> None:
    name = f"thr{threshold}"
    _consumer(js, name)
    pulls = _Pulls(jetstream_server.url, name)
    try:
        with js.consumer("WORK", name).messages(
            max_messages=100, threshold_messages=threshold
        ) as stream:
            assert _read(stream, 15) == list(range(15))
            time.sleep(0.3)  # a pull sent is seen by the watcher
            assert len(pulls.batches) == pulls_after_15, pulls.batches
            assert pulls.batches[0] == 100
            if threshold is not None:  # refilled to 100 at 10 or more taken
                assert 10 <= pulls.batches[1] <= 15
    finally:
        pulls.close()


def test_stop_after_ends_the_iteration_and_asks_for_no_more(
    js: JetStream, jetstream_server: NatsServer
) -> None:
    consumer = _consumer(js, "stopper")
    pulls = _Pulls(jetstream_server.url, "stopper")
    try:
        got = [int(msg.data) for msg in consumer.messages(max_messages=50, stop_after=70)]
        assert got == list(range(70))
        pulls.wait_for_total(70)
        assert sum(pulls.batches) == 70, pulls.batches
        assert consumer.info().delivered.consumer_seq == 70
    finally:
        pulls.close()


def test_consume_stops_after_n_callbacks(js: JetStream) -> None:
    seen: list[int] = []

    def handle(msg: JsMsg) -> None:
        seen.append(int(msg.data))
        msg.ack()

    context = _consumer(js, "consume_n").consume(handle, max_messages=40, stop_after=25)
    assert context.join(timeout=10)
    assert seen == list(range(25))


def test_a_missed_heartbeat_can_be_raised_and_reading_goes_on(
    js: JetStream, jetstream_server: NatsServer
) -> None:
    consumer = _consumer(js, "heartbeats")
    with consumer.messages(
        max_messages=500, max_wait=2.0, heartbeat=0.5, error_on_missing_heartbeat=True
    ) as stream:
        assert _read(stream, 300) == list(range(300))  # all there is: the pull stays open
        jetstream_server.pause()
        try:
            with pytest.raises(NoHeartbeatError, match="no message or heartbeat"):
                stream.next(timeout=10)
        finally:
            jetstream_server.resume()
        js.publish("work.item", b"300")
        assert int(stream.next(timeout=10).data) == 300


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"threshold_messages": 100}, "threshold_messages must be below max_messages"),
        ({"threshold_messages": -1}, "threshold_messages"),
        ({"threshold_bytes": 10}, "threshold_bytes needs max_bytes"),
        ({"max_bytes": 1000, "threshold_bytes": 1000}, "threshold_bytes must be below"),
        ({"stop_after": 0}, "stop_after"),
    ],
)
def test_bad_options_are_refused_naming_them(
    js: JetStream, options: dict[str, int], says: str
) -> None:
    consumer = _consumer(js, "refusals")
    with pytest.raises(InvalidArgumentError, match=says):
        consumer.messages(max_messages=100, **options)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match=says):
        consumer.consume(lambda msg: None, max_messages=100, **options)  # type: ignore[arg-type]

"""Fast-ingest batches kept alive while idle (issue 32): the server drops a batch that
sent nothing for its batch timeout (10 s by default); a ``FastPublisher`` pings an idle
batch from the client's timer thread until it ends or is garbage-collected. And the
``add`` after the server's end of a batch arrived raises at once.

The quick tests run a server whose batch timeout is 1 s (``jetstream.limits.batch``)
with the keep-alive looking every 0.2 s; one slow test idles 12.5 s against the
default 10 s."""

from __future__ import annotations

import gc
import json
import threading
import time
import weakref
from collections.abc import Callable, Iterator

import pytest

import nats_sync
from nats_sync import _defaults as d
from nats_sync.jetstream import (
    BatchClosedError,
    BatchMessageError,
    FastBatchUnknownError,
    FastPublisher,
    JetStream,
)
from nats_sync.msg import Msg
from nats_sync.testing import NatsServer

pytestmark = pytest.mark.timeout(60)

ClientFactory = Callable[..., nats_sync.Client]

#: The batch timeout of the quick tests' server, and the keep-alive's interval there.
SHORT_BATCH_TIMEOUT = 1.0
SHORT_KEEPALIVE = 0.2
PING_SUFFIX = ".4.$FI"


@pytest.fixture
def short_timeout_server() -> Iterator[NatsServer]:
    """A JetStream server that drops a fast batch idle for 1 s."""
    seconds = int(SHORT_BATCH_TIMEOUT)
    config = f'jetstream {{ limits {{ batch {{ timeout: "{seconds}s" }} }} }}'
    with NatsServer(jetstream=True, config=config) as server:
        yield server


@pytest.fixture
def quick_keepalive(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(d, "JS_FAST_KEEPALIVE_INTERVAL", SHORT_KEEPALIVE)


def _jetstream(server: NatsServer, made: list[nats_sync.Client]) -> JetStream:
    nc = nats_sync.connect(server.url)
    made.append(nc)
    js = nc.jetstream()
    js.create_stream(name="FAST", subjects=["fast.>"], allow_batched=True)
    return js


@pytest.fixture
def clients() -> Iterator[list[nats_sync.Client]]:
    made: list[nats_sync.Client] = []
    yield made
    for nc in made:
        nc.close()


def stored_datas(js: JetStream, stream: str = "FAST") -> list[bytes]:
    datas: list[bytes] = []
    for run in js.stream(stream).get_msg_columns(1, batch=1000):
        datas.extend(run.datas)
    return datas


class PingCounter:
    """A raw subscriber on the batch's subject: counts the pings (op 4) it sees."""

    def __init__(self, server: NatsServer, subject: str, made: list[nats_sync.Client]) -> None:
        self._lock = threading.Lock()
        self._count = 0
        nc = nats_sync.connect(server.url)
        made.append(nc)
        nc.subscribe(subject, cb=self._on_msg)
        nc.flush()

    def _on_msg(self, msg: Msg) -> None:
        if msg.reply.endswith(PING_SUFFIX):
            with self._lock:
                self._count += 1

    @property
    def count(self) -> int:
        with self._lock:
            return self._count


def raw_append_answer(
    server: NatsServer, batch_id: str, seq: int, made: list[nats_sync.Client]
) -> dict[str, object]:
    """Appends message ``seq`` to batch ``batch_id`` by hand and returns the server's
    answer: an unknown batch is refused with err_code 10208."""
    nc = nats_sync.connect(server.url)
    made.append(nc)
    inbox = f"_INBOX.{batch_id}"
    sub = nc.subscribe(f"{inbox}.>")
    nc.publish("fast.raw", b"by hand", reply=f"{inbox}.100.fail.{seq}.1.$FI")
    answer: dict[str, object] = json.loads(sub.next_msg(timeout=5).data)
    return answer


# --- kept alive ---------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_a_batch_idle_past_the_servers_10s_timeout_is_kept_alive(
    jetstream_server: NatsServer, clients: list[nats_sync.Client]
) -> None:
    js = _jetstream(jetstream_server, clients)
    with js.fast_publisher() as fp:
        for n in range(100):
            fp.add("fast.idle", str(n).encode())
        time.sleep(12.5)  # the server's default batch timeout is 10 s
        for n in range(100, 200):
            fp.add("fast.idle", str(n).encode())
        final = fp.commit("fast.idle", b"200")
    assert final.count == 201
    assert stored_datas(js) == [str(n).encode() for n in range(201)]
    # Every 2.5 s while idle, none while busy: 4 or 5 in 12.5 s.
    assert 3 <= fp._keepalive_pings <= 6


def test_an_idle_batch_is_pinged_and_outlives_the_servers_timeout(
    short_timeout_server: NatsServer, clients: list[nats_sync.Client], quick_keepalive: None
) -> None:
    js = _jetstream(short_timeout_server, clients)
    pings = PingCounter(short_timeout_server, "fast.>", clients)
    fp = js.fast_publisher()
    for n in range(50):
        fp.add("fast.short", str(n).encode())
    time.sleep(3 * SHORT_BATCH_TIMEOUT)
    for n in range(50, 100):
        fp.add("fast.short", str(n).encode())
    final = fp.commit("fast.short", b"100")
    assert final.count == 101
    assert stored_datas(js) == [str(n).encode() for n in range(101)]
    assert pings.count >= 5  # every 0.2 s for 3 s, give or take the timer's lateness
    assert pings.count == fp._keepalive_pings


def test_without_the_keepalive_the_server_drops_the_idle_batch(
    short_timeout_server: NatsServer,
    clients: list[nats_sync.Client],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The control of the test above: the short timeout does drop a batch left idle.
    monkeypatch.setattr(d, "JS_FAST_KEEPALIVE_INTERVAL", 3600.0)
    js = _jetstream(short_timeout_server, clients)
    fp = js.fast_publisher()
    for n in range(50):
        fp.add("fast.short", str(n).encode())
    time.sleep(2 * SHORT_BATCH_TIMEOUT)
    with pytest.raises(FastBatchUnknownError):
        fp.commit("fast.short", b"50")
    assert len(stored_datas(js)) == 50


def test_a_dropped_publisher_is_collected_and_its_keepalive_stops(
    short_timeout_server: NatsServer, clients: list[nats_sync.Client], quick_keepalive: None
) -> None:
    js = _jetstream(short_timeout_server, clients)
    pings = PingCounter(short_timeout_server, "fast.>", clients)
    fp: FastPublisher | None = js.fast_publisher()
    assert fp is not None
    for n in range(10):
        fp.add("fast.dropped", str(n).encode())
    batch_id = fp.batch_id
    time.sleep(1.0)
    assert pings.count >= 2, "an idle live publisher is pinged"
    collected = weakref.ref(fp)
    del fp
    gc.collect()
    assert collected() is None, "the keep-alive must not keep the publisher alive"
    time.sleep(2 * SHORT_KEEPALIVE + 0.1)  # a look under way may still ping once
    after_drop = pings.count
    time.sleep(2 * SHORT_BATCH_TIMEOUT)
    assert pings.count == after_drop, "no pings for a collected publisher"
    # The server dropped the batch: a message for it is refused as an unknown batch.
    answer = raw_append_answer(short_timeout_server, batch_id, 11, clients)
    error = answer.get("error")
    assert isinstance(error, dict) and error.get("err_code") == 10208, answer


def test_a_collected_publishers_inbox_is_unsubscribed(
    clients: list[nats_sync.Client], quick_keepalive: None
) -> None:
    with NatsServer(jetstream=True, monitoring=True) as server:
        nc = nats_sync.connect(server.url, name="fast-gc")
        clients.append(nc)
        js = nc.jetstream()
        js.create_stream(name="FAST", subjects=["fast.>"], allow_batched=True)

        def subscriptions() -> list[str]:
            nc.flush()
            connz = server.monitor("connz?subs=1")
            (conn,) = [c for c in connz["connections"] if c.get("name") == "fast-gc"]
            return list(conn.get("subscriptions_list", []))

        before = subscriptions()
        fp: FastPublisher | None = js.fast_publisher()
        assert fp is not None
        fp.add("fast.gc", b"1")
        batch_id = fp.batch_id
        assert any(batch_id in subject for subject in subscriptions())
        del fp
        gc.collect()
        deadline = time.monotonic() + 5
        while any(batch_id in subject for subject in subscriptions()):
            assert time.monotonic() < deadline, "the inbox stayed subscribed"
            time.sleep(0.05)
        assert subscriptions() == before


def test_a_closed_publisher_is_not_pinged(
    short_timeout_server: NatsServer, clients: list[nats_sync.Client], quick_keepalive: None
) -> None:
    js = _jetstream(short_timeout_server, clients)
    pings = PingCounter(short_timeout_server, "fast.>", clients)
    fp = js.fast_publisher()
    fp.add("fast.closed", b"1")
    assert fp.close().count == 1
    time.sleep(5 * SHORT_KEEPALIVE)
    assert pings.count == 0
    assert fp._keepalive_pings == 0


# --- the add after the server's end --------------------------------------------------------


def test_the_add_after_the_servers_end_arrived_raises(
    jetstream_server: NatsServer, clients: list[nats_sync.Client]
) -> None:
    js = _jetstream(jetstream_server, clients)
    nc = js.client
    # flow 100 and 2 acks outstanding: no add below waits for room, so only the look
    # at answers already queued can tell the batch ended.
    fp = js.fast_publisher(flow=100, max_outstanding_acks=2, error_cb=lambda error: None)
    # The same answers on a raw subscription of the same connection: once it has the
    # final ack and a PING/PONG went round, the publisher's inbox has them too.
    answers = nc.subscribe(f"_INBOX.{fp.batch_id}.>")
    for n in range(5):
        fp.add("fast.next", str(n).encode())
    fp.add("fast.next", b"wrong", expected_last_subject_seq=999)  # 6: ends the batch
    deadline = time.monotonic() + 5
    while True:
        reply = json.loads(answers.next_msg(timeout=max(0.01, deadline - time.monotonic())).data)
        if "type" not in reply:  # the final PubAck (flow acks and "err" have a type)
            break
    nc.flush()
    assert not fp.is_closed, "nothing read the answers yet"
    # Message 7: not a multiple of 16, where the client used to look for answers.
    with pytest.raises(BatchClosedError) as closed:
        fp.add("fast.next", b"7")
    assert isinstance(closed.value.__cause__, BatchMessageError)
    assert closed.value.__cause__.seq == 6
    assert fp.batch_sequence == 6, "the refused add sent nothing"
    assert fp.close().count == 5
    assert stored_datas(js) == [str(n).encode() for n in range(5)]

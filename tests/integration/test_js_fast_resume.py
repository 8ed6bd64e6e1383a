"""Resuming a fast-ingest batch that failed part-way (issue 32): the recipe of
docs/guides/jetstream.md ("Resuming a batch that failed part-way") across a server
restart and an R3 stream's leader change - everything up to ``ack_sequence`` (or the
final count) is stored, the rest is sent again in a new batch with the same message
ids, and the stream ends up with every message once, in order."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

import nats_sync
from nats_sync.jetstream import JetStream
from nats_sync.testing import NatsCluster, NatsServer

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]

COUNT = 20_000
CUT_AT = 5_000


def store_all(
    js: JetStream,
    subject: str,
    payloads: list[bytes],
    key: str,
    before_add: Callable[[int, int], None] = lambda attempt, n: None,
) -> int:
    """The guide's recipe (plus ``before_add(attempt, n)``, where a test breaks things).
    Returns the batches it took."""
    done = 0  # payloads[:done] are stored
    for attempt in range(1, 31):
        fp = js.fast_publisher()  # gap "fail": stored in order, without a hole
        try:
            for n in range(done, len(payloads) - 1):
                before_add(attempt, n)
                fp.add(subject, payloads[n], msg_id=f"{key}-{n}")
            last = len(payloads) - 1
            final = fp.commit(subject, payloads[last], msg_id=f"{key}-{last}")
        except nats_sync.Error:  # ended early, or no ack in time
            done += fp.ack_sequence  # acknowledged: stored
            time.sleep(1)  # a restarted server, a stream electing its new leader
            continue
        done += final.count  # the server's count (duplicates included)
        if done == len(payloads):
            return attempt
    raise AssertionError(f"stored {done} of {len(payloads)} after 30 batches")


def stored_in_order(js: JetStream, stream: str) -> list[bytes]:
    datas: list[bytes] = []
    for run in js.stream(stream).get_msg_columns(1, batch=5_000):
        datas.extend(run.datas)
    return datas


def test_a_batch_cut_by_a_server_restart_resumes_with_nothing_lost_or_doubled(
    jetstream_server: NatsServer,
) -> None:
    payloads = [b"%d" % n for n in range(COUNT)]
    with nats_sync.connect(
        jetstream_server.url, reconnect_time_wait=0.1, max_reconnect_attempts=-1
    ) as nc:
        js = nc.jetstream(timeout=5)
        js.create_stream(name="RESUME", subjects=["resume.>"], allow_batched=True, storage="file")

        def restart_once(attempt: int, n: int) -> None:
            if attempt == 1 and n == CUT_AT:
                # kill -9: messages the server stored but did not acknowledge yet are
                # sent again, and their message ids make the stream drop them.
                jetstream_server.kill()
                jetstream_server.start()

        batches = store_all(js, "resume.x", payloads, "restart", restart_once)
        assert batches >= 2, "the restart ended the first batch"
        assert stored_in_order(js, "RESUME") == payloads


def test_a_batch_cut_by_a_leader_change_resumes_with_nothing_lost_or_doubled(
    jetstream_cluster: NatsCluster,
) -> None:
    payloads = [b"%d" % n for n in range(COUNT)]
    with nats_sync.connect(servers=jetstream_cluster.urls, reconnect_time_wait=0.1) as nc:
        js = nc.jetstream(timeout=10)
        js.create_stream(name="RESUME3", subjects=["resume3.>"], allow_batched=True, num_replicas=3)
        leaders: list[str] = [js.stream_info("RESUME3").cluster["leader"]]  # type: ignore[index]

        def step_down_once(attempt: int, n: int) -> None:
            if attempt == 1 and n == CUT_AT:
                nc.request("$JS.API.STREAM.LEADER.STEPDOWN.RESUME3", b"", timeout=10)

        # A new leader ends a gap "fail" batch when a message was lost on the way (else
        # the batch goes on): either way every message is stored once, in order.
        store_all(js, "resume3.x", payloads, "leader", step_down_once)
        leaders.append(js.stream_info("RESUME3").cluster["leader"])  # type: ignore[index]
        assert leaders[0] != leaders[1], "the stream's leader changed"
        assert stored_in_order(js, "RESUME3") == payloads

"""request_batch's two ways of sending: plain items queued in chunks by the batch
itself, the rest through publish; order, per-item errors and ending mid-batch."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

import nats_sync
from nats_sync.msg import Msg

ClientFactory = Callable[..., nats_sync.Client]


def _echo(connect: ClientFactory, subject: str, delay: float = 0.0) -> nats_sync.Client:
    service = connect()

    def answer(msg: Msg) -> None:
        if delay:
            time.sleep(delay)
        header = (msg.headers or {}).get("tag")
        msg.respond(b"re:" + msg.data + (b"/" + str(header).encode() if header else b""))

    service.subscribe(subject, cb=answer)
    service.flush(5)
    return service


@pytest.mark.timeout(30)
def test_plain_and_other_items_interleaved_keep_their_order(
    client: nats_sync.Client, connect: ClientFactory
) -> None:
    _echo(connect, "batch.echo")
    payloads: list[Any] = []
    for n in range(300):
        if n % 37 == 5:
            payloads.append(bytearray(b"ba%d" % n))  # not bytes: goes through publish
        elif n % 53 == 7:
            payloads.append("text")  # wrong type: that item's TypeError
        else:
            payloads.append(b"%d" % n)
    results = client.request_batch("batch.echo", payloads, timeout=5, max_in_flight=50)
    for n, (payload, result) in enumerate(zip(payloads, results, strict=True)):
        if isinstance(payload, str):
            assert isinstance(result, TypeError), (n, result)
        else:
            assert isinstance(result, Msg) and result.data == b"re:" + bytes(payload), n
    assert client._handler.debug_snapshot()["requests_in_flight"] == 0


@pytest.mark.timeout(30)
def test_headers_go_through_publish_with_every_item(
    client: nats_sync.Client, connect: ClientFactory
) -> None:
    _echo(connect, "batch.headers")
    results = client.request_batch(
        "batch.headers", [b"a", b"b", b"c"], timeout=5, headers={"tag": "t1"}
    )
    assert [r.data for r in results if isinstance(r, Msg)] == [b"re:a/t1", b"re:b/t1", b"re:c/t1"]


@pytest.mark.timeout(30)
def test_a_bad_subject_is_every_items_error_not_an_exception(
    client: nats_sync.Client,
) -> None:
    results = client.request_batch("bad subject", [b"a", b"b"], timeout=1)
    assert len(results) == 2
    assert all(isinstance(r, nats_sync.BadSubjectError) for r in results)
    assert client._handler.debug_snapshot()["requests_in_flight"] == 0


@pytest.mark.timeout(30)
def test_closing_mid_batch_ends_it_with_per_item_errors(
    client: nats_sync.Client, connect: ClientFactory
) -> None:
    _echo(connect, "batch.slow", delay=0.002)
    outcome: list[Any] = []

    def run() -> None:
        outcome.append(
            client.request_batch(
                "batch.slow", [b"%d" % n for n in range(2_000)], timeout=10, max_in_flight=20
            )
        )

    thread = threading.Thread(target=run)
    thread.start()
    time.sleep(0.3)
    client.close()
    thread.join(10)
    assert not thread.is_alive() and len(outcome) == 1
    results = outcome[0]
    assert len(results) == 2_000
    answered = [r for r in results if isinstance(r, Msg)]
    failed = [r for r in results if isinstance(r, nats_sync.ConnectionClosedError)]
    assert answered and failed and len(answered) + len(failed) == 2_000
    # answered ones come first: the batch sends in order and stops at the close
    assert all(isinstance(r, Msg) for r in results[: len(answered)])

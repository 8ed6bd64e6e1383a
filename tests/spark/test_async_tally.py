"""The async sink's count of a task's acknowledgements (``_Tally``), driven with futures
settled by hand: an ack still awaited once a later publish found no stream answering
(its leader is gone) is taken as lost a moment later, not after the whole ack timeout;
without such an answer the tally waits for the timeout as before."""

from __future__ import annotations

import time
from concurrent.futures import Future

import pytest

from nats_sync import errors
from nats_sync.jetstream import PubAck
from nats_sync.jetstream.errors import NoStreamResponseError
from nats_sync.spark import _defaults as sd
from nats_sync.spark._jetstream.async_publish import _Tally

pytestmark = pytest.mark.timeout(30)

#: Far longer than the test's bound: a settle that waits it out fails the test.
LONG = 60.0


def acked(seq: int) -> Future[PubAck]:
    future: Future[PubAck] = Future()
    future.set_result(PubAck(stream="OUT", seq=seq))
    return future


def no_stream() -> Future[PubAck]:
    future: Future[PubAck] = Future()
    future.set_exception(NoStreamResponseError("no stream stores 'out.all' (no responders)"))
    return future


def test_an_ack_awaited_when_a_later_publish_finds_no_stream_is_lost_a_moment_later() -> None:
    tally = _Tally(lambda: 0)
    tally.add(acked(1), "out.all")
    tally.add(Future(), "out.all")  # the leader that took it died: no ack will come
    tally.add(no_stream(), "out.all")  # no leader yet: nobody answers
    tally.collect_done()  # the head only: the future still awaited hides the answer
    assert tally.leaderless_at is None
    began = time.monotonic()
    tally.settle(LONG)
    waited = time.monotonic() - began
    assert waited < LONG / 2, f"settle waited {waited:.1f}s"
    assert waited >= sd.SPARK_JS_ACKS_AFTER_RECONNECT * 0.9
    assert tally.acked == 1 and not tally.pending
    assert tally.failure is not None
    subject, cause = tally.failure
    assert subject == "out.all" and isinstance(cause, NoStreamResponseError)


def test_without_a_sign_of_loss_an_ack_is_awaited_for_the_whole_timeout() -> None:
    tally = _Tally(lambda: 0)
    tally.add(acked(1), "out.all")
    tally.add(Future(), "out.all")
    timeout = sd.SPARK_JS_ACKS_AFTER_RECONNECT * 2.5
    began = time.monotonic()
    tally.settle(timeout)
    assert time.monotonic() - began >= timeout * 0.9
    assert tally.leaderless_at is None
    assert tally.failure is not None
    cause = tally.failure[1]
    assert isinstance(cause, errors.TimeoutError)
    assert f"no ack and no error within {timeout}s" in str(cause)


def test_a_reconnection_still_marks_the_acks_awaited_as_lost() -> None:
    reconnects = [0]
    tally = _Tally(lambda: reconnects[0])
    tally.add(Future(), "out.all")
    reconnects[0] = 1
    began = time.monotonic()
    tally.settle(LONG)
    assert time.monotonic() - began < LONG / 2
    assert tally.failure is not None
    assert "lost with the old connection" in str(tally.failure[1])

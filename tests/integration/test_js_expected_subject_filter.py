"""``expected_last_subject_seq_subject``: the last sequence checked is that of a subject
filter, not of the message's own subject (``Nats-Expected-Last-Subject-Sequence-Subject``,
a real ``nats-server -js``), on ``publish``, ``publish_async`` and atomic batch adds."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import nats_sync
from nats_sync.errors import InvalidArgumentError
from nats_sync.jetstream import JetStream, WrongLastSequenceError
from nats_sync.testing import NatsServer

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def js(jetstream_server: NatsServer) -> Iterator[JetStream]:
    nc = nats_sync.connect(jetstream_server.url)
    context = nc.jetstream()
    context.create_stream(name="LEDGER", subjects=["ledger.>"], allow_atomic=True)
    try:
        yield context
    finally:
        context.delete_stream("LEDGER")
        nc.close()


def _two_accounts(js: JetStream) -> int:
    """ledger.a.1, ledger.b.1 and ledger.a.2 stored; the last of ledger.a.* is 3."""
    js.publish("ledger.a.1", b"10")
    js.publish("ledger.b.1", b"20")
    return js.publish("ledger.a.2", b"30").seq


def test_publish_checks_the_last_sequence_of_the_filter(js: JetStream) -> None:
    last_of_a = _two_accounts(js)
    stored = js.publish(
        "ledger.a.3",
        b"40",
        expected_last_subject_seq=last_of_a,
        expected_last_subject_seq_subject="ledger.a.*",
    )
    assert stored.seq == 4
    # ledger.a.* moved on to 4: the same expectation no longer holds.
    with pytest.raises(WrongLastSequenceError):
        js.publish(
            "ledger.a.4",
            b"50",
            expected_last_subject_seq=last_of_a,
            expected_last_subject_seq_subject="ledger.a.*",
        )
    # Without the filter the check is on ledger.b.9 itself, which has none: 0 holds.
    assert js.publish("ledger.b.9", b"60", expected_last_subject_seq=0).seq == 5
    message = js.stream("LEDGER").get_msg(4)
    assert message.headers is not None
    assert message.headers["Nats-Expected-Last-Subject-Sequence-Subject"] == "ledger.a.*"


def test_publish_async_checks_it_too(js: JetStream) -> None:
    last_of_a = _two_accounts(js)
    good = js.publish_async(
        "ledger.a.3",
        b"40",
        expected_last_subject_seq=last_of_a,
        expected_last_subject_seq_subject="ledger.a.>",
    )
    assert good.result(timeout=10).seq == 4
    stale = js.publish_async(
        "ledger.a.4",
        b"50",
        expected_last_subject_seq=last_of_a,
        expected_last_subject_seq_subject="ledger.a.>",
    )
    with pytest.raises(WrongLastSequenceError):
        stale.result(timeout=10)


def test_an_atomic_batch_add_checks_it(js: JetStream) -> None:
    last_of_a = _two_accounts(js)
    batch = js.atomic_batch()
    batch.add(
        "ledger.a.3",
        b"40",
        expected_last_subject_seq=last_of_a,
        expected_last_subject_seq_subject="ledger.a.*",
    )
    assert batch.commit("ledger.b.2", b"41").count == 2
    stale = js.atomic_batch()
    stale.add(
        "ledger.b.3",
        b"50",
        expected_last_subject_seq=last_of_a,  # ledger.a.* is at 4 now
        expected_last_subject_seq_subject="ledger.a.*",
    )
    with pytest.raises(WrongLastSequenceError):
        stale.commit("ledger.b.4", b"51")
    assert js.stream_info("LEDGER").state.messages == 5


@pytest.mark.parametrize(
    ("keywords", "says"),
    [
        ({"expected_last_subject_seq_subject": "ledger.a.*"}, "give expected_last_subject_seq"),
        (
            {"expected_last_subject_seq": 1, "expected_last_subject_seq_subject": "ledger..a"},
            "expected_last_subject_seq_subject",
        ),
        (
            {"expected_last_subject_seq": 1, "expected_last_subject_seq_subject": ""},
            "expected_last_subject_seq_subject",
        ),
    ],
)
def test_bad_values_are_refused_before_sending(
    js: JetStream, keywords: dict[str, object], says: str
) -> None:
    with pytest.raises(InvalidArgumentError, match=says):
        js.publish("ledger.a.1", b"x", **keywords)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match=says):
        js.publish_async("ledger.a.1", b"x", **keywords)  # type: ignore[arg-type]
    assert js.stream_info("LEDGER").state.messages == 0

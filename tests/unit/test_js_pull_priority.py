"""Priority groups (ADR-42) without a server: the checks of a read's group and criteria,
the pull's fields, the pin kept and dropped, the statuses, and how a fetch and a message
stream go on after a 423 (on test_js_pull_status's fake client)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from test_js_pull_status import NEXT, FakeClient, message, status

from nats_sync.errors import InvalidArgumentError
from nats_sync.jetstream import (
    BadRequestError,
    InvalidGroupNameError,
    InvalidPriorityGroupError,
    PinIdMismatchError,
    PriorityGroupRequiredError,
    PriorityPolicyError,
    StatusError,
    api_error,
)
from nats_sync.jetstream._consumers.priority import PinTracker, PullGroup, pull_group
from nats_sync.jetstream._consumers.pull import MessageBatch, MessageStream
from nats_sync.jetstream._consumers.pull_wire import classify, pull_body
from nats_sync.msg import Msg

pytestmark = pytest.mark.timeout(20)


def pinned(seq: int, pin: str) -> Msg:
    return message(seq, headers={"Nats-Pin-Id": pin})


# --- the checks -------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["", "a b", "a.b", "x" * 17, "é", 5, None])
def test_a_bad_group_name_is_refused_before_sending(name: Any) -> None:
    if name is None:
        assert pull_group(PinTracker(), None, None, None, None) is None  # no group: fine
        return
    with pytest.raises(InvalidGroupNameError) as caught:
        pull_group(PinTracker(), name, None, None, None)
    assert isinstance(caught.value, ValueError) and isinstance(caught.value, BadRequestError)


@pytest.mark.parametrize("good", ["jobs", "A-Z_a/z=09", "x" * 16])
def test_good_group_names(good: str) -> None:
    group = pull_group(PinTracker(), good, None, None, None)
    assert group is not None and group.fields() == {"group": good}


@pytest.mark.parametrize(
    "criteria",
    [
        {"priority": -1},
        {"priority": 10},
        {"priority": True},
        {"priority": 1.5},
        {"min_pending": -1},
        {"min_ack_pending": -5},
        {"min_pending": "3"},
    ],
)
def test_bad_criteria_are_refused(criteria: dict[str, Any]) -> None:
    values = {"min_pending": None, "min_ack_pending": None, "priority": None, **criteria}
    with pytest.raises(InvalidArgumentError):
        pull_group(
            PinTracker(), "g", values["min_pending"], values["min_ack_pending"], values["priority"]
        )


@pytest.mark.parametrize("criteria", [(1, None, None), (None, 1, None), (None, None, 0)])
def test_criteria_need_a_group(criteria: tuple[Any, Any, Any]) -> None:
    with pytest.raises(InvalidArgumentError, match="need a group"):
        pull_group(PinTracker(), None, *criteria)


def test_the_pull_carries_the_group_and_its_criteria() -> None:
    group = pull_group(PinTracker(), "g", 100, 5, 3)
    assert group is not None
    body = json.loads(pull_body(10, expires=1.0, group=group.fields()))
    assert body == {
        "batch": 10,
        "expires": 1_000_000_000,
        "group": "g",
        "min_pending": 100,
        "min_ack_pending": 5,
        "priority": 3,
    }
    zero = pull_group(PinTracker(), "g", 0, 0, 0)
    assert zero is not None and zero.fields() == {"group": "g"}  # 0 is the server's "none"


# --- the pin ------------------------------------------------------------------------------


def test_the_pin_is_kept_sent_and_dropped() -> None:
    pins = PinTracker()
    one = PullGroup(pins, "g", None, None, None)
    other = PullGroup(pins, "g", None, None, None)  # another read of the same consumer
    assert one.fields() == {"group": "g"} and one.sent is None
    one.seen(message(1))  # no header: nothing to keep
    assert pins.get("g") is None
    one.seen(pinned(2, "P1"))
    assert pins.get("g") == "P1"
    assert other.fields() == {"group": "g", "id": "P1"} and other.sent == "P1"
    one.seen(pinned(3, "P2"))  # a new pin replaces the old one
    other.lost()  # a 423 for a pull that carried P1: P2 is kept
    assert pins.get("g") == "P2"
    assert one.fields()["id"] == "P2"
    one.lost()
    assert pins.get("g") is None and one.fields() == {"group": "g"}


# --- the statuses -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("description", "error"),
    [
        ("Bad Request - Priority Group missing", PriorityGroupRequiredError),
        ("Bad Request - Invalid Priority Group", InvalidPriorityGroupError),
        ("Bad Request - Not a Overflow Priority consumer", PriorityPolicyError),
        ("Bad Request - Not a Pinned Client Priority consumer", PriorityPolicyError),
        ("Bad Request - Priority must be between 0 and 9", PriorityPolicyError),
        ("Bad Request - heartbeat value too large", StatusError),
    ],
)
def test_priority_refusals_have_their_classes(description: str, error: type[Exception]) -> None:
    got = classify(status(400, description))
    assert got.kind == "terminal" and type(got.error) is error
    assert description in str(got.error)


@pytest.mark.parametrize(
    ("err_code", "error"),
    [
        (10160, InvalidPriorityGroupError),
        (10159, PriorityPolicyError),
        (10178, PriorityPolicyError),
        (10196, PriorityPolicyError),
        (10197, PriorityPolicyError),
        (10161, InvalidGroupNameError),
        (10162, InvalidGroupNameError),
    ],
)
def test_api_errors_by_err_code(err_code: int, error: type[Exception]) -> None:
    got = api_error({"code": 400, "err_code": err_code, "description": "d"})
    assert type(got) is error and got.err_code == err_code


def test_a_423_is_a_lost_pin() -> None:
    got = classify(status(423, "Nats-Pin-Id mismatch"))
    assert got.kind == "pin_lost" and isinstance(got.error, PinIdMismatchError)
    assert isinstance(got.error, StatusError) and got.error.status == 423


# --- a fetch after a 423 ----------------------------------------------------------------


def fetch(client: FakeClient, pins: PinTracker, batch: int = 3, wait: float = 5.0) -> MessageBatch:
    from nats_sync.jetstream._consumers.consumer import _again

    group = PullGroup(pins, "g", None, None, None)
    body = pull_body(batch, expires=wait, group=group.fields())
    return MessageBatch(
        client,
        NEXT,
        body,
        batch=batch,  # type: ignore[arg-type]
        max_bytes=None,
        wait=wait + 1.0,
        heartbeat=None,
        ack_timeout=1.0,
        group=group,
        again=_again(group, wait, None),
    )


def test_a_fetch_that_lost_its_pin_pulls_again_without_it() -> None:
    client = FakeClient()
    pins = PinTracker()
    pins.set("g", "OLD")
    batch = fetch(client, pins)
    assert client.pulls[0]["id"] == "OLD"
    client.feed(
        pinned(1, "OLD"), status(423, "Nats-Wrong-Pin-Id"), pinned(2, "NEW"), pinned(3, "NEW")
    )
    assert [m.metadata.sequence.stream for m in batch] == [1, 2, 3]
    assert batch.error is None and pins.get("g") == "NEW"
    again = client.pulls[1]
    assert "id" not in again and again["batch"] == 2 and again["group"] == "g"
    assert 3_000_000_000 < again["expires"] <= 5_000_000_000  # the time left
    assert len(client.subs) == 1  # the same inbox


def test_a_fetch_with_no_time_left_ends_with_what_it_has() -> None:
    client = FakeClient()
    pins = PinTracker()
    pins.set("g", "OLD")
    batch = fetch(client, pins, wait=0.05)  # deadline: wait + 1 s; expires left < 0.1 s
    client.feed(status(423, "Nats-Pin-Id mismatch"))
    assert list(batch) == [] and batch.error is None
    assert len(client.pulls) == 1 and pins.get("g") is None


# --- a message stream after a 423 ---------------------------------------------------------


def test_a_stream_never_ends_for_a_lost_pin() -> None:
    client = FakeClient()
    pins = PinTracker()
    warnings: list[BaseException] = []
    stream = MessageStream(
        client,
        NEXT,
        "consumer 'C'",
        max_messages=10,  # type: ignore[arg-type]
        max_bytes=None,
        max_wait=30.0,
        heartbeat=5.0,
        ack_timeout=1.0,
        exists=lambda timeout: True,
        error_cb=warnings.append,
        group=PullGroup(pins, "g", None, None, None),
    )
    assert client.pulls[0] == {
        "batch": 10,
        "expires": 30_000_000_000,
        "idle_heartbeat": 5_000_000_000,
        "group": "g",
    }
    client.feed(pinned(1, "P1"), pinned(2, "P1"))
    assert [stream.next(timeout=2).metadata.sequence.stream for _ in range(2)] == [1, 2]
    assert pins.get("g") == "P1"
    client.feed(
        status(
            423, "Nats-Wrong-Pin-Id", **{"Nats-Pending-Messages": "8", "Nats-Pending-Bytes": "0"}
        ),
        pinned(3, "P2"),
    )
    assert stream.next(timeout=2).metadata.sequence.stream == 3
    pulls = client.pulls
    assert "id" not in pulls[-1] and pulls[-1]["batch"] == 10  # asked afresh, no id
    assert pins.get("g") == "P2" and warnings == [] and stream.error is None
    client.feed(*(pinned(seq, "P2") for seq in range(4, 10)))
    assert [stream.next(timeout=2).metadata.sequence.stream for _ in range(6)] == [4, 5, 6, 7, 8, 9]
    assert client.pulls[-1]["id"] == "P2"  # the next pull carries the new pin
    stream.stop()

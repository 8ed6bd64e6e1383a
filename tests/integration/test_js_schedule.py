"""Message schedules (ADR-51, nats-server 2.12+) against a real ``nats-server -js`` (2.15):
``js.publish_scheduled`` with an ``@at`` a moment ahead landing on its target, an
``@every 1s`` producing until its schedule message is removed (purged by subject, or
deleted by sequence: how a schedule is stopped), the schedule headers stored as sent
(``ttl``, ``source``, ``time_zone``, the user's own), a bad schedule refused before
anything is sent, ``SchedulesNotEnabledError`` from a stream without
``allow_msg_schedules``, ``ScheduleInvalidError`` for hand-made headers, and nats-py
reading what the server produced."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone

import pytest

import nats_sync
from nats_sync.errors import InvalidArgumentError
from nats_sync.jetstream import (
    BadRequestError,
    JetStream,
    MessageNotFoundError,
    ScheduleInvalidError,
    SchedulesNotEnabledError,
    StoredMsg,
)
from nats_sync.testing import NatsServer

pytestmark = pytest.mark.timeout(60)

ClientFactory = Callable[..., nats_sync.Client]
#: Longest wait for the server's scheduler (it fires on whole seconds).
FIRE_WAIT = 10.0


@pytest.fixture
def js(jetstream_server: NatsServer, connect: ClientFactory) -> JetStream:
    context = connect(servers=jetstream_server.url).jetstream()
    context.create_stream(
        name="SCHED",
        subjects=["sched.>", "orders.>", "sensors.>"],
        allow_msg_schedules=True,
        allow_msg_ttl=True,
    )
    return context


def header(msg: StoredMsg, name: str) -> str | None:
    value = (msg.headers or {}).get(name)
    return value[0] if isinstance(value, list) else value


def last(js: JetStream, subject: str) -> StoredMsg | None:
    try:
        return js.stream("SCHED").get_last_msg(subject)
    except MessageNotFoundError:
        return None


def wait_for(js: JetStream, subject: str, after_seq: int = 0) -> StoredMsg:
    """The last message on ``subject`` once one above ``after_seq`` is stored."""
    deadline = time.monotonic() + FIRE_WAIT
    while time.monotonic() < deadline:
        msg = last(js, subject)
        if msg is not None and msg.seq > after_seq:
            return msg
        time.sleep(0.1)
    pytest.fail(f"nothing new on {subject!r} within {FIRE_WAIT}s")


def count(js: JetStream, subject: str) -> int:
    return (js.stream("SCHED").info(subjects_filter=subject).state.subjects or {}).get(subject, 0)


def test_an_at_two_seconds_ahead_lands_on_the_target(js: JetStream) -> None:
    when = datetime.now(timezone.utc) + timedelta(seconds=2)
    ack = js.publish_scheduled(
        "sched.once", b"later", schedule=when, target="orders.once", headers={"X-Order": "42"}
    )
    stored = js.stream("SCHED").get_msg(ack.seq)
    assert header(
        stored,
        "Nats-Schedule",
    ) == "@at " + when.isoformat().replace("+00:00", "Z")
    assert header(stored, "Nats-Schedule-Target") == "orders.once"
    assert last(js, "orders.once") is None  # not before its time

    produced = wait_for(js, "orders.once")
    assert produced.data == b"later"
    assert produced.time is not None and produced.time >= when - timedelta(seconds=1)
    assert header(produced, "X-Order") == "42"  # the user's headers go along
    assert header(produced, "Nats-Scheduler") == "sched.once"
    assert header(produced, "Nats-Schedule-Next") == "purge"
    time.sleep(0.5)
    assert last(js, "sched.once") is None  # a one-off schedule removes itself


@pytest.mark.parametrize("stop", ["purge_subject", "delete_seq"])
def test_every_second_produces_until_its_schedule_is_removed(js: JetStream, stop: str) -> None:
    ack = js.publish_scheduled("sched.tick", b"tick", schedule="@every 1s", target="orders.tick")
    first = wait_for(js, "orders.tick")
    second = wait_for(js, "orders.tick", first.seq)
    assert second.data == b"tick" and header(second, "Nats-Scheduler") == "sched.tick"
    assert last(js, "sched.tick") is not None  # a repeating schedule stays

    if stop == "purge_subject":
        assert js.stream("SCHED").purge(subject="sched.tick") == 1
    else:
        js.stream("SCHED").delete_msg(ack.seq)
    time.sleep(0.3)  # a tick already under way may still land
    stopped_at = count(js, "orders.tick")
    time.sleep(2.5)
    assert count(js, "orders.tick") == stopped_at


def test_publishing_again_replaces_the_schedule(js: JetStream) -> None:
    js.publish_scheduled("sched.daily", b"v1", schedule="@daily", target="orders.daily")
    js.publish_scheduled("sched.daily", b"v2", schedule="0 30 6 * * mon-fri", target="orders.daily")
    assert count(js, "sched.daily") == 1
    stored = last(js, "sched.daily")
    assert stored is not None and stored.data == b"v2"
    assert header(stored, "Nats-Schedule") == "0 30 6 * * mon-fri"
    assert header(stored, "Nats-Rollup") == "sub"  # the server applies it


def test_ttl_source_time_zone_and_headers_are_stored_on_the_schedule(js: JetStream) -> None:
    js.publish("sensors.temp", b"21.5")
    js.publish_scheduled(
        "sched.sample",
        b"fallback",
        schedule="@every 1s",
        target="sensors.sampled",
        ttl=60,
        source="sensors.temp",
        headers={"X-Kind": "sample"},
    )
    stored = last(js, "sched.sample")
    assert stored is not None
    assert header(stored, "Nats-Schedule-TTL") == "60"
    assert header(stored, "Nats-Schedule-Source") == "sensors.temp"
    assert header(stored, "X-Kind") == "sample"

    produced = wait_for(js, "sensors.sampled")
    assert produced.data == b"21.5"  # the source's last message, not the body
    assert header(produced, "Nats-TTL") == "60"
    js.stream("SCHED").purge(subject="sched.sample")

    js.publish_scheduled(
        "sched.tz", schedule="0 0 9 * * *", target="orders.tz", time_zone="Europe/Amsterdam"
    )
    stored = last(js, "sched.tz")
    assert stored is not None
    assert header(stored, "Nats-Schedule-Time-Zone") == "Europe/Amsterdam"


#: Schedules the client takes: the server must take them too (and keep them verbatim).
GOOD_SCHEDULES = [
    "@at 2030-01-02T15:04:05Z",
    "@at 2030-01-02T15:04:05.250+02:00",
    "@every 1s",
    "@every 1h30m",
    "@every 1.5s",
    "@every 90m",
    "@yearly",
    "@annually",
    "@monthly",
    "@weekly",
    "@daily",
    "@midnight",
    "@hourly",
    "* * * * * *",
    "0 */15 * * * *",
    "0 0 8-18/2 * * MON-FRI",
    "30 0 4 1,15 * 5",
    "0 0 0 1 jan-mar,Dec ?",
    "5/10 0 0 * * sun",
    "0 0 0 29 2 *",
]


@pytest.mark.parametrize("schedule", GOOD_SCHEDULES)
def test_what_the_client_takes_the_server_takes(js: JetStream, schedule: str) -> None:
    ack = js.publish_scheduled("sched.good", b"", schedule=schedule, target="orders.good")
    assert header(js.stream("SCHED").get_msg(ack.seq), "Nats-Schedule") == schedule


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"schedule": datetime(2030, 1, 1)}, "naive"),  # a naive datetime
        ({"schedule": "* * * * *"}, "6 fields"),
        ({"schedule": "60 * * * * *"}, "outside 0-59"),
        ({"schedule": "0 0 0 32 * *"}, "outside 1-31"),
        ({"schedule": "0 0 0 * 13 *"}, "outside 1-12"),
        ({"schedule": "0 0 0 * * 7"}, "outside 0-6"),
        ({"schedule": "0 0 9-5 * * *"}, "starts after it ends"),
        ({"schedule": "*/0 * * * * *"}, "step of 0"),
        ({"schedule": "0 0 0 * foo *"}, "not a number"),
        ({"schedule": "@every 500ms"}, "at least 1s"),
        ({"schedule": "@every 5"}, "Go duration"),
        ({"schedule": "@every five minutes"}, "Go duration"),
        ({"schedule": "@at tomorrow"}, "RFC 3339"),
        ({"schedule": "@at 2030-01-01T00:00:00"}, "RFC 3339"),  # no offset
        ({"schedule": "@fortnightly"}, "none of"),
        ({"schedule": 5}, "datetime or a str"),
        ({"target": "sched.bad"}, "differ"),
        ({"target": "orders.*"}, "wildcards"),
        ({"target": "orders.>"}, "wildcards"),
        ({"target": ""}, "target"),
        ({"source": "orders.x"}, "differ"),
        ({"source": "sensors.*"}, "wildcards"),
        ({"ttl": 0.5}, "ttl"),
        ({"schedule": "@every 5m", "time_zone": "Europe/Amsterdam"}, "only with a cron"),
        (
            {"schedule": datetime(2030, 1, 1, tzinfo=timezone.utc), "time_zone": "UTC"},
            "only with a cron",
        ),
        ({"time_zone": "+02:00"}, "zone name"),
        ({"time_zone": ""}, "time_zone"),
    ],
)
def test_a_bad_schedule_is_refused_before_sending(
    js: JetStream, kwargs: dict[str, object], match: str
) -> None:
    call: dict[str, object] = {"schedule": "0 0 9 * * *", "target": "orders.x", **kwargs}
    with pytest.raises(InvalidArgumentError, match=match):
        js.publish_scheduled("sched.bad", b"x", **call)  # type: ignore[arg-type]
    assert js.stream("SCHED").info().state.messages == 0  # nothing was sent


def test_a_stream_without_schedules_refuses(js: JetStream) -> None:
    js.create_stream(name="PLAIN", subjects=["plain.>"])
    with pytest.raises(SchedulesNotEnabledError) as raised:
        js.publish_scheduled("plain.sched", b"x", schedule="@every 1s", target="plain.out")
    assert raised.value.err_code == 10188
    assert isinstance(raised.value, BadRequestError)
    assert js.stream("PLAIN").info().state.messages == 0


def test_the_server_refusal_of_hand_made_headers_is_schedule_invalid(js: JetStream) -> None:
    with pytest.raises(ScheduleInvalidError) as raised:
        js.publish(
            "sched.hand",
            b"x",
            headers={"Nats-Schedule": "@every 1s", "Nats-Schedule-Target": "elsewhere"},
        )
    assert raised.value.err_code == 10190  # a target outside the stream
    with pytest.raises(ScheduleInvalidError) as raised:
        js.publish(
            "sched.hand",
            b"x",
            headers={"Nats-Schedule": "61 * * * * *", "Nats-Schedule-Target": "orders.x"},
        )
    assert raised.value.err_code == 10189


def test_nats_py_reads_the_produced_message(js: JetStream, jetstream_server: NatsServer) -> None:
    import nats

    when = datetime.now(timezone.utc) + timedelta(seconds=1)
    js.publish_scheduled(
        "sched.interop", b"from nats_sync", schedule=when, target="orders.interop", ttl=30
    )
    wait_for(js, "orders.interop")

    async def their_side() -> tuple[bytes, dict[str, str]]:
        nc = await nats.connect(jetstream_server.url)
        try:
            msg = await nc.jetstream().get_last_msg("SCHED", "orders.interop")
            return msg.data or b"", dict(msg.headers or {})
        finally:
            await nc.close()

    data, headers = asyncio.run(their_side())
    assert data == b"from nats_sync"
    assert headers["Nats-Scheduler"] == "sched.interop"
    assert headers["Nats-TTL"] == "30"

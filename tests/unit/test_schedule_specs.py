"""The schedule checks and headers of ``jetstream/_publishing/schedule.py`` without a server (the
integration tests send what these build to nats-server 2.15)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from nats_sync.errors import InvalidArgumentError
from nats_sync.jetstream._publishing.schedule import PREDEFINED, check_schedule, schedule_headers


def test_an_aware_datetime_is_sent_as_at_in_utc() -> None:
    plus_two = timezone(timedelta(hours=2))
    assert check_schedule(datetime(2030, 1, 2, 17, 4, 5, tzinfo=plus_two)) == (
        "@at 2030-01-02T15:04:05Z",
        False,
    )
    assert check_schedule(datetime(2030, 1, 2, 15, 4, 5, 250000, tzinfo=timezone.utc)) == (
        "@at 2030-01-02T15:04:05.250000Z",
        False,
    )


@pytest.mark.parametrize(
    "spec",
    ["@every 1s", "@every 1m30s", "@every 0.5m", "@every 2h", "@at 2030-01-02T15:04:05-07:00"],
)
def test_at_and_every_are_kept_and_not_cron(spec: str) -> None:
    assert check_schedule(spec) == (spec, False)


@pytest.mark.parametrize(
    "spec",
    [
        *PREDEFINED,
        "0 0 * * * *",
        "0 0 0 1 JAN,jul ?",
        "*/10 0-30/5 1,2,3 * * *",
        "0 0 12 * * sat,SUN",
    ],
)
def test_predefined_and_cron_are_cron(spec: str) -> None:
    assert check_schedule(spec) == (spec, True)


@pytest.mark.parametrize(
    "spec",
    [
        "@every 999ms",
        "@every 1d",
        "@every",
        "@every 1s ",
        "@at 2030-13-01T00:00:00Z",
        "@at 2030-01-01 00:00:00Z",
        "0 0 0 1-2-3 * *",
        "0 0 0 1/2/3 * *",
        "0 0 0 , * *",
        "0 0 0 * * mon-",
        "0 0 0 * * ",
        "",
        "@HOURLY",
    ],
)
def test_malformed_schedules_are_refused(spec: str) -> None:
    with pytest.raises(InvalidArgumentError):
        check_schedule(spec)


def test_headers_win_over_the_users_and_carry_ttl_source_zone() -> None:
    headers = schedule_headers(
        "sched.a",
        schedule="0 0 9 * * *",
        target="orders.a",
        ttl=90.7,
        source="sensors.a",
        time_zone="America/New_York",
        headers={"X-Mine": "1", "Nats-Schedule": "@hourly"},
    )
    assert headers == {
        "X-Mine": "1",
        "Nats-Schedule": "0 0 9 * * *",
        "Nats-Schedule-Target": "orders.a",
        "Nats-Schedule-Source": "sensors.a",
        "Nats-Schedule-TTL": "90",
        "Nats-Schedule-Time-Zone": "America/New_York",
    }
    assert schedule_headers("s", schedule="@every 1s", target="t", ttl="never") == {
        "Nats-Schedule": "@every 1s",
        "Nats-Schedule-Target": "t",
        "Nats-Schedule-TTL": "never",
    }

"""nats_sync.micro without a server: ServiceError pickles, check() reads error replies,
the spec's records round-trip through their JSON, names and versions are checked."""

from __future__ import annotations

import pickle
from datetime import datetime, timezone

import pytest

import nats_sync
from nats_sync import micro
from nats_sync.micro import ServiceError, ServiceStats
from nats_sync.micro._api import check_name, check_version, parse_time
from nats_sync.msg import Msg

pytestmark = pytest.mark.timeout(10)


def test_service_error_pickles_with_its_fields() -> None:
    err = ServiceError("400 bad", code=400, description="bad", data=b"body")
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is ServiceError and isinstance(back, nats_sync.Error)
    assert (back.code, back.description, back.data, str(back)) == (
        400,
        "bad",
        b"body",
        "nats: service error: 400 bad",
    )


def test_check_passes_plain_replies_and_raises_error_replies() -> None:
    plain = Msg("inbox", data=b"ok", headers={"X": "1"})
    assert micro.check(plain) is plain
    failed = Msg(
        "inbox",
        data=b"why",
        headers={"Nats-Service-Error": "nope", "Nats-Service-Error-Code": "404"},
    )
    with pytest.raises(ServiceError) as caught:
        micro.check(failed)
    assert (caught.value.code, caught.value.description, caught.value.data) == (404, "nope", b"why")
    lower = Msg("inbox", headers={"nats-service-error-code": ["503"]})
    with pytest.raises(ServiceError) as caught:
        micro.check(lower)
    assert caught.value.code == 503
    with pytest.raises(nats_sync.NoRespondersError):
        micro.check(nats_sync.NoRespondersError("x"))


def test_stats_json_round_trip_and_times() -> None:
    started = datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=timezone.utc)
    stats = ServiceStats(
        "svc",
        "ID1",
        "1.0.0",
        started,
        {"a": "b"},
        [micro.EndpointStats("e", "e", "q", 3, 1, "500:x", 30, 10)],
    )
    data = stats.to_dict()
    assert data["type"] == "io.nats.micro.v1.stats_response"
    assert data["started"] == "2024-05-06T07:08:09.123456Z"
    assert ServiceStats.from_dict(data) == stats
    # nats.go writes nanoseconds and offsets
    assert parse_time("2024-05-06T07:08:09.123456789Z") == started
    assert parse_time("2024-05-06T09:08:09+02:00") == started.replace(microsecond=0)


@pytest.mark.parametrize("good", ["a", "A-b_9", "x" * 100])
def test_good_names(good: str) -> None:
    assert check_name(good, "service name") == good


@pytest.mark.parametrize("bad", ["", "a b", "a.b", "a*", "é", None, 3])
def test_bad_names(bad: object) -> None:
    with pytest.raises(nats_sync.InvalidArgumentError, match="service name"):
        check_name(bad, "service name")


@pytest.mark.parametrize("version", ["1.0.0", "0.0.1-alpha.1", "10.2.3+build.5"])
def test_good_versions(version: str) -> None:
    assert check_version(version) == version


@pytest.mark.parametrize("version", ["1", "1.0", "01.0.0", "v1.0.0", "1.0.0 ", ""])
def test_bad_versions(version: str) -> None:
    with pytest.raises(nats_sync.InvalidArgumentError, match="semantic version"):
        check_version(version)

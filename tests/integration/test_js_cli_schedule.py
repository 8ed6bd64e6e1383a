"""``nats-sync pub --js --schedule SPEC --target SUBJ``: a message schedule (ADR-51) from
the command line against ``nats-server -js`` (2.15), and its options refused where they
do not go."""

from __future__ import annotations

import time

import pytest

import nats_sync
from nats_sync.cli import main
from nats_sync.jetstream import MessageNotFoundError
from nats_sync.testing import NatsServer

pytestmark = pytest.mark.timeout(60)


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = main(list(args))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_pub_schedule_stores_a_schedule_that_fires(
    jetstream_server: NatsServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = jetstream_server.url
    with nats_sync.connect(url) as nc:
        nc.jetstream().create_stream(
            name="SCHED",
            subjects=["sched.>", "orders.>"],
            allow_msg_schedules=True,
            allow_msg_ttl=True,
        )
    status, out, err = cli(
        capsys,
        "-s",
        url,
        "pub",
        "sched.tick",
        "hello",
        "--js",
        "--schedule",
        "@every 1s",
        "--target",
        "orders.tick",
        "--ttl",
        "30",
        "--header",
        "k:v",
    )
    assert status == 0, err
    assert out.splitlines()[0] == "SCHED\tseq 1\tschedule '@every 1s' -> orders.tick"
    with nats_sync.connect(url) as nc:
        stream = nc.jetstream().stream("SCHED")
        schedule = stream.get_last_msg("sched.tick")
        assert schedule.headers is not None
        assert schedule.headers["Nats-Schedule-TTL"] == "30"
        assert schedule.headers["Nats-Schedule-Target"] == "orders.tick"
        deadline = time.monotonic() + 10
        while True:
            try:
                produced = stream.get_last_msg("orders.tick")
                break
            except MessageNotFoundError:
                assert time.monotonic() < deadline, "the schedule never fired"
                time.sleep(0.1)
        assert produced.data == b"hello" and produced.headers is not None
        assert produced.headers["k"] == "v" and produced.headers["Nats-TTL"] == "30"
        stream.purge(subject="sched.tick")


def test_pub_schedule_without_the_stream_flag_fails_with_one_line(
    jetstream_server: NatsServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = jetstream_server.url
    with nats_sync.connect(url) as nc:
        nc.jetstream().create_stream(name="PLAIN", subjects=["plain.>"])
    status, out, err = cli(
        capsys,
        "-s",
        url,
        "pub",
        "plain.s",
        "x",
        "--js",
        "--schedule",
        "@hourly",
        "--target",
        "plain.t",
    )
    assert status == 1 and out == ""
    assert "schedules" in err and err.count("\n") == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--schedule", "@hourly", "--target", "t"], "--schedule needs --js and --target"),
        (["--js", "--schedule", "@hourly"], "--schedule needs --js and --target"),
        (["--js", "--target", "t"], "--target and --time-zone need --schedule"),
        (["--js", "--schedule", "@hourly", "--target", "t", "--count", "2"], "one schedule"),
        (["--js", "--schedule", "@hourly", "--target", "t", "--atomic"], "one schedule"),
        (["--js", "--schedule", "* * * * *", "--target", "t"], "6 fields"),
    ],
)
def test_pub_schedule_options_are_refused_where_they_do_not_go(
    nats_server: NatsServer,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    message: str,
) -> None:
    status, out, err = cli(capsys, "-s", nats_server.url, "pub", "s", "x", *args)
    assert status != 0 and out == "" and message in err

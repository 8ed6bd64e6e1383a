"""The command line's ``stream`` and ``consumer`` commands against ``nats-server -js``."""

from __future__ import annotations

import json

import pytest

import nats_sync
from nats_sync.cli import main
from nats_sync.testing import NatsServer

pytestmark = pytest.mark.timeout(60)


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = main(list(args))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_stream_add_ls_info_rm(
    jetstream_server: NatsServer, capsys: pytest.CaptureFixture[str]
) -> None:
    url = jetstream_server.url
    status, out, err = cli(
        capsys,
        "stream",
        "add",
        "ORDERS",
        "--subjects",
        "orders.>,refunds",
        "--max-age",
        "3600",
        "--storage",
        "memory",
        "-s",
        url,
    )
    assert status == 0, err
    assert "stream ORDERS stores orders.>, refunds" in out
    with nats_sync.connect(url) as nc:
        nc.request("orders.1", b"x", timeout=5)
    status, out, _ = cli(capsys, "-s", url, "stream", "ls")
    assert status == 0 and out.startswith("ORDERS\t1 messages\t")
    status, out, _ = cli(capsys, "stream", "info", "ORDERS", "--server", url)
    info = json.loads(out)
    assert info["config"]["max_age"] == 3_600_000_000_000
    assert info["config"]["storage"] == "memory" and info["state"]["messages"] == 1
    status, out, _ = cli(capsys, "stream", "rm", "ORDERS", "-s", url)
    assert status == 0 and "deleted" in out
    status, _, err = cli(capsys, "stream", "info", "ORDERS", "-s", url)
    assert status == 1 and "stream not found" in err and err.count("\n") == 1


def test_consumer_add_ls_info_next_rm(
    jetstream_server: NatsServer, capsys: pytest.CaptureFixture[str]
) -> None:
    url = jetstream_server.url
    assert cli(capsys, "stream", "add", "JOBS", "--subjects", "jobs.>", "-s", url)[0] == 0
    with nats_sync.connect(url) as nc:
        for n in range(3):
            nc.request(f"jobs.{n}", b"job %d" % n, timeout=5)
    status, out, err = cli(
        capsys, "consumer", "add", "JOBS", "workers", "--filter", "jobs.>", "-s", url
    )
    assert status == 0, err
    assert "consumer workers on JOBS" in out
    status, out, _ = cli(capsys, "consumer", "ls", "JOBS", "-s", url)
    assert out.startswith("workers\t3 pending\t0 unacknowledged")
    status, out, err = cli(capsys, "consumer", "next", "JOBS", "workers", "--count", "2", "-s", url)
    assert status == 0, err
    assert "[jobs.0] stream seq 1, delivered 1x\njob 0\n" in out and "job 1" in out
    status, out, _ = cli(capsys, "consumer", "info", "JOBS", "workers", "-s", url)
    info = json.loads(out)
    assert info["num_pending"] == 1 and info["ack_floor"]["stream_seq"] == 2
    status, out, _ = cli(capsys, "consumer", "next", "JOBS", "workers", "--no-ack", "-s", url)
    assert "job 2" in out
    status, out, _ = cli(capsys, "consumer", "rm", "JOBS", "workers", "-s", url)
    assert status == 0 and "deleted" in out


def test_next_on_an_empty_consumer_says_so(
    jetstream_server: NatsServer, capsys: pytest.CaptureFixture[str]
) -> None:
    url = jetstream_server.url
    cli(capsys, "stream", "add", "EMPTY", "--subjects", "empty", "-s", url)
    cli(capsys, "consumer", "add", "EMPTY", "c", "-s", url)
    status, out, _ = cli(capsys, "consumer", "next", "EMPTY", "c", "--timeout", "0.5", "-s", url)
    assert status == 0 and "no message within 0.5s" in out


def test_bad_arguments_are_clear(
    jetstream_server: NatsServer, capsys: pytest.CaptureFixture[str]
) -> None:
    url = jetstream_server.url
    status, _, err = cli(capsys, "stream", "add", "S", "--subjects", " , ", "-s", url)
    assert status == 1 and "--subjects needs at least one subject" in err
    status, _, err = cli(capsys, "stream", "add", "bad.name", "--subjects", "x", "-s", url)
    assert status == 1 and "invalid stream name" in err
    with pytest.raises(SystemExit) as raised:
        main(["stream", "frobnicate"])
    assert raised.value.code == 2


def test_consumer_add_push_then_info_and_next_read_it(
    jetstream_server: NatsServer, capsys: pytest.CaptureFixture[str]
) -> None:
    url = jetstream_server.url
    cli(capsys, "stream", "add", "PUSHED", "--subjects", "pushed.>", "-s", url)
    with nats_sync.connect(url) as nc:
        for n in range(3):
            nc.request(f"pushed.{n}", b"job %d" % n, timeout=5)
    status, out, err = cli(
        capsys,
        "consumer",
        "add",
        "PUSHED",
        "feed",
        "--push",
        "--deliver-group",
        "readers",
        "--heartbeat",
        "2",
        "-s",
        url,
    )
    assert status == 0, err
    assert out.startswith("push consumer feed on PUSHED delivers to _INBOX.")
    assert out.rstrip().endswith("in group readers")
    status, out, _ = cli(capsys, "consumer", "info", "PUSHED", "feed", "-s", url)
    config = json.loads(out)["config"]
    assert config["deliver_group"] == "readers" and config["idle_heartbeat"] == 2_000_000_000
    status, out, err = cli(
        capsys, "consumer", "next", "PUSHED", "feed", "--count", "2", "--timeout", "5", "-s", url
    )
    assert status == 0, err
    assert "[pushed.0] stream seq 1, delivered 1x\njob 0\n" in out and "job 1" in out
    assert "job 2" not in out
    status, _, err = cli(
        capsys, "consumer", "add", "PUSHED", "x", "--flow-control", "--heartbeat", "1", "-s", url
    )
    assert status == 1 and "--flow-control, --heartbeat: for a push consumer (add --push)" in err

"""``nats-sync pub --js --atomic``: ``--count`` messages as one atomic batch against
``nats-server -js`` (2.15)."""

from __future__ import annotations

import re

import pytest

import nats_sync
from nats_sync.cli import main
from nats_sync.testing import NatsServer

pytestmark = pytest.mark.timeout(60)


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = main(list(args))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def make_streams(url: str) -> None:
    with nats_sync.connect(url) as nc:
        js = nc.jetstream()
        js.create_stream(name="ORDERS", subjects=["orders.>"], allow_atomic=True)
        js.create_stream(name="PLAIN", subjects=["plain.>"])


def stored(url: str, stream: str) -> list[nats_sync.jetstream.StoredMsg]:
    with nats_sync.connect(url) as nc:
        return list(nc.jetstream().stream(stream).get_msgs(1))


def test_pub_atomic_stores_the_count_as_one_batch_and_prints_its_ack(
    jetstream_server: NatsServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = jetstream_server.url
    make_streams(url)
    status, out, err = cli(
        capsys,
        "pub",
        "orders.new",
        "order {n}",
        "--count",
        "3",
        "--js",
        "--atomic",
        "--header",
        "k:v",
        "-s",
        url,
    )
    assert status == 0, err
    lines = out.splitlines()
    match = re.fullmatch(r"ORDERS\tseq 3\tbatch (\w+)\tcount 3", lines[0])
    assert match is not None, out
    assert lines[1:] == ["published 3 message(s) to 'orders.new'"]
    messages = stored(url, "ORDERS")
    assert [m.data for m in messages] == [b"order 1", b"order 2", b"order 3"]
    for message in messages:
        assert message.headers is not None
        assert message.headers["k"] == "v"
        assert message.headers["Nats-Batch-Id"] == match[1]


def test_pub_atomic_with_a_stored_msg_id_stores_nothing(
    jetstream_server: NatsServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = jetstream_server.url
    make_streams(url)
    assert cli(capsys, "-s", url, "pub", "orders.a", "x", "--js", "--msg-id", "id-2")[0] == 0
    status, out, err = cli(
        capsys,
        "-s",
        url,
        "pub",
        "orders.a",
        "{n}",
        "--js",
        "--atomic",
        "--msg-id",
        "id-{n}",
        "--count",
        "3",
    )
    assert status == 1 and out == ""
    assert "duplicate message id" in err and err.count("\n") == 1
    assert [m.data for m in stored(url, "ORDERS")] == [b"x"]  # the batch added nothing


def test_pub_atomic_to_a_stream_without_allow_atomic_fails_with_one_line(
    jetstream_server: NatsServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = jetstream_server.url
    make_streams(url)
    status, out, err = cli(
        capsys, "pub", "plain.a", "x", "--count", "2", "--js", "--atomic", "-s", url
    )
    assert status == 1 and out == ""
    assert "err_code=10174" in err and err.count("\n") == 1
    assert stored(url, "PLAIN") == []


def test_pub_atomic_over_the_limit_sends_nothing(
    jetstream_server: NatsServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = jetstream_server.url
    make_streams(url)
    status, _, err = cli(
        capsys, "pub", "orders.a", "x", "--count", "1001", "--js", "--atomic", "-s", url
    )
    assert status == 1 and "at most 1000 messages" in err
    assert stored(url, "ORDERS") == []
    status, out, err = cli(
        capsys, "pub", "orders.a", "x", "--count", "1000", "--js", "--atomic", "-s", url
    )
    assert status == 0, err
    assert "\tcount 1000" in out.splitlines()[0]


def test_pub_atomic_argument_mistakes(
    jetstream_server: NatsServer, capsys: pytest.CaptureFixture[str]
) -> None:
    url = jetstream_server.url
    status, _, err = cli(capsys, "pub", "orders.a", "--atomic", "-s", url)
    assert status == 1 and "--atomic needs --js" in err
    status, _, err = cli(capsys, "pub", "orders.a", "--js", "--atomic", "--count", "0", "-s", url)
    assert status == 1 and "--count must be >= 1" in err

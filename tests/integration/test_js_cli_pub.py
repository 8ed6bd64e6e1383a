"""``nats-sync pub --js``: publish with acknowledgements against ``nats-server -js``."""

from __future__ import annotations

import subprocess
import sys

import pytest

import nats_sync
from nats_sync.cli import main
from nats_sync.testing import NatsServer

pytestmark = pytest.mark.timeout(60)


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = main(list(args))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def make_stream(url: str) -> None:
    with nats_sync.connect(url) as nc:
        nc.jetstream().create_stream(name="ORDERS", subjects=["orders.>"])


def test_pub_js_prints_one_ack_per_message_in_order(
    jetstream_server: NatsServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = jetstream_server.url
    make_stream(url)
    status, out, err = cli(
        capsys,
        "pub",
        "orders.new",
        "order {n}",
        "--count",
        "3",
        "--js",
        "--header",
        "k:v",
        "-s",
        url,
    )
    assert status == 0, err
    assert out.splitlines() == [
        "ORDERS\tseq 1",
        "ORDERS\tseq 2",
        "ORDERS\tseq 3",
        "published 3 message(s) to 'orders.new'",
    ]
    with nats_sync.connect(url) as nc:
        stored = nc.jetstream().stream("ORDERS").get_msg(3)
    assert stored.data == b"order 3" and stored.headers == {"k": "v"}


def test_pub_js_msg_id_shows_duplicates(
    jetstream_server: NatsServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = jetstream_server.url
    make_stream(url)
    assert cli(capsys, "-s", url, "pub", "orders.a", "x", "--js", "--msg-id", "id-{n}")[0] == 0
    status, out, err = cli(
        capsys, "-s", url, "pub", "orders.a", "x", "--js", "--msg-id", "id-{n}", "--count", "2"
    )
    assert status == 0, err
    assert out.splitlines()[:2] == ["ORDERS\tseq 1\tduplicate", "ORDERS\tseq 2"]


def test_pub_js_without_a_stream_fails_with_one_line(
    jetstream_server: NatsServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, out, err = cli(capsys, "pub", "nowhere", "x", "--js", "-s", jetstream_server.url)
    assert status == 1 and out == ""
    assert "no stream stores 'nowhere'" in err and err.count("\n") == 1


def test_pub_js_argument_mistakes(
    jetstream_server: NatsServer, capsys: pytest.CaptureFixture[str]
) -> None:
    url = jetstream_server.url
    status, _, err = cli(capsys, "pub", "orders.a", "--js", "--reply", "r", "-s", url)
    assert status == 1 and "--reply does not go with --js" in err
    status, _, err = cli(capsys, "pub", "orders.a", "--msg-id", "1", "-s", url)
    assert status == 1 and "--msg-id needs --js" in err


def test_pub_js_as_a_process(jetstream_server: NatsServer) -> None:
    make_stream(jetstream_server.url)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "nats_sync",
            "--server",
            jetstream_server.url,
            "pub",
            "orders.p",
            "{n}",
            "--count",
            "1500",
            "--js",
        ],
        capture_output=True,
        text=True,
        timeout=50,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    # More than the CLI's window of acks awaited at once, all in order.
    assert lines[:-1] == [f"ORDERS\tseq {n}" for n in range(1, 1501)]

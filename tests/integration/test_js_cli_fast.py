"""``nats-sync pub --js --fast``: one fast-ingest batch against ``nats-server -js``."""

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


def make_stream(url: str, *, allow_batched: bool = True) -> None:
    with nats_sync.connect(url) as nc:
        nc.jetstream().create_stream(
            name="ORDERS", subjects=["orders.>"], allow_batched=allow_batched
        )


def stored(url: str) -> int:
    with nats_sync.connect(url) as nc:
        return nc.jetstream().stream_info("ORDERS").state.messages


def test_pub_js_fast_prints_the_batchs_final_ack(
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
        "500",
        "--js",
        "--fast",
        "--header",
        "k:v",
        "-s",
        url,
    )
    assert status == 0, err
    ack, summary = out.splitlines()
    stream, seq, batch, count = ack.split("\t")
    assert (stream, seq, count) == ("ORDERS", "seq 500", "count 500")
    assert batch.startswith("batch ") and len(batch) > len("batch ")
    assert summary == "published 500 message(s) to 'orders.new'"
    with nats_sync.connect(url) as nc:
        last = nc.jetstream().stream("ORDERS").get_msg(500)
    assert last.data == b"order 500" and last.headers == {"k": "v"}


def test_pub_js_fast_msg_id_makes_a_repeat_store_nothing(
    jetstream_server: NatsServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = jetstream_server.url
    make_stream(url)
    arguments = (
        "-s",
        url,
        "pub",
        "orders.a",
        "x",
        "--js",
        "--fast",
        "--count",
        "20",
        "--msg-id",
        "id-{n}",
    )
    assert cli(capsys, *arguments)[0] == 0
    status, out, err = cli(capsys, *arguments)
    assert status == 0, err
    assert out.splitlines()[0].split("\t")[1::2] == ["seq 0", "count 20"]
    assert stored(url) == 20


def test_pub_js_fast_to_a_stream_without_allow_batched_fails_with_one_line(
    jetstream_server: NatsServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = jetstream_server.url
    make_stream(url, allow_batched=False)
    status, out, err = cli(capsys, "pub", "orders.x", "x", "--js", "--fast", "-s", url)
    assert status == 1 and out == ""
    assert "10205" in err and err.count("\n") == 1
    assert stored(url) == 0


def test_pub_fast_needs_js(
    jetstream_server: NatsServer, capsys: pytest.CaptureFixture[str]
) -> None:
    status, _, err = cli(capsys, "pub", "orders.a", "--fast", "-s", jetstream_server.url)
    assert status == 1 and "--fast needs --js" in err


def test_pub_js_fast_as_a_process(jetstream_server: NatsServer) -> None:
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
            "5000",
            "--js",
            "--fast",
        ],
        capture_output=True,
        text=True,
        timeout=50,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0].endswith("\tcount 5000")
    assert stored(jetstream_server.url) == 5000

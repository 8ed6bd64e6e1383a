"""``nats-sync counter add|get`` (ADR-49), ``nats-sync pub --js --ttl`` (ADR-43) and
``nats-sync kv add --limit-marker-ttl`` (ADR-48) against a real ``nats-server -js``."""

from __future__ import annotations

import pytest

import nats_sync
from nats_sync.cli import main
from nats_sync.testing import NatsServer

pytestmark = pytest.mark.timeout(60)


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = main(list(args))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.fixture
def url(jetstream_server: NatsServer) -> str:
    with nats_sync.connect(jetstream_server.url) as nc:
        js = nc.jetstream()
        js.create_stream(
            name="HITS", subjects=["hits.>"], allow_msg_counter=True, allow_direct=True
        )
        js.create_stream(
            name="TTL",
            subjects=["ttl.>"],
            allow_msg_ttl=True,
            allow_atomic=True,
            allow_batched=True,
        )
        js.create_stream(name="PLAIN", subjects=["plain.>"])
    return jetstream_server.url


def stored_ttls(url: str, stream: str) -> list[str | None]:
    with nats_sync.connect(url) as nc:
        found = []
        for msg in nc.jetstream().stream(stream).get_msgs(1):
            value = (msg.headers or {}).get("Nats-TTL")
            found.append(value[0] if isinstance(value, list) else value)
        return found


def test_counter_add_and_get(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(capsys, "counter", "add", "HITS", "hits.a", "5", "-s", url) == (0, "hits.a\t5\n", "")
    assert cli(capsys, "-s", url, "counter", "add", "HITS", "hits.a", "-7")[1] == "hits.a\t-2\n"
    big = str(2**70)
    assert cli(capsys, "-s", url, "counter", "add", "HITS", "hits.b.c", big)[1] == (
        f"hits.b.c\t{big}\n"
    )
    status, out, err = cli(capsys, "-s", url, "counter", "get", "HITS", "hits.a", "hits.b.c")
    assert status == 0, err
    assert out.splitlines() == ["hits.a\t-2", f"hits.b.c\t{big}"]
    assert cli(capsys, "-s", url, "counter", "get", "HITS", "hits.>")[1].splitlines() == [
        "hits.a\t-2",
        f"hits.b.c\t{big}",
    ]
    assert cli(capsys, "-s", url, "counter", "get", "HITS", "hits.zzz.*") == (0, "", "")


def test_counter_errors_are_one_line(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = cli(capsys, "-s", url, "counter", "get", "HITS", "hits.never")
    assert (status, out) == (1, "") and "no counter 'hits.never'" in err
    assert err.count("\n") == 1
    status, _, err = cli(capsys, "-s", url, "counter", "add", "PLAIN", "plain.a", "1")
    assert status == 1 and "not a counter stream" in err
    with pytest.raises(SystemExit) as usage:
        main(["-s", url, "counter", "add", "HITS", "hits.a", "1.5"])
    assert usage.value.code == 2
    capsys.readouterr()


def test_pub_js_ttl_on_each_mode(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(capsys, "-s", url, "pub", "ttl.a", "x", "--js", "--ttl", "60")[0] == 0
    assert (
        cli(
            capsys,
            "-s",
            url,
            "pub",
            "ttl.b",
            "x",
            "--js",
            "--ttl",
            "never",
            "--count",
            "2",
            "--atomic",
        )[0]
        == 0
    )
    assert (
        cli(
            capsys, "-s", url, "pub", "ttl.c", "x", "--js", "--ttl", "2.5", "--count", "2", "--fast"
        )[0]
        == 0
    )
    assert cli(capsys, "-s", url, "pub", "ttl.d", "x", "--js")[0] == 0
    assert stored_ttls(url, "TTL") == ["60", "never", "never", "2", "2", None]


def test_pub_ttl_errors(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = cli(capsys, "-s", url, "pub", "ttl.a", "x", "--ttl", "5")
    assert status == 1 and "--ttl needs --js" in err
    status, _, err = cli(capsys, "-s", url, "pub", "ttl.a", "x", "--js", "--ttl", "0.5")
    assert status == 1 and "ttl must be" in err and "0.5" in err
    status, _, err = cli(capsys, "-s", url, "pub", "plain.a", "x", "--js", "--ttl", "5")
    assert status == 1 and "per-message TTL is disabled" in err
    with pytest.raises(SystemExit) as usage:
        main(["-s", url, "pub", "ttl.a", "x", "--js", "--ttl", "soon"])
    assert usage.value.code == 2
    capsys.readouterr()
    assert stored_ttls(url, "TTL") == []


def test_kv_add_limit_marker_ttl(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = cli(capsys, "-s", url, "kv", "add", "marked", "--limit-marker-ttl", "5")
    assert status == 0, err
    with nats_sync.connect(url) as nc:
        kv = nc.jetstream().key_value("marked")
        assert kv.status().limit_marker_ttl == 5.0
        kv.create("k", b"v", ttl=60)  # the bucket takes per-key TTLs
    status, _, err = cli(capsys, "-s", url, "kv", "add", "bad", "--limit-marker-ttl", "0.5")
    assert status == 1 and "limit_marker_ttl" in err

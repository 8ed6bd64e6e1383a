"""The command line's ``kv`` commands against ``nats-server -js``."""

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


def test_kv_add_ls_put_get_history_del(
    jetstream_server: NatsServer, capsys: pytest.CaptureFixture[str]
) -> None:
    url = jetstream_server.url
    status, out, err = cli(
        capsys, "kv", "add", "flags", "--history", "3", "--ttl", "3600", "-s", url
    )
    assert status == 0, err
    assert "bucket flags keeps 3 value(s) per key" in out
    assert cli(capsys, "kv", "ls", "-s", url)[1] == "flags\n"
    status, out, _ = cli(capsys, "kv", "put", "flags", "dark_mode", "on", "-s", url)
    assert status == 0 and out == "dark_mode revision 1\n"
    cli(capsys, "kv", "put", "flags", "dark_mode", "off", "-s", url)
    cli(capsys, "kv", "put", "flags", "beta", "yes", "-s", url)
    assert cli(capsys, "kv", "get", "flags", "dark_mode", "-s", url)[1] == "off\n"
    assert cli(capsys, "kv", "get", "flags", "dark_mode", "--revision", "1", "-s", url)[1] == "on\n"
    assert sorted(cli(capsys, "kv", "ls", "flags", "-s", url)[1].split()) == ["beta", "dark_mode"]
    status, out, _ = cli(capsys, "kv", "del", "flags", "dark_mode", "-s", url)
    assert status == 0 and out == "dark_mode deleted\n"
    status, _, err = cli(capsys, "kv", "get", "flags", "dark_mode", "-s", url)
    assert status == 1 and "deleted" in err
    lines = cli(capsys, "kv", "history", "flags", "dark_mode", "-s", url)[1].splitlines()
    assert [line.split("\t")[:2] for line in lines] == [["1", "PUT"], ["2", "PUT"], ["4", "DEL"]]
    assert lines[0].endswith("\tdark_mode\ton")
    status, out, _ = cli(capsys, "kv", "del", "flags", "beta", "--purge", "-s", url)
    assert status == 0 and out == "beta purged\n"
    status, out, _ = cli(capsys, "kv", "del", "flags", "-s", url)
    assert status == 0 and out == "bucket flags deleted\n"
    status, _, err = cli(capsys, "kv", "get", "flags", "beta", "-s", url)
    assert status == 1 and "bucket not found" in err


def test_kv_watch_prints_current_values_and_stops_after_count(
    jetstream_server: NatsServer, capsys: pytest.CaptureFixture[str]
) -> None:
    url = jetstream_server.url
    with nats_sync.connect(url) as nc:
        kv = nc.jetstream().create_key_value(bucket="cfg")
        kv.put("a.x", b"1")
        kv.put("b", b"2")
        kv.put("a.y", b"3")
    status, out, err = cli(capsys, "kv", "watch", "cfg", "a.*", "--count", "2", "-s", url)
    assert status == 0, err
    assert [line.split("\t")[3:] for line in out.splitlines()] == [["a.x", "1"], ["a.y", "3"]]


def test_kv_bad_input(jetstream_server: NatsServer, capsys: pytest.CaptureFixture[str]) -> None:
    url = jetstream_server.url
    status, _, err = cli(capsys, "kv", "add", "bad.name", "-s", url)
    assert status != 0 and "bad.name" in err
    status, _, err = cli(capsys, "kv", "add", "big", "--history", "65", "-s", url)
    assert status != 0 and "64" in err
    cli(capsys, "kv", "add", "ok", "-s", url)
    status, _, err = cli(capsys, "kv", "put", "ok", "bad key", "v", "-s", url)
    assert status != 0 and "bad key" in err
    status, _, err = cli(capsys, "kv", "watch", "ok", "--count", "0", "-s", url)
    assert status != 0 and "--count" in err


def test_kv_update_changes_only_the_settings_given(
    jetstream_server: NatsServer, capsys: pytest.CaptureFixture[str]
) -> None:
    url = jetstream_server.url
    cli(capsys, "kv", "add", "cfg", "--history", "2", "--description", "mine", "-s", url)
    cli(capsys, "kv", "put", "cfg", "k", "v", "-s", url)
    status, out, err = cli(capsys, "kv", "update", "cfg", "--ttl", "600", "-s", url)
    assert status == 0, err
    assert out == "bucket cfg updated: keeps 2 value(s) per key, values live 600s\n"
    status, out, err = cli(capsys, "kv", "update", "cfg", "--history", "5", "-s", url)
    assert status == 0, err
    assert out == "bucket cfg updated: keeps 5 value(s) per key, values live 600s\n"
    with nats_sync.connect(url) as nc:
        kv = nc.jetstream().key_value("cfg")
        assert kv.status().config.description == "mine"  # kept: not given
        assert kv.get("k").value == b"v"
    status, _, err = cli(capsys, "kv", "update", "cfg", "-s", url)
    assert status != 0 and "--history" in err
    status, _, err = cli(capsys, "kv", "update", "missing", "--ttl", "1", "-s", url)
    assert status == 1 and "bucket not found" in err

"""The command line's ``object`` commands against ``nats-server -js``."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

import nats_sync
from nats_sync.cli import main
from nats_sync.testing import NatsServer

pytestmark = pytest.mark.timeout(60)


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = main(list(args))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_object_put_ls_info_get_rm(
    jetstream_server: NatsServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = jetstream_server.url
    data = bytes(range(256)) * 2000  # 512,000 bytes: four chunks
    source = tmp_path / "report.bin"
    source.write_bytes(data)
    status, out, err = cli(capsys, "object", "put", "files", str(source), "-s", url)
    assert status == 0, err
    assert out.startswith("stored report.bin in files: 512000 bytes in 4 chunks, SHA-256=")
    status, out, _ = cli(capsys, "object", "ls", "files", "-s", url)
    assert status == 0 and out.startswith("report.bin\t512000 bytes\t")
    status, out, _ = cli(capsys, "object", "info", "files", "report.bin", "-s", url)
    info = json.loads(out)
    assert info["size"] == 512000 and info["chunks"] == 4 and info["bucket"] == "files"
    status, out, _ = cli(capsys, "object", "info", "files", "-s", url)
    assert json.loads(out)["size"] > 512000
    target = tmp_path / "copy.bin"
    status, out, err = cli(
        capsys, "object", "get", "files", "report.bin", "-o", str(target), "-s", url
    )
    assert status == 0, err
    assert target.read_bytes() == data and "wrote 512000 bytes" in out
    with nats_sync.connect(url) as nc:  # the same object through the API
        got = nc.jetstream().object_store("files").get("report.bin")
        assert hashlib.sha256(got.data).digest() == hashlib.sha256(data).digest()
    status, out, _ = cli(capsys, "object", "rm", "files", "report.bin", "-s", url)
    assert status == 0 and "deleted" in out
    status, out, _ = cli(capsys, "object", "ls", "files", "-s", url)
    assert status == 0 and out == ""
    status, _, err = cli(
        capsys, "object", "get", "files", "report.bin", "-o", str(tmp_path / "x"), "-s", url
    )
    assert status == 1 and "deleted" in err and err.count("\n") == 1
    status, out, _ = cli(capsys, "object", "rm", "files", "-s", url)
    assert status == 0 and "bucket files deleted" in out
    status, _, err = cli(capsys, "object", "ls", "files", "-s", url)
    assert status == 1 and "no object store bucket 'files'" in err


def test_object_put_missing_file_and_bad_bucket(
    jetstream_server: NatsServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = jetstream_server.url
    status, _, err = cli(capsys, "object", "put", "files", str(tmp_path / "nope"), "-s", url)
    assert status == 1 and "nope" in err
    source = tmp_path / "a.txt"
    source.write_bytes(b"a")
    status, _, err = cli(capsys, "object", "put", "bad.bucket", str(source), "-s", url)
    assert status == 1 and "bucket name" in err


def test_object_link_to_an_object_and_to_a_bucket(
    jetstream_server: NatsServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = jetstream_server.url
    source = tmp_path / "a.txt"
    source.write_bytes(b"hello")
    cli(capsys, "object", "put", "files", str(source), "-s", url)
    cli(capsys, "object", "put", "other", str(source), "--name", "b.txt", "-s", url)
    status, out, err = cli(capsys, "object", "link", "files", "alias", "other", "b.txt", "-s", url)
    assert status == 0, err
    assert out == "link alias in files to object b.txt in other\n"
    status, out, err = cli(capsys, "object", "link", "files", "dir", "other", "-s", url)
    assert status == 0 and out == "link dir in files to bucket other\n", err
    target = tmp_path / "copy.txt"
    status, out, err = cli(capsys, "object", "get", "files", "alias", "-o", str(target), "-s", url)
    assert status == 0 and target.read_bytes() == b"hello", err
    lines = cli(capsys, "object", "ls", "files", "-s", url)[1].splitlines()
    assert [line.split("\t")[:2] for line in lines] == [
        ["a.txt", "5 bytes"],
        ["alias", "link to object b.txt in other"],
        ["dir", "link to bucket other"],
    ]
    status, _, err = cli(capsys, "object", "link", "files", "a.txt", "other", "b.txt", "-s", url)
    assert status == 1 and "an object of that name exists" in err
    status, _, err = cli(capsys, "object", "get", "files", "dir", "-o", str(target), "-s", url)
    assert status == 1 and "link to the bucket 'other'" in err

"""``nats-sync cg static|elastic create|consume|add|drop|map|unmap|ls|rm|step-down`` (as
orbit.go's ``cg``) against a real ``nats-server -js``."""

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
            name="S",
            subjects=["foo.*"],
            subject_transform={"src": "foo.*", "dest": "{{partition(2,1)}}.foo.{{wildcard(1)}}"},
        )
        js.create_stream(name="E", subjects=["bar.*"])
        for n in range(6):
            js.publish(f"foo.k{n}", b"%d" % n)
    return jetstream_server.url


def test_static_create_ls_consume_rm(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        cli(capsys, "-s", url, "cg", "static", "create", "S", "cg", "2", "m1", "--filter", "foo.*")[
            1
        ]
        == "created static group cg on S\n"
    )
    assert cli(capsys, "-s", url, "cg", "static", "ls", "S")[1] == "cg\n"
    assert cli(capsys, "-s", url, "cg", "static", "ls", "S", "cg")[1] == (
        "max members: 2\nfilters: foo.*\nmembers: m1\n"
    )
    status, out, _ = cli(
        capsys, "-s", url, "cg", "static", "consume", "S", "cg", "m1", "--count", "6"
    )
    lines = [line.split("\t") for line in out.splitlines()]
    assert status == 0 and sorted(int(line[3]) for line in lines) == list(range(6))
    assert {line[0] for line in lines} == {"m1"}
    assert all(line[1] == f"foo.k{line[3]}" for line in lines)  # no partition number
    assert cli(capsys, "-s", url, "cg", "static", "step-down", "S", "cg", "m1")[0] == 0
    assert cli(capsys, "-s", url, "cg", "static", "rm", "S", "cg")[0] == 0
    assert cli(capsys, "-s", url, "cg", "static", "ls", "S")[1] == "no static groups on S\n"


def test_elastic_create_add_drop_map(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        cli(
            capsys,
            "-s",
            url,
            "cg",
            "elastic",
            "create",
            "E",
            "cg",
            "4",
            "--filter",
            "bar.*",
            "--wildcard",
            "1",
        )[0]
        == 0
    )
    assert cli(capsys, "-s", url, "cg", "elastic", "add", "E", "cg", "b", "a")[1] == (
        "members: a b\n"
    )
    assert cli(capsys, "-s", url, "cg", "elastic", "drop", "E", "cg", "a")[1] == "members: b\n"
    assert cli(capsys, "-s", url, "cg", "elastic", "map", "E", "cg", "x:0,1", "y:2,3")[1] == (
        "members: x y\n"
    )
    assert cli(capsys, "-s", url, "cg", "elastic", "ls", "E", "cg")[1] == (
        "max members: 4\nfilter: bar.* wildcards [1]\nmapping: x [0, 1]\nmapping: y [2, 3]\n"
        "members: x y\n"
    )
    status, _, err = cli(capsys, "-s", url, "cg", "elastic", "map", "E", "cg", "x:0")
    assert status == 1 and "leave partitions [1, 2, 3] to nobody" in err
    status, _, err = cli(capsys, "-s", url, "cg", "elastic", "add", "E", "nope", "m")
    assert status == 1 and "no elastic consumer group 'nope'" in err
    assert cli(capsys, "-s", url, "cg", "elastic", "unmap", "E", "cg")[0] == 0
    assert cli(capsys, "-s", url, "cg", "elastic", "rm", "E", "cg")[0] == 0

"""The command line's ``service ls|info|stats`` against services on a real nats-server."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

import nats_sync
from nats_sync import micro
from nats_sync.cli import main
from nats_sync.testing import NatsServer

pytestmark = pytest.mark.timeout(30)

ClientFactory = Callable[..., nats_sync.Client]


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = main(list(args))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_service_ls_info_stats(
    nats_server: NatsServer, connect: ClientFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    url = nats_server.url
    nc = connect()
    first = micro.add_service(nc, "lookup", "1.0.0", description="finds things")
    first.add_endpoint("get", lambda req: req.respond(b"v"))
    second = micro.add_service(connect(), "lookup", "1.0.0", description="finds things")
    second.add_endpoint("get", lambda req: req.respond(b"v"))
    other = micro.add_service(nc, "prices", "2.1.0")
    other.add_endpoint("quote", lambda req: req.respond_error(404, "no such product"))
    assert nc.request("get", b"", timeout=5).data == b"v"
    nc.request("quote", b"", timeout=5)

    status, out, err = cli(capsys, "service", "ls", "-s", url)
    assert status == 0, err
    lines = out.splitlines()
    assert len(lines) == 3
    assert sorted(line.split("\t")[2] for line in lines[:2]) == sorted([first.id, second.id])
    assert lines[0].startswith("lookup\t1.0.0\t") and lines[0].endswith(
        "\t1 endpoints\tfinds things"
    )
    assert lines[2] == f"prices\t2.1.0\t{other.id}\t1 endpoints\t"

    status, out, _ = cli(capsys, "service", "info", "prices", "-s", url)
    [info] = [json.loads(line) for line in out.splitlines()]
    assert info["type"] == "io.nats.micro.v1.info_response"
    assert info["endpoints"][0]["subject"] == "quote"

    status, out, _ = cli(capsys, "-s", url, "service", "stats", "lookup", first.id)
    assert status == 0
    [line] = out.splitlines()
    fields = line.split("\t")
    assert fields[:4] == ["lookup", first.id, "get", "get"]
    total = sum(s.stats().endpoints[0].num_requests for s in (first, second))
    assert total == 1 and fields[4] in ("0 requests", "1 requests")

    status, out, _ = cli(capsys, "service", "stats", "prices", "-s", url)
    assert out.splitlines()[0].endswith(
        "1 requests\t1 errors\taverage "
        + out.split("average ")[1].split("\t")[0]
        + "\tlast error 404:no such product"
    )

    status, out, _ = cli(capsys, "service", "ls", "nothing", "-s", url, "--timeout", "0.5")
    assert status == 0 and out == "no services found\n"
    status, _, err = cli(capsys, "service", "info", "bad name!", "-s", url)
    assert status == 1 and "service name" in err
    for svc in (first, second, other):
        svc.stop()

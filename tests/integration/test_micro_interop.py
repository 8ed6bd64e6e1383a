"""nats_sync.micro and nats-py's nats.micro (2.x) see each other: nats-py reads our
discovery answers with its own record classes and calls our endpoints; our discovery
and check() read a nats-py service. nats-py's nats.micro has no discovery client, so
the nats-py side asks with plain requests and decodes with its ``from_dict``."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import nats
import nats.micro
import pytest
from nats.micro.request import Request as PyRequest
from nats.micro.service import ServiceInfo as PyInfo
from nats.micro.service import ServicePing as PyPing
from nats.micro.service import ServiceStats as PyStats

import nats_sync
from nats_sync import micro
from nats_sync.micro import Request, ServiceError
from nats_sync.testing import NatsServer

pytestmark = pytest.mark.timeout(30)

ClientFactory = Callable[..., nats_sync.Client]


class AsyncioThread:
    """An asyncio loop on a thread of its own, for nats-py."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(
            target=self.loop.run_forever, name="test-asyncio", daemon=True
        )
        self.thread.start()

    def run(self, coro: Any, timeout: float = 10) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()


@pytest.fixture
def aio() -> Iterator[AsyncioThread]:
    runner = AsyncioThread()
    yield runner
    runner.stop()


# A str code as nats-py's respond_error takes it (issue 24) reaches nats-py as the int does.
@pytest.mark.parametrize("code", [422, "422"])
def test_nats_py_reads_our_discovery_and_calls_our_endpoints(
    nats_server: NatsServer, connect: ClientFactory, aio: AsyncioThread, code: int | str
) -> None:
    svc = micro.add_service(
        connect(), "ours", "1.4.2", description="sync side", metadata={"lang": "python-sync"}
    )

    def handler(req: Request) -> None:
        if req.data == b"bad":
            req.respond_error(code, "unprocessable")
        else:
            req.respond(req.data[::-1])

    svc.add_group("g").add_endpoint("rev", handler, metadata={"e": "1"})

    async def ask() -> dict[str, Any]:
        nc = await nats.connect(nats_server.url)
        try:
            ok = await nc.request("g.rev", b"abc", timeout=5)
            bad = await nc.request("g.rev", b"bad", timeout=5)
            ping = await nc.request("$SRV.PING.ours", b"", timeout=5)
            info = await nc.request(f"$SRV.INFO.ours.{svc.id}", b"", timeout=5)
            stats = await nc.request("$SRV.STATS", b"", timeout=5)
            return {
                "ok": ok.data,
                "bad": (bad.headers, bad.data),
                "ping": PyPing.from_dict(json.loads(ping.data)),
                "info": PyInfo.from_dict(json.loads(info.data)),
                "stats": PyStats.from_dict(json.loads(stats.data)),
            }
        finally:
            await nc.close()

    got = aio.run(ask())
    assert got["ok"] == b"cba"
    headers, _ = got["bad"]
    assert headers["Nats-Service-Error"] == "unprocessable"
    assert headers["Nats-Service-Error-Code"] == "422"
    ping, info, stats = got["ping"], got["info"], got["stats"]
    assert (ping.name, ping.id, ping.version, ping.type) == (
        "ours",
        svc.id,
        "1.4.2",
        "io.nats.micro.v1.ping_response",
    )
    assert info.description == "sync side" and info.metadata == {"lang": "python-sync"}
    assert [(e.name, e.subject, e.queue_group, e.metadata) for e in info.endpoints] == [
        ("rev", "g.rev", "q", {"e": "1"})
    ]
    assert stats.endpoints[0].num_requests == 2 and stats.endpoints[0].num_errors == 1
    assert stats.endpoints[0].last_error == "422:unprocessable"
    assert stats.started.year >= 2024
    svc.stop()


def test_our_discovery_sees_a_nats_py_service(
    nats_server: NatsServer, connect: ClientFactory, aio: AsyncioThread
) -> None:
    async def handler(req: PyRequest) -> None:
        if req.data == b"bad":
            await req.respond_error("409", "conflict", data=b"d")
        else:
            await req.respond(b"py:" + req.data)

    async def start() -> tuple[Any, Any]:
        nc = await nats.connect(nats_server.url)
        service = await nats.micro.add_service(
            nc,
            name="theirs",
            version="3.1.4",
            description="asyncio side",
            metadata={"lang": "asyncio"},
        )
        await service.add_group(name="py").add_endpoint(name="echo", handler=handler)
        await nc.flush()
        return nc, service

    py_nc, py_service = aio.run(start())
    try:
        nc = connect()
        assert micro.check(nc.request("py.echo", b"x", timeout=5)).data == b"py:x"
        with pytest.raises(ServiceError) as caught:
            micro.check(nc.request("py.echo", b"bad", timeout=5))
        assert (caught.value.code, caught.value.description) == (409, "conflict")
        [ping] = micro.ping(nc, "theirs")
        assert (ping.version, ping.metadata) == ("3.1.4", {"lang": "asyncio"})
        [info] = micro.info(nc, "theirs", ping.id)
        assert info.description == "asyncio side"
        assert [(e.name, e.subject, e.queue_group) for e in info.endpoints] == [
            ("echo", "py.echo", "q")
        ]
        [stats] = micro.stats(nc)
        # nats-py counts only raising handlers as errors, not respond_error.
        assert stats.name == "theirs" and stats.endpoints[0].num_requests == 2
    finally:

        async def stop() -> None:
            await py_service.stop()
            await py_nc.close()

        aio.run(stop())

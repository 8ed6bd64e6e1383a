"""request_many (ADR-47) against a real nats-server: gathering, each ending rule, no
responders, early exits freeing the request, many threads at once, a nats-py responder."""

from __future__ import annotations

import asyncio
import gc
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import nats
import pytest

import nats_sync
from nats_sync.msg import Msg
from nats_sync.testing import NatsServer

pytestmark = pytest.mark.timeout(30)

ClientFactory = Callable[..., nats_sync.Client]


def _responders(connect: ClientFactory, subject: str, count: int) -> nats_sync.Client:
    """``count`` subscribers on ``subject``, each answering ``<its index>:<data>``."""
    nc = connect()
    for index in range(count):
        nc.subscribe(subject, cb=lambda msg, i=index: msg.respond(f"{i}:".encode() + msg.data))
    nc.flush(5)
    return nc


def _snapshot(nc: nats_sync.Client) -> dict[str, Any]:
    return nc._handler.debug_snapshot()


def test_gathers_every_responders_reply(client: nats_sync.Client, connect: ClientFactory) -> None:
    _responders(connect, "svc.all", 5)

    start = time.monotonic()
    replies = [msg.data for msg in client.request_many("svc.all", b"q", timeout=0.5)]
    elapsed = time.monotonic() - start

    assert sorted(replies) == [f"{i}:q".encode() for i in range(5)]
    assert 0.45 <= elapsed < 2, f"the total timeout ended it after {elapsed:.2f}s"
    assert _snapshot(client)["requests_in_flight"] == 0


def test_max_messages_ends_at_that_count_at_once(
    client: nats_sync.Client, connect: ClientFactory
) -> None:
    _responders(connect, "svc.max", 4)

    start = time.monotonic()
    replies = list(client.request_many("svc.max", b"q", timeout=5, max_messages=2))

    assert len(replies) == 2
    assert time.monotonic() - start < 2, "it waited for the timeout after the 2nd reply"
    assert _snapshot(client)["requests_in_flight"] == 0


def test_stall_ends_after_the_gap_but_not_before_the_first_reply(
    client: nats_sync.Client, connect: ClientFactory
) -> None:
    responder = connect()

    def slow_then_quick(msg: Msg) -> None:
        time.sleep(0.4)  # longer than the stall: the stall only counts after a reply
        for n in range(3):
            responder.publish(msg.reply, str(n).encode())
        responder.publish("svc.stall.done", b"")

    responder.subscribe("svc.stall", cb=slow_then_quick)
    responder.flush(5)

    start = time.monotonic()
    replies = [msg.data for msg in client.request_many("svc.stall", timeout=5, stall=0.2)]
    elapsed = time.monotonic() - start

    assert replies == [b"0", b"1", b"2"]
    assert 0.55 <= elapsed < 2.5, f"ended after {elapsed:.2f}s (0.4 s + the 0.2 s stall)"


def test_sentinel_ends_and_is_not_yielded(client: nats_sync.Client, connect: ClientFactory) -> None:
    responder = connect()

    def stream_then_end(msg: Msg) -> None:
        for part in (b"a", b"b", b"", b"after"):
            responder.publish(msg.reply, part)

    responder.subscribe("svc.parts", cb=stream_then_end)
    responder.flush(5)

    start = time.monotonic()
    replies = [
        m.data for m in client.request_many("svc.parts", timeout=5, sentinel=lambda m: not m.data)
    ]

    assert replies == [b"a", b"b"]
    assert time.monotonic() - start < 2
    # Without a sentinel the empty reply is an ordinary reply.
    everything = [m.data for m in client.request_many("svc.parts", timeout=5, max_messages=4)]
    assert everything == [b"a", b"b", b"", b"after"]


def test_no_responders_raises_from_the_first_next(client: nats_sync.Client) -> None:
    replies = client.request_many("nobody.here", b"q", timeout=5)
    start = time.monotonic()
    with pytest.raises(nats_sync.NoRespondersError):
        next(replies)
    assert time.monotonic() - start < 2
    assert list(replies) == []  # over
    assert _snapshot(client)["requests_in_flight"] == 0


def test_bad_arguments_are_refused_by_name(client: nats_sync.Client) -> None:
    for kwargs, name in (
        ({"timeout": -1}, "timeout"),
        ({"timeout": 0}, "timeout"),
        ({"max_messages": 0}, "max_messages"),
        ({"max_messages": True}, "max_messages"),
        ({"stall": -0.5}, "stall"),
        ({"stall": float("nan")}, "stall"),
    ):
        with pytest.raises(nats_sync.InvalidArgumentError, match=name):
            client.request_many("svc.x", b"", **kwargs)
    with pytest.raises(TypeError, match="sentinel"):
        client.request_many("svc.x", b"", sentinel=b"")  # type: ignore[arg-type]
    with pytest.raises(nats_sync.BadSubjectError):
        client.request_many("bad subject", b"")
    assert _snapshot(client)["requests_in_flight"] == 0


def test_early_exits_free_the_request_and_late_replies_are_dropped(
    client: nats_sync.Client, connect: ClientFactory
) -> None:
    _responders(connect, "svc.many", 3)

    for _ in range(200):  # break out of the loop
        for _msg in client.request_many("svc.many", b"q", timeout=5):
            break
    for _ in range(50):  # an exception out of the loop
        with pytest.raises(KeyError):
            for _msg in client.request_many("svc.many", b"q", timeout=5):
                raise KeyError("mine")
    kept = client.request_many("svc.many", b"q", timeout=5)
    next(kept)
    del kept  # garbage collection
    gc.collect()
    with client.request_many("svc.many", b"q", timeout=5) as replies:
        next(replies)
    client.flush(5)
    time.sleep(0.1)
    client.flush(5)

    snapshot = _snapshot(client)
    assert snapshot["requests_in_flight"] == 0, "an abandoned request stayed in the mux"
    # Each left 2 replies behind, at most (some may have come before the exit).
    assert 0 < snapshot["late_replies"] <= 2 * 252
    assert len(list(client.request_many("svc.many", b"q", timeout=0.3))) == 3


def test_the_client_closing_ends_the_iteration_with_an_error(
    nats_server: NatsServer, connect: ClientFactory
) -> None:
    nc = nats_sync.connect(nats_server.url)
    _responders(connect, "svc.close", 1)
    replies = nc.request_many("svc.close", b"q", timeout=5)
    assert next(replies).data == b"0:q"
    nc.close()
    with pytest.raises(nats_sync.ConnectionClosedError):
        next(replies)


def test_many_threads_at_once_each_get_only_their_own_replies(
    client: nats_sync.Client, connect: ClientFactory
) -> None:
    _responders(connect, "svc.threads", 3)
    errors: list[BaseException] = []
    rounds = 20

    def worker(name: int) -> None:
        try:
            for n in range(rounds):
                body = f"{name}.{n}".encode()
                got = sorted(
                    m.data
                    for m in client.request_many("svc.threads", body, timeout=5, max_messages=3)
                )
                assert got == [f"{i}:".encode() + body for i in range(3)], got
        except BaseException as err:  # reported by the main thread
            errors.append(err)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    assert not any(thread.is_alive() for thread in threads)
    assert errors == []
    assert _snapshot(client)["requests_in_flight"] == 0


@pytest.fixture
def aio() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="test-asyncio", daemon=True)
    thread.start()
    yield loop
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)
    loop.close()


def test_nats_py_responders_answer(
    nats_server: NatsServer, client: nats_sync.Client, aio: asyncio.AbstractEventLoop
) -> None:
    async def serve() -> Any:
        nc = await nats.connect(nats_server.url)

        async def answer(msg: Any) -> None:
            await msg.respond(b"py1:" + msg.data)
            await msg.respond(b"py2:" + msg.data)
            await msg.respond(b"")

        await nc.subscribe("svc.py", cb=answer)
        await nc.flush()
        return nc

    py_client = asyncio.run_coroutine_threadsafe(serve(), aio).result(10)
    try:
        replies = [
            m.data
            for m in client.request_many("svc.py", b"hi", timeout=5, sentinel=lambda m: not m.data)
        ]
        assert replies == [b"py1:hi", b"py2:hi"]
    finally:
        asyncio.run_coroutine_threadsafe(py_client.close(), aio).result(10)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "nats_sync", *args],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_cli_req_gathers_replies(nats_server: NatsServer, connect: ClientFactory) -> None:
    _responders(connect, "cli.many", 3)

    done = _cli("--server", nats_server.url, "req", "cli.many", "hi", "--stall", "0.3")
    assert done.returncode == 0, done.stderr
    assert all(f"{i}:hi" in done.stdout for i in range(3)), done.stdout
    assert "(3 replies in" in done.stdout

    two = _cli("--server", nats_server.url, "req", "cli.many", "hi", "--replies", "2")
    assert two.returncode == 0, two.stderr
    assert "(2 replies in" in two.stdout

    nobody = _cli("--server", nats_server.url, "req", "cli.nobody", "--replies", "5")
    assert nobody.returncode == 1 and "no responders" in nobody.stderr
    assert "Traceback" not in nobody.stderr
    bad = _cli("--server", nats_server.url, "req", "cli.many", "--replies", "0")
    assert bad.returncode == 1 and "--replies" in bad.stderr

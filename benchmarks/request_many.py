"""The request-many case: one request, a reply from each of N responders, gathered.

How it works: the worker (either client's) starts N raw echo responders
(``benchmarks.responder``, child processes) on a subject carrying its pid, so no other
responder answers. Each request is then gathered until its N replies came:
nats_sync with ``nc.request_many(..., max_messages=N)`` on its shared request inbox;
nats-py the way it is done there without a helper (as orbit.py's ``nats-extra``
does): a subscription on a fresh inbox, the publish, ``next_msg`` until N replies,
then unsubscribe. Requests run one after another; the headline is replies gathered per
second. The responders are stopped on the way out.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from benchmarks import common as c
from benchmarks.procs import Responder

Metrics = dict[str, Any]


@contextmanager
def _responders(url: str, count: int) -> Iterator[str]:
    """``count`` echo responders on a subject of this worker's own; yields it."""
    subject = f"bench.many.{os.getpid()}"
    started: list[Responder] = []
    try:
        for _ in range(count):
            started.append(Responder(url, subject=subject))
        yield subject
    finally:
        for responder in started:
            responder.stop()


def _metrics(requests: int, gathered: int, responders: int, watch: c.Stopwatch) -> Metrics:
    return {
        "replies_per_s": gathered / watch.wall,
        "reqs_per_s": requests / watch.wall,
        "cpu_us_per_reply": watch.cpu / max(gathered, 1) * 1e6,
        "errors": requests * responders - gathered,
        "elapsed_s": watch.wall,
    }


def drive_sync(url: str, size: int, count: int, responders: int, warmup: int) -> Metrics:
    """nats_sync: ``request_many`` with ``max_messages=responders``, ``count`` times."""
    import nats_sync  # noqa: PLC0415 - each worker imports only its own client

    data = c.payload(size)
    with _responders(url, responders) as subject, nats_sync.connect(url) as nc:
        many = nc.request_many
        for _ in range(warmup):
            for _msg in many(subject, data, timeout=c.REQUEST_TIMEOUT, max_messages=responders):
                pass
        gathered = 0
        watch = c.Stopwatch().start()
        for _ in range(count):
            for _msg in many(subject, data, timeout=c.REQUEST_TIMEOUT, max_messages=responders):
                gathered += 1
        watch.stop()
    return _metrics(count, gathered, responders, watch)


def drive_natspy(url: str, size: int, count: int, responders: int, warmup: int) -> Metrics:
    """nats-py: a subscription on a fresh inbox per request, ``count`` times."""
    return asyncio.run(_natspy(url, size, count, responders, warmup))


async def _natspy(url: str, size: int, count: int, responders: int, warmup: int) -> Metrics:
    import nats  # noqa: PLC0415 - each worker imports only its own client
    from nats.errors import TimeoutError as NatsTimeoutError  # noqa: PLC0415

    data = c.payload(size)
    with _responders(url, responders) as subject:
        nc = await nats.connect(url)

        async def gather() -> int:
            inbox = nc.new_inbox()
            sub = await nc.subscribe(inbox)
            got = 0
            try:
                await nc.publish(subject, data, reply=inbox)
                while got < responders:
                    await sub.next_msg(timeout=c.REQUEST_TIMEOUT)
                    got += 1
            except NatsTimeoutError:
                pass
            finally:
                await sub.unsubscribe()
            return got

        for _ in range(warmup):
            await gather()
        gathered = 0
        watch = c.Stopwatch().start()
        for _ in range(count):
            gathered += await gather()
        watch.stop()
        await nc.close()
    return _metrics(count, gathered, responders, watch)

"""The reconnect loop with an injected sleep and random source (connects to a dead port)."""

from __future__ import annotations

import random
import socket
import threading

import pytest
import tenacity

import nats_sync
from nats_sync._core.components.reconnect import reconnect
from nats_sync._core.transport.options import build_options
from nats_sync._core.transport.pool import ServerPool, reconnect_wait

pytestmark = pytest.mark.timeout(30)


def _dead_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"nats://127.0.0.1:{sock.getsockname()[1]}"


def _expected_waits(base: float, jitter: float, seed: int, count: int) -> list[float]:
    wait = reconnect_wait(base, jitter, random.Random(seed))
    state = tenacity.RetryCallState(retry_object=tenacity.Retrying(), fn=None, args=(), kwargs={})
    waits = []
    for attempt in range(1, count + 1):
        state.attempt_number = attempt
        waits.append(wait(state))
    return waits


def test_passes_wait_by_the_backoff_then_the_pool_runs_out() -> None:
    options = build_options(
        _dead_url(), max_reconnect_attempts=3, reconnect_time_wait=0.5, connect_timeout=1.0
    )
    pool = ServerPool(options.servers, rng=random.Random(1))
    slept: list[float] = []
    with pytest.raises(nats_sync.NoServersError):
        reconnect(
            pool,
            options,
            threading.Lock(),
            random.Random(42),
            lost=None,
            is_closed=lambda: False,
            sleep=slept.append,
            report_error=lambda e: None,
        )
    # Three passes over the one server, an exponential wait (plus jitter) between them.
    assert slept == _expected_waits(0.5, 0.1, 42, 2)
    assert 0.5 <= slept[0] <= 0.6 and 1.0 <= slept[1] <= 1.1
    assert len(pool) == 0


def test_a_closed_client_stops_the_loop_at_once() -> None:
    options = build_options(_dead_url(), max_reconnect_attempts=-1, connect_timeout=1.0)
    pool = ServerPool(options.servers)
    closed = threading.Event()
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        closed.set()  # the user closes the client during the first wait

    with pytest.raises(nats_sync.ConnectionClosedError):
        reconnect(
            pool,
            options,
            threading.Lock(),
            random.Random(),
            lost=None,
            is_closed=closed.is_set,
            sleep=sleep,
            report_error=lambda e: None,
        )
    assert len(slept) == 1
    assert len(pool) == 1  # -1: the server never leaves the pool

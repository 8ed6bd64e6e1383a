"""The server pool and the reconnect backoff, with an injected random source."""

from __future__ import annotations

import random

import pytest
import tenacity

from nats_sync._core.transport.pool import (
    ServerAddress,
    ServerPool,
    parse_server_url,
    reconnect_wait,
)
from nats_sync.errors import Error


@pytest.mark.parametrize(
    ("url", "scheme", "host", "port"),
    [
        ("nats://demo.nats.io:4222", "nats", "demo.nats.io", 4222),
        ("nats://demo.nats.io", "nats", "demo.nats.io", 4222),
        ("demo.nats.io:4333", "nats", "demo.nats.io", 4333),
        ("127.0.0.1", "nats", "127.0.0.1", 4222),
        ("tls://secure:4443", "tls", "secure", 4443),
        ("tls://secure", "tls", "secure", 4222),
        ("ws://web", "ws", "web", 80),
        ("wss://web", "wss", "web", 443),
        ("nats://[::1]:4555", "nats", "::1", 4555),
        ("[::1]", "nats", "::1", 4222),
        (" NATS://Host:1 ", "nats", "host", 1),
    ],
)
def test_urls_parse_with_default_ports(url: str, scheme: str, host: str, port: int) -> None:
    server = parse_server_url(url)
    assert (server.scheme, server.host, server.port) == (scheme, host, port)


def test_credentials_in_urls_are_kept_and_redacted() -> None:
    with_password = parse_server_url("nats://alice:s%40cret@host:4222")
    assert (with_password.user, with_password.password) == ("alice", "s@cret")
    assert with_password.redacted_url == "nats://alice:***@host:4222"
    with_token = parse_server_url("nats://t0ken@host")
    assert (with_token.token, with_token.user) == ("t0ken", None)
    assert "t0ken" not in repr(with_token) and "t0ken" not in str(with_token)
    assert parse_server_url("nats://[::1]:5").netloc == "[::1]:5"


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("", "non-empty"),
        ("http://host", "unknown scheme"),
        ("nats://host:notaport", "bad server URL"),
        ("nats://:4222", "no host"),
        ("nats://user:secret@host:99999", "bad server URL"),
    ],
)
def test_bad_urls_are_refused_without_showing_secrets(url: str, words: str) -> None:
    with pytest.raises(Error, match=words) as caught:
        parse_server_url(url)
    assert "secret" not in str(caught.value)


def _names(servers: list[ServerAddress]) -> list[str]:
    return [server.host for server in servers]


URLS = ["nats://a:1", "nats://b:1", "nats://c:1", "nats://d:1"]


def test_dont_randomize_keeps_the_given_order() -> None:
    pool = ServerPool(URLS, randomize=False)
    assert _names(list(pool.servers)) == ["a", "b", "c", "d"]
    assert _names(pool.attempt_order()) == ["a", "b", "c", "d"]


def test_the_shuffle_comes_from_the_injected_random_source() -> None:
    first = ServerPool(URLS, rng=random.Random(7))
    second = ServerPool(URLS, rng=random.Random(7))
    assert _names(list(first.servers)) == _names(list(second.servers))
    orders = {
        tuple(_names(ServerPool(URLS, rng=random.Random(s)).attempt_order())) for s in range(20)
    }
    assert len(orders) > 1  # different seeds give different orders


def test_attempt_order_puts_fewest_failures_first_and_the_lost_server_last() -> None:
    pool = ServerPool(URLS, randomize=False)
    a, b, c, _ = pool.servers
    pool.record_failure(a)
    pool.record_failure(a)
    pool.record_failure(c)
    assert _names(pool.attempt_order()) == ["b", "d", "c", "a"]
    assert _names(pool.attempt_order(last=b)) == ["d", "c", "a", "b"]
    pool.record_success(a)
    assert pool.failures(a) == 0
    assert _names(pool.attempt_order()) == ["a", "b", "d", "c"]


def test_servers_that_failed_max_attempts_in_a_row_leave_the_pool() -> None:
    pool = ServerPool(URLS[:2], randomize=False)
    a, b = pool.servers
    for _ in range(3):
        pool.record_failure(a)
    pool.record_failure(b)
    assert pool.remove_exhausted(-1) == []  # forever: nobody leaves
    assert pool.remove_exhausted(3) == [a]
    assert _names(list(pool.servers)) == ["b"]
    assert pool.remove_exhausted(1) == [b]
    assert len(pool) == 0


def test_discovered_servers_take_scheme_credentials_and_tls_name_of_their_source() -> None:
    pool = ServerPool(["tls://user:pw@nats.example.com:4443"], randomize=False)
    (origin,) = pool.servers
    added = pool.add_discovered(
        [
            "10.0.0.2:4443",
            "10.0.0.3:4443",
            "nats.example.com:4443",
            "10.0.0.2:4443",
            42,
            "bad host:x",
        ],
        via=origin,
    )
    assert [server.netloc for server in added] == ["10.0.0.2:4443", "10.0.0.3:4443"]
    for server in added:
        assert server.discovered and server.scheme == "tls"
        assert (server.user, server.password) == ("user", "pw")
        assert server.tls_name == "nats.example.com"
    assert pool.discovered == added
    assert pool.add_discovered(["10.0.0.3:4443"], via=origin) == []  # already known


def test_ignore_discovered_servers_adds_nothing() -> None:
    pool = ServerPool(URLS[:1], ignore_discovered=True)
    assert pool.add_discovered(["x:1"], via=pool.servers[0]) == []
    assert len(pool) == 1


def _wait_after(wait: tenacity.wait.wait_base, failed_passes: int) -> float:
    state = tenacity.RetryCallState(retry_object=tenacity.Retrying(), fn=None, args=(), kwargs={})
    state.attempt_number = failed_passes
    return float(wait(state))


def test_backoff_is_exponential_from_the_base_capped_with_jitter() -> None:
    wait = reconnect_wait(base=0.5, jitter=0.0, rng=random.Random(1))
    assert [_wait_after(wait, n) for n in range(1, 7)] == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    big_base = reconnect_wait(base=10.0, jitter=0.0, rng=random.Random(1))
    assert _wait_after(big_base, 3) == 10.0  # the cap never undercuts the base


def test_jitter_is_bounded_and_reproducible() -> None:
    first = [_wait_after(reconnect_wait(0.1, 1.0, random.Random(3)), 1) for _ in range(3)]
    waits = [_wait_after(reconnect_wait(0.1, 1.0, random.Random(3)), 1) for _ in range(3)]
    assert first == waits  # same seed, same jitter
    rng = random.Random(5)
    wait = reconnect_wait(0.1, 1.0, rng)
    samples = [_wait_after(wait, 1) for _ in range(200)]
    assert all(0.1 <= sample <= 1.1 for sample in samples)
    assert max(samples) - min(samples) > 0.5  # it does vary


def test_reconnect_delay_cb_replaces_the_default() -> None:
    calls: list[int] = []

    def delay(attempt: int) -> float:
        calls.append(attempt)
        return attempt * 0.25 if attempt < 3 else -1.0

    wait = reconnect_wait(2.0, 1.0, random.Random(), delay_cb=delay)
    assert [_wait_after(wait, n) for n in (1, 2, 3)] == [0.25, 0.5, 0.0]  # negative -> 0
    assert calls == [1, 2, 3]

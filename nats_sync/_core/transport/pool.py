"""Server URLs, the server pool and the reconnect backoff.

How it works: pure code, no sockets, no clock, no global random state: the random
source is injected so tests control it. ``parse_server_url`` turns each URL the user
gives into a :class:`ServerAddress`; :class:`ServerPool` keeps them, adds servers a
cluster announces in INFO ``connect_urls``, counts failed attempts, and orders each pass
(shuffled unless told not to, then fewest failures first, the server just lost last).
:func:`reconnect_wait` is the tenacity wait between passes. Used by the connecting
thread and the reconnect thread, under the handler's lock where it changes. Secrets in
URLs are kept for CONNECT and shown as ``***`` everywhere else.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import ParseResult, unquote, urlparse, urlsplit

import tenacity

from nats_sync._defaults import DEFAULT_PORT, MAX_RECONNECT_DELAY
from nats_sync.errors import InvalidArgumentError

_DEFAULT_PORTS = {"nats": DEFAULT_PORT, "tls": DEFAULT_PORT, "ws": 80, "wss": 443}


@dataclass(frozen=True)
class ServerAddress:
    """One server of the pool, parsed from its URL."""

    scheme: str
    host: str
    port: int
    user: str | None = field(default=None, repr=False)
    password: str | None = field(default=None, repr=False)
    token: str | None = field(default=None, repr=False)
    discovered: bool = False
    #: For a discovered server: the host of the URL it was learned through, which TLS
    #: verifies the certificate against (cluster members often announce bare IPs).
    tls_name: str | None = None

    @property
    def tls_required(self) -> bool:
        """Whether the URL itself asks for TLS (``tls://`` or ``wss://``)."""
        return self.scheme in ("tls", "wss")

    @property
    def is_websocket(self) -> bool:
        """Whether the URL is ``ws://`` or ``wss://``."""
        return self.scheme in ("ws", "wss")

    @property
    def netloc(self) -> str:
        """``host:port``, with brackets around an IPv6 host."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    @property
    def redacted_url(self) -> str:
        """The URL with any password or token replaced by ``***``."""
        if self.user is not None:
            credentials = f"{self.user}:***@" if self.password is not None else f"{self.user}@"
        elif self.token is not None:
            credentials = "***@"
        else:
            credentials = ""
        return f"{self.scheme}://{credentials}{self.netloc}"

    def __str__(self) -> str:
        return self.redacted_url

    def __repr__(self) -> str:
        return f"ServerAddress({self.redacted_url!r})"


@dataclass(frozen=True)
class Server:
    """One server of the pool as nats-py shows it (``nc.server_pool``, and what
    ``reconnect_to_server_handler`` gets and returns).

    Attributes:
        uri: the server's URL, parsed (``uri.hostname``, ``uri.port``, ``uri.scheme``);
            a password or token in it is shown as ``***``.
        reconnects: failed attempts on it since it last connected.
    """

    uri: ParseResult
    reconnects: int = 0

    @classmethod
    def of(cls, server: ServerAddress, reconnects: int) -> Server:
        """The view of ``server`` with its count of failed attempts."""
        return cls(uri=urlparse(server.redacted_url), reconnects=reconnects)


def parse_server_url(url: str) -> ServerAddress:
    """Parses ``nats://``, ``tls://``, ``ws://``, ``wss://`` or bare ``host[:port]`` URLs.

    ``user:pass@host`` carries a user and password, ``token@host`` a token.

    Raises:
        InvalidArgumentError: the URL cannot be parsed or names an unknown scheme.
    """
    if not isinstance(url, str) or not url.strip():
        raise InvalidArgumentError(f"server URL must be a non-empty str, got {url!r}")
    text = url.strip()
    if "://" not in text:
        text = "nats://" + text
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as err:
        raise InvalidArgumentError(f"bad server URL {_redact_raw(url)!r}: {err}") from None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS:
        raise InvalidArgumentError(
            f"server URL {_redact_raw(url)!r} has unknown scheme "
            f"{scheme!r}; use nats://, tls://, ws:// or wss://"
        )
    if not parts.hostname:
        raise InvalidArgumentError(f"server URL {_redact_raw(url)!r} has no host")
    user = unquote(parts.username) if parts.username is not None else None
    password = unquote(parts.password) if parts.password is not None else None
    token = None
    if user is not None and password is None:
        token, user = user, None
    return ServerAddress(
        scheme=scheme,
        host=parts.hostname,
        port=port if port is not None else _DEFAULT_PORTS[scheme],
        user=user,
        password=password,
        token=token,
    )


def _redact_raw(url: str) -> str:
    """Hides anything before an ``@`` in a URL we could not parse."""
    scheme, sep, rest = url.rpartition("://")
    if "@" in rest:
        rest = "***@" + rest.rsplit("@", 1)[1]
    return f"{scheme}{sep}{rest}"


class ServerPool:
    """The servers to try, and how each has fared.

    Args:
        urls: the URLs the user gave.
        randomize: shuffle them (the default, to spread clients over a cluster).
        rng: the random source, injected so tests control it.
        ignore_discovered: never add servers announced in INFO ``connect_urls``.
    """

    def __init__(
        self,
        urls: Iterable[str],
        randomize: bool = True,
        rng: random.Random | None = None,
        ignore_discovered: bool = False,
    ) -> None:
        self._servers = [parse_server_url(url) for url in urls]
        if not self._servers:
            raise InvalidArgumentError("no server URLs given")
        self._randomize = randomize
        self._rng = rng or random.Random()
        self._ignore_discovered = ignore_discovered
        self._failures: dict[str, int] = {}
        if randomize:
            self._rng.shuffle(self._servers)

    @property
    def servers(self) -> Sequence[ServerAddress]:
        """Every server, in the order they were given (shuffled) and discovered."""
        return tuple(self._servers)

    @property
    def discovered(self) -> list[ServerAddress]:
        """The servers learned from INFO ``connect_urls``."""
        return [server for server in self._servers if server.discovered]

    def __len__(self) -> int:
        return len(self._servers)

    def failures(self, server: ServerAddress) -> int:
        """Failed attempts on ``server`` since it last connected."""
        return self._failures.get(server.netloc, 0)

    def views(self, servers: Iterable[ServerAddress] | None = None) -> list[Server]:
        """``servers`` (every server by default) as nats-py's :class:`Server` views."""
        chosen = self._servers if servers is None else servers
        return [Server.of(server, self.failures(server)) for server in chosen]

    def replace(self, urls: Iterable[str]) -> None:
        """Makes ``urls`` the pool (``set_server_pool``): parsed first, so a bad URL
        changes nothing; shuffled unless told not to; failure counts of servers that
        stay are kept; discovered servers are dropped (INFO may announce them again).

        Raises:
            InvalidArgumentError: a URL cannot be parsed, or there is none.
        """
        servers = [parse_server_url(url) for url in urls]
        if not servers:
            raise InvalidArgumentError("no server URLs given")
        if self._randomize:
            self._rng.shuffle(servers)
        self._servers = servers

    def attempt_order(self, last: ServerAddress | None = None) -> list[ServerAddress]:
        """One pass: shuffled (unless told not to), fewest failures first, ``last`` last."""
        order = list(self._servers)
        if self._randomize:
            self._rng.shuffle(order)
        order.sort(key=self.failures)  # stable: keeps the shuffle among equals
        if last is not None:
            order.sort(key=lambda server: server.netloc == last.netloc)
        return order

    def record_failure(self, server: ServerAddress) -> int:
        """Counts one failed attempt; returns the count."""
        count = self._failures.get(server.netloc, 0) + 1
        self._failures[server.netloc] = count
        return count

    def record_success(self, server: ServerAddress) -> None:
        """Forgets the failures of the server just connected to."""
        self._failures.pop(server.netloc, None)

    def remove_exhausted(self, max_attempts: int) -> list[ServerAddress]:
        """Drops servers that failed ``max_attempts`` times in a row (-1: never)."""
        if max_attempts < 0:
            return []
        gone = [server for server in self._servers if self.failures(server) >= max_attempts]
        self._servers = [server for server in self._servers if server not in gone]
        return gone

    def add_discovered(self, urls: Iterable[Any], via: ServerAddress) -> list[ServerAddress]:
        """Adds servers announced by ``via`` in INFO ``connect_urls``; returns the new ones.

        They take ``via``'s scheme and credentials (same cluster) and keep its host as the
        name TLS checks. Malformed entries are skipped: a server's announcement must not
        break the client.
        """
        if self._ignore_discovered:
            return []
        known = {server.netloc for server in self._servers}
        added: list[ServerAddress] = []
        for url in urls:
            if not isinstance(url, str):
                continue
            try:
                parsed = parse_server_url(url if "://" in url else f"{via.scheme}://{url}")
            except InvalidArgumentError:
                continue
            if parsed.netloc in known:
                continue
            server = dataclasses.replace(
                parsed,
                scheme=via.scheme,
                user=via.user,
                password=via.password,
                token=via.token,
                discovered=True,
                tls_name=via.tls_name or via.host,
            )
            known.add(server.netloc)
            added.append(server)
        if added:
            position = self._rng.randrange(len(self._servers) + 1) if self._randomize else None
            if position is None:
                self._servers.extend(added)
            else:
                self._servers[position:position] = added
        return added


class _Jitter(tenacity.wait.wait_base):
    """A random extra wait from the injected random source."""

    def __init__(self, rng: random.Random, jitter: float) -> None:
        self._rng = rng
        self._jitter = jitter

    def __call__(self, retry_state: tenacity.RetryCallState) -> float:
        return self._rng.uniform(0, self._jitter) if self._jitter > 0 else 0.0


class _DelayCallback(tenacity.wait.wait_base):
    """The user's ``reconnect_delay_cb(attempt)``, where attempt counts failed passes."""

    def __init__(self, delay_cb: Callable[[int], float]) -> None:
        self._delay_cb = delay_cb

    def __call__(self, retry_state: tenacity.RetryCallState) -> float:
        return max(0.0, float(self._delay_cb(retry_state.attempt_number)))


def reconnect_wait(
    base: float,
    jitter: float,
    rng: random.Random,
    delay_cb: Callable[[int], float] | None = None,
) -> tenacity.wait.wait_base:
    """The wait between passes over the pool (the first pass never waits).

    After failed pass ``n``: ``min(base * 2**(n-1), max(base, 4s))`` plus up to ``jitter``
    seconds at random; ``delay_cb(n)`` replaces all of it when given.
    """
    if delay_cb is not None:
        return _DelayCallback(delay_cb)
    cap = max(base, MAX_RECONNECT_DELAY)
    exponential = tenacity.wait_exponential(multiplier=base, exp_base=2, min=0, max=cap)
    return exponential + _Jitter(rng, jitter)

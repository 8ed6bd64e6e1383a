"""Server URLs and the server pool.

How it works: pure code, no sockets, no clock. ``parse_server_url`` turns each URL the
user gives into a :class:`ServerAddress`; :class:`ServerPool` keeps them in the order
connect attempts should follow. Secrets in URLs are kept for CONNECT and shown as
``***`` everywhere else.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

from nats_sync._defaults import DEFAULT_PORT
from nats_sync.errors import Error

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


def parse_server_url(url: str) -> ServerAddress:
    """Parses ``nats://``, ``tls://``, ``ws://``, ``wss://`` or bare ``host[:port]`` URLs.

    ``user:pass@host`` carries a user and password, ``token@host`` a token.

    Raises:
        Error: the URL cannot be parsed or names an unknown scheme.
    """
    if not isinstance(url, str) or not url.strip():
        raise Error(f"server URL must be a non-empty str, got {url!r}")
    text = url.strip()
    if "://" not in text:
        text = "nats://" + text
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as err:
        raise Error(f"bad server URL {_redact_raw(url)!r}: {err}") from None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS:
        raise Error(f"server URL {_redact_raw(url)!r} has unknown scheme {scheme!r}; "
                    "use nats://, tls://, ws:// or wss://")
    if not parts.hostname:
        raise Error(f"server URL {_redact_raw(url)!r} has no host")
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
    """The servers to try, in the order to try them.

    Args:
        urls: the URLs the user gave.
        randomize: shuffle them (the default, to spread clients over a cluster).
        rng: the random source, injected so tests control it.
    """

    def __init__(
        self, urls: Iterable[str], randomize: bool = True, rng: random.Random | None = None
    ) -> None:
        self._servers = [parse_server_url(url) for url in urls]
        if not self._servers:
            raise Error("no server URLs given")
        if randomize:
            (rng or random.Random()).shuffle(self._servers)

    @property
    def servers(self) -> Sequence[ServerAddress]:
        """Every server, in attempt order."""
        return tuple(self._servers)

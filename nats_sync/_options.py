"""The frozen options object ``connect()`` builds from its keywords.

How it works: plain data, validated once in :func:`build_options`, then shared read-only
by every thread. Defaults come from ``_defaults``. Secrets are kept out of ``repr``.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from nats_sync import _defaults as d
from nats_sync._auth import read_creds_file, read_seed_file
from nats_sync._pool import parse_server_url
from nats_sync._validate import check_int, check_timeout
from nats_sync.errors import BadCredentialsError, InvalidArgumentError

ErrorCallback = Callable[[BaseException], None]
EventCallback = Callable[[], None]
DelayCallback = Callable[[int], float]


@dataclass(frozen=True)
class Options:
    """Every connect option; see ``nats_sync.connect`` for what each one means.

    The fields are ``connect()``'s parameters: same names, order, types and defaults
    (``servers`` held parsed, as a tuple). ``tests/unit/test_options.py`` checks it.
    """

    servers: tuple[str, ...] = (d.DEFAULT_URL,)
    name: str | None = None
    allow_reconnect: bool = d.DEFAULT_ALLOW_RECONNECT
    max_reconnect_attempts: int = d.DEFAULT_MAX_RECONNECT_ATTEMPTS
    reconnect_time_wait: float = d.DEFAULT_RECONNECT_TIME_WAIT
    reconnect_delay_cb: DelayCallback | None = None
    connect_timeout: float = d.DEFAULT_CONNECT_TIMEOUT
    retry_on_failed_connect: bool = False
    dont_randomize: bool = False
    ignore_discovered_servers: bool = False
    ping_interval: float = d.DEFAULT_PING_INTERVAL
    max_outstanding_pings: int = d.DEFAULT_MAX_OUTSTANDING_PINGS
    pending_size: int = d.DEFAULT_PENDING_SIZE
    no_echo: bool = False
    verbose: bool = False
    pedantic: bool = False
    inbox_prefix: str = d.DEFAULT_INBOX_PREFIX
    drain_timeout: float = d.DEFAULT_DRAIN_TIMEOUT
    flush_timeout: float | None = None
    user: str | None = None
    password: str | None = field(default=None, repr=False)
    token: str | None = field(default=None, repr=False)
    user_credentials: str | None = None
    nkeys_seed: str | None = None
    tls: ssl.SSLContext | None = None
    tls_hostname: str | None = None
    tls_handshake_first: bool = False
    error_cb: ErrorCallback | None = None
    disconnected_cb: EventCallback | None = None
    reconnected_cb: EventCallback | None = None
    closed_cb: EventCallback | None = None
    discovered_server_cb: EventCallback | None = None
    lame_duck_mode_cb: EventCallback | None = None
    ignore_auth_error_abort: bool = False
    user_jwt_cb: Callable[[], str] | None = None
    signature_cb: Callable[[bytes], bytes] | None = None

    def __repr__(self) -> str:
        shown = []
        for item in fields(self):
            value = getattr(self, item.name)
            if item.name in ("password", "token") and value is not None:
                value = "***"
            elif item.name == "servers":
                value = tuple(parse_server_url(url).redacted_url for url in value)
            shown.append(f"{item.name}={value!r}")
        return f"Options({', '.join(shown)})"

    @property
    def full_wait(self) -> float:
        """How long a publish waits for room in a full outbox while connected."""
        return self.flush_timeout if self.flush_timeout is not None else d.DEFAULT_FLUSH_TIMEOUT


def build_options(servers: str | Sequence[str] | None, **keywords: Any) -> Options:
    """Validates ``connect()``'s keywords into :class:`Options`.

    Raises:
        InvalidArgumentError: an unknown keyword or a value of the wrong kind, named in
            the message.
        BadCredentialsError: a credential file or callback option that cannot be used.
    """
    known = {item.name for item in fields(Options)}
    unknown = sorted(set(keywords) - known)
    if unknown:
        raise InvalidArgumentError(f"unknown connect option(s): {', '.join(unknown)}")
    if servers is None:
        server_list: tuple[str, ...] = (d.DEFAULT_URL,)
    elif isinstance(servers, str):
        server_list = tuple(url.strip() for url in servers.split(",") if url.strip())
    else:
        server_list = tuple(servers)
    if not server_list:
        raise InvalidArgumentError("no server URLs given")
    for url in server_list:
        if not isinstance(url, str):
            raise InvalidArgumentError(f"server URLs must be str, got {url!r}")
    options = Options(servers=server_list, **keywords)
    for name in ("connect_timeout", "drain_timeout", "ping_interval"):
        check_timeout(getattr(options, name), name)
    check_timeout(options.reconnect_time_wait, "reconnect_time_wait", zero_ok=True)
    if options.flush_timeout is not None:
        check_timeout(options.flush_timeout, "flush_timeout")
    check_int(options.pending_size, "pending_size", 0)
    check_int(options.max_reconnect_attempts, "max_reconnect_attempts (-1: forever)", -1)
    check_int(options.max_outstanding_pings, "max_outstanding_pings", 1)
    if not options.inbox_prefix or "*" in options.inbox_prefix or ">" in options.inbox_prefix:
        raise InvalidArgumentError(
            f"inbox_prefix must be a plain subject, got {options.inbox_prefix!r}"
        )
    for name in ("error_cb", "disconnected_cb", "reconnected_cb", "closed_cb",
                 "discovered_server_cb", "lame_duck_mode_cb", "reconnect_delay_cb"):
        value = getattr(options, name)
        if value is not None and not callable(value):
            raise InvalidArgumentError(f"{name} must be callable, got {value!r}")
    if options.tls is not None and not isinstance(options.tls, ssl.SSLContext):
        raise InvalidArgumentError(
            f"tls must be an ssl.SSLContext, got {type(options.tls).__name__}"
        )
    _check_credentials(options)
    return options


def _check_credentials(options: Options) -> None:
    """Reads credential files once now, so a bad one fails connect() before any socket
    (the handshake reads them again each time, so rotated files are picked up).

    Raises:
        InvalidArgumentError: a path or callback of the wrong type.
        BadCredentialsError: an unusable file, half of the callback pair, or an nkey
            combined with a JWT (a connection is one nkey user or one JWT user).
    """
    for name in ("user_credentials", "nkeys_seed"):
        value = getattr(options, name)
        if value is not None and not isinstance(value, str | os.PathLike):
            raise InvalidArgumentError(
                f"{name} must be a file path, got {type(value).__name__}"
            )
    for name in ("user_jwt_cb", "signature_cb"):
        value = getattr(options, name)
        if value is not None and not callable(value):
            raise InvalidArgumentError(
                f"{name} must be callable, got {type(value).__name__}"
            )
    callbacks = options.user_jwt_cb is not None
    if callbacks != (options.signature_cb is not None):
        raise BadCredentialsError(
            "user_jwt_cb and signature_cb go together: one returns the JWT, the other "
            "signs the server's nonce"
        )
    if options.nkeys_seed is not None and (callbacks or options.user_credentials is not None):
        raise BadCredentialsError(
            "nkeys_seed cannot be combined with user_credentials or user_jwt_cb"
        )
    if options.user_credentials is not None and not callbacks:  # the callbacks replace it
        read_creds_file(options.user_credentials)
    if options.nkeys_seed is not None:
        read_seed_file(options.nkeys_seed)

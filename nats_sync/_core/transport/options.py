"""The frozen options object ``connect()`` builds from its keywords.

How it works: plain data, validated once in :func:`build_options`, then shared read-only
by every thread. Defaults come from ``_defaults``. Secrets are kept out of ``repr``.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import re
import ssl
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from nats_sync import _defaults as d
from nats_sync._core.transport.auth import (
    Credential,
    read_creds_file,
    read_seed_file,
    seed_from_string,
)
from nats_sync._core.transport.contexts import NatsContext, apply_context, resolve
from nats_sync._core.transport.pool import Server, parse_server_url
from nats_sync._core.validate import check_int, check_timeout
from nats_sync.errors import (
    BadCredentialsError,
    ErrorCallback,
    InvalidArgumentError,
    NotSupportedError,
)

EventCallback = Callable[[], None]
DelayCallback = Callable[[int], float]
#: ``handler(servers, server_info) -> (server or None, delay)``: picks the next server
#: to try on reconnect (nats-py's contract; see ``connect``). The server may also be
#: given as its URL.
ReconnectToServerHandler = Callable[
    [list[Server], dict[str, Any]], tuple["Server | str | None", float]
]
#: Extra headers of the WebSocket upgrade: name -> value, or name -> list of values.
WsHeaders = Mapping[str, "str | Sequence[str]"]

#: Option values never shown in full (``repr``, ``Client.options``).
SECRET_OPTIONS = ("password", "token", "nkeys_seed_str")
#: An HTTP header name (RFC 9110 token).
_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")


@dataclass(frozen=True)
class Options:
    """Every connect option; see ``nats_sync.connect`` for what each one means.

    The fields are ``connect()``'s parameters: same names, order, types and defaults
    (``servers`` held parsed, as a tuple; ``context`` holds the name of the ``nats``
    context read, given or selected). ``tests/unit/test_options.py`` checks it.
    """

    servers: tuple[str, ...] = (d.DEFAULT_URL,)
    context: str | None = None
    name: str | None = None
    allow_reconnect: bool = d.DEFAULT_ALLOW_RECONNECT
    max_reconnect_attempts: int = d.DEFAULT_MAX_RECONNECT_ATTEMPTS
    reconnect_time_wait: float = d.DEFAULT_RECONNECT_TIME_WAIT
    reconnect_delay_cb: DelayCallback | None = None
    reconnect_to_server_handler: ReconnectToServerHandler | None = None
    connect_timeout: float = d.DEFAULT_CONNECT_TIMEOUT
    retry_on_failed_connect: bool = False
    dont_randomize: bool = False
    no_randomize: bool = False
    ignore_discovered_servers: bool = False
    ping_interval: float = d.DEFAULT_PING_INTERVAL
    max_outstanding_pings: int = d.DEFAULT_MAX_OUTSTANDING_PINGS
    pending_size: int = d.DEFAULT_PENDING_SIZE
    flusher_queue_size: int = d.NATS_PY_FLUSHER_QUEUE_SIZE
    no_echo: bool = False
    verbose: bool = False
    pedantic: bool = False
    inbox_prefix: str = d.DEFAULT_INBOX_PREFIX
    skip_subject_validation: bool = False
    drain_timeout: float = d.DEFAULT_DRAIN_TIMEOUT
    flush_timeout: float | None = None
    user: Credential | None = None
    password: Credential | None = field(default=None, repr=False)
    token: Credential | None = field(default=None, repr=False)
    user_credentials: str | None = None
    nkeys_seed: str | None = None
    nkeys_seed_str: str | None = field(default=None, repr=False)
    tls: ssl.SSLContext | None = None
    tls_hostname: str | None = None
    tls_handshake_first: bool = False
    ws_connection_headers: WsHeaders | None = field(default=None, repr=False)
    error_cb: ErrorCallback | None = None
    disconnected_cb: EventCallback | None = None
    reconnected_cb: EventCallback | None = None
    closed_cb: EventCallback | None = None
    discovered_server_cb: EventCallback | None = None
    lame_duck_mode_cb: EventCallback | None = None
    ignore_auth_error_abort: bool = False
    user_jwt_cb: Callable[[], str] | None = None
    signature_cb: Callable[[bytes], bytes] | None = None
    tracing: bool = False

    def __repr__(self) -> str:
        shown = [f"{name}={value!r}" for name, value in self.shown().items()]
        return f"Options({', '.join(shown)})"

    def shown(self) -> dict[str, Any]:
        """Every option by name, safe to show: passwords, tokens and seeds as ``***``,
        WebSocket header values (often credentials) as ``***``, servers redacted."""
        shown: dict[str, Any] = {}
        for item in fields(self):
            value = getattr(self, item.name)
            if item.name in SECRET_OPTIONS and value is not None:
                value = "***"
            elif item.name == "ws_connection_headers" and value is not None:
                value = {name: ["***"] for name in value}
            elif item.name == "servers":
                value = tuple(parse_server_url(url).redacted_url for url in value)
            shown[item.name] = value
        return shown

    @property
    def ws_header_pairs(self) -> list[tuple[str, str]]:
        """``ws_connection_headers`` as (name, value) pairs, in order, a pair per value."""
        headers = self.ws_connection_headers or {}
        return [
            (name, value)
            for name, values in headers.items()
            for value in ([values] if isinstance(values, str) else values)
        ]

    @property
    def randomize(self) -> bool:
        """Whether servers, and a host name's addresses, are tried in random order."""
        return not (self.dont_randomize or self.no_randomize)

    @property
    def full_wait(self) -> float:
        """How long a publish waits for room in a full outbox while connected."""
        return self.flush_timeout if self.flush_timeout is not None else d.DEFAULT_FLUSH_TIMEOUT


def build_options(servers: str | Sequence[str] | None, **keywords: Any) -> Options:
    """Validates ``connect()``'s keywords into :class:`Options` (see
    :func:`build_options_and_context`)."""
    return build_options_and_context(servers, **keywords)[0]


def build_options_and_context(
    servers: str | Sequence[str] | None, context: str | None = None, **keywords: Any
) -> tuple[Options, NatsContext | None]:
    """Validates ``connect()``'s keywords into :class:`Options`, with the ``nats``
    context they came from (``_core.transport.contexts``): with no ``servers``, or with ``context``
    given, the servers and the options left at their defaults come from ``$NATS_URL``
    or a context.

    Raises:
        InvalidArgumentError: an unknown keyword or a value of the wrong kind, named in
            the message; a context that cannot be used (its file named).
        BadCredentialsError: a credential file or callback option that cannot be used.
        NotSupportedError: the context needs ``nsc``.
    """
    known = {item.name for item in fields(Options)}
    unknown = sorted(set(keywords) - known)
    if unknown:
        raise InvalidArgumentError(f"unknown connect option(s): {', '.join(unknown)}")
    if context is not None and not isinstance(context, str):
        raise InvalidArgumentError(
            f"context must be a context name (str), got {type(context).__name__}"
        )
    chosen, found = resolve(servers, context)
    if found is not None:
        apply_context(found, keywords, _DEFAULTS)
    options = Options(
        servers=server_urls(chosen), context=found.name if found is not None else None, **keywords
    )
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
    for name in (
        "error_cb",
        "disconnected_cb",
        "reconnected_cb",
        "closed_cb",
        "discovered_server_cb",
        "lame_duck_mode_cb",
        "reconnect_delay_cb",
        "reconnect_to_server_handler",
    ):
        value = getattr(options, name)
        if value is not None and not callable(value):
            raise InvalidArgumentError(f"{name} must be callable, got {value!r}")
    if options.tls is not None and not isinstance(options.tls, ssl.SSLContext):
        raise InvalidArgumentError(
            f"tls must be an ssl.SSLContext, got {type(options.tls).__name__}"
        )
    if not isinstance(options.skip_subject_validation, bool):
        raise InvalidArgumentError(
            f"skip_subject_validation must be a bool, got {options.skip_subject_validation!r}"
        )
    if not isinstance(options.tracing, bool):
        raise InvalidArgumentError(f"tracing must be a bool, got {options.tracing!r}")
    check_int(options.flusher_queue_size, "flusher_queue_size (ignored here)", 0)
    _check_credentials(options)
    if options.ws_connection_headers is not None:
        options = dataclasses.replace(
            options, ws_connection_headers=ws_headers(options.ws_connection_headers)
        )
    return options, found


#: Each option's default, for telling which ones the caller set (``apply_context``).
_DEFAULTS: dict[str, Any] = {item.name: item.default for item in fields(Options)}


def server_urls(servers: object) -> tuple[str, ...]:
    """The server URLs of ``connect(servers)`` or ``set_server_pool(servers)``: one URL,
    a comma-separated list, or a list of URLs (each parsed, so a bad one fails here).

    Raises:
        InvalidArgumentError: no URL, a URL that is not a str, or one that cannot be
            parsed.
    """
    if isinstance(servers, str):
        urls = tuple(url.strip() for url in servers.split(",") if url.strip())
    elif isinstance(servers, Iterable):
        urls = tuple(servers)
    else:
        raise InvalidArgumentError(
            f"servers must be a URL or a list of URLs, got {type(servers).__name__}"
        )
    if not urls:
        raise InvalidArgumentError("no server URLs given")
    for url in urls:
        if not isinstance(url, str):
            raise InvalidArgumentError(f"server URLs must be str, got {url!r}")
        parse_server_url(url)
    return urls


def ws_headers(headers: object) -> dict[str, list[str]]:
    """A copy of ``ws_connection_headers`` with every value a list (nats-py takes a str
    or a list of str per name), checked so that nothing can break the upgrade request.

    Raises:
        InvalidArgumentError: not a mapping; a name that is not an HTTP token or that
            the upgrade writes itself (``Host``, ``Upgrade``, ``Connection``,
            ``Sec-WebSocket-Key``, ``Sec-WebSocket-Version``); a value that is not a str
            or holds a line break or another control character (named, never shown).
    """
    if not isinstance(headers, Mapping):
        raise InvalidArgumentError(
            "ws_connection_headers must map header names to a str or a list of str, "
            f"got {type(headers).__name__}"
        )
    checked: dict[str, list[str]] = {}
    for name, values in headers.items():
        if not isinstance(name, str) or not _HEADER_NAME.fullmatch(name):
            raise InvalidArgumentError(
                f"ws_connection_headers: {name!r} is not a valid HTTP header name"
            )
        if name.lower() in d.WS_RESERVED_HEADERS:
            raise InvalidArgumentError(
                f"ws_connection_headers must not set {name}: the WebSocket upgrade writes it itself"
            )
        listed = [values] if isinstance(values, str) else values
        if not isinstance(listed, Sequence) or not all(isinstance(v, str) for v in listed):
            raise InvalidArgumentError(
                f"ws_connection_headers[{name!r}] must be a str or a list of str, got "
                f"{type(values).__name__}"
            )
        for value in listed:
            if any((ord(c) < 32 and c != "\t") or ord(c) == 127 for c in value):
                raise InvalidArgumentError(
                    f"ws_connection_headers[{name!r}] holds a line break or a control "
                    "character (value not shown)"
                )
        checked.setdefault(name, []).extend(listed)
    return checked


def _check_credentials(options: Options) -> None:
    """Reads credential files once now, so a bad one fails connect() before any socket
    (the handshake reads them again each time, so rotated files are picked up).

    Raises:
        InvalidArgumentError: a path or callback of the wrong type.
        BadCredentialsError: an unusable file, half of the callback pair, or an nkey
            combined with a JWT (a connection is one nkey user or one JWT user).
    """
    for name in ("user", "password", "token"):
        value = getattr(options, name)
        if value is not None and not isinstance(value, str) and not callable(value):
            raise InvalidArgumentError(
                f"{name} must be a str or a callable returning one, got {type(value).__name__}"
            )
    for name in ("user_credentials", "nkeys_seed"):
        value = getattr(options, name)
        if value is not None and not isinstance(value, str | os.PathLike):
            raise InvalidArgumentError(f"{name} must be a file path, got {type(value).__name__}")
    if options.nkeys_seed_str is not None and not isinstance(options.nkeys_seed_str, str):
        raise InvalidArgumentError(
            f"nkeys_seed_str must be the seed as a str, got {type(options.nkeys_seed_str).__name__}"
        )
    for name in ("user_jwt_cb", "signature_cb"):
        value = getattr(options, name)
        if value is not None and not callable(value):
            raise InvalidArgumentError(f"{name} must be callable, got {type(value).__name__}")
    callbacks = options.user_jwt_cb is not None
    if callbacks != (options.signature_cb is not None):
        raise BadCredentialsError(
            "user_jwt_cb and signature_cb go together: one returns the JWT, the other "
            "signs the server's nonce"
        )
    if options.nkeys_seed is not None and options.nkeys_seed_str is not None:
        raise BadCredentialsError(
            "give the nkey seed once: as a file (nkeys_seed) or as a string (nkeys_seed_str)"
        )
    for name in ("nkeys_seed", "nkeys_seed_str"):
        if getattr(options, name) is not None and (
            callbacks or options.user_credentials is not None
        ):
            raise BadCredentialsError(
                f"{name} cannot be combined with user_credentials or user_jwt_cb"
            )
    if options.user_credentials is not None and not callbacks:  # the callbacks replace it
        read_creds_file(options.user_credentials)
    if options.nkeys_seed is not None:
        read_seed_file(options.nkeys_seed)
    if options.nkeys_seed_str is not None:
        seed_from_string(options.nkeys_seed_str)


def check_websocket_support(urls: Sequence[str]) -> None:
    """Raises NotSupportedError when ``urls`` name a WebSocket server and the optional
    ``wsproto`` is not installed."""
    if any(parse_server_url(url).is_websocket for url in urls) and (
        importlib.util.find_spec("wsproto") is None
    ):
        raise NotSupportedError(
            "ws:// and wss:// servers need wsproto: pip install 'nats-sync[websocket]'"
        )

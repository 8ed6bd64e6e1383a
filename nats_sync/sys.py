"""Server monitoring over NATS: the servers' ``$SYS.REQ.SERVER`` endpoints (as orbit.go's
natssysclient), for a user of the system account.

How it works: every nats-server answers monitoring requests from users of its system
account (``system_account`` in its configuration) on ``$SYS.REQ.SERVER.<id>.<ENDPOINT>``
(that server) and on ``$SYS.REQ.SERVER.PING.<ENDPOINT>`` (every server that shares the
system account: the cluster, the super-cluster, leaf nodes). The request body is a JSON
object of options: the endpoint's own filters, and ``server_name``, ``cluster``, ``host``,
``exact_match``, ``tags``, ``domain`` to pick servers (a server they leave out stays
silent). Each server replies with an envelope, ``{"server": {...}, "data": {...}}``, or
``{"server": {...}, "error": {"code": ..., "description": ...}}`` (STATSZ puts its data
under ``"statsz"``). The keyword filters are checked here against the option names and
types the server reads (server/monitor.go, events.go), because the server ignores names
it does not know.

One server: one ``nc.request``. Every server: one ``nc.request_many``, ended by the first
of: ``stall`` seconds without a new reply once one came (each server answers once, at
once), ``server_count`` replies when that is known, ``timeout`` seconds in all.

Threads: none of its own. A :class:`SystemClient` holds only the client and its
settings, and the client is safe from any thread, so one may be shared by threads.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, overload

from nats_sync import _defaults as d
from nats_sync._core.validate import check_int, check_timeout
from nats_sync.errors import (
    InvalidArgumentError,
    MonitoringError,
    NoRespondersError,
    ProtocolError,
    TimeoutError,
)

if TYPE_CHECKING:
    from nats_sync.client import Client
    from nats_sync.msg import Msg

__all__ = ["Reply", "SystemClient"]

Reply = dict[str, Any]
"""One server's decoded answer: ``{"server": {...}, "data": {...}}``, ``"statsz"`` in
place of ``"data"`` for STATSZ (an answer with ``"error"`` is raised instead)."""

_BOOL, _INT, _TEXT, _TAGS, _STATE = "bool", "int", "text", "tags", "state"

#: Filters every endpoint takes: they pick which servers answer.
_SERVER_FILTERS: dict[str, str] = {
    "server_name": _TEXT,
    "cluster": _TEXT,
    "host": _TEXT,
    "exact_match": _BOOL,
    "tags": _TAGS,
    "domain": _TEXT,
}

#: Each endpoint's own filters, by keyword (the server's option name, ``-`` as ``_``).
_ENDPOINT_FILTERS: dict[str, dict[str, str]] = {
    "VARZ": {},
    "STATSZ": {},
    "CONNZ": {
        "sort": _TEXT,
        "auth": _BOOL,
        "subscriptions": _BOOL,
        "subscriptions_detail": _BOOL,
        "offset": _INT,
        "limit": _INT,
        "cid": _INT,
        "mqtt_client": _TEXT,
        "state": _STATE,
        "user": _TEXT,
        "acc": _TEXT,
        "filter_subject": _TEXT,
    },
    "ROUTEZ": {"subscriptions": _BOOL, "subscriptions_detail": _BOOL},
    "GATEWAYZ": {
        "name": _TEXT,
        "accounts": _BOOL,
        "account_name": _TEXT,
        "subscriptions": _BOOL,
        "subscriptions_detail": _BOOL,
    },
    "LEAFZ": {"subscriptions": _BOOL, "account": _TEXT},
    "SUBSZ": {
        "offset": _INT,
        "limit": _INT,
        "subscriptions": _BOOL,
        "account": _TEXT,
        "test": _TEXT,
    },
    "ACCOUNTZ": {"account": _TEXT},
    "JSZ": {
        "account": _TEXT,
        "accounts": _BOOL,
        "streams": _BOOL,
        "consumer": _BOOL,
        "direct_consumer": _BOOL,
        "config": _BOOL,
        "leader_only": _BOOL,
        "offset": _INT,
        "limit": _INT,
        "raft": _BOOL,
        "stream_leader_only": _BOOL,
    },
    "HEALTHZ": {
        "js_enabled_only": _BOOL,
        "js_server_only": _BOOL,
        "js_meta_only": _BOOL,
        "account": _TEXT,
        "stream": _TEXT,
        "consumer": _TEXT,
        "details": _BOOL,
    },
}

#: The JSON names that are not the keyword (HEALTHZ spells its options with ``-``).
_JSON_NAMES = {
    "js_enabled_only": "js-enabled-only",
    "js_server_only": "js-server-only",
    "js_meta_only": "js-meta-only",
}

#: CONNZ ``state``: the server's ConnState numbers.
_CONN_STATES = {"open": 0, "closed": 1, "all": 2}


class SystemClient:
    """Asks servers for their monitoring data over NATS (no HTTP port needed).

    The client must be connected as a user of the system account (``system_account``
    in the server configuration); other users get :class:`~nats_sync.NoRespondersError`.

    Every method takes ``server_id=`` (ask that server only; returns its reply) or none
    (ask every server; returns a list of replies, one per server that answered, sorted
    by server name). A reply is the decoded JSON envelope the server sent:
    ``reply["server"]`` says who answered (``"name"``, ``"id"``, ``"cluster"``,
    ``"ver"``...), ``reply["data"]`` holds the endpoint's data (``reply["statsz"]`` for
    :meth:`statsz`). Keyword filters are the server's option names (listed on each
    method), plus these, which pick the servers that answer: ``server_name``,
    ``cluster``, ``host`` (substrings, or exact with ``exact_match=True``), ``tags`` (a
    list: all must match), ``domain``.

    Args:
        nc: a connected client.
        timeout: seconds to wait for one server's reply, or for all the replies of a
            request to every server.
        stall: a request to every server ends this many seconds after the last reply
            came (each server answers once).
        server_count: a request to every server ends at this many replies, when you
            know how many servers there are.

    Raises:
        InvalidArgumentError: ``timeout``/``stall`` not > 0, ``server_count`` < 1.

    Every method raises :class:`~nats_sync.InvalidArgumentError` for a filter its
    endpoint does not take (named) or a value of the wrong type, and for a
    ``server_id`` that is not one subject token; :class:`~nats_sync.MonitoringError`
    when a server answered with an error (a filter value it refused);
    :class:`~nats_sync.NoRespondersError` when nobody answers (the user is not in the
    system account, or no server has that ``server_id``); and, with ``server_id``,
    :class:`~nats_sync.TimeoutError` when no reply came within ``timeout`` (the
    server-picking filters may leave that server out). Asking every server returns
    what came in time, possibly an empty list (no server passed the filters).
    """

    def __init__(
        self,
        nc: Client,
        *,
        timeout: float = d.DEFAULT_SYS_TIMEOUT,
        stall: float = d.DEFAULT_SYS_STALL,
        server_count: int | None = None,
    ) -> None:
        check_timeout(timeout)
        check_timeout(stall, "stall")
        if server_count is not None:
            check_int(server_count, "server_count", 1)
        self._nc = nc
        self.timeout = timeout
        self.stall = stall
        self.server_count = server_count

    def __repr__(self) -> str:
        return (
            f"SystemClient(timeout={self.timeout}, stall={self.stall}, "
            f"server_count={self.server_count})"
        )

    # --- endpoints ---------------------------------------------------------------------

    @overload
    def varz(self, *, server_id: str, timeout: float | None = ..., **filters: Any) -> Reply: ...
    @overload
    def varz(
        self, *, server_id: None = ..., timeout: float | None = ..., **filters: Any
    ) -> list[Reply]: ...
    def varz(
        self, *, server_id: str | None = None, timeout: float | None = None, **filters: Any
    ) -> Reply | list[Reply]:
        """General information, limits and counters (the HTTP ``/varz``).

        Args:
            server_id: ask this server only; None asks every server.
            timeout: seconds; None uses the client's.
            **filters: only the server-picking ones.

        Returns:
            The server's reply, or a list of every server's reply.
        """
        return self._ask("VARZ", server_id, timeout, filters)

    @overload
    def statsz(self, *, server_id: str, timeout: float | None = ..., **filters: Any) -> Reply: ...
    @overload
    def statsz(
        self, *, server_id: None = ..., timeout: float | None = ..., **filters: Any
    ) -> list[Reply]: ...
    def statsz(
        self, *, server_id: str | None = None, timeout: float | None = None, **filters: Any
    ) -> Reply | list[Reply]:
        """Statistics (connections, messages, memory, CPU), under ``reply["statsz"]``.

        Args:
            server_id: ask this server only; None asks every server.
            timeout: seconds; None uses the client's.
            **filters: only the server-picking ones.

        Returns:
            The server's reply, or a list of every server's reply.
        """
        return self._ask("STATSZ", server_id, timeout, filters)

    @overload
    def connz(self, *, server_id: str, timeout: float | None = ..., **filters: Any) -> Reply: ...
    @overload
    def connz(
        self, *, server_id: None = ..., timeout: float | None = ..., **filters: Any
    ) -> list[Reply]: ...
    def connz(
        self, *, server_id: str | None = None, timeout: float | None = None, **filters: Any
    ) -> Reply | list[Reply]:
        """Client connections (the HTTP ``/connz``), a page of them.

        Args:
            server_id: ask this server only; None asks every server.
            timeout: seconds; None uses the client's.
            **filters: ``sort`` (``"cid"``, ``"start"``, ``"subs"``, ``"pending"``,
                ``"msgs_to"``, ``"msgs_from"``, ``"bytes_to"``, ``"bytes_from"``,
                ``"last"``, ``"idle"``, ``"uptime"``, ``"stop"``, ``"reason"``),
                ``auth``, ``subscriptions``, ``subscriptions_detail`` (bool), ``offset``,
                ``limit``, ``cid`` (int), ``state`` (``"open"``, ``"closed"``, ``"all"``),
                ``user``, ``acc`` (an account), ``filter_subject``, ``mqtt_client``.

        Returns:
            The server's reply, or a list of every server's reply.
        """
        return self._ask("CONNZ", server_id, timeout, filters)

    @overload
    def routez(self, *, server_id: str, timeout: float | None = ..., **filters: Any) -> Reply: ...
    @overload
    def routez(
        self, *, server_id: None = ..., timeout: float | None = ..., **filters: Any
    ) -> list[Reply]: ...
    def routez(
        self, *, server_id: str | None = None, timeout: float | None = None, **filters: Any
    ) -> Reply | list[Reply]:
        """Routes to the other servers of the cluster (the HTTP ``/routez``).

        Args:
            server_id: ask this server only; None asks every server.
            timeout: seconds; None uses the client's.
            **filters: ``subscriptions``, ``subscriptions_detail`` (bool).

        Returns:
            The server's reply, or a list of every server's reply.
        """
        return self._ask("ROUTEZ", server_id, timeout, filters)

    @overload
    def gatewayz(self, *, server_id: str, timeout: float | None = ..., **filters: Any) -> Reply: ...
    @overload
    def gatewayz(
        self, *, server_id: None = ..., timeout: float | None = ..., **filters: Any
    ) -> list[Reply]: ...
    def gatewayz(
        self, *, server_id: str | None = None, timeout: float | None = None, **filters: Any
    ) -> Reply | list[Reply]:
        """Gateways to other clusters (the HTTP ``/gatewayz``).

        Args:
            server_id: ask this server only; None asks every server.
            timeout: seconds; None uses the client's.
            **filters: ``name`` (a gateway), ``accounts`` (bool), ``account_name``,
                ``subscriptions``, ``subscriptions_detail`` (bool).

        Returns:
            The server's reply, or a list of every server's reply.
        """
        return self._ask("GATEWAYZ", server_id, timeout, filters)

    @overload
    def leafz(self, *, server_id: str, timeout: float | None = ..., **filters: Any) -> Reply: ...
    @overload
    def leafz(
        self, *, server_id: None = ..., timeout: float | None = ..., **filters: Any
    ) -> list[Reply]: ...
    def leafz(
        self, *, server_id: str | None = None, timeout: float | None = None, **filters: Any
    ) -> Reply | list[Reply]:
        """Leaf node connections (the HTTP ``/leafz``).

        Args:
            server_id: ask this server only; None asks every server.
            timeout: seconds; None uses the client's.
            **filters: ``subscriptions`` (bool), ``account``.

        Returns:
            The server's reply, or a list of every server's reply.
        """
        return self._ask("LEAFZ", server_id, timeout, filters)

    @overload
    def subsz(self, *, server_id: str, timeout: float | None = ..., **filters: Any) -> Reply: ...
    @overload
    def subsz(
        self, *, server_id: None = ..., timeout: float | None = ..., **filters: Any
    ) -> list[Reply]: ...
    def subsz(
        self, *, server_id: str | None = None, timeout: float | None = None, **filters: Any
    ) -> Reply | list[Reply]:
        """Subscriptions and the subject routing cache (the HTTP ``/subsz``).

        Args:
            server_id: ask this server only; None asks every server.
            timeout: seconds; None uses the client's.
            **filters: ``subscriptions`` (bool: list them), ``offset``, ``limit`` (int),
                ``account``, ``test`` (a subject without wildcards: only the
                subscriptions a message on it would reach).

        Returns:
            The server's reply, or a list of every server's reply.
        """
        return self._ask("SUBSZ", server_id, timeout, filters)

    @overload
    def jsz(self, *, server_id: str, timeout: float | None = ..., **filters: Any) -> Reply: ...
    @overload
    def jsz(
        self, *, server_id: None = ..., timeout: float | None = ..., **filters: Any
    ) -> list[Reply]: ...
    def jsz(
        self, *, server_id: str | None = None, timeout: float | None = None, **filters: Any
    ) -> Reply | list[Reply]:
        """JetStream usage, accounts, streams and consumers (the HTTP ``/jsz``).

        Args:
            server_id: ask this server only; None asks every server.
            timeout: seconds; None uses the client's.
            **filters: ``account``; bool: ``accounts``, ``streams``, ``consumer``,
                ``direct_consumer``, ``config``, ``leader_only``, ``raft``,
                ``stream_leader_only``; int: ``offset``, ``limit``.

        Returns:
            The server's reply, or a list of every server's reply.
        """
        return self._ask("JSZ", server_id, timeout, filters)

    @overload
    def accountz(self, *, server_id: str, timeout: float | None = ..., **filters: Any) -> Reply: ...
    @overload
    def accountz(
        self, *, server_id: None = ..., timeout: float | None = ..., **filters: Any
    ) -> list[Reply]: ...
    def accountz(
        self, *, server_id: str | None = None, timeout: float | None = None, **filters: Any
    ) -> Reply | list[Reply]:
        """The accounts, or one account in detail (the HTTP ``/accountz``).

        Args:
            server_id: ask this server only; None asks every server.
            timeout: seconds; None uses the client's.
            **filters: ``account`` (one account's details; the server answers with an
                error for an account it does not know).

        Returns:
            The server's reply, or a list of every server's reply.
        """
        return self._ask("ACCOUNTZ", server_id, timeout, filters)

    @overload
    def healthz(self, *, server_id: str, timeout: float | None = ..., **filters: Any) -> Reply: ...
    @overload
    def healthz(
        self, *, server_id: None = ..., timeout: float | None = ..., **filters: Any
    ) -> list[Reply]: ...
    def healthz(
        self, *, server_id: str | None = None, timeout: float | None = None, **filters: Any
    ) -> Reply | list[Reply]:
        """Health (the HTTP ``/healthz``): ``reply["data"]["status"]`` is ``"ok"`` or not.

        An unhealthy server is an answer, not an error: its ``status`` says so.

        Args:
            server_id: ask this server only; None asks every server.
            timeout: seconds; None uses the client's.
            **filters: bool: ``js_enabled_only``, ``js_server_only``, ``js_meta_only``,
                ``details``; ``account``, ``stream``, ``consumer`` (check one asset).

        Returns:
            The server's reply, or a list of every server's reply.
        """
        return self._ask("HEALTHZ", server_id, timeout, filters)

    # --- requests ----------------------------------------------------------------------

    def _ask(
        self,
        endpoint: str,
        server_id: str | None,
        timeout: float | None,
        filters: Mapping[str, Any],
    ) -> Reply | list[Reply]:
        payload = _encode_filters(endpoint, filters)
        if timeout is None:
            timeout = self.timeout
        else:
            check_timeout(timeout)
        if server_id is None:
            return self._ask_every_server(endpoint, payload, timeout)
        subject = f"$SYS.REQ.SERVER.{_check_server_id(server_id)}.{endpoint}"
        try:
            msg = self._nc.request(subject, payload, timeout=timeout)
        except NoRespondersError:
            raise NoRespondersError(
                f"nobody answered {subject!r}: no server has id {server_id!r}, or the "
                "connection's user is not in the system account"
            ) from None
        except TimeoutError:
            picking = sorted(set(filters) & set(_SERVER_FILTERS))
            hint = f" (or {', '.join(picking)} left it out)" if picking else ""
            raise TimeoutError(
                f"server {server_id!r} did not answer {endpoint} within {timeout}s{hint}"
            ) from None
        return _decode(endpoint, msg)

    def _ask_every_server(self, endpoint: str, payload: bytes, timeout: float) -> list[Reply]:
        subject = f"$SYS.REQ.SERVER.PING.{endpoint}"
        try:
            # Gathered to the end first: a reply that raises leaves no request open.
            msgs = list(
                self._nc.request_many(
                    subject,
                    payload,
                    timeout=timeout,
                    stall=self.stall,
                    max_messages=self.server_count,
                )
            )
        except NoRespondersError:
            raise NoRespondersError(
                f"nobody answered {subject!r}: monitoring over NATS needs a user of the "
                "system account (system_account in the server configuration)"
            ) from None
        return sorted((_decode(endpoint, msg) for msg in msgs), key=_server_order)


def _server_order(reply: Reply) -> tuple[str, str]:
    server = reply.get("server") or {}
    return str(server.get("name", "")), str(server.get("id", ""))


def _check_server_id(server_id: object) -> str:
    if not isinstance(server_id, str):
        raise InvalidArgumentError(f"server_id must be a str, got {server_id!r}")
    if server_id == "PING":
        raise InvalidArgumentError(
            "server_id='PING' is no server: leave server_id out to ask every server"
        )
    if not server_id or any(c in server_id for c in ".*> \t\r\n"):
        raise InvalidArgumentError(
            f"server_id must be a server's id (one subject token), got {server_id!r}"
        )
    return server_id


def endpoint_filters(endpoint: str) -> dict[str, str]:
    """The filters ``endpoint`` (``"CONNZ"``...) takes: keyword -> kind (``"bool"``,
    ``"int"``, ``"text"``, ``"tags"``, ``"state"``), the server-picking ones included.

    Raises:
        InvalidArgumentError: an endpoint this module does not know.
    """
    try:
        own = _ENDPOINT_FILTERS[endpoint]
    except KeyError:
        known = ", ".join(name.lower() for name in _ENDPOINT_FILTERS)
        raise InvalidArgumentError(
            f"no monitoring endpoint {endpoint!r}; there are: {known}"
        ) from None
    return {**own, **_SERVER_FILTERS}


def _encode_filters(endpoint: str, filters: Mapping[str, Any]) -> bytes:
    """The request body for ``filters`` (b"" for none; None values are left out).

    Raises:
        InvalidArgumentError: a filter ``endpoint`` does not take, or a wrong value.
    """
    kinds = endpoint_filters(endpoint)
    options: dict[str, Any] = {}
    for name, value in filters.items():
        kind = kinds.get(name)
        if kind is None:
            own = ", ".join(_ENDPOINT_FILTERS[endpoint]) or "none of its own"
            raise InvalidArgumentError(
                f"{endpoint.lower()}() takes no filter {name!r}; its filters: {own} "
                f"(and {', '.join(_SERVER_FILTERS)} to pick servers)"
            )
        if value is not None:
            options[_JSON_NAMES.get(name, name)] = _checked(name, kind, value)
    return json.dumps(options).encode() if options else b""


def _checked(name: str, kind: str, value: object) -> object:
    if kind == _BOOL:
        if not isinstance(value, bool):
            raise InvalidArgumentError(f"filter {name} takes True or False, got {value!r}")
    elif kind == _INT:
        check_int(value, f"filter {name}", 0)
    elif kind == _TEXT:
        if not isinstance(value, str):
            raise InvalidArgumentError(f"filter {name} takes a str, got {value!r}")
    elif kind == _TAGS:
        if (
            isinstance(value, str)
            or not isinstance(value, Sequence)
            or not all(isinstance(tag, str) for tag in value)
        ):
            raise InvalidArgumentError(f"filter {name} takes a list of str, got {value!r}")
        return list(value)
    elif kind == _STATE:
        if not isinstance(value, str) or value not in _CONN_STATES:
            raise InvalidArgumentError(
                f"filter {name} takes one of {', '.join(map(repr, _CONN_STATES))}, got {value!r}"
            )
        return _CONN_STATES[str(value)]
    return value


def _decode(endpoint: str, msg: Msg) -> Reply:
    try:
        reply = json.loads(msg.data)
    except ValueError as exc:
        raise ProtocolError(
            f"the {endpoint} reply is not JSON ({exc}): {msg.data[:80]!r}"
        ) from None
    if not isinstance(reply, dict):
        raise ProtocolError(f"the {endpoint} reply is not a JSON object: {msg.data[:80]!r}")
    error = reply.get("error")
    if error:
        server = reply.get("server") or {}
        name = server.get("name") or server.get("id") or "a server"
        code = error.get("code", 0) if isinstance(error, dict) else 0
        description = str(error.get("description", error) if isinstance(error, dict) else error)
        raise MonitoringError(
            f"{name} answered {endpoint} with error {code}: {description}",
            code=code if isinstance(code, int) else 0,
            description=description,
            server_id=str(server.get("id", "")),
        )
    return reply

"""The nats_sync exception hierarchy: one root, five families.

Every error the library raises or reports to ``error_cb`` derives from :class:`Error`.
The families group errors by what a caller can do about them:

- :class:`NatsConnectionError`: the connection is closed, draining, reconnecting,
  stale, could not be made, or cannot buffer more.
- :class:`TimeoutError`: something did not happen in time (also a builtin
  ``TimeoutError``, so ``except TimeoutError`` works without importing us).
- :class:`ProtocolError`: the server sent bytes we cannot accept.
- :class:`ServerError`: the server answered ``-ERR``. Where a ``-ERR`` means what a
  client-side error means, its class derives from both (``ServerStaleConnectionError``
  is a ``StaleConnectionError`` too), so either ``except`` catches it.
- :class:`InvalidArgumentError`: a call got a value it cannot use; also the builtin
  ``ValueError`` (:class:`BadSubjectError`, :class:`BadHeaderError`,
  :class:`BadCredentialsError` and :class:`MaxPayloadError` are kinds of it).

``str(err)`` reads ``"nats: <what>: <detail>"``. The detail is kept as the single
positional argument, and extra fields are keyword-only attributes, so every error
pickles and unpickles intact (Spark ships exceptions between processes).
"""

from __future__ import annotations

import builtins
import re
from collections.abc import Callable

__all__ = [
    "AuthorizationError",
    "BadCredentialsError",
    "BadHeaderError",
    "BadSubjectError",
    "BadSubscriptionError",
    "ConnectionClosedError",
    "ConnectionDrainingError",
    "ConnectionReconnectingError",
    "DrainTimeoutError",
    "Error",
    "FlushTimeoutError",
    "InvalidArgumentError",
    "MaxPayloadError",
    "MonitoringError",
    "NatsConnectionError",
    "NoRespondersError",
    "NoServersError",
    "NotSupportedError",
    "OutboundBufferLimitError",
    "PermissionsViolationError",
    "ProtocolError",
    "SecureConnFailedError",
    "SecureConnRequiredError",
    "ServerError",
    "ServerMaxPayloadError",
    "ServerSecureConnRequiredError",
    "ServerStaleConnectionError",
    "SlowConsumerError",
    "StaleConnectionError",
    "TimeoutError",
    "server_error_from_description",
]

#: ``error_cb(error)``: what the client, JetStream consumers and groups hand an
#: asynchronous error (or a warning) to, on a thread of theirs.
ErrorCallback = Callable[[BaseException], None]


class Error(Exception):
    """Root of every nats_sync error.

    Args:
        detail: what went wrong, in words; kept as ``args[0]``.
    """

    #: The words after ``"nats: "`` in ``str(err)``; each subclass names itself.
    label = "error"

    def __init__(self, detail: str = "") -> None:
        super().__init__(detail)

    @property
    def detail(self) -> str:
        """The detail given when the error was raised ("" when none)."""
        return str(self.args[0]) if self.args and self.args[0] else ""

    def __str__(self) -> str:
        detail = self.detail
        return f"nats: {self.label}: {detail}" if detail else f"nats: {self.label}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.detail!r})"


# --- argument errors ---------------------------------------------------------------


class InvalidArgumentError(Error, ValueError):
    """A call got an argument (or option) it cannot use; the message names it.

    Also a builtin ``ValueError``. Wrong types may raise the builtin ``TypeError``
    instead, as Python itself does.
    """

    label = "invalid argument"


class BadSubjectError(InvalidArgumentError):
    """A subject, reply subject or queue name breaks the NATS subject rules."""

    label = "invalid subject"


class BadHeaderError(InvalidArgumentError):
    """A header name or value cannot be written in the NATS/1.0 header block."""

    label = "invalid header"


class BadCredentialsError(InvalidArgumentError):
    """A seed or ``.creds`` file cannot be used (missing, garbage, the wrong kind of key).

    The message names the file, never its secret content.
    """

    label = "bad credentials"


class MaxPayloadError(InvalidArgumentError):
    """A message is larger than the server's ``max_payload``.

    Raised by ``publish`` before anything is sent; when the server answers
    ``-ERR 'Maximum Payload Violation'`` it is reported as :class:`ServerMaxPayloadError`.
    """

    label = "maximum payload exceeded"


class NotSupportedError(Error, NotImplementedError):
    """An option or feature this version of nats_sync does not provide yet."""

    label = "not supported"


# --- connection family -------------------------------------------------------------


class NatsConnectionError(Error):
    """Family: the connection cannot carry out the call in its present state."""

    label = "connection error"


class ConnectionClosedError(NatsConnectionError):
    """The client is closed (or was created in another process)."""

    label = "connection closed"


class ConnectionDrainingError(NatsConnectionError):
    """The client or subscription is draining and takes no new work."""

    label = "connection draining"


class ConnectionReconnectingError(NatsConnectionError):
    """The call needs a live connection and the client is reconnecting."""

    label = "connection reconnecting"


class NoServersError(NatsConnectionError):
    """No server of the pool could be reached; ``__cause__`` holds the last error."""

    label = "no servers available for connection"


class StaleConnectionError(NatsConnectionError):
    """The server stopped answering PINGs (more than ``max_outstanding_pings``)."""

    label = "stale connection"


class OutboundBufferLimitError(NatsConnectionError):
    """The outgoing buffer holds ``pending_size`` bytes already; nothing was queued."""

    label = "outbound buffer limit exceeded"


class SecureConnRequiredError(NatsConnectionError):
    """TLS is required by one side and not offered by the other."""

    label = "secure connection required"


class SecureConnFailedError(NatsConnectionError):
    """The TLS handshake failed or the certificate was not trusted."""

    label = "secure connection failed"


# --- timeouts ----------------------------------------------------------------------


class TimeoutError(Error, builtins.TimeoutError):
    """Something did not happen in time; also a builtin ``TimeoutError``."""

    label = "timeout"


class FlushTimeoutError(TimeoutError):
    """``flush()`` did not see the server's PONG in time."""

    label = "flush timeout"


class DrainTimeoutError(TimeoutError):
    """``drain()`` did not finish within its timeout; the client was closed anyway."""

    label = "drain timeout"


# --- request-reply and consumers ---------------------------------------------------


class NoRespondersError(Error):
    """Nobody was subscribed to the request subject (a status 503 reply)."""

    label = "no responders available for request"


class MonitoringError(Error):
    """A server answered a monitoring request (``$SYS.REQ.SERVER...``) with an error.

    Attributes:
        code: the server's status: 400 when it could not decode the filters, 500 when
            the endpoint refused them (0 if not stated).
        description: the server's own words.
        server_id: the id of the server that answered ("" if not stated).
    """

    label = "monitoring request failed"

    def __init__(
        self, detail: str = "", *, code: int = 0, description: str = "", server_id: str = ""
    ) -> None:
        super().__init__(detail)
        self.code = code
        self.description = description
        self.server_id = server_id


class SlowConsumerError(Error):
    """A subscription's pending queue was full and a message was dropped.

    Attributes:
        subject: the subscription's subject.
        sid: the subscription id.
    """

    label = "slow consumer, messages dropped"

    def __init__(self, detail: str = "", *, subject: str = "", sid: int = 0) -> None:
        super().__init__(detail)
        self.subject = subject
        self.sid = sid


class BadSubscriptionError(Error):
    """The subscription has ended (unsubscribed, drained or reached ``max_msgs``)."""

    label = "subscription closed"


# --- protocol and server errors ----------------------------------------------------


class ProtocolError(Error):
    """The server sent something that is not valid NATS protocol."""

    label = "protocol error"


class ServerError(Error):
    """Family: the server answered ``-ERR``; ``detail`` holds its text, unquoted."""

    label = "server error"


class AuthorizationError(ServerError):
    """The server refused the credentials (or they expired)."""

    label = "authorization violation"


class PermissionsViolationError(ServerError):
    """The server refused a publish or subscribe for lack of permission.

    Attributes:
        operation: ``"publish"`` or ``"subscription"`` (``""`` if not stated).
        subject: the subject the server named.
        queue: the queue group the server named, or ``""``.
    """

    label = "permissions violation"

    def __init__(
        self, detail: str = "", *, operation: str = "", subject: str = "", queue: str = ""
    ) -> None:
        super().__init__(detail)
        self.operation = operation
        self.subject = subject
        self.queue = queue


class ServerMaxPayloadError(ServerError, MaxPayloadError):
    """The server answered ``-ERR 'Maximum Payload Violation'`` (and closes the connection)."""

    label = "server: maximum payload exceeded"


class ServerStaleConnectionError(ServerError, StaleConnectionError):
    """The server answered ``-ERR 'Stale Connection'``: it saw no PONG from us in time."""

    label = "server: stale connection"


class ServerSecureConnRequiredError(ServerError, SecureConnRequiredError):
    """The server answered ``-ERR 'Secure Connection - TLS Required'``."""

    label = "server: secure connection required"


_PERMISSION_RE = re.compile(r'(Publish|Subscription) to "?([^"\s]+)"?', re.IGNORECASE)
_QUEUE_RE = re.compile(r'using queue "([^"]+)"', re.IGNORECASE)


def server_error_from_description(description: str) -> ServerError:
    """Maps a ``-ERR`` description to the matching :class:`ServerError` subclass.

    Args:
        description: the text after ``-ERR``, quotes already removed.

    Returns:
        An error instance; unknown texts become a plain :class:`ServerError`.
    """
    lowered = description.lower()
    if "permissions violation" in lowered:
        found = _PERMISSION_RE.search(description)
        queue = _QUEUE_RE.search(description)
        return PermissionsViolationError(
            description,
            operation=found.group(1).lower() if found else "",
            subject=found.group(2) if found else "",
            queue=queue.group(1) if queue else "",
        )
    if "authorization violation" in lowered or "authentication" in lowered:
        return AuthorizationError(description)
    if "maximum payload" in lowered:
        return ServerMaxPayloadError(description)
    if "stale connection" in lowered:
        return ServerStaleConnectionError(description)
    if "secure connection" in lowered and "tls required" in lowered:
        return ServerSecureConnRequiredError(description)
    return ServerError(description)

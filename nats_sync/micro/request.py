"""A service's side of one request (:class:`Request`) and the caller's side of an error
reply (:class:`ServiceError`, :func:`check`).

How it works: a ``Request`` wraps the received ``Msg`` and answers through its public
``respond``. It runs on one handler thread only (the endpoint's delivery thread or one
of its workers), so its one piece of state, the error it answered with (read by the
service for the statistics once the handler returns), needs no lock. ``check`` is a pure
function of a reply. No threads of its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from nats_sync.errors import Error, InvalidArgumentError
from nats_sync.micro._api import ERROR_CODE_HEADER, ERROR_HEADER
from nats_sync.msg import Msg

if TYPE_CHECKING:
    from nats_sync._core.components.instrumentation import Instrumentation

HeadersArg = Mapping[str, str | Sequence[str]] | None


class ServiceError(Error):
    """A service answered with an error (the ``Nats-Service-Error`` headers).

    Raised by :func:`check`; a handler may also raise it to answer with its code and
    description instead of 500.

    Args:
        detail: the words of ``str(err)``.
        code: the error code (an HTTP-like number; 0 when the reply gave none).
        description: the service's description of the error.
        data: the error reply's body.
    """

    label = "service error"

    def __init__(
        self, detail: str = "", *, code: int = 0, description: str = "", data: bytes = b""
    ) -> None:
        super().__init__(detail or f"{code} {description}".strip())
        self.code = code
        self.description = description
        self.data = data

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild, (type(self), self.detail, self.code, self.description, self.data))


def _rebuild(
    cls: type[ServiceError], detail: str, code: int, description: str, data: bytes
) -> ServiceError:
    return cls(detail, code=code, description=description, data=data)


def _header(headers: Mapping[str, str | list[str]] | None, name: str) -> str | None:
    if not headers:
        return None
    value = headers.get(name)
    if value is None:  # header names are case-insensitive on the wire
        lower = name.lower()
        value = next((v for k, v in headers.items() if k.lower() == lower), None)
    if isinstance(value, list):
        return value[0] if value else None
    return value


def check(reply: Msg | BaseException) -> Msg:
    """Returns ``reply`` if it is not a service error reply, else raises it.

    Use it after ``nc.request`` (``check(nc.request(...))``) and on the items of
    ``nc.request_batch``, which may also be exceptions: those are raised as they are.
    ``spark.request_udf`` returns reply bodies only, without headers, so a service meant
    for it should also say what failed in the body (``respond_error(..., data=...)``).

    Args:
        reply: a reply message, or an exception standing for one (``request_batch``).

    Raises:
        ServiceError: the reply carries ``Nats-Service-Error-Code`` (or
            ``Nats-Service-Error``); ``.code`` and ``.description`` hold them.
        BaseException: ``reply`` itself, when it is an exception.
    """
    if isinstance(reply, BaseException):
        raise reply
    headers = reply.headers
    code_text = _header(headers, ERROR_CODE_HEADER)
    description = _header(headers, ERROR_HEADER)
    if code_text is None and description is None:
        return reply
    try:
        code = int(code_text) if code_text else 0
    except ValueError:
        code = 0
    description = description or ""
    raise ServiceError(
        f"{code_text or '?'} {description} (on {reply.subject!r})".strip(),
        code=code,
        description=description,
        data=reply.data,
    )


class Request:
    """One request to an endpoint, handed to its handler.

    Args:
        msg: the received message.
        tracing: the service's instrumentation, when traced (the endpoint gives it).

    Attributes:
        msg: the received message.
    """

    __slots__ = ("_error", "_responded", "_tracing", "msg")

    def __init__(self, msg: Msg, tracing: Instrumentation | None = None) -> None:
        self.msg = msg
        self._error: str | None = None
        self._responded = False
        #: The service's instrumentation (given by the endpoint): the answer then carries
        #: the handler's trace context.
        self._tracing = tracing

    @property
    def subject(self) -> str:
        """The subject the request was sent to."""
        return self.msg.subject

    @property
    def reply(self) -> str:
        """Where the answer goes ("" when the sender expects none)."""
        return self.msg.reply

    @property
    def data(self) -> bytes:
        """The request's body."""
        return self.msg.data

    @property
    def headers(self) -> Mapping[str, str | list[str]] | None:
        """The request's headers (None when it had none)."""
        return self.msg.headers

    @property
    def responded(self) -> bool:
        """Whether the handler answered (with data or an error)."""
        return self._responded

    def respond(self, data: bytes = b"", headers: HeadersArg = None) -> None:
        """Answers the request.

        Raises:
            InvalidArgumentError: the request has no reply subject.
            ConnectionClosedError: the client is closed.
        """
        self._responded = True
        if self._tracing is not None:
            headers = self._tracing.inject(headers)
        self.msg.respond(data, headers)

    def respond_error(
        self, code: int | str, description: str, data: bytes = b"", headers: HeadersArg = None
    ) -> None:
        """Answers with an error: ``Nats-Service-Error`` and ``Nats-Service-Error-Code``
        headers (beside ``headers``) and ``data`` as the body; counted in the endpoint's
        ``num_errors``.

        Args:
            code: the error code, e.g. 400 or ``"404"``: an int, or a str sent as given
                (nats-py's ``respond_error`` and nats.go's ``Error`` take a string, so
                code ported from either works unchanged).
            description: what went wrong, in words (one line).
            data: a body for the caller, if any.
            headers: more headers.

        Raises:
            InvalidArgumentError: ``code`` is neither an int nor a str, is an empty str
                (nats.go refuses it too) or holds a line break (it goes in a header line),
                or the request has no reply subject.
        """
        # bool is an int subclass, but True as a code is a mistake, not 1.
        if isinstance(code, bool) or not isinstance(code, (int, str)):
            raise InvalidArgumentError(f"code must be an int or a str, got {code!r}")
        code_text = str(code)
        if not code_text or "\r" in code_text or "\n" in code_text:
            raise InvalidArgumentError(f"code must be non-empty and on one line, got {code!r}")
        description = str(description).replace("\r", " ").replace("\n", " ")
        self._error = f"{code_text}:{description}"
        all_headers: dict[str, str | Sequence[str]] = dict(headers or {})
        all_headers[ERROR_HEADER] = description
        all_headers[ERROR_CODE_HEADER] = code_text
        self.respond(data, all_headers)

    def __repr__(self) -> str:
        return f"<Request subject={self.subject!r} reply={self.reply!r}>"

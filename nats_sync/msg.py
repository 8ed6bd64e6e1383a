"""The :class:`Msg` a subscription or a request hands to user code.

How it works: a ``Msg`` is an immutable tuple laid out like the protocol core's
``MsgOp`` (subject, sid, reply, payload, headers, status, description, size, context),
so the reader thread's parser builds it in one allocation, with the receiving client's
``publish`` as the context ``respond`` uses. No threads, no state.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from nats_sync._defaults import STATUS_NO_RESPONDERS
from nats_sync.errors import InvalidArgumentError

if TYPE_CHECKING:
    from nats_sync._core.proto import Headers

#: ``publish(subject, payload, reply, headers)`` of the client that received a message.
Publisher = Callable[[str, bytes, str, "Mapping[str, str | Sequence[str]] | None"], None]

try:  # the C accessor namedtuple uses: as fast as reading an attribute
    from collections import _tuplegetter  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - other Python implementations

    def _tuplegetter(index: int, doc: str) -> Any:
        return property(itemgetter(index), doc=doc)


_SUBJECT, _SID, _REPLY, _DATA, _HEADERS, _STATUS, _DESCRIPTION, _SIZE, _PUBLISH = range(9)


class Msg(tuple):  # type: ignore[type-arg]  # fields are typed below
    """A message received from NATS (read-only).

    Attributes:
        subject: the subject it was published to.
        reply: the reply subject ("" when none).
        data: the payload.
        headers: None, or name -> value (a list of values for a repeated name).
        header: nats-py's second name for ``headers``.
        sid: the id of the subscription that received it.
        status: the status code of a status message (e.g. 503), else None.
        description: the status description ("" when none).
    """

    __slots__ = ()

    if TYPE_CHECKING:
        subject: str
        sid: int
        reply: str
        data: bytes
        headers: Headers | None
        header: Headers | None
        status: int | None
        description: str
        _publish: Publisher | None
    else:
        subject = _tuplegetter(_SUBJECT, "the subject it was published to")
        sid = _tuplegetter(_SID, "the id of the subscription that received it")
        reply = _tuplegetter(_REPLY, 'the reply subject ("" when none)')
        data = _tuplegetter(_DATA, "the payload")
        headers = _tuplegetter(_HEADERS, "None, or name -> value (a list for a repeated name)")
        header = _tuplegetter(_HEADERS, "nats-py's second name for headers")
        status = _tuplegetter(_STATUS, "the status code of a status message, else None")
        description = _tuplegetter(_DESCRIPTION, 'the status description ("" when none)')
        _publish = _tuplegetter(_PUBLISH, "the receiving client's publish, for respond()")

    def __new__(
        cls,
        subject: str,
        reply: str = "",
        data: bytes = b"",
        headers: Headers | None = None,
        sid: int = 0,
        status: int | None = None,
        description: str = "",
        publish: Publisher | None = None,
    ) -> Msg:
        """Makes a message by hand (tests, fakes); clients build theirs in the parser."""
        return tuple.__new__(
            cls, (subject, sid, reply, data, headers, status, description, len(data), publish)
        )

    # Two messages are the same message only if they are the same object (as before
    # this was a tuple); headers are a dict, so a value hash would fail anyway.
    __eq__ = object.__eq__
    __ne__ = object.__ne__
    __hash__ = object.__hash__

    def __reduce__(self) -> tuple[Any, ...]:
        # The client's publish is not picklable; a pickled message cannot respond.
        return (
            Msg,
            (
                self.subject,
                self.reply,
                self.data,
                self.headers,
                self.sid,
                self.status,
                self.description,
            ),
        )

    @property
    def is_no_responders(self) -> bool:
        """Whether this is the server's "no responders" status (503, no payload)."""
        return self[_STATUS] == STATUS_NO_RESPONDERS and not self[_DATA]

    def respond(
        self, data: bytes = b"", headers: Mapping[str, str | Sequence[str]] | None = None
    ) -> None:
        """Publishes ``data`` to this message's reply subject.

        Raises:
            InvalidArgumentError: the message has no reply subject, or did not come
                from a client.
        """
        if not self[_REPLY]:
            raise InvalidArgumentError(
                f"message on {self[_SUBJECT]!r} has no reply subject to respond to"
            )
        publish = self[_PUBLISH]
        if publish is None:
            raise InvalidArgumentError("message was not received by a client, so it cannot respond")
        publish(self[_REPLY], data, "", headers)

    def __repr__(self) -> str:
        data = self[_DATA]
        shown = data if len(data) <= 32 else data[:32] + b"..."
        status = self[_STATUS]
        extra = f" status={status}" if status is not None else ""
        return f"<Msg subject={self[_SUBJECT]!r} reply={self[_REPLY]!r}{extra} data={shown!r}>"

"""The :class:`Msg` a subscription or a request hands to user code."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from nats_sync._defaults import STATUS_NO_RESPONDERS
from nats_sync.errors import Error

if TYPE_CHECKING:
    from nats_sync._proto import Headers

#: ``publish(subject, payload, reply, headers)`` of the client that received a message.
Publisher = Callable[[str, bytes, str, "Mapping[str, str | Sequence[str]] | None"], None]


class Msg:
    """A message received from NATS.

    Attributes:
        subject: the subject it was published to.
        reply: the reply subject ("" when none).
        data: the payload.
        headers: None, or name -> value (a list of values for a repeated name).
        sid: the id of the subscription that received it.
        status: the status code of a status message (e.g. 503), else None.
        description: the status description ("" when none).
    """

    __slots__ = ("_publish", "data", "description", "headers", "reply", "sid", "status", "subject")

    def __init__(
        self,
        subject: str,
        reply: str = "",
        data: bytes = b"",
        headers: Headers | None = None,
        sid: int = 0,
        status: int | None = None,
        description: str = "",
        publish: Publisher | None = None,
    ) -> None:
        self.subject = subject
        self.reply = reply
        self.data = data
        self.headers = headers
        self.sid = sid
        self.status = status
        self.description = description
        self._publish = publish

    @property
    def is_no_responders(self) -> bool:
        """Whether this is the server's 503 answer to a request nobody listened to."""
        return self.status == STATUS_NO_RESPONDERS and not self.data

    def respond(
        self, data: bytes = b"", headers: Mapping[str, str | Sequence[str]] | None = None
    ) -> None:
        """Publishes ``data`` to this message's reply subject.

        Raises:
            Error: the message has no reply subject, or did not come from a client.
        """
        if not self.reply:
            raise Error(f"message on {self.subject!r} has no reply subject to respond to")
        if self._publish is None:
            raise Error("message was not received by a client, so it cannot respond")
        self._publish(self.reply, data, "", headers)

    def __repr__(self) -> str:
        size = len(self.data)
        shown = self.data if size <= 32 else self.data[:32] + b"..."
        extra = f" status={self.status}" if self.status is not None else ""
        return f"<Msg subject={self.subject!r} reply={self.reply!r}{extra} data={shown!r}>"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Msg):
            return NotImplemented
        return (
            self.subject == other.subject
            and self.reply == other.reply
            and self.data == other.data
            and self.headers == other.headers
            and self.status == other.status
        )

    __hash__ = None  # type: ignore[assignment]

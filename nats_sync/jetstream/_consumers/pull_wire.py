"""The pull request on the wire and what comes back on its inbox: pure functions.

How it works: a pull is a core publish of ``{"batch", "expires", "max_bytes", "no_wait",
"idle_heartbeat"}`` (durations in ns; :func:`pull_body` writes it, with a priority group's
fields when the read names one: ``_consumers.priority``) to
``<prefix>.CONSUMER.MSG.NEXT.<stream>.<consumer>`` with an inbox as the reply subject.
The server sends the messages there and, on the same inbox, the status messages
:func:`classify` sorts out (notes §2.4):

======  =====================================  ====================================
status  description                            what it means here
======  =====================================  ====================================
100     Idle Heartbeat                         ``heartbeat``: the request is alive
404     No Messages                            ``done``: a ``no_wait`` found nothing
408     Request Timeout / Interest Expired...  ``done``; ``Nats-Pending-*`` = unsent
409     Message Size Exceeds MaxBytes, Batch   ``done`` (with the pending headers)
        Completed, Server Shutdown
409     Leadership Change                      ``reset``: every request is gone
409     Consumer Deleted                       ``terminal``: ``ConsumerDeletedError``
409     Consumer is push based                 ``terminal``: ``StatusError``
409     Exceeded MaxWaiting / MaxRequest...    ``warning``: the request was refused
423     Nats-Pin-Id mismatch / Wrong-Pin-Id    ``pin_lost``: pull again without the id
400     Bad Request - Priority Group missing,  ``terminal``: the priority group errors
        Invalid Priority Group, Not a ...      (``priority.refusal``)
503     (no responders)                        ``no_responders``: no such consumer
other   (400 Bad Request, 412...)              ``terminal``: ``StatusError``
======  =====================================  ====================================

:func:`message_size` counts a delivered message as the server does against
``max_bytes``. The readers of ``_consumers.pull`` (``MessageBatch``, ``MessageStream``) and the
range reads of ``_streams.ranges`` share these rules. Nothing here keeps state, starts a thread
or takes a lock: the reading threads call them, any number at once.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from nats_sync import _defaults as d
from nats_sync._core import proto
from nats_sync.jetstream._consumers.priority import refusal
from nats_sync.jetstream._streams.wire import header_int, to_ns
from nats_sync.jetstream.errors import (
    ConsumerDeletedError,
    ConsumerNotFoundError,
    JetStreamError,
    PinIdMismatchError,
    StatusError,
)

if TYPE_CHECKING:
    from nats_sync.msg import Msg

Kind = Literal[
    "message", "heartbeat", "done", "reset", "warning", "no_responders", "pin_lost", "terminal"
]


@dataclass(frozen=True)
class PullStatus:
    """What a message on a pull inbox means (see the module's table).

    Attributes:
        kind: the meaning.
        pending_msgs: for ``done`` and ``pin_lost``, the messages the ended request still owed
            (``Nats-Pending-Messages``); None when the status does not say.
        pending_bytes: the same for bytes (``Nats-Pending-Bytes``).
        error: for ``terminal``, ``warning``, ``no_responders`` and ``pin_lost``: the
            error.
    """

    kind: Kind
    pending_msgs: int | None = None
    pending_bytes: int | None = None
    error: JetStreamError | None = None


_MESSAGE = PullStatus("message")
_HEARTBEAT = PullStatus("heartbeat")

#: 409 descriptions (lower case) that end one request normally.
_ENDS_REQUEST = ("message size exceeds maxbytes", "batch completed", "server shutdown")


def classify(msg: Msg) -> PullStatus:
    """What ``msg``, received on a pull inbox, means."""
    status = msg.status
    if status is None:
        return _MESSAGE
    description = msg.description
    lowered = description.lower()
    if status == d.STATUS_CONTROL:
        return _HEARTBEAT
    if status == d.STATUS_NOT_FOUND:
        return PullStatus("done")
    if status == d.STATUS_REQUEST_TIMEOUT:
        return PullStatus("done", *_pending_headers(msg))
    if status == 409:
        if "consumer deleted" in lowered:
            return PullStatus(
                "terminal",
                error=ConsumerDeletedError(f"the consumer was deleted ({status} {description})"),
            )
        if "leadership change" in lowered:
            return PullStatus("reset")
        if any(text in lowered for text in _ENDS_REQUEST):
            return PullStatus("done", *_pending_headers(msg))
        if "push based" in lowered:
            return PullStatus(
                "terminal",
                error=StatusError(
                    f"{status} {description}: pull requests need a pull consumer",
                    status=status,
                    description=description,
                ),
            )
        return PullStatus(
            "warning",
            error=StatusError(
                f"the pull request was refused: {status} {description}",
                status=status,
                description=description,
            ),
        )
    if status == d.STATUS_PIN_MISMATCH:
        return PullStatus(
            "pin_lost",
            *_pending_headers(msg),
            error=PinIdMismatchError(
                f"{status} {description}: the pin moved to another reader",
                status=status,
                description=description,
            ),
        )
    if status == 400:
        error = refusal(status, description)
        if error is not None:
            return PullStatus("terminal", error=error)
    if status == d.STATUS_NO_RESPONDERS:
        text = (
            "consumer not found: no responders for the pull request (the consumer "
            "does not exist, or its server is not ready)"
        )
        return PullStatus(
            "no_responders",
            error=ConsumerNotFoundError(text, code=404, err_code=10014, description=text),
        )
    return PullStatus(
        "terminal",
        error=StatusError(
            f"unexpected status {status} {description}".rstrip(),
            status=status,
            description=description,
        ),
    )


def _pending_headers(msg: Msg) -> tuple[int | None, int | None]:
    return (
        header_int(msg.headers, "Nats-Pending-Messages"),
        header_int(msg.headers, "Nats-Pending-Bytes"),
    )


def pull_body(
    batch: int,
    *,
    expires: float | None = None,
    max_bytes: int | None = None,
    no_wait: bool = False,
    heartbeat: float | None = None,
    group: Mapping[str, Any] | None = None,
) -> bytes:
    """The JSON of a pull request (durations in seconds here, ns on the wire);
    ``group``: a priority group's fields (``PullGroup.fields()``)."""
    body: dict[str, Any] = {"batch": batch}
    if expires:
        body["expires"] = to_ns(expires)
    if max_bytes:
        body["max_bytes"] = max_bytes
    if no_wait:
        body["no_wait"] = True
    if heartbeat:
        body["idle_heartbeat"] = to_ns(heartbeat)
    if group:
        body.update(group)
    return json.dumps(body, separators=(",", ":")).encode()


def message_size(msg: Msg) -> int:
    """A delivered message's size as the server counts it against ``max_bytes``:
    subject + reply + header block + payload (ADR-37)."""
    size = len(msg.subject) + len(msg.reply) + len(msg.data)
    headers = msg.headers
    if headers:
        # Re-encoded: the block as every client writes it (``Name: value``); the core
        # message does not expose the size it was read with.
        size += len(proto.encode_headers(headers))
    return size

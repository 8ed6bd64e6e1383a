"""Priority groups (ADR-42, nats-server 2.11): a pull's group and criteria, and the pin.

How it works: a consumer with ``priority_policy`` and ``priority_groups`` serves only
pulls that name one of its groups (``"group"`` in the pull request) and, by policy:

- ``overflow``: ``min_pending`` / ``min_ack_pending``: the pull is served only while the
  consumer has at least that many messages pending / unacknowledged (either suffices);
- ``prioritized``: ``priority`` 0-9: waiting pulls are served lowest number first;
- ``pinned_client``: the server picks one waiting pull and marks every message it
  delivers for the group with a ``Nats-Pin-Id`` header; from then on only pulls that
  carry that id (``"id"``) are served, until the pinned reader makes no pull for
  ``priority_timeout`` or someone calls UNPIN. A pull carrying a stale id is answered
  ``423`` (``Nats-Pin-Id mismatch`` at once, ``Nats-Wrong-Pin-Id`` when it was
  waiting): the reader drops the id and pulls again without it, a standby again.

:class:`PinTracker` holds the pin ids (one per group) of one ``PullConsumer`` object:
every read of that object (fetches, message streams, consume threads) shares it, as in
nats.go. :class:`PullGroup` is one read's group and criteria over the tracker: the
pull's fields with the current pin (:meth:`PullGroup.fields`), the pin taken from a
delivered message (:meth:`PullGroup.seen`), the pin dropped after a 423
(:meth:`PullGroup.lost`, only if it is still the id that read sent: another read may
have been pinned meanwhile).

Threads and state: no thread here. The tracker's dict is guarded by its lock, held for
one lookup or store, never while publishing or waiting; any reading thread calls in.
A ``PullGroup``'s ``sent`` (the id of its last pull) is written and read by the thread
reading that one read.
"""

from __future__ import annotations

import re
import threading
from typing import TYPE_CHECKING, Any

from nats_sync._core.validate import check_int
from nats_sync.errors import InvalidArgumentError
from nats_sync.jetstream._streams.wire import header_value
from nats_sync.jetstream.errors import (
    APIError,
    InvalidGroupNameError,
    InvalidPriorityGroupError,
    PriorityGroupRequiredError,
    PriorityPolicyError,
)

if TYPE_CHECKING:
    from nats_sync.msg import Msg

#: The header that carries the pin on each message delivered to the pinned read.
PIN_ID_HEADER = "Nats-Pin-Id"
#: A pull's ``priority``: 0 is served first.
PRIORITY_MIN, PRIORITY_MAX = 0, 9
#: The server's rule for a group name (``validGroupName``, ADR-6 limited-term, <= 16).
_GROUP_NAME = re.compile(r"[A-Za-z0-9/_=-]{1,16}")

#: Pull refusals (400 descriptions, lower case) and their classes.
_REFUSALS: tuple[tuple[str, type[APIError]], ...] = (
    ("priority group missing", PriorityGroupRequiredError),
    ("invalid priority group", InvalidPriorityGroupError),
    ("priority consumer", PriorityPolicyError),  # "Not a Overflow/Pinned Client Priority..."
    ("priority must be between", PriorityPolicyError),
)


def check_group_name(group: object) -> str:
    """``group`` if it is a valid priority group name.

    Raises:
        InvalidGroupNameError: empty, over 16 characters, or a character other than
            ``A-Z a-z 0-9 - _ / =``.
    """
    if not isinstance(group, str) or _GROUP_NAME.fullmatch(group) is None:
        raise InvalidGroupNameError(
            f"priority group must be 1-16 of A-Z a-z 0-9 - _ / =, got {group!r}"
        )
    return group


def refusal(status: int, description: str) -> APIError | None:
    """The error for a pull refused for its priority group fields (a 400), or None."""
    lowered = description.lower()
    for text, cls in _REFUSALS:
        if text in lowered:
            return cls(
                f"the pull request was refused: {status} {description}",
                code=status,
                description=description,
            )
    return None


class PinTracker:
    """The ``Nats-Pin-Id`` per priority group of one pull consumer object."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pins: dict[str, str] = {}

    def get(self, group: str) -> str | None:
        """The pin id held for ``group``, or None."""
        with self._lock:
            return self._pins.get(group)

    def set(self, group: str, pin: str) -> None:
        """Keeps ``pin`` for ``group`` (the server pinned a read of ours)."""
        with self._lock:
            self._pins[group] = pin

    def drop(self, group: str, pin: str | None) -> None:
        """Forgets ``group``'s pin if it is still ``pin`` (None: whatever it is)."""
        with self._lock:
            if pin is None or self._pins.get(group) == pin:
                self._pins.pop(group, None)


class PullGroup:
    """One read's priority group and criteria (see the module docstring).

    Args:
        pins: the consumer object's tracker.
        group: the group's name.
        min_pending: ``overflow``: serve only with at least this many pending.
        min_ack_pending: ``overflow``: serve only with at least this many unacknowledged.
        priority: ``prioritized``: 0 (served first) to 9.
    """

    def __init__(
        self,
        pins: PinTracker,
        group: str,
        min_pending: int | None,
        min_ack_pending: int | None,
        priority: int | None,
    ) -> None:
        self.group = group
        self._pins = pins
        self._fields: dict[str, Any] = {"group": group}
        if min_pending:
            self._fields["min_pending"] = min_pending
        if min_ack_pending:
            self._fields["min_ack_pending"] = min_ack_pending
        if priority:
            self._fields["priority"] = priority
        #: The pin id the last pull of this read carried (None: none).
        self.sent: str | None = None

    def fields(self) -> dict[str, Any]:
        """The pull request's priority fields, with the pin id when one is held (and
        notes it as :attr:`sent`)."""
        pin = self._pins.get(self.group)
        self.sent = pin
        if pin is None:
            return self._fields
        return {**self._fields, "id": pin}

    def seen(self, msg: Msg) -> None:
        """Keeps the pin a delivered message carries (``Nats-Pin-Id``), if any."""
        headers = msg.headers
        if headers:
            pin = header_value(headers, PIN_ID_HEADER)
            if pin and pin != self.sent:
                self._pins.set(self.group, pin)
                self.sent = pin

    def lost(self) -> None:
        """A pull was answered 423: drops the pin it carried (the next pull goes
        without, as a standby)."""
        if self.sent is not None:
            self._pins.drop(self.group, self.sent)
            self.sent = None


def pull_group(
    pins: PinTracker,
    group: str | None,
    min_pending: int | None,
    min_ack_pending: int | None,
    priority: int | None,
) -> PullGroup | None:
    """The checked :class:`PullGroup` of a read's keywords (None without a group).

    Raises:
        InvalidGroupNameError: a bad group name.
        InvalidArgumentError: criteria without a group, ``min_pending`` or
            ``min_ack_pending`` below 0, ``priority`` outside 0-9.
    """
    if min_pending is not None:
        check_int(min_pending, "min_pending", 0)
    if min_ack_pending is not None:
        check_int(min_ack_pending, "min_ack_pending", 0)
    if priority is not None:
        check_int(priority, "priority", PRIORITY_MIN)
        if priority > PRIORITY_MAX:
            raise InvalidArgumentError(
                f"priority must be {PRIORITY_MIN}..{PRIORITY_MAX}, got {priority!r}"
            )
    if group is None:
        if min_pending is not None or min_ack_pending is not None or priority is not None:
            raise InvalidArgumentError(
                "min_pending, min_ack_pending and priority need a group (the priority "
                "group the read belongs to)"
            )
        return None
    return PullGroup(pins, check_group_name(group), min_pending, min_ack_pending, priority)

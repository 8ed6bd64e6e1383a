"""The errors of partitioned consumer groups: all ``ConsumerGroupError``, a
``JetStreamError`` (so a ``nats_sync.Error``)."""

from __future__ import annotations

from nats_sync.errors import InvalidArgumentError
from nats_sync.jetstream.errors import JetStreamError

__all__ = [
    "ConsumerGroupConfigError",
    "ConsumerGroupError",
    "ConsumerGroupExistsError",
    "ConsumerGroupNotFoundError",
    "GroupConfigChangedError",
    "MemberNotInGroupError",
]


class ConsumerGroupError(JetStreamError):
    """Root of the partitioned consumer group errors."""

    label = "consumer group error"


class ConsumerGroupConfigError(ConsumerGroupError, InvalidArgumentError):
    """A group config (given, or stored by another client) breaks the rules."""

    label = "consumer group config error"


class ConsumerGroupNotFoundError(ConsumerGroupError):
    """No such group on the stream (or no group of that kind was ever made)."""

    label = "consumer group not found"


class ConsumerGroupExistsError(ConsumerGroupError):
    """The group exists with another config: delete it and create it again."""

    label = "consumer group exists"


class MemberNotInGroupError(ConsumerGroupError):
    """The member is not in the static group's membership."""

    label = "member not in group"


class GroupConfigChangedError(ConsumerGroupError):
    """A running member's group config changed in a way it cannot follow (any change of
    a static group; partitions, filters or buffers of an elastic one): it left."""

    label = "group config changed"

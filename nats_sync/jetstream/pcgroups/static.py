"""Static partitioned consumer groups: a fixed membership on a stream that already puts
the partition number first in its subjects.

How it works: the stream's own subject transform (e.g. ``foo.*`` to
``{{partition(10,1)}}.foo.{{wildcard(1)}}``) stores every message under
``<partition>.<subject>``. ``create_static`` stores the group's config in the
``static-consumer-groups`` bucket; each member instance (``static_consume``) makes the
member's durable consumer ``<group>-<member>`` on the stream, filtered on its
partitions, and reads it on the group's thread (``_member``). The config may not change
while members run: any change, or its deletion, makes every member leave (a change is
an error, a deletion a clean end) and delete its consumer.

Threads and state: each member instance has its group's thread (a ``ConsumeContext``);
:class:`_Static` holds the config the member joined with, read on that thread only.
The other functions run on the caller's thread.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from nats_sync.errors import ErrorCallback, InvalidArgumentError
from nats_sync.jetstream._consumers.consumer import ConsumeContext, PullConsumer
from nats_sync.jetstream._consumers.msg import JsMsg
from nats_sync.jetstream._kv.bucket import Entry
from nats_sync.jetstream.api import ConsumerConfig
from nats_sync.jetstream.errors import ConsumerNotFoundError, KeyWrongLastSequenceError
from nats_sync.jetstream.pcgroups._config import (
    ConsumerGroupConfigError,
    ConsumerGroupExistsError,
    ConsumerGroupNotFoundError,
    GroupJetStream,
    MappingsArg,
    MemberNotInGroupError,
    StaticConfig,
    bucket,
    bucket_for_create,
    check_max_members,
    check_membership,
    check_names,
    group_names,
    in_membership,
    key_of,
    mappings_of,
    names_of,
    partition_filters,
    read_value,
    static_from_json,
)
from nats_sync.jetstream.pcgroups._defaults import PCG_PRIORITY_GROUP
from nats_sync.jetstream.pcgroups._member import (
    MemberSource,
    member_template,
    pinned_config,
)
from nats_sync.jetstream.pcgroups.errors import GroupConfigChangedError

__all__ = [
    "create_static",
    "delete_static",
    "list_static",
    "static_consume",
    "static_member_step_down",
]

_KIND = "static"


def _consumer_name(group: str, member: str) -> str:
    return f"{group}-{member}"


def create_static(
    js: GroupJetStream,
    stream: str,
    group: str,
    max_members: int,
    filters: str | Sequence[str] | None,
    members: Sequence[str] = (),
    member_mappings: MappingsArg | None = (),
) -> StaticConfig:
    """Creates a static group on ``stream``, whose subjects already start with the
    partition number (0 to ``max_members - 1``, the stream's subject transform puts it
    there). The same config again is fine.

    Args:
        js: the JetStream context (``nc.jetstream()``).
        stream: the stream.
        group: the group's name.
        max_members: the number of partitions, and of members at most.
        filters: a subject filter or several (without the partition number), the
            messages the group reads (None or empty: all).
        members: the members; the partitions are shared out among them evenly.
        member_mappings: or the partitions of each member, by hand: ``MemberMapping``
            objects or ``{member: [partitions]}``; each partition exactly once.

    Returns:
        The stored config.

    Raises:
        ConsumerGroupConfigError: a bad name, count, member list or mapping.
        ConsumerGroupExistsError: the group exists with another config.
        StreamNotFoundError: no such stream.
    """
    check_names(stream, group)
    config = StaticConfig(
        max_members=check_max_members(max_members),
        filters=names_of(filters, "filters"),
        members=names_of(members, "members"),
        member_mappings=mappings_of(member_mappings),
    )
    for member in config.member_names():
        check_names(stream, group, member)
    check_membership(config.max_members, config.members, config.member_mappings)
    replicas = js.stream_info(stream).config.num_replicas or 1
    kv = bucket_for_create(js, False, replicas)
    try:
        kv.create(key_of(stream, group), config.to_json())
    except KeyWrongLastSequenceError:
        value, _ = read_value(kv, stream, group, _KIND)
        stored = static_from_json(value, f"static group {group!r}")
        if stored != config:
            raise ConsumerGroupExistsError(
                f"static consumer group {group!r} on stream {stream!r} exists with another "
                f"config ({stored}); delete it first"
            ) from None
    return config


def get_static(js: GroupJetStream, stream: str, group: str) -> StaticConfig:
    """A static group's config.

    Raises:
        ConsumerGroupNotFoundError: no such group.
        ConsumerGroupConfigError: the stored config is broken.
    """
    check_names(stream, group)
    value, _ = read_value(bucket(js, False), stream, group, _KIND)
    return static_from_json(value, f"static group {group!r}")


def delete_static(js: GroupJetStream, stream: str, group: str) -> None:
    """Deletes a static group: its config (its running members leave) and its members'
    consumers.

    Raises:
        ConsumerGroupNotFoundError: no such group.
        StreamNotFoundError: no such stream.
    """
    try:
        members: list[str] | None = get_static(js, stream, group).member_names()
    except ConsumerGroupConfigError:
        members = None  # a broken config is deleted too, with every "<group>-" consumer
    js.stream_info(stream)
    bucket(js, False).delete(key_of(stream, group))
    for info in js.list_consumers(stream):
        name = info.name
        if (
            name.startswith(f"{group}-")
            if members is None
            else name in {_consumer_name(group, m) for m in members}
        ):
            try:
                js.delete_consumer(stream, name)
            except ConsumerNotFoundError:
                pass  # its member deleted it on seeing the group go


def list_static(js: GroupJetStream, stream: str) -> list[str]:
    """The names of the static groups on ``stream`` (sorted)."""
    try:
        kv = bucket(js, False)
    except ConsumerGroupNotFoundError:
        return []
    return group_names(kv, stream)


def static_member_step_down(js: GroupJetStream, stream: str, group: str, member: str) -> None:
    """Makes the member's active (pinned) instance step down: the server unpins it and
    one of its standby instances gets the messages from then on (ADR-42 unpin).

    Raises:
        ConsumerNotFoundError: the member has no consumer (no instance ever ran).
    """
    check_names(stream, group, member)
    js.consumer(stream, _consumer_name(group, member)).unpin(PCG_PRIORITY_GROUP)


def static_consume(
    js: GroupJetStream,
    stream: str,
    group: str,
    member: str,
    cb: Callable[[JsMsg], None],
    config: ConsumerConfig | None = None,
    *,
    error_cb: ErrorCallback | None = None,
) -> ConsumeContext:
    """Joins a static group as ``member`` and runs ``cb(msg)`` for each of its messages,
    in order, on the group's thread; ``msg.subject`` comes without the partition number.

    Several instances of one member may run: one gets the messages, the others wait as
    standbys and one takes over when it stops (after the ack wait) or steps down.

    Args:
        js: the JetStream context.
        stream: the group's stream.
        group: the group.
        member: a member of the group.
        cb: ``callable(msg)``; acking is up to it (explicit acks by default).
        config: the member's consumer config as a template (its ``ack_policy``,
            ``ack_wait`` (default 5 s, also the standby's take-over time),
            ``max_ack_pending``, ...); names, filters and the priority group are set
            here.
        error_cb: ``callable(exception)`` for errors of ``cb`` and the one that ends
            it (e.g. ``GroupConfigChangedError``); None: the ``nats_sync`` log.

    Returns:
        The running ``ConsumeContext``: ``stop()`` leaves the group. It ends by itself
        when the group is deleted, or with ``GroupConfigChangedError`` when its config
        changes.

    Raises:
        ConsumerGroupNotFoundError: no such group.
        MemberNotInGroupError: ``member`` is not one of its members.
        StreamNotFoundError: no such stream.
    """
    check_names(stream, group, member)
    if not callable(cb):
        raise InvalidArgumentError(f"cb must be callable, got {cb!r}")
    template, ack_wait = member_template(config)
    js.stream_info(stream)
    kv = bucket(js, False)
    value, _ = read_value(kv, stream, group, _KIND)
    current = static_from_json(value, f"static group {group!r}")
    if not in_membership(current.members, current.member_mappings, member):
        raise MemberNotInGroupError(
            f"{member!r} is not a member of static consumer group {group!r} on stream "
            f"{stream!r} (members: {current.member_names()})"
        )
    kind = _Static(stream, group, member, current, template, ack_wait)
    source = MemberSource(js, kv, stream, group, member, ack_wait, kind)
    try:
        source.start(kind.join(source))
    except BaseException:
        source.stop()
        raise
    return ConsumeContext(source, cb, error_cb, _consumer_name(group, member), js.client)


class _Static:
    """A static member's part of :class:`MemberSource` (the group's thread only)."""

    def __init__(
        self,
        stream: str,
        group: str,
        member: str,
        config: StaticConfig,
        template: ConsumerConfig,
        ack_wait: float,
    ) -> None:
        self.consumer_stream = stream
        self._group = group
        self._member = member
        self._config = config
        self._template = template
        self._ack_wait = ack_wait

    def join(self, source: MemberSource) -> PullConsumer | None:
        config = self._config
        filters = partition_filters(
            config.members, config.max_members, config.member_mappings, self._member, config.filters
        )
        if not filters:
            return None
        name = _consumer_name(self._group, self._member)
        return source.js.create_consumer(
            self.consumer_stream,
            pinned_config(self._template, self._ack_wait, filters, durable_name=name),
        )

    def apply(self, source: MemberSource, entry: Entry) -> None:
        what = f"static group {self._group!r}"
        try:
            changed = static_from_json(entry.value, what) != self._config
        except InvalidArgumentError:
            changed = True
        if changed:
            self.on_group_deleted(source)
            raise GroupConfigChangedError(
                f"the config of {what} on stream {self.consumer_stream!r} changed; a static "
                f"group's members cannot follow that, so member {self._member!r} left"
            )

    def idle(self, source: MemberSource) -> None:
        """Nothing to do: a static member's consumer never changes."""

    def lost(self, source: MemberSource, err: Exception) -> None:
        source.end(None if not source.group_exists() else err)

    def on_group_deleted(self, source: MemberSource) -> None:
        source.stop_consuming()
        source.delete_consumer(_consumer_name(self._group, self._member))

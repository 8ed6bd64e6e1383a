"""Elastic partitioned consumer groups: members taken in and out while the group runs,
on any stream.

How it works: ``create_elastic`` stores the config in the ``elastic-consumer-groups``
bucket and makes the group's work-queue stream ``<stream>-<group>``, which sources the
origin stream through a subject transform that puts the partition number first
(``{{Partition(N,1)}}.foo.{{Wildcard(1)}}``: a hash of the chosen wildcard tokens, or of
the whole subject). Each member instance (``elastic_consume``) makes the member's
consumer ``<member>`` on that stream (its partitions' filters, an inactive threshold of
the ack wait) and watches the config. When the membership changes, the instance that
holds the pin deletes the member's consumer and makes it again with the new filters
(from the stream's first unacknowledged message, as the stream is a work queue: an
acked message is gone, an unacked one goes to its partition's new owner); a standby
waits a moment and makes the same consumer (the same config: nothing changes). A
member whose consumer could not be made yet (the work queue refuses overlapping
filters until the former owner let go) tries again every ack wait and a half.

Threads and state: each member instance has its group's thread (a ``ConsumeContext``);
:class:`_Elastic` holds the config it follows and when to try again, read and written
on that thread only. The other functions run on the caller's thread.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace

from nats_sync.errors import Error, ErrorCallback, InvalidArgumentError
from nats_sync.jetstream._consumers.consumer import ConsumeContext, PullConsumer
from nats_sync.jetstream._consumers.msg import JsMsg
from nats_sync.jetstream._kv.bucket import Entry
from nats_sync.jetstream.api import ConsumerConfig
from nats_sync.jetstream.errors import (
    APIError,
    ConsumerExistsError,
    KeyWrongLastSequenceError,
    StreamNotFoundError,
)
from nats_sync.jetstream.pcgroups._config import (
    ConsumerGroupConfigError,
    ConsumerGroupExistsError,
    ConsumerGroupNotFoundError,
    ElasticConfig,
    GroupJetStream,
    MappingsArg,
    PartitioningFilter,
    bucket,
    bucket_for_create,
    check_elastic,
    check_max_members,
    check_names,
    elastic_from_json,
    group_names,
    in_membership,
    key_of,
    mappings_of,
    names_of,
    partition_filters,
    read_value,
    transform_destination,
)
from nats_sync.jetstream.pcgroups._defaults import PCG_PRIORITY_GROUP, PCG_STANDBY_BACKOFF
from nats_sync.jetstream.pcgroups._member import (
    MemberSource,
    log,
    member_template,
    pinned_config,
)
from nats_sync.jetstream.pcgroups.errors import GroupConfigChangedError
from nats_sync.jetstream.pcgroups.static import get_static

__all__ = [
    "add_members",
    "create_elastic",
    "delete_elastic",
    "delete_member_mappings",
    "delete_members",
    "elastic_consume",
    "elastic_member_step_down",
    "get_elastic",
    "list_elastic",
    "list_members",
    "set_member_mappings",
]

_KIND = "elastic"
#: The server's refusal of a consumer whose filters overlap another's on a work queue.
_WQ_NOT_UNIQUE = 10100


def _group_stream(stream: str, group: str) -> str:
    return f"{stream}-{group}"


def create_elastic(
    js: GroupJetStream,
    stream: str,
    group: str,
    max_members: int,
    filter: str | None = None,
    partitioning_wildcards: Sequence[int] = (),
    *,
    max_buffered_msgs: int = 0,
    max_buffered_bytes: int = 0,
) -> ElasticConfig:
    """Creates an elastic group on ``stream`` with no members yet, and its work-queue
    stream ``<stream>-<group>``. The same config again is fine.

    Args:
        js: the JetStream context (``nc.jetstream()``).
        stream: the stream (any subjects).
        group: the group's name.
        max_members: the number of partitions, and of members at most.
        filter: the subjects the group reads, with ``*`` wildcards (None: all).
        partitioning_wildcards: which ``*`` of ``filter`` (1 for the first) make the
            partition key; none: the whole subject.
        max_buffered_msgs: most messages the work-queue stream holds (0: no limit);
            when full it pauses sourcing for a second or more.
        max_buffered_bytes: most bytes it holds (0: no limit).

    Returns:
        The stored config.

    Raises:
        ConsumerGroupConfigError: a bad name, count, filter or wildcard index.
        ConsumerGroupExistsError: the group exists with another config.
        StreamNotFoundError: no such stream.
    """
    check_names(stream, group)
    wildcards = tuple(partitioning_wildcards)
    if filter is None and wildcards:
        raise ConsumerGroupConfigError("partitioning_wildcards need a filter")
    if filter is not None and not isinstance(filter, str):
        raise ConsumerGroupConfigError(f"filter must be a subject filter, got {filter!r}")
    config = ElasticConfig(
        max_members=check_max_members(max_members),
        partitioning_filters=None if filter is None else (PartitioningFilter(filter, wildcards),),
        max_buffered_msgs=max_buffered_msgs,
        max_buffered_bytes=max_buffered_bytes,
    )
    check_elastic(config)
    origin = js.stream_info(stream).config
    kv = bucket_for_create(js, True, origin.num_replicas or 1)
    try:
        kv.create(key_of(stream, group), config.to_json())
    except KeyWrongLastSequenceError:
        stored = get_elastic(js, stream, group)
        if not stored.same_shape(config):
            raise ConsumerGroupExistsError(
                f"elastic consumer group {group!r} on stream {stream!r} exists with another "
                "config; delete it first"
            ) from None
        config = stored
    filters = config.partitioning_filters or (PartitioningFilter(">"),)
    transforms = [
        {"src": pf.filter, "dest": transform_destination(pf, config.max_members)} for pf in filters
    ]
    js.create_stream(
        name=_group_stream(stream, group),
        retention="workqueue",
        num_replicas=origin.num_replicas or 1,
        storage=origin.storage or "file",
        max_msgs=config.max_buffered_msgs,
        max_bytes=config.max_buffered_bytes,
        discard="new",
        sources=[{"name": stream, "subject_transforms": transforms}],
        allow_direct=True,
    )
    return config


def get_elastic(js: GroupJetStream, stream: str, group: str) -> ElasticConfig:
    """An elastic group's config (with the revision it was read at).

    Raises:
        ConsumerGroupNotFoundError: no such group.
        ConsumerGroupConfigError: the stored config is broken.
    """
    check_names(stream, group)
    value, revision = read_value(bucket(js, True), stream, group, _KIND)
    return elastic_from_json(value, f"elastic group {group!r}", revision)


def delete_elastic(js: GroupJetStream, stream: str, group: str) -> None:
    """Deletes an elastic group: its config (its running members leave) and its
    work-queue stream, with the messages it still holds.

    Raises:
        ConsumerGroupNotFoundError: no such group.
    """
    check_names(stream, group)
    read_value(bucket(js, True), stream, group, _KIND)  # it exists (broken or not)
    bucket(js, True).delete(key_of(stream, group))
    try:
        js.delete_stream(_group_stream(stream, group))
    except StreamNotFoundError:
        pass


def list_elastic(js: GroupJetStream, stream: str) -> list[str]:
    """The names of the elastic groups on ``stream`` (sorted)."""
    try:
        kv = bucket(js, True)
    except ConsumerGroupNotFoundError:
        return []
    return group_names(kv, stream)


def list_members(js: GroupJetStream, stream: str, group: str, *, static: bool = False) -> list[str]:
    """The members of a group (of the elastic group; ``static=True``: the static one),
    from its member list or its mappings.

    Raises:
        ConsumerGroupNotFoundError: no such group.
    """
    config = get_static(js, stream, group) if static else get_elastic(js, stream, group)
    return config.member_names()


def _store(js: GroupJetStream, stream: str, group: str, config: ElasticConfig) -> None:
    # A compare-and-set on the revision read: two admins at once cannot lose a change.
    bucket(js, True).update(key_of(stream, group), config.to_json(), config.revision)


def add_members(
    js: GroupJetStream, stream: str, group: str, members: str | Sequence[str]
) -> list[str]:
    """Adds members to an elastic group; running instances of them start reading.

    Returns:
        The members now (sorted).

    Raises:
        ConsumerGroupNotFoundError: no such group.
        ConsumerGroupConfigError: no or bad names, or the group uses member mappings.
        KeyWrongLastSequenceError: the config changed meanwhile (try again).
    """
    adding = names_of(members, "members")
    for member in adding:
        check_names(stream, group, member)
    if not adding:
        raise ConsumerGroupConfigError("add_members needs at least one member name")
    config = get_elastic(js, stream, group)
    if config.member_mappings:
        raise ConsumerGroupConfigError(
            f"elastic group {group!r} uses member mappings: change them with "
            "set_member_mappings, or delete_member_mappings first"
        )
    new = tuple(sorted(set(config.members) | set(adding)))
    _store(js, stream, group, replace(config, members=new))
    return list(new)


def delete_members(
    js: GroupJetStream, stream: str, group: str, members: str | Sequence[str]
) -> list[str]:
    """Drops members from an elastic group; their partitions go to the others.

    Returns:
        The members left.

    Raises:
        ConsumerGroupNotFoundError: no such group.
        ConsumerGroupConfigError: no names, or the group uses member mappings.
        KeyWrongLastSequenceError: the config changed meanwhile (try again).
    """
    dropping = set(names_of(members, "members"))
    if not dropping:
        raise ConsumerGroupConfigError("delete_members needs at least one member name")
    config = get_elastic(js, stream, group)
    if config.member_mappings:
        raise ConsumerGroupConfigError(
            f"elastic group {group!r} uses member mappings: change them with set_member_mappings"
        )
    left = tuple(m for m in config.members if m not in dropping)
    _store(js, stream, group, replace(config, members=left))
    return list(left)


def set_member_mappings(
    js: GroupJetStream, stream: str, group: str, member_mappings: MappingsArg
) -> None:
    """Gives an elastic group's partitions to members by hand (its member list is
    cleared): ``MemberMapping`` objects or ``{member: [partitions]}``, each partition
    exactly once.

    Raises:
        ConsumerGroupNotFoundError: no such group.
        ConsumerGroupConfigError: bad mappings.
    """
    mappings = mappings_of(member_mappings)
    if not mappings:
        raise ConsumerGroupConfigError("set_member_mappings needs mappings")
    config = replace(get_elastic(js, stream, group), members=(), member_mappings=mappings)
    check_elastic(config)
    _store(js, stream, group, config)


def delete_member_mappings(js: GroupJetStream, stream: str, group: str) -> None:
    """Removes an elastic group's member mappings (it then has no members, as in
    orbit.go: add some with ``add_members``).

    Raises:
        ConsumerGroupNotFoundError: no such group.
    """
    _store(js, stream, group, replace(get_elastic(js, stream, group), member_mappings=()))


def elastic_member_step_down(js: GroupJetStream, stream: str, group: str, member: str) -> None:
    """Makes the member's active (pinned) instance step down: one of its standbys takes
    over (ADR-42 unpin).

    Raises:
        ConsumerNotFoundError: the member has no consumer now.
    """
    check_names(stream, group, member)
    js.consumer(_group_stream(stream, group), member).unpin(PCG_PRIORITY_GROUP)


def elastic_consume(
    js: GroupJetStream,
    stream: str,
    group: str,
    member: str,
    cb: Callable[[JsMsg], None],
    config: ConsumerConfig | None = None,
    *,
    error_cb: ErrorCallback | None = None,
) -> ConsumeContext:
    """Joins an elastic group as ``member`` (in its membership now or later) and runs
    ``cb(msg)`` for each message of its partitions, in order, on the group's thread;
    ``msg.subject`` comes without the partition number. ``cb`` must ack each message
    (the group's stream is a work queue); ``msg.double_ack()`` tells you the ack was
    stored, so the message will not come again.

    Args:
        js: the JetStream context.
        stream: the group's (origin) stream.
        group: the group.
        member: the member's name.
        cb: ``callable(msg)``.
        config: the consumer config as a template (``ack_policy`` must be explicit, the
            default; ``ack_wait`` (default 5 s) sets the take-over and retry times).
        error_cb: ``callable(exception)`` for errors of ``cb`` and the one that ends it.

    Returns:
        The running ``ConsumeContext``: ``stop()`` leaves. It ends by itself when the
        group is deleted, or with ``GroupConfigChangedError`` when its partitions,
        filter or buffers change.

    Raises:
        ConsumerGroupNotFoundError: no such group.
        ConsumerGroupConfigError: an ``ack_policy`` other than explicit.
    """
    check_names(stream, group, member)
    if not callable(cb):
        raise InvalidArgumentError(f"cb must be callable, got {cb!r}")
    template, ack_wait = member_template(config)
    if template.ack_policy != "explicit":
        raise ConsumerGroupConfigError(
            f"an elastic group's members ack explicitly (its stream is a work queue), "
            f"got ack_policy={template.ack_policy!r}"
        )
    template = template.replace(inactive_threshold=ack_wait)
    current = get_elastic(js, stream, group)
    try:
        js.stream_info(_group_stream(stream, group))
    except StreamNotFoundError:
        raise ConsumerGroupNotFoundError(
            f"elastic group {group!r} on stream {stream!r} has no stream "
            f"{_group_stream(stream, group)!r}"
        ) from None
    kind = _Elastic(stream, group, member, current, template, ack_wait)
    source = MemberSource(js, bucket(js, True), stream, group, member, ack_wait, kind)
    try:
        if in_membership(current.members, current.member_mappings, member):
            source.start(kind.join(source))
    except BaseException:
        source.stop()
        raise
    return ConsumeContext(source, cb, error_cb, f"{group}-{member}", js.client)


class _Elastic:
    """An elastic member's part of :class:`MemberSource` (the group's thread only)."""

    def __init__(
        self,
        stream: str,
        group: str,
        member: str,
        config: ElasticConfig,
        template: ConsumerConfig,
        ack_wait: float,
    ) -> None:
        self.consumer_stream = _group_stream(stream, group)
        self._group = group
        self._member = member
        self._config = config
        self._template = template
        self._ack_wait = ack_wait
        self._retry_at = 0.0

    def _in(self) -> bool:
        return in_membership(self._config.members, self._config.member_mappings, self._member)

    def join(self, source: MemberSource) -> PullConsumer | None:
        """The member's consumer for the current membership, or None (not a member, or
        it could not be made yet: tried again later)."""
        self._retry_at = time.monotonic() + self._ack_wait + 0.5
        config = self._config
        filters = partition_filters(
            config.members,
            config.max_members,
            config.member_mappings,
            self._member,
            [pf.filter for pf in config.partitioning_filters or ()],
        )
        if not filters:
            return None
        wanted = pinned_config(self._template, self._ack_wait, filters, name=self._member)
        try:
            try:
                return source.js.create_consumer(self.consumer_stream, wanted)
            except ConsumerExistsError:  # with the filters of an older membership
                source.delete_consumer(self._member)
                return source.js.create_consumer(self.consumer_stream, wanted)
        except APIError as err:
            if err.err_code != _WQ_NOT_UNIQUE:  # that one: the old owner lets go soon
                log.warning("nats_sync: %r could not make its consumer: %s", source, err)
        except Error as err:
            log.warning("nats_sync: %r could not make its consumer: %s", source, err)
        return None

    def apply(self, source: MemberSource, entry: Entry) -> None:
        new = elastic_from_json(entry.value, f"elastic group {self._group!r}", entry.revision)
        if not new.same_shape(self._config):
            raise GroupConfigChangedError(
                f"the partitions, filter or buffers of elastic group {self._group!r} "
                f"changed; member {self._member!r} left (delete and create the group)"
            )
        same = (new.members, new.member_mappings) == (
            self._config.members,
            self._config.member_mappings,
        )
        self._config = new
        if same and source.consumer is not None:
            return
        pinned = False
        if source.consumer is not None:
            pinned = source.is_pinned()
            source.stop_consuming()
        if pinned:
            # New partitions may hold messages before our consumer's position: make it
            # again rather than changing its filters.
            source.delete_consumer(self._member)
        elif not source.backoff():  # let the pinned instance go first
            return
        source.start(self.join(source))

    def idle(self, source: MemberSource) -> None:
        if self._in() and time.monotonic() >= self._retry_at:
            source.start(self.join(source))

    def lost(self, source: MemberSource, err: Exception) -> None:
        # Another instance remade the consumer, or it was reaped: make it again soon.
        self._retry_at = time.monotonic() + PCG_STANDBY_BACKOFF

    def on_group_deleted(self, source: MemberSource) -> None:
        """Nothing to delete: ``delete_elastic`` deletes the stream, consumers and all."""

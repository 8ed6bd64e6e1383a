"""Partitioned consumer groups: the stored configs, their checks and the partition plan.

How it works: a group's config is one JSON value in a key-value bucket
(``static-consumer-groups`` or ``elastic-consumer-groups``) under the key
``<stream>.<group>``, written exactly as orbit.go's ``pcgroups`` writes it (same field
names, same order, ``omitempty`` fields left out when empty) so Go and Python members
share one group. Every member computes its own partitions from that config alone
(:func:`partition_filters`): the members are deduplicated, sorted and capped at
``max_members``; each gets a run of ``max_members // len(members)`` partitions and the
rest are dealt out from the first member on; with member mappings each member gets the
partitions it is mapped to. A partition ``p`` is the subject prefix ``p.``, put there
by the stream's subject transform (static groups) or the group's work-queue stream
(elastic groups, :func:`transform_destination`).

Threads and state: none. The configs are plain dataclasses, made and read by the
caller's thread; the bucket helpers block like the rest of the client.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from nats_sync.jetstream._consumers.consumer import PullConsumer
from nats_sync.jetstream._kv.bucket import KeyValue
from nats_sync.jetstream._streams.stream import Stream
from nats_sync.jetstream._streams.wire import CoreClient
from nats_sync.jetstream.api import ConsumerConfig, ConsumerInfo, StreamConfig, StreamInfo
from nats_sync.jetstream.errors import (
    BucketNotFoundError,
    KeyNotFoundError,
    StreamNameAlreadyInUseError,
)
from nats_sync.jetstream.pcgroups._defaults import PCG_ELASTIC_BUCKET, PCG_STATIC_BUCKET
from nats_sync.jetstream.pcgroups.errors import (
    ConsumerGroupConfigError,
    ConsumerGroupExistsError,
    ConsumerGroupNotFoundError,
    MemberNotInGroupError,
)

__all__ = [
    "ConsumerGroupConfigError",
    "ConsumerGroupExistsError",
    "ConsumerGroupNotFoundError",
    "ElasticConfig",
    "GroupJetStream",
    "MemberMapping",
    "MemberNotInGroupError",
    "PartitioningFilter",
    "StaticConfig",
]


# --- what the groups use of the JetStream context ------------------------------------------


class GroupJetStream(Protocol):
    """What the groups use of :class:`nats_sync.jetstream.JetStream` (``nc.jetstream()``)."""

    @property
    def client(self) -> CoreClient:
        """The connection."""
        ...

    @property
    def timeout(self) -> float:
        """The default seconds per API call."""
        ...

    def create_stream(
        self, config: StreamConfig | None = None, *, timeout: float | None = None, **fields: Any
    ) -> Stream:
        """Creates a stream."""
        ...

    def stream_info(
        self,
        name: str,
        subjects_filter: str | None = None,
        deleted_details: bool = False,
        *,
        timeout: float | None = None,
    ) -> StreamInfo:
        """A stream's config and state."""
        ...

    def delete_stream(self, name: str, timeout: float | None = None) -> None:
        """Deletes a stream."""

    def create_consumer(
        self,
        stream: str,
        config: ConsumerConfig | None = None,
        *,
        timeout: float | None = None,
        **fields: Any,
    ) -> PullConsumer:
        """Creates a consumer."""
        ...

    def consumer(self, stream: str, name: str, timeout: float | None = None) -> PullConsumer:
        """Binds to an existing consumer."""
        ...

    def consumer_info(
        self, stream: str, name: str, *, timeout: float | None = None
    ) -> ConsumerInfo:
        """A consumer's config and position."""
        ...

    def delete_consumer(self, stream: str, name: str, timeout: float | None = None) -> None:
        """Deletes a consumer."""

    def list_consumers(self, stream: str, timeout: float | None = None) -> Iterator[ConsumerInfo]:
        """Every consumer's info on a stream."""
        ...

    def key_value(self, bucket: str, timeout: float | None = None) -> KeyValue:
        """Binds to a key-value bucket."""
        ...

    def create_key_value(
        self, config: Any = None, *, timeout: float | None = None, **fields: Any
    ) -> KeyValue:
        """Creates a key-value bucket."""
        ...


# --- the configs ---------------------------------------------------------------------------


@dataclass(frozen=True)
class MemberMapping:
    """Partitions given to one member by hand.

    Attributes:
        member: the member's name.
        partitions: its partition numbers (0 to ``max_members - 1``).
    """

    member: str
    partitions: tuple[int, ...]

    def to_json(self) -> dict[str, Any]:
        """orbit.go's ``MemberMapping`` JSON."""
        return {"member": self.member, "partitions": list(self.partitions)}


@dataclass(frozen=True)
class PartitioningFilter:
    """An elastic group's subject filter and the ``*`` wildcards (1-based) whose tokens
    make the partition key (none: the whole subject)."""

    filter: str
    partitioning_wildcards: tuple[int, ...] = ()


@dataclass(frozen=True)
class StaticConfig:
    """A static group's stored config (orbit.go's ``StaticConsumerGroupConfig``)."""

    max_members: int
    filters: tuple[str, ...] = ()
    members: tuple[str, ...] = ()
    member_mappings: tuple[MemberMapping, ...] = ()

    def to_json(self) -> bytes:
        """The value as orbit.go writes it (``omitempty`` fields left out when empty)."""
        out: dict[str, Any] = {"max_members": self.max_members}
        if self.filters:
            out["filters"] = list(self.filters)
        if self.members:
            out["members"] = list(self.members)
        if self.member_mappings:
            out["member_mappings"] = [m.to_json() for m in self.member_mappings]
        return _dumps(out)

    def member_names(self) -> list[str]:
        """The members, from the list or the mappings."""
        return member_names(self.members, self.member_mappings)


@dataclass(frozen=True)
class ElasticConfig:
    """An elastic group's stored config (orbit.go's ``ElasticConsumerGroupConfig``).

    ``partitioning_filters`` None is Go's nil slice (``null``): the whole subject is
    the key.
    """

    max_members: int
    partitioning_filters: tuple[PartitioningFilter, ...] | None = None
    max_buffered_msgs: int = 0
    max_buffered_bytes: int = 0
    members: tuple[str, ...] = ()
    member_mappings: tuple[MemberMapping, ...] = ()
    #: The key-value revision it was read at (0: not read); not stored.
    revision: int = field(default=0, compare=False)

    def to_json(self) -> bytes:
        """The value as orbit.go writes it (note ``max_buffered_msg``, singular)."""
        out: dict[str, Any] = {"max_members": self.max_members}
        out["partitioning_filters"] = (
            None
            if self.partitioning_filters is None
            else [
                {"filter": f.filter, "partitioning_wildcards": list(f.partitioning_wildcards)}
                for f in self.partitioning_filters
            ]
        )
        if self.max_buffered_msgs:
            out["max_buffered_msg"] = self.max_buffered_msgs
        if self.max_buffered_bytes:
            out["max_buffered_bytes"] = self.max_buffered_bytes
        if self.members:
            out["members"] = list(self.members)
        if self.member_mappings:
            out["member_mappings"] = [m.to_json() for m in self.member_mappings]
        return _dumps(out)

    def member_names(self) -> list[str]:
        """The members, from the list or the mappings."""
        return member_names(self.members, self.member_mappings)

    def same_shape(self, other: ElasticConfig) -> bool:
        """Whether what may not change once made (partitions, filters, buffers) is equal."""
        return (
            self.max_members,
            self.partitioning_filters or (),
            self.max_buffered_msgs,
            self.max_buffered_bytes,
        ) == (
            other.max_members,
            other.partitioning_filters or (),
            other.max_buffered_msgs,
            other.max_buffered_bytes,
        )


def _dumps(value: dict[str, Any]) -> bytes:
    # Go's encoding/json: no spaces, keys in the struct's order.
    return json.dumps(value, separators=(",", ":")).encode()


def member_names(members: Sequence[str], mappings: Sequence[MemberMapping]) -> list[str]:
    """The members named by a members list or, without one, by the mappings."""
    return list(members) if members else [m.member for m in mappings]


def in_membership(members: Sequence[str], mappings: Sequence[MemberMapping], member: str) -> bool:
    """Whether ``member`` is in the list or the mappings."""
    return member in members or any(m.member == member for m in mappings)


# --- reading and checking ------------------------------------------------------------------


def _list(data: dict[str, Any], key: str, what: str) -> list[Any]:
    value = data.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise ConsumerGroupConfigError(f"{what}: {key!r} must be a list, got {value!r}")
    return value


def _int(value: Any, name: str, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConsumerGroupConfigError(f"{what}: {name} must be an integer, got {value!r}")
    return value


def _mappings(raw: list[Any], what: str) -> tuple[MemberMapping, ...]:
    out = []
    for item in raw:
        if not isinstance(item, dict) or not isinstance(item.get("member", ""), str):
            raise ConsumerGroupConfigError(
                f"{what}: a member mapping must be "
                f'{{"member": ..., "partitions": [...]}}, got {item!r}'
            )
        partitions = tuple(_int(p, "a partition", what) for p in _list(item, "partitions", what))
        out.append(MemberMapping(item.get("member", ""), partitions))
    return tuple(out)


def _strings(raw: list[Any], name: str, what: str) -> tuple[str, ...]:
    if not all(isinstance(item, str) for item in raw):
        raise ConsumerGroupConfigError(f"{what}: {name} must be strings, got {raw!r}")
    return tuple(raw)


def _decode(value: bytes, what: str) -> dict[str, Any]:
    try:
        data = json.loads(value)
    except ValueError as err:
        raise ConsumerGroupConfigError(f"{what} is not valid JSON: {err}") from None
    if not isinstance(data, dict):
        raise ConsumerGroupConfigError(f"{what} is not a JSON object: {value!r}")
    return data


def static_from_json(value: bytes, what: str) -> StaticConfig:
    """A stored static config, checked.

    Raises:
        ConsumerGroupConfigError: not valid JSON, or the config breaks the rules.
    """
    data = _decode(value, what)
    config = StaticConfig(
        max_members=_int(data.get("max_members", 0), "max_members", what),
        filters=_strings(_list(data, "filters", what), "filters", what),
        members=_strings(_list(data, "members", what), "members", what),
        member_mappings=_mappings(_list(data, "member_mappings", what), what),
    )
    check_membership(config.max_members, config.members, config.member_mappings)
    return config


def elastic_from_json(value: bytes, what: str, revision: int = 0) -> ElasticConfig:
    """A stored elastic config, checked.

    Raises:
        ConsumerGroupConfigError: not valid JSON, or the config breaks the rules.
    """
    data = _decode(value, what)
    filters: tuple[PartitioningFilter, ...] | None = None
    if data.get("partitioning_filters") is not None:
        items = _list(data, "partitioning_filters", what)
        if not all(isinstance(item, dict) for item in items):
            raise ConsumerGroupConfigError(f"{what}: bad partitioning_filters {items!r}")
        filters = tuple(
            PartitioningFilter(
                str(item.get("filter", "")),
                tuple(
                    _int(w, "a partitioning wildcard", what)
                    for w in _list(item, "partitioning_wildcards", what)
                ),
            )
            for item in items
        )
    config = ElasticConfig(
        max_members=_int(data.get("max_members", 0), "max_members", what),
        partitioning_filters=filters,
        max_buffered_msgs=_int(data.get("max_buffered_msg", 0), "max_buffered_msg", what),
        max_buffered_bytes=_int(data.get("max_buffered_bytes", 0), "max_buffered_bytes", what),
        members=_strings(_list(data, "members", what), "members", what),
        member_mappings=_mappings(_list(data, "member_mappings", what), what),
        revision=revision,
    )
    check_elastic(config)
    return config


def check_membership(
    max_members: int, members: Sequence[str], mappings: Sequence[MemberMapping]
) -> None:
    """orbit.go's rules for the members and mappings.

    Raises:
        ConsumerGroupConfigError: ``max_members`` below 1, both members and mappings,
            or mappings that do not give each partition to exactly one member.
    """
    if max_members < 1:
        raise ConsumerGroupConfigError(f"max_members must be >= 1, got {max_members}")
    if members and mappings:
        raise ConsumerGroupConfigError("give members or member mappings, not both")
    if not mappings:
        return
    if len(mappings) > max_members:
        raise ConsumerGroupConfigError(
            f"{len(mappings)} member mappings for {max_members} partitions: at most one "
            "mapping per partition"
        )
    names: set[str] = set()
    seen: set[int] = set()
    for mapping in mappings:
        if not mapping.member or mapping.member in names:
            raise ConsumerGroupConfigError(
                f"member names in the mappings must be unique and non-empty: {mapping.member!r}"
            )
        names.add(mapping.member)
        for partition in mapping.partitions:
            if partition in seen:
                raise ConsumerGroupConfigError(f"partition {partition} is mapped twice")
            if not 0 <= partition < max_members:
                raise ConsumerGroupConfigError(
                    f"partition {partition} is not within 0..{max_members - 1}"
                )
            seen.add(partition)
    if len(seen) != max_members:
        missing = sorted(set(range(max_members)) - seen)
        raise ConsumerGroupConfigError(f"the mappings leave partitions {missing} to nobody")


def check_elastic(config: ElasticConfig) -> None:
    """orbit.go's rules for an elastic config.

    Raises:
        ConsumerGroupConfigError: a bad filter or wildcard index, or a bad membership.
    """
    if config.max_members < 1:
        raise ConsumerGroupConfigError(f"max_members must be >= 1, got {config.max_members}")
    for pf in config.partitioning_filters or ():
        if not pf.filter:
            raise ConsumerGroupConfigError("a partitioning filter may not be empty")
        tokens = pf.filter.split(".")
        stars = tokens.count("*")
        if stars == 0 and tokens[-1] != ">":
            raise ConsumerGroupConfigError(
                f"partitioning filter {pf.filter!r} needs a * wildcard or a final >"
            )
        if len(set(pf.partitioning_wildcards)) != len(pf.partitioning_wildcards):
            raise ConsumerGroupConfigError(
                f"partitioning wildcards {list(pf.partitioning_wildcards)} repeat an index"
            )
        for index in pf.partitioning_wildcards:
            if not 1 <= index <= stars:
                raise ConsumerGroupConfigError(
                    f"partitioning wildcard {index} is not within 1..{stars}, the * "
                    f"wildcards of {pf.filter!r}"
                )
    for name, value in (
        ("max_buffered_msgs", config.max_buffered_msgs),
        ("max_buffered_bytes", config.max_buffered_bytes),
    ):
        if value < -1:
            raise ConsumerGroupConfigError(f"{name} must be -1, 0 or more, got {value}")
    check_membership(config.max_members, config.members, config.member_mappings)


def check_names(stream: str, group: str, member: str | None = None) -> None:
    """Raises ConsumerGroupConfigError for an empty or dotted stream, group or member
    name (the key is ``<stream>.<group>``, consumer names have no dots)."""
    for what, name in (("stream", stream), ("group", group), ("member", member)):
        if name is None:
            continue
        if not isinstance(name, str) or not name or any(c in name for c in ". *>"):
            raise ConsumerGroupConfigError(
                f"the {what} name must be non-empty, without '.', ' ', '*' or '>': {name!r}"
            )


# --- the partition plan --------------------------------------------------------------------


def partition_filters(
    members: Sequence[str],
    max_members: int,
    mappings: Sequence[MemberMapping],
    member: str,
    filters: Sequence[str],
) -> list[str]:
    """The filter subjects of ``member``'s consumer: ``<partition>.<filter>`` for each of
    its partitions and each of ``filters`` (``>`` when none); with mappings
    ``<partition>.>`` (as orbit.go), once each."""
    subject_filters = list(filters) or [">"]
    if members:
        chosen = sorted(set(members))[:max_members]
        count = len(chosen)
        per = max_members // count
        mine = [
            p
            for p in range(max_members)
            if chosen[(p // per) % count if p < count * per else (p - count * per) % count]
            == member
        ]
        return [f"{p}.{f}" for f in subject_filters for p in mine]
    out: list[str] = []
    for mapping in mappings:
        if mapping.member == member:
            out.extend(f"{p}.>" for p in mapping.partitions if f"{p}.>" not in out)
    return out


def transform_destination(pf: PartitioningFilter, max_members: int) -> str:
    """The subject transform that puts the partition number first (elastic groups)."""
    tokens = pf.filter.split(".")
    star = 0
    for i, token in enumerate(tokens):
        if token == "*":
            star += 1
            tokens[i] = f"{{{{Wildcard({star})}}}}"
    keys = "".join(f",{w}" for w in pf.partitioning_wildcards)
    return f"{{{{Partition({max_members}{keys})}}}}.{'.'.join(tokens)}"


def strip_partition(subject: str) -> str:
    """The subject without its first token (the partition number)."""
    return subject.partition(".")[2] or subject


# --- the buckets ---------------------------------------------------------------------------


def key_of(stream: str, group: str) -> str:
    """The group's key in its bucket."""
    return f"{stream}.{group}"


def bucket(js: GroupJetStream, elastic: bool) -> KeyValue:
    """The bucket of static or elastic groups.

    Raises:
        ConsumerGroupNotFoundError: it does not exist (no such group was ever made).
    """
    name = PCG_ELASTIC_BUCKET if elastic else PCG_STATIC_BUCKET
    try:
        return js.key_value(name)
    except BucketNotFoundError:
        raise ConsumerGroupNotFoundError(
            f"no {'elastic' if elastic else 'static'} consumer group exists yet "
            f"(no bucket {name!r})"
        ) from None


def bucket_for_create(js: GroupJetStream, elastic: bool, replicas: int) -> KeyValue:
    """The bucket, made (file storage, the stream's replicas, as orbit.go) if missing."""
    try:
        return bucket(js, elastic)
    except ConsumerGroupNotFoundError:
        pass
    name = PCG_ELASTIC_BUCKET if elastic else PCG_STATIC_BUCKET
    try:
        return js.create_key_value(bucket=name, replicas=replicas, storage="file")
    except StreamNameAlreadyInUseError:  # made meanwhile, by someone else
        return js.key_value(name)


def read_value(kv: KeyValue, stream: str, group: str, kind: str) -> tuple[bytes, int]:
    """The stored value of a group and its revision.

    Raises:
        ConsumerGroupNotFoundError: no such group.
    """
    try:
        entry = kv.get(key_of(stream, group))
    except KeyNotFoundError:
        raise ConsumerGroupNotFoundError(
            f"no {kind} consumer group {group!r} on stream {stream!r}"
        ) from None
    return entry.value, entry.revision


def group_names(kv: KeyValue, stream: str) -> list[str]:
    """The groups of ``stream`` in a bucket."""
    prefix = f"{stream}."
    return sorted(
        key[len(prefix) :] for key in kv.list_keys([f"{stream}.*"]) if key.startswith(prefix)
    )


# --- arguments -----------------------------------------------------------------------------

#: Member mappings as given: MemberMapping objects, or ``{member: [partitions]}``.
MappingsArg = Sequence[MemberMapping] | Mapping[str, Sequence[int]]


def mappings_of(value: MappingsArg | None) -> tuple[MemberMapping, ...]:
    """Member mappings from either form.

    Raises:
        ConsumerGroupConfigError: neither form, or a partition that is not an int.
    """
    if not value:
        return ()
    if isinstance(value, Mapping):
        items = [MemberMapping(str(k), tuple(v)) for k, v in value.items()]
    elif isinstance(value, (list, tuple)) and all(isinstance(m, MemberMapping) for m in value):
        items = list(value)
    else:
        raise ConsumerGroupConfigError(
            f"member_mappings must be MemberMapping objects or {{member: [partitions]}}, "
            f"got {value!r}"
        )
    for mapping in items:
        check_names("-", "-", mapping.member)
        for p in mapping.partitions:
            _int(p, "a partition", f"the mapping of {mapping.member!r}")
    return tuple(items)


def names_of(value: str | Sequence[str] | None, what: str) -> tuple[str, ...]:
    """A name or a sequence of names as a tuple of checked names.

    Raises:
        ConsumerGroupConfigError: one is not a non-empty string.
    """
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    out = tuple(value)
    for name in out:
        if not isinstance(name, str) or not name:
            raise ConsumerGroupConfigError(f"{what} must be non-empty strings, got {name!r}")
    return out


def check_max_members(max_members: object) -> int:
    """``max_members`` if it is an int >= 1.

    Raises:
        ConsumerGroupConfigError: it is not.
    """
    if isinstance(max_members, bool) or not isinstance(max_members, int) or max_members < 1:
        raise ConsumerGroupConfigError(
            f"max_members (the number of partitions) must be an int >= 1, got {max_members!r}"
        )
    return max_members

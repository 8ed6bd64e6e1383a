"""JetStream's configs and infos as dataclasses, decoded leniently from the server's JSON.

How it works: plain data, no threads. Each class derives from :class:`ApiObject`, whose
``from_api`` reads the server's JSON (unknown keys go into ``extra`` and are sent back by
``to_api``, so an update does not drop what a newer server added) and whose ``to_api``
writes only the fields that are set. A field's ``metadata`` says how it travels:
``"duration"`` (float seconds here, integer nanoseconds on the wire), ``"durations"``
(a list of them), ``"time"`` (aware UTC ``datetime`` here, RFC 3339 there) or a nested
``ApiObject`` class. Policies are plain strings, as in the server's JSON
(``ack_policy="explicit"``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar, NamedTuple, TypeVar

from nats_sync._core.proto import Headers
from nats_sync.errors import InvalidArgumentError
from nats_sync.jetstream._streams.wire import (
    check_consumer_name,
    format_time,
    from_ns,
    parse_time,
    to_ns,
)
from nats_sync.jetstream.errors import NotPullConsumerError

_T = TypeVar("_T", bound="ApiObject")

_DURATION = {"wire": "duration"}
_DURATIONS = {"wire": "durations"}
_TIME = {"wire": "time"}


def _nested(cls: type[ApiObject]) -> dict[str, Any]:
    return {"wire": cls}


def _nested_list(cls: type[ApiObject]) -> dict[str, Any]:
    return {"wire": ("list", cls)}


@dataclass
class ApiObject:
    """Base of the JetStream dataclasses: lenient JSON in, only what is set out."""

    #: Keys the server sent that this version does not know; sent back by ``to_api``.
    extra: dict[str, Any] = field(default_factory=dict, repr=False, compare=False, kw_only=True)

    _fields: ClassVar[dict[str, dataclasses.Field[Any]]]

    @classmethod
    def _field_map(cls) -> dict[str, dataclasses.Field[Any]]:
        known = cls.__dict__.get("_fields_cache")
        if known is None:
            known = {f.name: f for f in dataclasses.fields(cls) if f.name != "extra"}
            cls._fields_cache = known  # type: ignore[attr-defined]
        return known

    @classmethod
    def from_api(cls: type[_T], data: dict[str, Any] | None) -> _T:
        """Reads the server's JSON object; unknown keys land in ``extra``."""
        fields = cls._field_map()
        values: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for key, raw in (data or {}).items():
            spec = fields.get(key)
            if spec is None:
                extra[key] = raw
                continue
            values[key] = _decode(spec.metadata.get("wire"), raw)
        return cls(**values, extra=extra)

    def to_api(self) -> dict[str, Any]:
        """The JSON object for the server: set fields only, then ``extra``."""
        out: dict[str, Any] = dict(self.extra)
        for name, spec in self._field_map().items():
            value = getattr(self, name)
            if value is None:
                continue
            out[name] = _encode(spec.metadata.get("wire"), value)
        return out

    def replace(self: _T, **changes: Any) -> _T:
        """A copy with ``changes`` (a dataclasses.replace that keeps ``extra``)."""
        return dataclasses.replace(self, **changes)


def _decode(wire: Any, raw: Any) -> Any:
    if raw is None or wire is None:
        return raw
    if wire == "duration":
        return from_ns(raw) if isinstance(raw, int) else raw
    if wire == "durations":
        return [from_ns(item) for item in raw] if isinstance(raw, list) else raw
    if wire == "time":
        if not isinstance(raw, str) or raw.startswith("0001-01-01"):
            return None  # Go's zero time: not set
        return parse_time(raw)
    if isinstance(wire, type) and issubclass(wire, ApiObject):
        return wire.from_api(raw) if isinstance(raw, dict) else raw
    if isinstance(wire, tuple) and isinstance(raw, list):  # ("list", an ApiObject class)
        return [wire[1].from_api(item) if isinstance(item, dict) else item for item in raw]
    return raw


def _encode(wire: Any, value: Any) -> Any:
    if wire == "duration":
        return to_ns(value)
    if wire == "durations":
        return [to_ns(item) for item in value]
    if wire == "time":
        return format_time(value) if isinstance(value, datetime) else value
    if isinstance(value, ApiObject):
        return value.to_api()
    if isinstance(wire, tuple) and isinstance(value, list):
        return [item.to_api() if isinstance(item, ApiObject) else item for item in value]
    return value


def config_with(cls: type[Any], config: Any, fields: dict[str, Any], what: str) -> Any:
    """``config`` (a ``cls``) with ``fields`` applied over it (either may be given, or
    both): the ``config=None, **fields`` form of the create calls.

    Raises:
        InvalidArgumentError: ``config`` is not a ``cls`` (``what`` names it).
    """
    if config is None:
        return cls(**fields)
    if not isinstance(config, cls):
        raise InvalidArgumentError(f"{what} must be a {cls.__name__}, got {type(config).__name__}")
    return config.replace(**fields) if fields else config


# --- streams -------------------------------------------------------------------------------


@dataclass
class StreamConfig(ApiObject):
    """A stream's configuration: every field of the server's (None: the server's default).

    Durations are float seconds (``max_age``, ``duplicate_window``,
    ``subject_delete_marker_ttl``).
    """

    name: str | None = None
    subjects: list[str] | None = None
    description: str | None = None
    retention: str | None = None  # "limits" | "interest" | "workqueue"
    max_consumers: int | None = None
    max_msgs: int | None = None
    max_bytes: int | None = None
    discard: str | None = None  # "old" | "new"
    discard_new_per_subject: bool | None = None
    max_age: float | None = field(default=None, metadata=_DURATION)
    max_msgs_per_subject: int | None = None
    max_msg_size: int | None = None
    storage: str | None = None  # "file" | "memory"
    num_replicas: int | None = None
    no_ack: bool | None = None
    duplicate_window: float | None = field(default=None, metadata=_DURATION)
    placement: dict[str, Any] | None = None
    mirror: dict[str, Any] | None = None
    sources: list[dict[str, Any]] | None = None
    sealed: bool | None = None
    deny_delete: bool | None = None
    deny_purge: bool | None = None
    allow_rollup_hdrs: bool | None = None
    allow_direct: bool | None = None
    mirror_direct: bool | None = None
    republish: dict[str, Any] | None = None
    subject_transform: dict[str, Any] | None = None
    compression: str | None = None  # "none" | "s2"
    first_seq: int | None = None
    metadata: dict[str, str] | None = None
    allow_msg_ttl: bool | None = None
    subject_delete_marker_ttl: float | None = field(default=None, metadata=_DURATION)
    allow_msg_counter: bool | None = None
    allow_atomic: bool | None = None
    allow_batched: bool | None = None  # fast-ingest batches (server 2.14+)
    allow_msg_schedules: bool | None = None
    persist_mode: str | None = None  # "default" | "async" (server 2.12+)


@dataclass
class StreamState(ApiObject):
    """What a stream holds now."""

    messages: int = 0
    bytes: int = 0
    first_seq: int = 0
    first_ts: datetime | None = field(default=None, metadata=_TIME)
    last_seq: int = 0
    last_ts: datetime | None = field(default=None, metadata=_TIME)
    num_deleted: int = 0
    num_subjects: int = 0
    consumer_count: int = 0
    subjects: dict[str, int] | None = None
    deleted: list[int] | None = None


@dataclass
class StreamInfo(ApiObject):
    """A stream's configuration and state."""

    config: StreamConfig = field(default_factory=StreamConfig, metadata=_nested(StreamConfig))
    state: StreamState = field(default_factory=StreamState, metadata=_nested(StreamState))
    created: datetime | None = field(default=None, metadata=_TIME)
    cluster: dict[str, Any] | None = None
    mirror: dict[str, Any] | None = None
    sources: list[dict[str, Any]] | None = None
    ts: datetime | None = field(default=None, metadata=_TIME)


# --- consumers -----------------------------------------------------------------------------


@dataclass
class ConsumerConfig(ApiObject):
    """A consumer's configuration: every field of the server's (None: its default).

    Durations are float seconds (``ack_wait``, ``backoff``, ``max_expires``,
    ``inactive_threshold``, ``idle_heartbeat``); ``opt_start_time`` an aware datetime.
    """

    name: str | None = None
    durable_name: str | None = None
    description: str | None = None
    deliver_policy: str | None = None  # "all" | "last" | "new" | "by_start_sequence" | ...
    opt_start_seq: int | None = None
    opt_start_time: datetime | None = field(default=None, metadata=_TIME)
    ack_policy: str | None = None  # "none" | "all" | "explicit"
    ack_wait: float | None = field(default=None, metadata=_DURATION)
    max_deliver: int | None = None
    backoff: list[float] | None = field(default=None, metadata=_DURATIONS)
    filter_subject: str | None = None
    filter_subjects: list[str] | None = None
    replay_policy: str | None = None  # "instant" | "original"
    rate_limit_bps: int | None = None
    sample_freq: str | None = None
    max_waiting: int | None = None
    max_ack_pending: int | None = None
    headers_only: bool | None = None
    max_batch: int | None = None
    max_expires: float | None = field(default=None, metadata=_DURATION)
    max_bytes: int | None = None
    inactive_threshold: float | None = field(default=None, metadata=_DURATION)
    num_replicas: int | None = None
    mem_storage: bool | None = None
    metadata: dict[str, str] | None = None
    pause_until: datetime | None = field(default=None, metadata=_TIME)
    priority_groups: list[str] | None = None
    priority_policy: str | None = None
    priority_timeout: float | None = field(default=None, metadata=_DURATION)
    # push consumers only (``js.create_push_consumer``; a pull consumer has none)
    deliver_subject: str | None = None
    deliver_group: str | None = None
    idle_heartbeat: float | None = field(default=None, metadata=_DURATION)
    flow_control: bool | None = None

    def create_call(
        self, stream: str, action: str, new_name: Callable[[], str], *, push: bool = False
    ) -> tuple[str, dict[str, Any]]:
        """The API call (after the prefix) and body that create (``action`` "create"),
        update ("update") or create-or-update ("") this consumer on ``stream``; a
        consumer without a name is named ``new_name()``. ``push``: a push consumer is
        meant (its ``deliver_subject`` is then required, else refused).

        Raises:
            InvalidArgumentError: two different names, or an update without a name.
            NotPullConsumerError: a ``deliver_subject`` where a pull consumer is meant
                (also an ``InvalidArgumentError``).
            InvalidConsumerNameError: the name holds a character names may not.
        """
        if self.durable_name and self.name and self.durable_name != self.name:
            raise InvalidArgumentError(
                f"name {self.name!r} and durable_name {self.durable_name!r} differ; "
                "a durable consumer has one name"
            )
        name = self.name or self.durable_name
        if name is not None:
            check_consumer_name(name)
        elif action == "update":
            raise InvalidArgumentError("update_consumer needs the consumer's name")
        if push and not self.deliver_subject:
            raise InvalidArgumentError("a push consumer needs a deliver_subject")
        if self.deliver_subject and not push:
            raise NotPullConsumerError(
                f"deliver_subject {self.deliver_subject!r} makes a push consumer: make it "
                "with js.create_push_consumer (or create_or_update_push_consumer), or leave "
                "deliver_subject out for a pull consumer"
            )
        # With one filter subject the server checks it against the subject it was sent to;
        # nats.go and nats-py use this form too. An ephemeral consumer is named by us.
        call = f"CONSUMER.CREATE.{stream}"
        config = self
        if name is None:
            name = new_name()
            config = self.replace(name=name)
        call += f".{name}"
        filter_subject = self.filter_subject
        if (
            filter_subject
            and not self.filter_subjects
            and not any(token in ("*", ">") for token in filter_subject.split("."))
        ):
            # A publish subject cannot hold wildcards, so a wildcard filter travels
            # in the body only (the server checks it there as well).
            call += f".{filter_subject}"
        return call, {"stream_name": stream, "config": config.to_api(), "action": action}


@dataclass
class SequenceInfo(ApiObject):
    """A consumer's position: consumer and stream sequence, and when it last moved."""

    consumer_seq: int = 0
    stream_seq: int = 0
    last_active: datetime | None = field(default=None, metadata=_TIME)


@dataclass
class PriorityGroupState(ApiObject):
    """One priority group of a consumer as it stands (``ConsumerInfo.priority_groups``):
    with the ``pinned_client`` policy, the current pin and when it was given."""

    group: str = ""
    pinned_client_id: str | None = None
    pinned_ts: datetime | None = field(default=None, metadata=_TIME)


@dataclass
class ConsumerInfo(ApiObject):
    """A consumer's configuration and where it stands."""

    stream_name: str = ""
    name: str = ""
    config: ConsumerConfig = field(default_factory=ConsumerConfig, metadata=_nested(ConsumerConfig))
    created: datetime | None = field(default=None, metadata=_TIME)
    delivered: SequenceInfo = field(default_factory=SequenceInfo, metadata=_nested(SequenceInfo))
    ack_floor: SequenceInfo = field(default_factory=SequenceInfo, metadata=_nested(SequenceInfo))
    num_ack_pending: int = 0
    num_redelivered: int = 0
    num_waiting: int = 0
    num_pending: int = 0
    cluster: dict[str, Any] | None = None
    push_bound: bool | None = None
    paused: bool | None = None
    pause_remaining: float | None = field(default=None, metadata=_DURATION)
    ts: datetime | None = field(default=None, metadata=_TIME)
    priority_groups: list[PriorityGroupState] | None = field(
        default=None, metadata=_nested_list(PriorityGroupState)
    )


@dataclass
class ConsumerPause(ApiObject):
    """A consumer's pause state after ``pause_consumer`` or ``resume_consumer``
    (nats-server 2.11 and later)."""

    paused: bool = False
    pause_until: datetime | None = field(default=None, metadata=_TIME)
    pause_remaining: float | None = field(default=None, metadata=_DURATION)


@dataclass
class ConsumerReset:
    """What ``reset_consumer`` returns (ADR-60, nats-server 2.14 and later): the
    consumer's info after the reset and the stream sequence it restarts from."""

    info: ConsumerInfo
    reset_seq: int

    @classmethod
    def from_api(cls, data: dict[str, Any]) -> ConsumerReset:
        """Reads the server's reply: the consumer's info with ``reset_seq`` beside it."""
        info = {key: value for key, value in data.items() if key != "reset_seq"}
        return cls(ConsumerInfo.from_api(info), int(data.get("reset_seq") or 0))


# --- account, publish acks, stored messages -----------------------------------------------


@dataclass
class ApiStats(ApiObject):
    """The API's level and call counters (``$JS.API.INFO``)."""

    level: int = 0
    total: int = 0
    errors: int = 0


@dataclass
class AccountInfo(ApiObject):
    """The account's JetStream usage and limits."""

    memory: int = 0
    storage: int = 0
    streams: int = 0
    consumers: int = 0
    limits: dict[str, Any] | None = None
    api: ApiStats = field(default_factory=ApiStats, metadata=_nested(ApiStats))
    domain: str | None = None

    @property
    def api_level(self) -> int:
        """The JetStream API level (0 below server 2.11); gate features on it."""
        return self.api.level


@dataclass
class PubAck(ApiObject):
    """The stream's acknowledgement of a JetStream publish."""

    stream: str = ""
    seq: int = 0
    duplicate: bool = False
    domain: str | None = None
    val: str | None = None


@dataclass
class StreamSource:
    """Where a mirror or a sourcing stream reads from; for a bucket's ``mirror`` and
    ``sources``, the *bucket* it names (as nats.go: ``KV_``/``OBJ_`` added for you).

    Attributes:
        name: the stream (or, in a bucket's config, the bucket).
        opt_start_seq: the first sequence to read.
        opt_start_time: the first time to read from (RFC 3339 text).
        filter_subject: only these subjects.
        subject_transforms: ``[{"src": ..., "dest": ...}]``; a bucket's are made for
            you where none are given.
        domain: the JetStream domain the source lives in (another hub or leaf node);
            sent as ``external.api`` ``$JS.<domain>.API``.
        external: the ``{"api": ..., "deliver": ...}`` prefixes of a source in another
            account (given as it is; ``domain`` fills ``api`` where this is None).
    """

    name: str
    opt_start_seq: int | None = None
    opt_start_time: str | None = None
    filter_subject: str | None = None
    subject_transforms: list[dict[str, str]] | None = None
    domain: str | None = None
    external: dict[str, str] | None = None

    def to_api(self) -> dict[str, Any]:
        """The JSON object of a stream config's ``mirror`` or ``sources`` entry."""
        given: dict[str, Any] = {"name": self.name}
        for key in ("opt_start_seq", "opt_start_time", "filter_subject", "subject_transforms"):
            value = getattr(self, key)
            if value is not None:
                given[key] = value
        external = dict(self.external) if self.external else {}
        if self.domain and "api" not in external:
            external["api"] = f"$JS.{self.domain}.API"
        if external:
            given["external"] = external
        return given


@dataclass(frozen=True)
class CounterEntry:
    """A counter's last stored state (ADR-49), as ``Counter.get_entry`` reads it.

    Attributes:
        subject: the counter's subject.
        value: its value (an int of any size).
        sources: where a stream that sources counters got its value from: for each
            source (the ``Nats-Counter-Sources`` header's keys, e.g. the sourced stream's
            name), the value each of its subjects had when last sourced; empty for a
            counter nothing sources into.
        increment: the increment that made this value (``Nats-Incr``); None where the
            last message carried none (a value that came from a source).
        seq: the stream sequence of the message holding the value.
    """

    subject: str
    value: int
    sources: dict[str, dict[str, int]]
    increment: int | None
    seq: int


@dataclass(frozen=True)
class BatchAck:
    """The stream's acknowledgement of a whole batch (atomic or fast ingest).

    Attributes:
        stream: the stream that stored the batch.
        seq: the stream sequence of the batch's last stored message (0 when the
            server stored nothing new, e.g. every message was a duplicate).
        batch_id: the batch's id.
        count: how many messages of the batch the stream took (the server's count;
            with gap ``fail`` every one up to the last stored, in order).
        domain: the JetStream domain, if the server has one.
    """

    stream: str
    seq: int
    batch_id: str
    count: int
    domain: str | None = None

    @classmethod
    def from_api(cls, reply: dict[str, Any], batch_id: str) -> BatchAck:
        """Reads a batch's final publish acknowledgement (``{"stream", "seq", "batch",
        "count", ...}``); ``batch_id`` fills in where the server left it out."""
        seq = reply.get("seq", 0)
        count = reply.get("count", 0)
        domain = reply.get("domain")
        return cls(
            stream=str(reply.get("stream", "")),
            seq=seq if isinstance(seq, int) and not isinstance(seq, bool) else 0,
            batch_id=str(reply.get("batch") or batch_id),
            count=count if isinstance(count, int) and not isinstance(count, bool) else 0,
            domain=domain if isinstance(domain, str) else None,
        )


class FastPubAck(NamedTuple):
    """What :meth:`FastPublisher.add` returns for each message.

    A named tuple, not a dataclass: ``add`` makes one per message, and a tuple is made
    in a third of the time of a frozen dataclass.

    Attributes:
        batch_sequence: this message's sequence within the batch (1, 2, ...).
        ack_sequence: the highest batch sequence the server has acknowledged so far;
            with gap ``fail`` every message up to it is stored.
    """

    batch_sequence: int
    ack_sequence: int


@dataclass
class StoredColumns:
    """A run of stored messages in sequence order, column by column (``times_ns``:
    nanoseconds since the epoch, as the server stamped them). What a columnar reader
    such as Spark's turns into Arrow arrays without an object per message."""

    seqs: list[int] = field(default_factory=list)
    subjects: list[str] = field(default_factory=list)
    datas: list[bytes] = field(default_factory=list)
    headers: list[Headers | None] = field(default_factory=list)
    times_ns: list[int] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.seqs)


@dataclass
class StoredMsg:
    """A message read from a stream without a consumer (``get_msg``, ``get_msgs``)."""

    stream: str
    subject: str
    seq: int
    data: bytes
    headers: dict[str, str | list[str]] | None
    time: datetime | None

"""Key-value bucket names and settings: the key and bucket name checks,
:class:`KeyValueConfig` (and the stream config it makes) and :class:`KeyValueStatus`
(and the config it reads back from a bucket's stream).

How it works: plain functions and dataclasses, moved out of ``_kv/bucket.py`` (which imports
them back, so ``nats_sync.jetstream._kv.bucket`` keeps every name) to keep it short. No thread,
no state: the dataclasses are values, ``KeyValueStatus`` frozen.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any

from nats_sync.errors import InvalidArgumentError
from nats_sync.jetstream._streams.wire import check_bucket_name
from nats_sync.jetstream.api import StreamConfig, StreamInfo, StreamSource
from nats_sync.jetstream.errors import (
    InvalidKeyError,
    KeyHistoryTooLargeError,
)

MAX_HISTORY = 64
_KEY_RE = re.compile(r"^[-/_=.a-zA-Z0-9]+$")
_FILTER_RE = re.compile(r"^[-/_=.a-zA-Z0-9*]*>?$")


# --- names ---------------------------------------------------------------------------------


def check_key(key: object, *, writing: bool = False) -> str:
    """Returns ``key`` if it is a valid key.

    Raises:
        InvalidKeyError: empty, not a str, starting or ending with ``.``, holding ``..``
            or a character other than letters, digits and ``- / _ = .``; or, when
            ``writing``, starting with the reserved ``_kv``.
    """
    if not isinstance(key, str) or not key:
        raise InvalidKeyError(f"key must be a non-empty str, got {key!r}")
    if not _KEY_RE.match(key):
        bad = "".join(sorted({c for c in key if not _KEY_RE.match(c)}))
        raise InvalidKeyError(
            f"key {key!r} holds {bad!r}: keys are letters, digits and '-', '/', '_', '=', '.'"
        )
    if key[0] == "." or key[-1] == "." or ".." in key:
        raise InvalidKeyError(f"key {key!r} starts or ends with '.' or holds '..'")
    if writing and key.startswith("_kv"):
        raise InvalidKeyError(f"key {key!r}: keys starting with '_kv' are reserved")
    return key


def check_filter(pattern: object) -> str:
    """Returns ``pattern`` if it is a valid key filter (``*`` and a final ``>`` allowed).

    Raises:
        InvalidKeyError: it is not.
    """
    tokens = pattern.split(".") if isinstance(pattern, str) else []
    if (
        not isinstance(pattern, str)
        or not pattern
        or not _FILTER_RE.match(pattern)
        or any(
            not token or ("*" in token and token != "*") or (">" in token and token != ">")
            for token in tokens
        )
        or ">" in tokens[:-1]
    ):
        raise InvalidKeyError(
            f"key filter {pattern!r} is not a key, '>', or a key with '*' tokens or a final '>'"
        )
    return pattern


def stream_name(bucket: str) -> str:
    """The stream of a bucket."""
    return f"KV_{bucket}"


# --- data ----------------------------------------------------------------------------------


@dataclass
class KeyValueConfig:
    """A bucket's configuration.

    Attributes:
        bucket: its name (letters, digits, ``-``, ``_``).
        description: free text.
        history: how many values a key keeps (1 to 64).
        ttl: seconds a value lives (0: for ever).
        max_value_size: the largest value in bytes (-1: no limit).
        max_bytes: the bucket's size limit in bytes (-1: no limit).
        storage: ``"file"`` or ``"memory"``.
        replicas: how many servers keep it.
        compression: compress the stored values (s2).
        placement, republish, metadata: passed to the stream as they are.
        limit_marker_ttl: seconds (>= 1) the server keeps a marker when age removes a
            key's last value, so watchers see it; also lets ``create`` and ``purge``
            take a ``ttl`` (key TTLs, ADR-48; nats-server 2.11+). None: no markers.
        mirror: the bucket this one mirrors (its name, ``domain=`` for one in another
            JetStream domain): a read-only copy whose reads see the origin's keys and
            whose puts go to the origin (ADR-8).
        sources: buckets whose keys this one takes in too (``$KV.<source>.>`` becomes
            ``$KV.<this>.>`` unless the source gives its own transforms).
    """

    bucket: str
    description: str | None = None
    history: int = 1
    ttl: float = 0.0
    max_value_size: int = -1
    max_bytes: int = -1
    storage: str = "file"
    replicas: int = 1
    compression: bool = False
    placement: dict[str, Any] | None = None
    republish: dict[str, Any] | None = None
    metadata: dict[str, str] | None = None
    limit_marker_ttl: float | None = None
    mirror: StreamSource | None = None
    sources: list[StreamSource] = field(default_factory=list)

    @classmethod
    def build(cls, config: KeyValueConfig | None, fields: dict[str, Any]) -> KeyValueConfig:
        """``config`` with ``fields`` over it (either, or both).

        Raises:
            InvalidArgumentError: ``config`` is not a KeyValueConfig, a field is unknown,
                or no bucket is named.
        """
        if config is not None and not isinstance(config, KeyValueConfig):
            raise InvalidArgumentError(
                f"config must be a KeyValueConfig, got {type(config).__name__}"
            )
        known = {spec.name for spec in dataclasses.fields(cls)}
        unknown = sorted(set(fields) - known)
        if unknown:
            raise InvalidArgumentError(
                f"unknown KeyValueConfig field(s) {', '.join(unknown)}; "
                f"known: {', '.join(sorted(known))}"
            )
        if config is None:
            if "bucket" not in fields:
                raise InvalidArgumentError("a key-value bucket needs a name (bucket=...)")
            return cls(**fields)
        return dataclasses.replace(config, **fields)

    def to_stream_config(self) -> StreamConfig:
        """The stream config of the bucket (nats.go's ``prepareKeyValueConfig``).

        Raises:
            InvalidBucketNameError: the name is not valid.
            KeyHistoryTooLargeError: history above 64.
            InvalidArgumentError: another field has a value it cannot take.
        """
        bucket = check_bucket_name(self.bucket)
        if bad_int(self.history, 1):
            raise InvalidArgumentError(f"history must be an int >= 1, got {self.history!r}")
        if self.history > MAX_HISTORY:
            raise KeyHistoryTooLargeError(
                f"history {self.history} is above {MAX_HISTORY}, the most a bucket keeps"
            )
        if isinstance(self.ttl, bool) or not isinstance(self.ttl, (int, float)) or self.ttl < 0:
            raise InvalidArgumentError(f"ttl must be seconds >= 0, got {self.ttl!r}")
        for value, what in ((self.max_value_size, "max_value_size"), (self.max_bytes, "max_bytes")):
            if bad_int(value, -1) or value == 0:
                raise InvalidArgumentError(f"{what} must be an int >= 1 or -1, got {value!r}")
        if self.storage not in ("file", "memory"):
            raise InvalidArgumentError(f"storage must be 'file' or 'memory', got {self.storage!r}")
        if bad_int(self.replicas, 1):
            raise InvalidArgumentError(f"replicas must be an int >= 1, got {self.replicas!r}")
        marker_ttl = self.limit_marker_ttl
        if marker_ttl is not None and (
            isinstance(marker_ttl, bool)
            or not isinstance(marker_ttl, (int, float))
            or not marker_ttl >= 1
        ):
            raise InvalidArgumentError(
                f"limit_marker_ttl must be seconds >= 1 (or None), got {marker_ttl!r}"
            )
        duplicate_window = 120.0
        if self.ttl and self.ttl < duplicate_window:
            duplicate_window = float(self.ttl)
        mirror, sources = self._origins(bucket)
        return StreamConfig(
            name=stream_name(bucket),
            subjects=None if mirror is not None else [f"$KV.{bucket}.>"],
            mirror=mirror,
            mirror_direct=True if mirror is not None else None,
            sources=sources,
            description=self.description,
            max_msgs_per_subject=self.history,
            max_bytes=self.max_bytes,
            max_age=float(self.ttl),
            max_msg_size=self.max_value_size,
            storage=self.storage,
            num_replicas=self.replicas,
            allow_rollup_hdrs=True,
            deny_delete=True,
            discard="new",
            duplicate_window=duplicate_window,
            max_msgs=-1,
            max_consumers=-1,
            allow_direct=True,
            compression="s2" if self.compression else None,
            placement=self.placement,
            republish=self.republish,
            metadata=self.metadata,
            allow_msg_ttl=True if marker_ttl else None,
            subject_delete_marker_ttl=float(marker_ttl) if marker_ttl else None,
        )

    def _origins(self, bucket: str) -> tuple[dict[str, Any] | None, list[dict[str, Any]] | None]:
        """The stream's ``mirror`` and ``sources`` for the buckets named (nats.go's
        ``prepareKeyValueConfig``): stream names get ``KV_``, and a source's keys are
        moved under this bucket's subjects.

        Raises:
            InvalidArgumentError: both a mirror and sources, or an entry that is not a
                ``StreamSource``.
        """
        entries = ([self.mirror] if self.mirror is not None else []) + list(self.sources)
        for entry in entries:
            if not isinstance(entry, StreamSource):
                raise InvalidArgumentError(
                    f"a bucket's mirror and sources are StreamSource(name=<bucket>), got {entry!r}"
                )
        if self.mirror is not None and self.sources:
            raise InvalidArgumentError(
                f"bucket {bucket!r}: a mirror takes no sources (give one or the other)"
            )
        if self.mirror is not None:
            mirrored = dataclasses.replace(self.mirror, name=stream_name(_bucket_of(self.mirror)))
            return mirrored.to_api(), None
        if not self.sources:
            return None, None
        sources = []
        for source in self.sources:
            origin = _bucket_of(source)
            entry = dataclasses.replace(source, name=stream_name(origin))
            external = source.domain is not None or source.external is not None
            if not source.subject_transforms and (not external or origin != bucket):
                entry.subject_transforms = [{"src": f"$KV.{origin}.>", "dest": f"$KV.{bucket}.>"}]
            sources.append(entry.to_api())
        return None, sources


def _bucket_of(source: StreamSource) -> str:
    """The bucket a source names (a stream name ``KV_<bucket>`` is taken too)."""
    name = source.name[3:] if source.name.startswith("KV_") else source.name
    return check_bucket_name(name)


def origin_of(info: StreamInfo) -> tuple[str, str | None] | None:
    """For a mirror bucket: the bucket it mirrors and the API prefix of the origin's
    domain (None: this one's); None for a bucket that is no mirror."""
    mirror = info.config.mirror
    if not mirror:
        return None
    name = str(mirror.get("name") or "")
    external = mirror.get("external") or {}
    api = external.get("api") if isinstance(external, dict) else None
    return (name[3:] if name.startswith("KV_") else name), (str(api) if api else None)


def bad_int(value: object, minimum: int) -> bool:
    return isinstance(value, bool) or not isinstance(value, int) or value < minimum


@dataclass(frozen=True)
class KeyValueStatus:
    """A bucket's state and settings (``kv.status()``).

    Attributes:
        bucket: its name.
        values: how many entries it stores (markers and history included).
        history: values kept per key.
        ttl: seconds a value lives (0: for ever).
        bytes: its size in bytes.
        backing_store: always ``"JetStream"``.
        is_compressed: whether values are stored compressed.
        limit_marker_ttl: seconds the limit markers live (0: no markers).
        info: the stream info it was read from.
    """

    bucket: str
    values: int
    history: int
    ttl: float
    bytes: int
    backing_store: str = "JetStream"
    is_compressed: bool = False
    limit_marker_ttl: float = 0.0
    info: StreamInfo = field(default_factory=StreamInfo, repr=False, compare=False)

    @property
    def config(self) -> KeyValueConfig:
        """The bucket's settings as a :class:`KeyValueConfig` (nats.go's
        ``Status().Config()``), read from ``info``: change a field and give it to
        ``js.update_key_value`` to change only that one.

        The server's own ``_nats.*`` metadata keys are left out.
        """
        config = self.info.config
        metadata = {
            key: value
            for key, value in (config.metadata or {}).items()
            if not key.startswith("_nats.")
        }
        return KeyValueConfig(
            bucket=self.bucket,
            description=config.description,
            history=config.max_msgs_per_subject or 1,
            ttl=config.max_age or 0.0,
            max_value_size=_limit(config.max_msg_size),
            max_bytes=_limit(config.max_bytes),
            storage=config.storage or "file",
            replicas=config.num_replicas or 1,
            compression=config.compression not in (None, "", "none"),
            placement=config.placement,
            republish=config.republish,
            metadata=metadata or None,
            limit_marker_ttl=config.subject_delete_marker_ttl or None,
            mirror=_source_from(config.mirror) if config.mirror else None,
            sources=[_source_from(source) for source in config.sources or []],
        )


def _source_from(given: dict[str, Any]) -> StreamSource:
    """A stream's ``mirror`` or ``sources`` entry as a bucket's: it names the bucket."""
    name = str(given.get("name") or "")
    return StreamSource(
        name=name[3:] if name.startswith("KV_") else name,
        opt_start_seq=given.get("opt_start_seq"),
        opt_start_time=given.get("opt_start_time"),
        filter_subject=given.get("filter_subject"),
        subject_transforms=given.get("subject_transforms"),
        external=given.get("external"),
    )


def bucket_status(bucket: str, info: StreamInfo) -> KeyValueStatus:
    """The status of ``bucket`` read from its stream's ``info``."""
    config = info.config
    return KeyValueStatus(
        bucket=bucket,
        values=info.state.messages,
        history=config.max_msgs_per_subject or 1,
        ttl=config.max_age or 0.0,
        bytes=info.state.bytes,
        is_compressed=config.compression not in (None, "", "none"),
        limit_marker_ttl=config.subject_delete_marker_ttl or 0.0,
        info=info,
    )


def _limit(value: int | None) -> int:
    """A stream's byte limit as a bucket setting: unset or 0 is no limit (-1)."""
    return value if value is not None and value > 0 else -1

"""The service API's wire facts (ADR-32): subjects, JSON types, the reply records.

How it works: plain data and pure functions, no threads and no state. The records
(:class:`ServicePing`, :class:`ServiceInfo`, :class:`ServiceStats` and their endpoint
parts) carry exactly the spec's JSON fields as attributes, and convert to and from that
JSON, so the service (``service``) and the discovery helpers (``discovery``) share one
spelling of it. Durations stay integer nanoseconds, as on the wire, because the fields
are the spec's; ``started`` is an aware UTC ``datetime``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from nats_sync.errors import InvalidArgumentError

#: The root of every discovery subject.
PREFIX = "$SRV"
#: The queue group endpoints join unless told otherwise.
DEFAULT_QUEUE_GROUP = "q"
#: Header naming a service error's description.
ERROR_HEADER = "Nats-Service-Error"
#: Header holding a service error's code (digits).
ERROR_CODE_HEADER = "Nats-Service-Error-Code"

PING_RESPONSE_TYPE = "io.nats.micro.v1.ping_response"
INFO_RESPONSE_TYPE = "io.nats.micro.v1.info_response"
STATS_RESPONSE_TYPE = "io.nats.micro.v1.stats_response"
#: The discovery verbs, as they appear in subjects.
VERBS = ("PING", "INFO", "STATS")

_NAME = re.compile(r"^[A-Za-z0-9\-_]+$")
# Semantic versioning 2.0.0, the regular expression semver.org suggests.
_SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$"
)
_SUBJECT_TOKEN_BAD = re.compile(r"[\s]")


def check_name(value: object, what: str) -> str:
    """Returns ``value`` if it is a valid service or endpoint name (``[A-Za-z0-9_-]+``).

    Raises:
        InvalidArgumentError: it is not.
    """
    if not isinstance(value, str) or not _NAME.match(value):
        raise InvalidArgumentError(
            f"{what} must be letters, digits, '-' and '_' only (at least one), got {value!r}"
        )
    return value


def check_version(value: object) -> str:
    """Returns ``value`` if it is a semantic version such as ``"1.0.0"``.

    Raises:
        InvalidArgumentError: it is not.
    """
    if not isinstance(value, str) or not _SEMVER.match(value):
        raise InvalidArgumentError(
            f"service version must be a semantic version such as '1.0.0', got {value!r}"
        )
    return value


def check_subject(value: object, what: str, *, wildcards: bool) -> str:
    """Returns ``value`` if it is a subject (or part of one) endpoints can use.

    Raises:
        InvalidArgumentError: empty tokens, white space, or wildcards where not allowed.
    """
    if not isinstance(value, str) or not value or _SUBJECT_TOKEN_BAD.search(value):
        raise InvalidArgumentError(f"{what} must be a subject without spaces, got {value!r}")
    tokens = value.split(".")
    for index, token in enumerate(tokens):
        wild = token in ("*", ">")
        if not token or (not wild and ("*" in token or ">" in token)):
            raise InvalidArgumentError(f"{what} is not a valid subject: {value!r}")
        if wild and not wildcards:
            raise InvalidArgumentError(f"{what} may not hold wildcards: {value!r}")
        if token == ">" and index != len(tokens) - 1:
            raise InvalidArgumentError(f"{what}: '>' must be the last token: {value!r}")
    return value


def check_queue_group(value: object, what: str) -> str:
    """Returns ``value`` if it can be a queue group name.

    Raises:
        InvalidArgumentError: it cannot.
    """
    return check_subject(value, what, wildcards=False)


def check_metadata(value: object, what: str) -> dict[str, str]:
    """Returns a copy of ``value`` if it maps strings to strings (None gives ``{}``).

    Raises:
        InvalidArgumentError: it does not.
    """
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise InvalidArgumentError(f"{what} must map str to str, got {value!r}")
    return dict(value)


def control_subject(verb: str, name: str | None = None, id: str | None = None) -> str:
    """The discovery subject ``$SRV.<VERB>[.<name>[.<id>]]``."""
    parts = [PREFIX, verb.upper()]
    if name:
        parts.append(name)
        if id:
            parts.append(id)
    return ".".join(parts)


def format_time(when: datetime) -> str:
    """RFC 3339 in UTC with microseconds and ``Z`` (what nats.go and nats-py both read)."""
    return when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(text: str) -> datetime:
    """Reads an RFC 3339 time; nanosecond fractions (nats.go) are cut to microseconds."""
    match = re.match(r"^(.*T\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$", text)
    if not match:
        raise InvalidArgumentError(f"not an RFC 3339 time: {text!r}")
    base, fraction, zone = match.groups()
    fraction = (fraction or "0")[:6].ljust(6, "0")
    zone = "+00:00" if zone == "Z" else zone
    return datetime.fromisoformat(f"{base}.{fraction}{zone}").astimezone(timezone.utc)


@dataclass
class EndpointInfo:
    """One endpoint in an INFO reply.

    Attributes:
        name: the endpoint's name.
        subject: the subject it listens on.
        queue_group: its queue group.
        metadata: its metadata.
    """

    name: str
    subject: str
    queue_group: str = DEFAULT_QUEUE_GROUP
    metadata: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The spec's JSON object."""
        return {
            "name": self.name,
            "subject": self.subject,
            "queue_group": self.queue_group,
            "metadata": self.metadata,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EndpointInfo:
        """Reads the spec's JSON object (unknown keys ignored)."""
        return cls(
            name=data.get("name", ""),
            subject=data.get("subject", ""),
            queue_group=data.get("queue_group") or "",
            metadata=data.get("metadata") or {},
        )


@dataclass
class EndpointStats:
    """One endpoint in a STATS reply.

    Attributes:
        name: the endpoint's name.
        subject: the subject it listens on.
        queue_group: its queue group.
        num_requests: requests handled since the start or the last reset.
        num_errors: of which answered with an error (or raising).
        last_error: the last error, ``"<code>:<description>"`` ("" when none).
        processing_time: total handler time, integer nanoseconds.
        average_processing_time: ``processing_time // num_requests``, nanoseconds.
        data: the endpoint's own statistics, any JSON value (None when none).
    """

    name: str
    subject: str
    queue_group: str = DEFAULT_QUEUE_GROUP
    num_requests: int = 0
    num_errors: int = 0
    last_error: str = ""
    processing_time: int = 0
    average_processing_time: int = 0
    data: Any = None

    def to_dict(self) -> dict[str, Any]:
        """The spec's JSON object."""
        return {
            "name": self.name,
            "subject": self.subject,
            "queue_group": self.queue_group,
            "num_requests": self.num_requests,
            "num_errors": self.num_errors,
            "last_error": self.last_error,
            "processing_time": self.processing_time,
            "average_processing_time": self.average_processing_time,
            # Always there, null when empty: nats-py 2.x reads the key unconditionally.
            "data": self.data,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EndpointStats:
        """Reads the spec's JSON object (unknown keys ignored)."""
        return cls(
            name=data.get("name", ""),
            subject=data.get("subject", ""),
            queue_group=data.get("queue_group") or "",
            num_requests=int(data.get("num_requests") or 0),
            num_errors=int(data.get("num_errors") or 0),
            last_error=data.get("last_error") or "",
            processing_time=int(data.get("processing_time") or 0),
            average_processing_time=int(data.get("average_processing_time") or 0),
            data=data.get("data"),
        )


@dataclass
class ServicePing:
    """A PING reply: who is there.

    Attributes:
        name: the service's name (shared by its instances).
        id: this instance's unique id.
        version: the service's semantic version.
        metadata: the service's metadata.
        type: ``io.nats.micro.v1.ping_response``.
    """

    name: str
    id: str
    version: str
    metadata: dict[str, str] = field(default_factory=dict)
    type: str = PING_RESPONSE_TYPE

    def to_dict(self) -> dict[str, Any]:
        """The spec's JSON object."""
        return {
            "type": self.type,
            "name": self.name,
            "id": self.id,
            "version": self.version,
            "metadata": self.metadata,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ServicePing:
        """Reads the spec's JSON object (unknown keys ignored)."""
        return cls(
            name=data.get("name", ""),
            id=data.get("id", ""),
            version=data.get("version", ""),
            metadata=data.get("metadata") or {},
            type=data.get("type", PING_RESPONSE_TYPE),
        )


@dataclass
class ServiceInfo:
    """An INFO reply: the service and its endpoints.

    Attributes:
        name: the service's name.
        id: this instance's unique id.
        version: the service's semantic version.
        description: what the service does ("" when not given).
        metadata: the service's metadata.
        endpoints: one :class:`EndpointInfo` per endpoint, in the order they were added.
        type: ``io.nats.micro.v1.info_response``.
    """

    name: str
    id: str
    version: str
    description: str = ""
    metadata: dict[str, str] = field(default_factory=dict)
    endpoints: list[EndpointInfo] = field(default_factory=list)
    type: str = INFO_RESPONSE_TYPE

    def to_dict(self) -> dict[str, Any]:
        """The spec's JSON object."""
        return {
            "type": self.type,
            "name": self.name,
            "id": self.id,
            "version": self.version,
            "description": self.description,
            "metadata": self.metadata,
            "endpoints": [e.to_dict() for e in self.endpoints],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ServiceInfo:
        """Reads the spec's JSON object (unknown keys ignored)."""
        return cls(
            name=data.get("name", ""),
            id=data.get("id", ""),
            version=data.get("version", ""),
            description=data.get("description") or "",
            metadata=data.get("metadata") or {},
            endpoints=[EndpointInfo.from_dict(e) for e in data.get("endpoints") or []],
            type=data.get("type", INFO_RESPONSE_TYPE),
        )


@dataclass
class ServiceStats:
    """A STATS reply: the counters of each endpoint since ``started``.

    Attributes:
        name: the service's name.
        id: this instance's unique id.
        version: the service's semantic version.
        metadata: the service's metadata.
        started: when the service started or was last reset (aware UTC).
        endpoints: one :class:`EndpointStats` per endpoint.
        type: ``io.nats.micro.v1.stats_response``.
    """

    name: str
    id: str
    version: str
    started: datetime
    metadata: dict[str, str] = field(default_factory=dict)
    endpoints: list[EndpointStats] = field(default_factory=list)
    type: str = STATS_RESPONSE_TYPE

    def to_dict(self) -> dict[str, Any]:
        """The spec's JSON object."""
        return {
            "type": self.type,
            "name": self.name,
            "id": self.id,
            "version": self.version,
            "metadata": self.metadata,
            "started": format_time(self.started),
            "endpoints": [e.to_dict() for e in self.endpoints],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ServiceStats:
        """Reads the spec's JSON object (unknown keys ignored)."""
        started = data.get("started")
        return cls(
            name=data.get("name", ""),
            id=data.get("id", ""),
            version=data.get("version", ""),
            started=parse_time(started) if started else datetime.now(timezone.utc),
            metadata=data.get("metadata") or {},
            endpoints=[EndpointStats.from_dict(e) for e in data.get("endpoints") or []],
            type=data.get("type", STATS_RESPONSE_TYPE),
        )


def encode(record: ServicePing | ServiceInfo | ServiceStats) -> bytes:
    """The record's JSON, compact, as bytes."""
    return json.dumps(record.to_dict(), separators=(",", ":")).encode()

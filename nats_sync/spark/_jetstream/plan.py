"""Planning a "jetstream" read: the settings, stream state, offsets, data-loss checks.

How it works: plain functions and a `Planner` made per call, on the driver (the readers in
``source``) and, for one re-check of the stream's head, on an executor (``read``).
An offset is ``{"<stream>": {"seq": <next sequence to read>, "created": "<stream
creation time>"}}``; the creation time tells a stream deleted and made again (its
sequences start over) from the one a checkpoint knew. A planner asks the server once per
call (``STREAM.INFO``) through the process's worker client and keeps nothing but the one
JetStream context its calls share.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from pyspark.sql.datasource import InputPartition

from nats_sync.errors import InvalidArgumentError
from nats_sync.jetstream import JetStream
from nats_sync.jetstream._streams.wire import format_time
from nats_sync.jetstream.api import StreamInfo
from nats_sync.jetstream.errors import MessageNotFoundError, StreamNotFoundError
from nats_sync.spark import _defaults as sd
from nats_sync.spark._jetstream.retry import RetryPolicy
from nats_sync.spark._worker import worker_client

logger = logging.getLogger("nats_sync.spark")

SOURCE = "jetstream data source"
#: Kafka's JSON shorthands for a starting offset.
EARLIEST, LATEST = -2, -1


@dataclass(frozen=True)
class JsReadSettings:
    """Validated read options (plain data: pickled to the executors with each range)."""

    servers: tuple[str, ...]
    stream: str
    connect_options: tuple[tuple[str, Any], ...] = ()
    subject: str | None = None
    starting: int | None = None  # a sequence, EARLIEST or LATEST; None: the default
    starting_timestamp_ms: int | None = None
    ending: int | None = None  # batch: the sequence to stop before; None: the head
    max_offsets_per_trigger: int | None = None
    min_partitions: int = 1
    fail_on_data_loss: bool = True
    include_headers: bool = True
    domain: str | None = None
    timeout: float = sd.SPARK_JS_TIMEOUT
    read_mode: str = "auto"
    fetch_batch: int = sd.SPARK_JS_FETCH_BATCH
    retry_timeout: float = sd.SPARK_JS_RETRY_TIMEOUT

    def jetstream(self) -> JetStream:
        """This process's JetStream context on the worker client."""
        client = worker_client(list(self.servers), dict(self.connect_options))
        return client.jetstream(domain=self.domain, timeout=self.timeout)

    @property
    def retry(self) -> RetryPolicy:
        """How the reader's calls ride through a cluster's transient failures."""
        return RetryPolicy(budget=self.retry_timeout, servers=self.servers)


@dataclass(frozen=True)
class JsRange(InputPartition):
    """One read task: sequences ``lo`` (inclusive) to ``hi`` (exclusive) of a stream."""

    settings: JsReadSettings
    lo: int
    hi: int
    direct: bool
    check_head: bool


class DataLossError(InvalidArgumentError):
    """Messages the query had not read yet are gone (``failOnDataLoss`` is true)."""


def created_of(info: StreamInfo) -> str:
    return info.created.isoformat() if info.created is not None else ""


def earliest_of(info: StreamInfo) -> int:
    return max(info.state.first_seq, 1)


def head_of(info: StreamInfo) -> int:
    return info.state.last_seq + 1


class Planner:
    """What both readers do on the driver: stream state, starting points, ranges.

    Each call to the server rides through a cluster's transient failures
    (``settings.retry``).
    """

    def __init__(self, settings: JsReadSettings) -> None:
        self.settings = settings
        self._js: JetStream | None = None

    @property
    def js(self) -> JetStream:
        """The context of this planner's calls (its ``api_level`` asked once at most),
        made again on the worker's new client where the one it was on has closed."""
        if self._js is None or self._js.client.is_closed:
            self._js = self.settings.jetstream()
        return self._js

    def info(self) -> StreamInfo:
        stream = self.settings.stream
        try:
            return self.settings.retry.call(
                f"{SOURCE}: STREAM.INFO of {stream!r}", lambda: self.js.stream_info(stream)
            )
        except StreamNotFoundError:
            raise StreamNotFoundError(
                f"{SOURCE}: stream {stream!r} does not exist",
                code=404,
                err_code=10059,
            ) from None

    def offset(self, seq: int, info: StreamInfo) -> dict[str, Any]:
        return {self.settings.stream: {"seq": seq, "created": created_of(info)}}

    def start_seq(self, info: StreamInfo, *, streaming: bool) -> int:
        """The first sequence a new query reads."""
        settings = self.settings
        if settings.starting_timestamp_ms is not None:
            return self._seq_at_time(settings.starting_timestamp_ms, info)
        starting = settings.starting
        if starting is None:
            starting = LATEST if streaming else EARLIEST  # as Spark's Kafka source
        if starting == EARLIEST:
            return earliest_of(info)
        if starting == LATEST:
            return head_of(info)
        return starting

    def _seq_at_time(self, millis: int, info: StreamInfo) -> int:
        when = datetime.fromtimestamp(millis / 1000, tz=timezone.utc)
        stream = self.settings.stream
        try:
            reply = self.settings.retry.call(
                f"{SOURCE}: STREAM.MSG.GET of {stream!r} at startingTimestamp {millis}",
                lambda: self.js.api.request(
                    f"STREAM.MSG.GET.{stream}", {"start_time": format_time(when)}
                ),
            )
        except MessageNotFoundError:
            return head_of(info)  # nothing stored at or after that time yet
        seq = (reply.get("message") or {}).get("seq")
        if not isinstance(seq, int):
            raise InvalidArgumentError(
                f"{SOURCE}: the server did not resolve startingTimestamp {millis}: {reply!r}"
            )
        return seq

    def checked_start(self, start: Mapping[str, Any], info: StreamInfo) -> int:
        """The sequence to read from, given a checkpointed or planned start offset.

        Raises:
            DataLossError: ``failOnDataLoss`` is true and messages after ``start`` are
                gone (the stream's head moved past them, or the stream was made again).
        """
        seq, created = unpack(start, self.settings.stream)
        if created and created != created_of(info):
            self._lost(
                f"stream {self.settings.stream!r} was deleted and made again (created "
                f"{created}, now {created_of(info)}): sequences {seq}.. of the old stream are "
                "gone",
                restart_at=earliest_of(info),
            )
            return earliest_of(info)
        if seq > head_of(info):
            self._lost(
                f"stream {self.settings.stream!r} ends at sequence {info.state.last_seq} but "
                f"the query is at {seq}: the stream was made again or reset",
                restart_at=earliest_of(info),
            )
            return earliest_of(info)
        first = earliest_of(info)
        if seq < first and not _head_moves_by_design(info):
            self._lost(
                f"messages {seq}..{first - 1} of stream {self.settings.stream!r} were "
                "removed before they were read (limits, a purge or deletes at its head)",
                restart_at=first,
            )
        return max(seq, first)

    def _lost(self, what: str, *, restart_at: int) -> None:
        if self.settings.fail_on_data_loss:
            raise DataLossError(
                f"{SOURCE}: {what}; set failOnDataLoss to false to go on from sequence {restart_at}"
            )
        logger.warning(
            "%s: %s; going on from sequence %d (failOnDataLoss=false)", SOURCE, what, restart_at
        )

    def ranges(self, lo: int, hi: int, info: StreamInfo) -> list[JsRange]:
        """``[lo, hi)`` split into read tasks (at least ``minPartitions`` where it can)."""
        if lo >= hi:
            return []
        span = hi - lo
        count = max(
            self.settings.min_partitions, math.ceil(span / sd.SPARK_JS_MAX_SEQ_PER_PARTITION)
        )
        count = min(count, span)
        direct = self._direct(info)
        bounds = [lo + (span * index) // count for index in range(count + 1)]
        return [
            JsRange(
                settings=self.settings,
                lo=bounds[index],
                hi=bounds[index + 1],
                direct=direct,
                check_head=index == 0,
            )
            for index in range(count)
        ]

    def _direct(self, info: StreamInfo) -> bool:
        """Whether the tasks read by direct get rather than a temporary consumer.

        The consumer is the default: it reads about twice as fast on one client. A
        work-queue stream refuses a second, overlapping consumer, so ``auto`` reads it
        by direct get where it can.
        """
        mode = self.settings.read_mode
        if mode == "consumer":
            return False
        if mode == "auto" and info.config.retention != "workqueue":
            return False
        usable = bool(info.config.allow_direct) and (
            self.settings.retry.call(f"{SOURCE}: the server's API level", self.js.api_level) >= 1
        )
        if mode == "direct" and not usable:
            raise InvalidArgumentError(
                f"{SOURCE}: readMode 'direct' needs a stream with allow_direct and a "
                f"nats-server >= 2.11; stream {self.settings.stream!r} has allow_direct="
                f"{info.config.allow_direct}"
            )
        return usable


def _head_moves_by_design(info: StreamInfo) -> bool:
    """Streams whose oldest messages go because newer ones replace them (per-subject
    limits, as in key-value buckets): the head moving is not data loss there."""
    per_subject = info.config.max_msgs_per_subject
    return per_subject is not None and per_subject > 0


def unpack(offset: Mapping[str, Any], stream: str) -> tuple[int, str]:
    entry = offset.get(stream)
    if not isinstance(entry, Mapping) or not isinstance(entry.get("seq"), int):
        raise InvalidArgumentError(
            f"{SOURCE}: the checkpointed offset {dict(offset)!r} is not for stream "
            f"{stream!r}: a checkpoint belongs to one stream; start a new checkpoint location"
        )
    return int(entry["seq"]), str(entry.get("created") or "")


__all__ = [
    "EARLIEST",
    "LATEST",
    "DataLossError",
    "JsRange",
    "JsReadSettings",
    "Planner",
    "created_of",
    "earliest_of",
    "head_of",
    "unpack",
]

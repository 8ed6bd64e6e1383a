"""The "jetstream" source's driver side: its options and its two readers.

How it works: Spark calls these readers on the driver, one call at a time (a streaming
reader lives in one long-lived Python process for the query; a batch reader only plans).
Offsets are stream sequences (see ``plan``): Spark checkpoints them, so a restarted
query re-plans its unfinished micro-batch from the same sequences and reads the same
messages. Planned ranges ``[lo, hi)`` are read on the executors by ``read``. A
reader's only state is its settings and the ``availableNow`` target.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition

from nats_sync.errors import InvalidArgumentError
from nats_sync.jetstream._streams.wire import check_stream_name
from nats_sync.jetstream.errors import InvalidStreamNameError
from nats_sync.spark import _defaults as sd
from nats_sync.spark._jetstream.plan import (
    EARLIEST,
    LATEST,
    SOURCE,
    JsRange,
    JsReadSettings,
    Planner,
    created_of,
    head_of,
    unpack,
)
from nats_sync.spark._jetstream.read import JS_READ_SCHEMA, read_range_batches
from nats_sync.spark._options import (
    CONNECT_OPTIONS,
    check_known,
    connection_options,
    lowered_options,
    positive_float,
    positive_int,
    retry_timeout,
    whole_number,
)

try:  # pyspark >= 4.2: admission control and Trigger.AvailableNow
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadMaxRows,
        SupportsTriggerAvailableNow,
    )
except ImportError:  # pragma: no cover - pyspark 4.1
    ReadAllAvailable = ReadMaxRows = None  # type: ignore[assignment,misc]
    SupportsTriggerAvailableNow = object  # type: ignore[assignment,misc]

_READ_MODES = ("auto", "direct", "consumer")
_READ_OPTIONS = (
    "stream",
    "subject",
    "startingoffsets",
    "startingtimestamp",
    "endingoffsets",
    "maxoffsetspertrigger",
    "minpartitions",
    "failondataloss",
    "includeheaders",
    "domain",
    "timeout",
    "readmode",
    "fetchbatch",
    "retrytimeout",
)


def parse_read_options(options: Mapping[str, str], *, streaming: bool) -> JsReadSettings:
    """Checks and converts the read options, on the driver, before any task runs.

    Raises:
        InvalidArgumentError: an unknown option, a missing ``servers`` or ``stream``, or a
            value of the wrong kind; the message names the option.
    """
    given = lowered_options(options)
    check_known(SOURCE, given, set(CONNECT_OPTIONS) | set(_READ_OPTIONS))
    servers, connect = connection_options(SOURCE, given)
    stream = given.get("stream", "").strip()
    if not stream:
        raise InvalidArgumentError(f"{SOURCE}: option 'stream' is required (the stream's name)")
    try:
        check_stream_name(stream)
    except InvalidStreamNameError as bad:
        raise InvalidStreamNameError(f"{SOURCE}: option 'stream': {bad.detail}") from None
    if "startingoffsets" in given and "startingtimestamp" in given:
        raise InvalidArgumentError(
            f"{SOURCE}: give either 'startingOffsets' or 'startingTimestamp', not both"
        )
    if not streaming and "maxoffsetspertrigger" in given:
        raise InvalidArgumentError(f"{SOURCE}: 'maxOffsetsPerTrigger' is for streaming reads")
    if streaming and "endingoffsets" in given:
        raise InvalidArgumentError(
            f"{SOURCE}: 'endingOffsets' is for batch reads (spark.read), not streaming ones"
        )
    read_mode = given.get("readmode", "auto").lower()
    if read_mode not in _READ_MODES:
        raise InvalidArgumentError(
            f"{SOURCE}: option 'readMode' must be one of {', '.join(_READ_MODES)}, "
            f"got {given['readmode']!r}"
        )
    max_offsets = given.get("maxoffsetspertrigger")
    if max_offsets is not None and ReadMaxRows is None:  # pragma: no cover - pyspark 4.1
        raise InvalidArgumentError(
            f"{SOURCE}: 'maxOffsetsPerTrigger' needs pyspark >= 4.2 (admission control)"
        )
    return JsReadSettings(
        servers=servers,
        stream=stream,
        connect_options=connect,
        subject=given.get("subject") or None,
        starting=_offset_option(
            given, "startingoffsets", stream, streaming=streaming, allow_latest=streaming
        ),
        starting_timestamp_ms=(
            whole_number("startingTimestamp", given["startingtimestamp"], SOURCE)
            if "startingtimestamp" in given
            else None
        ),
        ending=_offset_option(
            given,
            "endingoffsets",
            stream,
            streaming=streaming,
            allow_latest=True,
            allow_earliest=False,
        ),
        max_offsets_per_trigger=(
            positive_int("maxOffsetsPerTrigger", max_offsets, SOURCE)
            if max_offsets is not None
            else None
        ),
        min_partitions=positive_int("minPartitions", given.get("minpartitions", "1"), SOURCE),
        fail_on_data_loss=_boolean(given, "failondataloss", default=True),
        include_headers=_boolean(given, "includeheaders", default=True),
        domain=given.get("domain") or None,
        timeout=positive_float("timeout", given.get("timeout", str(sd.SPARK_JS_TIMEOUT)), SOURCE),
        read_mode=read_mode,
        fetch_batch=positive_int(
            "fetchBatch", given.get("fetchbatch", str(sd.SPARK_JS_FETCH_BATCH)), SOURCE
        ),
        retry_timeout=retry_timeout(given, SOURCE),
    )


def _offset_option(
    given: Mapping[str, str],
    key: str,
    stream: str,
    *,
    streaming: bool,
    allow_latest: bool,
    allow_earliest: bool = True,
) -> int | None:
    text = given.get(key)
    if text is None:
        return None
    name = {"startingoffsets": "startingOffsets", "endingoffsets": "endingOffsets"}[key]
    word = text.strip().lower()
    if word == "earliest" and allow_earliest:
        return EARLIEST
    if word == "latest" and allow_latest:
        return LATEST
    if word in ("earliest", "latest"):
        raise InvalidArgumentError(
            f"{SOURCE}: {name} {text!r} is not allowed for a "
            f"{'streaming' if streaming else 'batch'} read"
        )
    try:
        decoded = json.loads(text)
    except ValueError:
        decoded = None
    if not isinstance(decoded, dict):
        raise InvalidArgumentError(
            f"{SOURCE}: {name} must be 'earliest', 'latest' or JSON like "
            f'{{"{stream}": 42}} (the next sequence to read), got {text!r}'
        )
    if set(decoded) != {stream}:
        raise InvalidArgumentError(
            f"{SOURCE}: {name} must name the stream {stream!r} and only it, got {text!r}"
        )
    value = decoded[stream]
    if isinstance(value, bool) or not isinstance(value, int) or value < EARLIEST or value == 0:
        raise InvalidArgumentError(
            f"{SOURCE}: {name} for {stream!r} must be a sequence >= 1 "
            f"(or -2 for earliest, -1 for latest), got {value!r}"
        )
    if (value == LATEST and not allow_latest) or (value == EARLIEST and not allow_earliest):
        raise InvalidArgumentError(f"{SOURCE}: {name} {text!r} is not allowed here")
    return int(value)


def _boolean(given: Mapping[str, str], key: str, *, default: bool) -> bool:
    text = given.get(key)
    if text is None:
        return default
    if text.strip().lower() in ("true", "false"):
        return text.strip().lower() == "true"
    raise InvalidArgumentError(f"{SOURCE}: option {key!r} must be true or false, got {text!r}")


class JetStreamBatchReader(DataSourceReader):
    """``spark.read.format("jetstream")``: a sequence range read once."""

    def __init__(self, settings: JsReadSettings) -> None:
        self.settings = settings

    def partitions(self) -> Sequence[InputPartition]:
        """Plans ``[start, end)`` on the driver: ``startingOffsets`` (default earliest) to
        ``endingOffsets`` (default: the stream's last sequence now, inclusive)."""
        planner = Planner(self.settings)
        info = planner.info()
        lo = planner.start_seq(info, streaming=False)
        ending = self.settings.ending
        hi = head_of(info) if ending is None or ending == LATEST else ending
        if lo < hi:
            lo = planner.checked_start(planner.offset(lo, info), info)
        return planner.ranges(lo, hi, info)

    def read(self, partition: InputPartition) -> Any:
        """Reads one range on an executor, as Arrow record batches."""
        return _read(partition)


class JetStreamStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("jetstream")``: replayable, offsets are sequences."""

    def __init__(self, settings: JsReadSettings) -> None:
        self.settings = settings
        self._target: int | None = None  # Trigger.AvailableNow: read no further

    def initialOffset(self) -> dict[str, Any]:
        """Where a new query starts (a restarted one starts from its checkpoint)."""
        planner = Planner(self.settings)
        info = planner.info()
        return planner.offset(planner.start_seq(info, streaming=True), info)

    def getDefaultReadLimit(self) -> Any:
        """``maxOffsetsPerTrigger`` as a row limit (it counts sequences; gaps make fewer
        rows)."""
        if self.settings.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.settings.max_offsets_per_trigger)
        return ReadAllAvailable()

    def latestOffset(
        self, start: dict[str, Any] | None = None, limit: Any = None
    ) -> dict[str, Any]:
        """The end of the next micro-batch: the stream's head, capped by the limit."""
        planner = Planner(self.settings)
        info = planner.info()
        if start is None:  # pyspark 4.1 passes nothing: no admission control there
            return planner.offset(head_of(info), info)
        seq = planner.checked_start(start, info)
        end = head_of(info)
        if self._target is not None:
            end = min(end, self._target)
        if ReadMaxRows is not None and isinstance(limit, ReadMaxRows):
            end = min(end, seq + limit.max_rows)
        return planner.offset(max(end, seq), info)

    def reportLatestOffset(self) -> dict[str, Any] | None:
        """The stream's head, for the query's progress report."""
        planner = Planner(self.settings)
        info = planner.info()
        return planner.offset(head_of(info), info)

    def prepareForTriggerAvailableNow(self) -> None:
        """Pins the head now: an ``availableNow`` query reads no further."""
        self._target = head_of(Planner(self.settings).info())

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        """The micro-batch ``[start, end)`` as read tasks; a restart re-plans the same."""
        planner = Planner(self.settings)
        info = planner.info()
        hi, end_created = unpack(end, self.settings.stream)
        if end_created and end_created != created_of(info):
            planner.checked_start(end, info)  # the stream was made again since planning
            return []
        lo = planner.checked_start(start, info)
        return planner.ranges(lo, hi, info)

    def read(self, partition: InputPartition) -> Any:
        """Reads one range on an executor, as Arrow record batches."""
        return _read(partition)

    def commit(self, end: dict[str, Any]) -> None:
        """Acknowledges nothing: Spark's checkpoint is the record of what was read."""

    def stop(self) -> None:
        """Nothing to release: the worker client outlives the query."""


def _read(partition: InputPartition | None) -> Any:
    # Spark reads one empty partition (None, or holding None) when the plan has none.
    if partition is None or getattr(partition, "value", False) is None:
        return iter(())
    if not isinstance(partition, JsRange):
        raise InvalidArgumentError(f"{SOURCE}: not a planned range: {partition!r}")
    return read_range_batches(partition)


__all__ = [
    "JS_READ_SCHEMA",
    "JetStreamBatchReader",
    "JetStreamStreamReader",
    "parse_read_options",
]

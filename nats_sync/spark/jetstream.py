"""The "jetstream" Python data source: replayable reads and acknowledged writes.

How it works: Spark pickles `JetStreamDataSource` (by reference to this module) to its
Python processes. Reads: the driver plans sequence ranges of one stream (offsets are
stream sequences, checkpointed by Spark) and each task reads its range on an executor
(``read``); nothing is kept between calls but the driver reader's last stream
identity. Writes (``sink``) publish with acknowledgements from the tasks.
"""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
)
from pyspark.sql.types import StructType

from nats_sync.spark._jetstream import sink
from nats_sync.spark._jetstream.source import (
    JS_READ_SCHEMA,
    JetStreamBatchReader,
    JetStreamStreamReader,
    parse_read_options,
)


class JetStreamDataSource(DataSource):
    """``format("jetstream")``: see `nats_sync.spark` for the options and columns."""

    @classmethod
    def name(cls) -> str:
        """The format name, ``"jetstream"``."""
        return "jetstream"

    def schema(self) -> str:
        """The columns a read yields."""
        return JS_READ_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        """A batch reader of a sequence range (default: everything stored now)."""
        return JetStreamBatchReader(parse_read_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """A replayable streaming reader whose offsets are stream sequences."""
        return JetStreamStreamReader(parse_read_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceArrowWriter:
        """Publishes every row with an acknowledgement; only ``mode("append")``."""
        return sink.batch_writer(self.options, schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamArrowWriter:
        """The streaming counterpart of `writer`, per micro-batch."""
        return sink.stream_writer(self.options, schema, overwrite)


__all__ = ["JetStreamDataSource"]

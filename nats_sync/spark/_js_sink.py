"""The "jetstream" sink (being written): publishes rows with acknowledgements."""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter
from pyspark.sql.types import StructType


def batch_writer(options: Mapping[str, str], schema: StructType,
                 overwrite: bool) -> DataSourceArrowWriter:
    """The writer of ``df.write.format("jetstream")``."""
    raise NotImplementedError("the jetstream sink is not written yet")


def stream_writer(options: Mapping[str, str], schema: StructType,
                  overwrite: bool) -> DataSourceStreamArrowWriter:
    """The writer of ``df.writeStream.format("jetstream")``."""
    raise NotImplementedError("the jetstream sink is not written yet")

"""The "jetstream" source's driver side (being written)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader

JS_READ_SCHEMA = (
    "stream string, seq long, subject string, data binary, headers map<string,string>, "
    "timestamp timestamp"
)


def parse_read_options(options: Mapping[str, str], *, streaming: bool) -> Any:
    """Checks the read options."""
    raise NotImplementedError("the jetstream source is not written yet")


class JetStreamBatchReader(DataSourceReader):
    """Batch reads."""

    def __init__(self, settings: Any) -> None:
        self.settings = settings


class JetStreamStreamReader(DataSourceStreamReader):
    """Streaming reads."""

    def __init__(self, settings: Any) -> None:
        self.settings = settings

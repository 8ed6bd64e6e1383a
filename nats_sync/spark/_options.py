"""Turns the string options of the "nats" data source into connect keywords and settings.

How it works: pure functions, run on the driver when Spark builds a reader or writer, so
a typo fails the query before any task starts. Spark hands options over as a
case-insensitive mapping of strings; every key is checked against a fixed list. Also
the column checks and the headers conversion the sources share.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql.types import BinaryType, DataType, MapType, StringType

from nats_sync.errors import InvalidArgumentError
from nats_sync.spark import _defaults as sd

#: Options that go to ``connect()``; the value is the keyword they become there.
CONNECT_OPTIONS = {
    "servers": "servers",
    "name": "name",
    "user": "user",
    "password": "password",
    "token": "token",
    "creds": "user_credentials",
    "nkeys_seed": "nkeys_seed",
    "tls_ca": "tls_ca",
    "connect_timeout": "connect_timeout",
}
#: Options the data source itself reads.
SOURCE_OPTIONS = ("subject", "queue", "timeout", "max_buffered", "max_rows_per_batch")
#: Options Spark itself adds or reads (streaming queries pass them on to the source and
#: the sink: ``.queryName(...)`` arrives as ``queryName``).
SPARK_OPTIONS = ("checkpointlocation", "queryname")


@dataclass(frozen=True)
class SourceSettings:
    """Validated settings of one reader or writer (picklable: plain data only)."""

    servers: tuple[str, ...]
    connect_options: tuple[tuple[str, Any], ...] = ()
    subject: str | None = None
    queue: str = ""
    timeout: float = sd.SPARK_WRITE_TIMEOUT
    max_buffered: int = sd.SPARK_MAX_BUFFERED
    max_rows_per_batch: int = sd.SPARK_MAX_ROWS_PER_BATCH

    @property
    def connect_kwargs(self) -> dict[str, Any]:
        """The keywords for `worker_client` (``servers`` excluded)."""
        return dict(self.connect_options)


def parse_source_options(options: Mapping[str, str], *, need_subject: bool) -> SourceSettings:
    """Checks and converts the options given with ``.option(...)``.

    Args:
        options: what Spark passes to the data source (keys in any case).
        need_subject: whether a ``subject`` option is required (reading).

    Returns:
        The settings.

    Raises:
        InvalidArgumentError: an unknown option, a missing ``servers`` (or ``subject`` when
            needed), or a value that is not of the right kind; the message names it.
    """
    given = lowered_options(options)
    known = set(CONNECT_OPTIONS) | set(SOURCE_OPTIONS)
    check_known("nats data source", given, known)
    servers, connect_options = connection_options("nats data source", given)
    subject = given.get("subject") or None
    if need_subject and subject is None:
        raise InvalidArgumentError("nats data source: option 'subject' is required for reading")
    return SourceSettings(
        servers=servers,
        connect_options=connect_options,
        subject=subject,
        queue=given.get("queue", ""),
        timeout=positive_float("timeout", given.get("timeout", str(sd.SPARK_WRITE_TIMEOUT))),
        max_buffered=positive_int(
            "max_buffered", given.get("max_buffered", str(sd.SPARK_MAX_BUFFERED))
        ),
        max_rows_per_batch=positive_int(
            "max_rows_per_batch",
            given.get("max_rows_per_batch", str(sd.SPARK_MAX_ROWS_PER_BATCH)),
        ),
    )


def check_message_columns(
    source: str,
    columns: Mapping[str, DataType],
    string_columns: tuple[str, ...],
    *,
    has_subject_option: bool,
) -> None:
    """The column checks both sinks share: ``data`` binary or string, each of
    ``string_columns`` a string, ``headers`` a map<string,string>, and a subject from
    the option or a column.

    Raises:
        InvalidArgumentError: what is wrong, naming the column.
    """
    if "data" not in columns:
        raise InvalidArgumentError(f"{source}: the DataFrame needs a 'data' column")
    if not isinstance(columns["data"], BinaryType | StringType):
        raise InvalidArgumentError(
            f"{source}: column 'data' must be binary or string, not {columns['data']}"
        )
    for name in string_columns:
        if name in columns and not isinstance(columns[name], StringType):
            raise InvalidArgumentError(
                f"{source}: column {name!r} must be a string, not {columns[name]}"
            )
    headers = columns.get("headers")
    if headers is not None and not (
        isinstance(headers, MapType)
        and isinstance(headers.keyType, StringType)
        and isinstance(headers.valueType, StringType)
    ):
        raise InvalidArgumentError(
            f"{source}: column 'headers' must be map<string,string>, not {headers}"
        )
    if not has_subject_option and "subject" not in columns:
        raise InvalidArgumentError(
            f"{source}: give option 'subject' or a 'subject' column to publish to"
        )


def flat_headers(headers: Mapping[str, Any] | None) -> dict[str, str] | None:
    """Message headers as a ``map<string,string>`` value (a repeated header's values
    joined with ``,``), or None where there are none."""
    if not headers:
        return None
    return {
        key: ",".join(value) if isinstance(value, list) else value for key, value in headers.items()
    }


def lowered_options(options: Mapping[str, str]) -> dict[str, str]:
    """The options with their keys in lower case, without the ones Spark itself adds."""
    return {
        str(key).lower(): str(value)
        for key, value in options.items()
        if str(key).lower() not in SPARK_OPTIONS
    }


def check_known(source: str, given: Mapping[str, str], known: set[str]) -> None:
    """Raises `InvalidArgumentError` naming every option of ``given`` not in ``known``."""
    unknown = sorted(set(given) - known)
    if unknown:
        raise InvalidArgumentError(
            f"{source}: unknown option(s) {', '.join(map(repr, unknown))}; "
            f"known options are {', '.join(sorted(known))}"
        )


def connection_options(
    source: str, given: Mapping[str, str]
) -> tuple[tuple[str, ...], tuple[tuple[str, Any], ...]]:
    """The server URLs and the ``connect()`` keywords among the (lower-cased) options.

    Raises:
        InvalidArgumentError: ``servers`` is missing or empty, or ``connect_timeout`` is
            not a positive number.
    """
    servers = tuple(url.strip() for url in given.get("servers", "").split(",") if url.strip())
    if not servers:
        raise InvalidArgumentError(
            f"{source}: option 'servers' is required (a NATS URL, or several separated by commas)"
        )
    keywords: list[tuple[str, Any]] = []
    for option, keyword in CONNECT_OPTIONS.items():
        if option == "servers" or option not in given:
            continue
        value: Any = given[option]
        if option == "connect_timeout":
            value = positive_float(option, value, source)
        keywords.append((keyword, value))
    return servers, tuple(keywords)


def positive_float(option: str, text: str, source: str = "nats data source") -> float:
    """``text`` as a number > 0, or `InvalidArgumentError` naming the option."""
    try:
        value = float(text)
    except ValueError:
        raise InvalidArgumentError(
            f"{source}: option {option!r} must be a number of seconds, got {text!r}"
        ) from None
    if not value > 0:
        raise InvalidArgumentError(f"{source}: option {option!r} must be > 0, got {text!r}")
    return value


def retry_timeout(given: Mapping[str, str], source: str) -> float:
    """Option ``retryTimeout`` (lower-cased ``retrytimeout``): seconds >= 0 a call may
    keep retrying a cluster's transient failures (0: no retry); the default where it is
    not given.

    Raises:
        InvalidArgumentError: the value is not a number >= 0.
    """
    text = given.get("retrytimeout")
    if text is None:
        return sd.SPARK_JS_RETRY_TIMEOUT
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0 or value == float("inf"):
        raise InvalidArgumentError(
            f"{source}: option 'retryTimeout' must be a number of seconds >= 0 "
            f"(0: no retry), got {text!r}"
        )
    return value


def whole_number(
    option: str, text: str, source: str = "nats data source", *, minimum: int = 0
) -> int:
    """``text`` as a whole number of at least ``minimum``, or `InvalidArgumentError`
    naming the option."""
    try:
        value = int(text)
    except ValueError:
        raise InvalidArgumentError(
            f"{source}: option {option!r} must be a whole number, got {text!r}"
        ) from None
    if value < minimum:
        raise InvalidArgumentError(
            f"{source}: option {option!r} must be at least {minimum}, got {text!r}"
        )
    return value


def positive_int(option: str, text: str, source: str = "nats data source") -> int:
    """``text`` as a whole number > 0, or `InvalidArgumentError` naming the option."""
    return whole_number(option, text, source, minimum=1)


__all__ = [
    "CONNECT_OPTIONS",
    "SourceSettings",
    "check_known",
    "check_message_columns",
    "connection_options",
    "flat_headers",
    "lowered_options",
    "parse_source_options",
    "positive_float",
    "positive_int",
    "retry_timeout",
    "whole_number",
]

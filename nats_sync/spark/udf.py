"""Request-reply from Spark: a vectorised UDF and a DataFrame transform.

How it works: Spark hands each Python worker Arrow batches (10,000 rows by default).
For each batch the worker's shared client (see ``_worker``) sends every row's request
with ``request_batch``, so up to ``max_in_flight`` requests are on the wire at once
instead of one round trip per row. Only plain data (subject, servers, options) is
captured in the functions Spark pickles (with the driver's trace context, when
OpenTelemetry is loaded and a span is current as the UDF is made); the client is made
in the worker, after the fork. These functions run on Spark's task threads; they touch
only the worker cache.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql.pandas.functions import arrow_udf
from pyspark.sql.types import BinaryType, StringType, StructField, StructType

from nats_sync import _defaults as d
from nats_sync._core.proto import publish_subject
from nats_sync._core.validate import check_int, check_timeout
from nats_sync.errors import Error, InvalidArgumentError
from nats_sync.msg import Msg
from nats_sync.spark import _defaults as sd
from nats_sync.spark._worker import worker_client
from nats_sync.spark._worker_python import check_session_workers

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

REPLY_FIELD = "reply"
ERROR_FIELD = "error"
_NULL_PAYLOAD = "payload is null"


def _as_bytes(value: Any) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    raise TypeError(f"nats request payloads must be binary or string, got {type(value).__name__}")


def _describe(error: BaseException) -> str:
    return str(error) if isinstance(error, Error) else f"{type(error).__name__}: {error}"


def driver_trace_headers() -> dict[str, str] | None:
    """The driver's current OpenTelemetry trace context as request headers, or None.

    Taken when the UDF is made, on the driver, and pickled with it: every executor's
    request then carries it, so the services that answer (when instrumented) continue
    the driver's trace. OpenTelemetry is never imported for this: None unless the
    program loaded it, or when no span is current.
    """
    if "opentelemetry" not in sys.modules:
        return None
    from nats_sync.otel import trace_headers  # noqa: PLC0415 - only when loaded already

    return trace_headers() or None


def request_values(
    payloads: Sequence[Any],
    subject: str,
    servers: str | list[str],
    timeout: float,
    max_in_flight: int,
    connect_options: dict[str, Any],
    headers: dict[str, str] | None = None,
) -> tuple[list[bytes | None], list[str | None]]:
    """Sends one request per payload and returns (replies, errors), both in input order.

    A null payload, a timeout or "no responders" gives a null reply and an error text;
    a successful row has a null error. ``headers`` go with every request (the driver's
    trace context).
    """
    client = worker_client(servers, connect_options)
    # Comprehensions rather than a loop of calls: this runs once per row.
    values = [value if type(value) is bytes else _as_bytes(value) for value in payloads]
    positions = [index for index, value in enumerate(values) if value is not None]
    sent = [value for value in values if value is not None]
    results = (
        client.request_batch(
            subject, sent, timeout=timeout, headers=headers, max_in_flight=max_in_flight
        )
        if sent
        else []
    )
    replies: list[bytes | None] = [None] * len(values)
    errors: list[str | None] = [None if value is not None else _NULL_PAYLOAD for value in values]
    for index, result in zip(positions, results, strict=True):
        if isinstance(result, Msg):
            replies[index] = result.data
        else:
            errors[index] = _describe(result)
    return replies, errors


def request_udf(
    subject: str,
    servers: str | list[str],
    timeout: float = sd.SPARK_REQUEST_TIMEOUT,
    max_in_flight: int = d.DEFAULT_REQUEST_MAX_IN_FLIGHT,
    *,
    with_errors: bool = False,
    **connect_options: Any,
) -> Any:
    """A vectorised UDF that sends one NATS request per row and returns the reply.

    Example:
        ```python
        lookup = request_udf("geo.lookup", "nats://10.0.0.5:4222")
        df.withColumn("geo", lookup("ip"))
        ```

    Made while an OpenTelemetry span is current on the driver, every request carries
    that trace context (``traceparent``), so instrumented services continue the trace.

    Args:
        subject: the subject every request goes to.
        servers: NATS server URL(s), as `nats_sync.connect` takes them.
        timeout: seconds each request may wait for its reply.
        max_in_flight: requests of one batch on the wire at once.
        with_errors: return a struct ``<reply: binary, error: string>`` instead of the
            reply alone, so failed rows say why ("no responders", "timeout"...).
        **connect_options: further `nats_sync.connect` keywords (plain values).

    Returns:
        A UDF taking one binary or string column and returning a binary column (null
        for rows whose request failed) or, with ``with_errors``, the struct.

    Raises:
        BadSubjectError: ``subject`` is not a valid publish subject.
        InvalidArgumentError: ``timeout`` or ``max_in_flight`` is not positive.
        SparkWorkerPythonError: the active session runs on a local master whose
            Python workers cannot import nats_sync (see `register`).
    """
    publish_subject(subject)
    _check_limits(timeout, max_in_flight)
    check_session_workers()
    options = dict(connect_options)
    headers = driver_trace_headers()

    def nats_request(payloads: pa.Array) -> pa.Array:
        replies, errors = request_values(
            payloads.to_pylist(), subject, servers, timeout, max_in_flight, options, headers
        )
        reply_array = pa.array(replies, type=pa.binary())
        if not with_errors:
            return reply_array
        return pa.StructArray.from_arrays(
            [reply_array, pa.array(errors, type=pa.string())], names=[REPLY_FIELD, ERROR_FIELD]
        )

    return_type = f"{REPLY_FIELD} binary, {ERROR_FIELD} string" if with_errors else "binary"
    # Spark reads the kind of UDF from the type hints (Array -> Array); its stubs still
    # insist on the deprecated functionType argument, which would warn at runtime.
    return arrow_udf(nats_request, return_type)  # type: ignore[call-overload]


def request_df(
    df: DataFrame,
    subject: str,
    servers: str | list[str],
    payload_col: str,
    timeout: float = sd.SPARK_REQUEST_TIMEOUT,
    max_in_flight: int = d.DEFAULT_REQUEST_MAX_IN_FLIGHT,
    **connect_options: Any,
) -> DataFrame:
    """Adds the reply of one request per row to a DataFrame.

    Called while an OpenTelemetry span is current, every request carries that trace
    context, as with `request_udf`.

    Args:
        df: the input; every column is kept.
        subject: the subject every request goes to.
        servers: NATS server URL(s).
        payload_col: the binary or string column sent as each request's payload.
        timeout: seconds each request may wait for its reply.
        max_in_flight: requests of one batch on the wire at once.
        **connect_options: further `nats_sync.connect` keywords (plain values).

    Returns:
        ``df`` plus columns ``reply`` (binary, null on failure) and ``error`` (string,
        null on success).

    Raises:
        InvalidArgumentError: ``payload_col`` is missing, or ``df`` already has a ``reply`` or
            ``error`` column.
        SparkWorkerPythonError: ``df``'s session runs on a local master whose Python
            workers cannot import nats_sync (see `register`).
    """
    publish_subject(subject)
    _check_limits(timeout, max_in_flight)
    if payload_col not in df.columns:
        raise InvalidArgumentError(f"request_df: column {payload_col!r} not in {df.columns}")
    clashing = {REPLY_FIELD, ERROR_FIELD} & set(df.columns)
    if clashing:
        raise InvalidArgumentError(
            f"request_df: the input already has column(s) {sorted(clashing)}"
        )
    schema = StructType(
        [
            *df.schema.fields,
            StructField(REPLY_FIELD, BinaryType(), True),
            StructField(ERROR_FIELD, StringType(), True),
        ]
    )
    check_session_workers(df.sparkSession)
    options = dict(connect_options)
    headers = driver_trace_headers()

    def enrich(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            replies, errors = request_values(
                batch.column(payload_col).to_pylist(),
                subject,
                servers,
                timeout,
                max_in_flight,
                options,
                headers,
            )
            yield pa.RecordBatch.from_arrays(
                [*batch.columns, pa.array(replies, pa.binary()), pa.array(errors, pa.string())],
                names=[*batch.schema.names, REPLY_FIELD, ERROR_FIELD],
            )

    return df.mapInArrow(enrich, schema)


def _check_limits(timeout: float, max_in_flight: int) -> None:
    check_timeout(timeout)
    check_int(max_in_flight, "max_in_flight", 1)

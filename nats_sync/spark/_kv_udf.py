"""``kv_lookup_udf``: each key's current value in a key-value bucket, as a Spark column.

How it works: Spark hands the UDF Arrow batches of keys (10,000 rows by default) on a
task thread of a Python worker. For each batch the worker's one client (``_worker``)
looks up the batch's distinct keys with one ``KeyValue.get_many`` call (pipelined
batched direct gets, 1,024 keys a request, four in flight, continued past a request's
byte limit; ``get`` per key where the server or the bucket has no direct gets), then
maps the values found back onto the batch's rows: null where a key has no value (never
set, deleted or purged) or the key is null. An invalid key raises `InvalidKeyError`
naming it (a bug in the job, unlike a missing key, as in nats.go and nats-py), and a
lookup that gets no answer in time raises: the task fails and Spark retries it, rather
than taking an unreachable server for a missing key.

State: a per-process cache of bucket bindings (``_worker.PerClient``), made on first
use after Spark forks the worker; each ``KeyValue`` remembers whether batched gets work.
Only plain data (bucket, servers, options) is captured in the function Spark pickles.
"""

from __future__ import annotations

import codecs
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.pandas.functions import arrow_udf

from nats_sync._core.validate import check_timeout
from nats_sync.errors import InvalidArgumentError
from nats_sync.jetstream import KeyValue, KeyValueConfig
from nats_sync.jetstream._streams.wire import check_domain
from nats_sync.spark import _defaults as sd
from nats_sync.spark._worker import PerClient, worker_client
from nats_sync.spark._worker_python import check_session_workers

#: This process's bound buckets, per client, bucket, domain and timeout.
_buckets: PerClient[KeyValue] = PerClient()


def _bucket(
    bucket: str,
    servers: str | list[str],
    timeout: float,
    domain: str | None,
    options: dict[str, Any],
) -> KeyValue:
    """This process's binding of ``bucket`` (made on first use, again after a close)."""
    client = worker_client(servers, options)
    return _buckets.get(
        client,
        (bucket, domain, timeout),
        lambda: client.jetstream(domain=domain, timeout=timeout).key_value(bucket),
    )


def lookup_values(
    keys: Sequence[Any],
    bucket: str,
    servers: str | list[str],
    timeout: float,
    domain: str | None,
    options: dict[str, Any],
) -> list[bytes | None]:
    """Each key's current value (None where absent, deleted or purged, or the key null).

    Raises:
        InvalidKeyError: a key is not a valid key (the message names it).
        BucketNotFoundError: there is no such bucket.
        TimeoutError: the server did not answer within ``timeout``.
    """
    names: list[str | None] = [
        key if key is None or isinstance(key, str) else _key_text(key) for key in keys
    ]
    wanted = [name for name in names if name is not None]
    if not wanted:
        return [None] * len(names)
    kv = _bucket(bucket, servers, timeout, domain, options)
    values = kv.get_many(wanted, timeout=timeout)
    return [None if name is None else values.get(name) for name in names]


def _key_text(key: object) -> str:
    if isinstance(key, bytes):
        return key.decode("utf-8", errors="replace")
    raise InvalidArgumentError(
        f"kv_lookup_udf: keys must be strings, got {type(key).__name__} {key!r}"
    )


def kv_lookup_udf(
    bucket: str,
    servers: str | list[str],
    timeout: float = sd.SPARK_KV_LOOKUP_TIMEOUT,
    *,
    domain: str | None = None,
    decode: str | None = None,
    **connect_options: Any,
) -> Any:
    """A vectorised UDF giving each key's current value in a key-value bucket.

    It serves "enrich from a reference table" with no service process: the keys of each
    Arrow batch are looked up together over the worker's one connection (batched direct
    gets, 1,024 keys a request, a few requests in flight), not one round trip per row.

    Values are bytes, as the bucket stores them: the column is binary, and Spark shows
    ``b"1.5"`` as ``[31 2E 35]``. ``decode="utf-8"`` gives a string column instead.

    Example:
        ```python
        price = kv_lookup_udf("prices", "nats://10.0.0.5:4222", decode="utf-8")
        orders.withColumn("price", price("sku").cast("double"))
        ```

    Args:
        bucket: the key-value bucket's name.
        servers: NATS server URL(s), as `nats_sync.connect` takes them.
        timeout: seconds to wait for the server's answers (and to bind the bucket).
        domain: the JetStream domain of the bucket, if any.
        decode: a text encoding (``"utf-8"``, ``"latin-1"``...) to decode each value
            with, giving a string column; None (the default) keeps the bytes.
        **connect_options: further `nats_sync.connect` keywords (plain values).

    Returns:
        A UDF taking one string column of keys and returning a binary column (a string
        column with ``decode``): the key's latest value, or null where the key has none
        (never set, deleted or purged) or the key is null. It reads what the server
        holds when the batch is looked up (a stream replica may lag its leader by a
        moment).

    Raises:
        InvalidBucketNameError: ``bucket`` is not a valid bucket name.
        InvalidArgumentError: ``timeout`` is not a positive number, ``domain`` not a
            plain name, or ``decode`` not an encoding Python knows.
        SparkWorkerPythonError: the active session runs on a local master whose
            Python workers cannot import nats_sync (see `register`).

    The UDF itself raises in the task (failing it, so Spark retries) on an invalid
    key (`InvalidKeyError`, naming it), a missing bucket (`BucketNotFoundError`), no
    answer within ``timeout``, or, with ``decode``, a value that is not valid text in
    that encoding (`InvalidArgumentError`, naming the key).
    """
    KeyValueConfig(bucket=bucket).to_stream_config()  # raises InvalidBucketNameError
    check_timeout(timeout)
    try:
        check_domain(domain)
    except InvalidArgumentError as bad:
        raise InvalidArgumentError(f"kv_lookup_udf: {bad}") from None
    encoding = None if decode is None else _check_encoding(decode)
    check_session_workers()
    options = dict(connect_options)
    wait = float(timeout)

    def kv_lookup(keys: pa.Array) -> pa.Array:
        names = keys.to_pylist()
        values = lookup_values(names, bucket, servers, wait, domain, options)
        if encoding is None:
            return pa.array(values, type=pa.binary())
        return pa.array(decode_values(names, values, encoding, bucket), type=pa.string())

    # Spark reads the kind of UDF from the type hints (Array -> Array); see request_udf.
    return_type = "binary" if encoding is None else "string"
    return arrow_udf(kv_lookup, return_type)  # type: ignore[call-overload]


def _check_encoding(decode: object) -> str:
    if not isinstance(decode, str):
        raise InvalidArgumentError(
            f"kv_lookup_udf: decode must be an encoding name or None, got {decode!r}"
        )
    try:
        return codecs.lookup(decode).name
    except LookupError:
        raise InvalidArgumentError(f"kv_lookup_udf: unknown encoding decode={decode!r}") from None


def decode_values(
    keys: Sequence[Any], values: Sequence[bytes | None], encoding: str, bucket: str
) -> list[str | None]:
    """``values`` decoded with ``encoding`` (None stays None).

    Raises:
        InvalidArgumentError: a value is not valid text in ``encoding`` (names its key).
    """
    decoded: list[str | None] = []
    for key, value in zip(keys, values, strict=True):
        if value is None:
            decoded.append(None)
            continue
        try:
            decoded.append(value.decode(encoding))
        except UnicodeDecodeError as bad:
            raise InvalidArgumentError(
                f"kv_lookup_udf: the value of key {key!r} in bucket {bucket!r} is not "
                f"valid {encoding}: {bad.reason} at byte {bad.start} (decode=None gives bytes)"
            ) from None
    return decoded


__all__ = ["decode_values", "kv_lookup_udf", "lookup_values"]

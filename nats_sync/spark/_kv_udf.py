"""``kv_lookup_udf``: each key's current value in a key-value bucket, as a Spark column.

How it works: Spark hands the UDF Arrow batches of keys (10,000 rows by default) on a
task thread of a Python worker. For each batch the worker's one client (``_worker``)
looks up the batch's distinct keys with the batched direct get of nats-server 2.11+
(JetStream API level >= 1): ``{"multi_last": [subjects]}`` sent to
``$JS.API.DIRECT.GET.KV_<bucket>`` with a reply subject of ours; the stream answers with
the latest message of each key that has one (``Nats-Subject`` says which), then a
``204 EOB`` status (``404`` when none has). A request names at most 1,024 keys (the
server's cap on the messages one request may match) and keeps under a quarter of the
server's ``max_payload``; up to four requests of a batch are on the wire at once, their
replies told apart by the last token of the reply subject. An EOB with messages pending
(the request's byte limit was reached) is continued from the sequence after the last one
received, up to the same sequence, so every key of a request is read from one snapshot
of the stream. A delete or purge marker as the latest entry gives null, as does a key
with no entry.

Where the server has no batched direct get, or the bucket answers no direct gets
(``allow_direct`` off: "no responders"), each distinct key of the batch is read with
``KeyValue.get``, one round trip each. An invalid key raises `InvalidKeyError` naming it
(a bug in the job, unlike a missing key, as in nats.go and nats-py), and a lookup that
gets no answer in time raises: the task fails and Spark retries it, rather than taking
an unreachable server for a missing key.

State: a per-process cache of (client, bucket binding, whether batched gets work), made
on first use after Spark forks the worker and guarded by a lock; each batch's
subscription lives only while the batch is looked up. Only plain data (bucket, servers,
options) is captured in the function Spark pickles.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.pandas.functions import arrow_udf

from nats_sync._validate import check_timeout
from nats_sync.client import Client
from nats_sync.errors import InvalidArgumentError, TimeoutError
from nats_sync.jetstream import (
    JetStream,
    KeyNotFoundError,
    KeyValue,
    StatusError,
)
from nats_sync.jetstream._kv_watch import operation_of
from nats_sync.jetstream.kv import check_bucket_name, check_key
from nats_sync.msg import Msg
from nats_sync.spark._worker import worker_client

_DEFAULT_TIMEOUT = 5.0
#: The server refuses a multi_last request matching more messages (413 Too Many Results).
MULTI_LAST_MAX_KEYS = 1024
#: Requests of one batch awaiting their replies at once.
_CHUNKS_IN_FLIGHT = 4
#: Bytes of values one request may bring back before the server pauses it (an EOB with
#: messages pending; the rest is asked for again).
_CHUNK_MAX_BYTES = 8 * 1024 * 1024
_END_OF_BATCH = 204
_NOT_FOUND = 404
#: Statuses of a server that does not know multi_last requests (bad or empty request,
#: required API level).
_UNSUPPORTED = frozenset({400, 408, 412})


@dataclass
class _Bucket:
    """One process's binding of a bucket: the client, context and KV handle."""

    client: Client
    js: JetStream
    kv: KeyValue
    batched: bool


_buckets_lock = threading.Lock()
_buckets: dict[tuple[Any, ...], _Bucket] = {}


def _bucket(bucket: str, servers: str | list[str], timeout: float, domain: str | None,
            options: dict[str, Any]) -> _Bucket:
    """This process's binding of ``bucket`` (made on first use, again after a close)."""
    client = worker_client(servers, options)
    key = (bucket, id(client), domain, timeout)
    with _buckets_lock:
        found = _buckets.get(key)
        if found is not None and found.client is client:
            return found
        for stale in [k for k, b in _buckets.items() if b.client.is_closed]:
            del _buckets[stale]
        js = client.jetstream(domain=domain, timeout=timeout)
        kv = js.key_value(bucket)
        found = _Bucket(client, js, kv, batched=js.api_level() >= 1)
        _buckets[key] = found
        return found


class _UnsupportedError(Exception):
    """The server or the bucket takes no batched direct gets: look keys up one by one."""


def lookup_values(keys: Sequence[Any], bucket: str, servers: str | list[str], timeout: float,
                  domain: str | None, options: dict[str, Any]) -> list[bytes | None]:
    """Each key's current value (None where absent, deleted or purged, or the key null).

    Raises:
        InvalidKeyError: a key is not a valid key (the message names it).
        BucketNotFoundError: there is no such bucket.
        TimeoutError: the server did not answer within ``timeout``.
    """
    names: list[str | None] = [
        key if key is None or isinstance(key, str) else _key_text(key) for key in keys
    ]
    wanted = list(dict.fromkeys(name for name in names if name is not None))
    for name in wanted:
        check_key(name)
    if not wanted:
        return [None] * len(names)
    bound = _bucket(bucket, servers, timeout, domain, options)
    values: dict[str, bytes] | None = None
    if bound.batched:
        try:
            values = _multi_last(bound, wanted, timeout)
        except _UnsupportedError:
            bound.batched = False
    if values is None:
        values = _one_by_one(bound.kv, wanted, timeout)
    return [None if name is None else values.get(name) for name in names]


def _key_text(key: object) -> str:
    if isinstance(key, bytes):
        return key.decode("utf-8", errors="replace")
    raise InvalidArgumentError(
        f"kv_lookup_udf: keys must be strings, got {type(key).__name__} {key!r}"
    )


def _chunks(subjects: list[str], max_payload: int) -> list[list[str]]:
    """``subjects`` cut into requests of at most 1,024 and under max_payload / 4 bytes."""
    limit = max(max_payload // 4, 1024)
    chunks: list[list[str]] = []
    current: list[str] = []
    size = 0
    for subject in subjects:
        cost = len(subject.encode()) + 3  # quotes and comma
        if current and (len(current) >= MULTI_LAST_MAX_KEYS or size + cost > limit):
            chunks.append(current)
            current, size = [], 0
        current.append(subject)
        size += cost
    if current:
        chunks.append(current)
    return chunks


def _multi_last(bound: _Bucket, keys: list[str], timeout: float) -> dict[str, bytes]:
    """The values of ``keys`` by batched direct gets, pipelined (see the module doc).

    Raises:
        _UnsupportedError: the first answer says batched direct gets are not available.
    """
    prefix = f"$KV.{bound.kv.bucket}."
    call = bound.js.api.subject(f"DIRECT.GET.{bound.kv.stream_name}")
    chunks = _chunks([prefix + key for key in keys], bound.client.max_payload)
    client = bound.client
    inbox = client.new_inbox()
    sub = client.subscribe(inbox + ".*", pending_msgs_limit=0)
    values: dict[str, bytes] = {}
    answered = False  # a reply came: no longer a question of support
    try:
        waiting: dict[str, list[str]] = {}
        upcoming = iter(enumerate(chunks))

        def send(token: str, subjects: list[str], resume: dict[str, int]) -> None:
            body = {"multi_last": subjects, "max_bytes": _CHUNK_MAX_BYTES, **resume}
            client.publish(call, json.dumps(body, separators=(",", ":")).encode(),
                           reply=f"{inbox}.{token}")
            waiting[token] = subjects

        def send_next() -> None:
            for index, subjects in upcoming:
                send(str(index), subjects, {})
                return

        for _ in range(_CHUNKS_IN_FLIGHT):
            send_next()
        while waiting:
            try:
                reply = sub.next_msg(timeout)
            except TimeoutError:
                raise TimeoutError(
                    f"kv_lookup_udf: bucket {bound.kv.bucket!r} did not answer a lookup of "
                    f"{len(keys)} keys within {timeout}s"
                ) from None
            token = reply.subject[len(inbox) + 1:]
            status = reply.status
            if status is None:
                answered = True
                _take(reply, prefix, values)
                continue
            subjects = waiting.pop(token, [])
            if status == _END_OF_BATCH:
                answered = True
                resume = _resume(reply)
                if resume is not None:
                    send(token, subjects, resume)
                    continue
            elif status == _NOT_FOUND:
                answered = True
            elif not answered and (reply.is_no_responders or status in _UNSUPPORTED):
                raise _UnsupportedError
            else:
                raise StatusError(status=status, description=reply.description)
            send_next()
    finally:
        sub.unsubscribe()
    return values


def _take(reply: Msg, prefix: str, values: dict[str, bytes]) -> None:
    """Records one key's latest entry (a marker is no value)."""
    headers = reply.headers
    if not headers:
        return
    subject = headers.get("Nats-Subject")
    if not isinstance(subject, str) or not subject.startswith(prefix):
        return
    if ("KV-Operation" not in headers and "Nats-Marker-Reason" not in headers
            ) or operation_of(headers) == "PUT":
        values[subject[len(prefix):]] = reply.data
    else:
        values.pop(subject[len(prefix):], None)


def _resume(eob: Msg) -> dict[str, int] | None:
    """What continues a request its byte limit paused; None when it is complete."""
    headers = eob.headers or {}
    pending, last, up_to = (_int(headers.get(name)) for name in (
        "Nats-Num-Pending", "Nats-Last-Sequence", "Nats-UpTo-Sequence"))
    if not pending or last is None:
        return None
    resume = {"seq": last + 1}
    if up_to:
        resume["up_to_seq"] = up_to
    return resume


def _int(value: object) -> int | None:
    if isinstance(value, list):
        value = value[0] if value else None
    return int(value) if isinstance(value, str) and value.isdigit() else None


def _one_by_one(kv: KeyValue, keys: Iterable[str], timeout: float) -> dict[str, bytes]:
    values: dict[str, bytes] = {}
    for key in keys:
        try:
            values[key] = kv.get(key, timeout=timeout).value
        except KeyNotFoundError:  # never set, deleted or purged
            continue
    return values


def kv_lookup_udf(bucket: str, servers: str | list[str], timeout: float = _DEFAULT_TIMEOUT,
                  *, domain: str | None = None, **connect_options: Any) -> Any:
    """A vectorised UDF giving each key's current value in a key-value bucket.

    It serves "enrich from a reference table" with no service process: the keys of each
    Arrow batch are looked up together over the worker's one connection (batched direct
    gets, 1,024 keys a request, a few requests in flight), not one round trip per row.

    Example::

        price = kv_lookup_udf("prices", "nats://10.0.0.5:4222")
        orders.withColumn("price", price("sku"))

    Args:
        bucket: the key-value bucket's name.
        servers: NATS server URL(s), as `nats_sync.connect` takes them.
        timeout: seconds to wait for the server's answers (and to bind the bucket).
        domain: the JetStream domain of the bucket, if any.
        **connect_options: further `nats_sync.connect` keywords (plain values).

    Returns:
        A UDF taking one string column of keys and returning a binary column: the
        key's latest value, or null where the key has none (never set, deleted or
        purged) or the key is null. It reads what the server holds when the batch is
        looked up (a stream replica may lag its leader by a moment).

    Raises:
        InvalidBucketNameError: ``bucket`` is not a valid bucket name.
        InvalidArgumentError: ``timeout`` is not a positive number, or ``domain`` not
            a plain name.

    The UDF itself raises in the task (failing it, so Spark retries) on an invalid
    key (`InvalidKeyError`, naming it), a missing bucket (`BucketNotFoundError`) or
    no answer within ``timeout``.
    """
    check_bucket_name(bucket)
    check_timeout(timeout)
    if domain is not None and (not isinstance(domain, str) or not domain
                               or any(c in domain for c in ".*> \t\r\n")):
        raise InvalidArgumentError(f"kv_lookup_udf: domain must be a plain name, got {domain!r}")
    options = dict(connect_options)
    wait = float(timeout)

    def kv_lookup(keys: pa.Array) -> pa.Array:
        values = lookup_values(keys.to_pylist(), bucket, servers, wait, domain, options)
        return pa.array(values, type=pa.binary())

    # Spark reads the kind of UDF from the type hints (Array -> Array); see request_udf.
    return arrow_udf(kv_lookup, "binary")  # type: ignore[call-overload]


__all__ = ["MULTI_LAST_MAX_KEYS", "kv_lookup_udf", "lookup_values"]

"""kv_lookup_udf on a local[2] Spark against a real nats-server, and its mapping of
``KeyValue.get_many``'s values back onto a batch's rows in this process (the lookup
itself is tested in tests/integration/test_kv_get_many.py)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType, StringType

import nats_sync
from nats_sync.errors import InvalidArgumentError
from nats_sync.jetstream import InvalidBucketNameError, InvalidKeyError, KeyValue
from nats_sync.spark import _kv_udf, kv_lookup_udf
from nats_sync.spark._worker import close_worker_clients
from nats_sync.testing import NatsServer

pytestmark = pytest.mark.timeout(180)

KEYS = 3_000
#: The most keys one batched direct get names (the server's cap).
MULTI_LAST_MAX_KEYS = 1024


@pytest.fixture(scope="module")
def js_server() -> Iterator[NatsServer]:
    with NatsServer(jetstream=True) as nats:
        yield nats


@pytest.fixture(scope="module")
def bucket(js_server: NatsServer) -> Iterator[KeyValue]:
    """Bucket "ref" (history 5): k<n> = v<n> for n < 3000, then k1 updated, k2 deleted,
    k3 purged, and "empty" holding an empty value."""
    with nats_sync.connect(js_server.url) as nc:
        # One context for all the puts, whose acks may take long on a loaded 2-core CI box.
        js = nc.jetstream(timeout=30)
        kv = js.create_key_value(bucket="ref", history=5)
        futures = [js.publish_async(f"$KV.ref.k{n}", b"v%d" % n) for n in range(KEYS)]
        for future in futures:
            future.result(60)
        kv.put("k1", b"new")
        kv.delete("k2")
        kv.purge("k3")
        kv.put("empty", b"")
        yield kv
    close_worker_clients()  # the in-process lookups' client


def _expected(key: str | None) -> bytes | None:
    if key is None or key in ("k2", "k3") or not key.startswith("k"):
        return b"" if key == "empty" else None
    n = int(key[1:])
    if n >= KEYS:
        return None
    return b"new" if n == 1 else b"v%d" % n


@pytest.mark.usefixtures("bucket")
def test_values_of_present_keys_and_null_for_missing_deleted_purged_and_null_keys(
    spark: Any, js_server: NatsServer
) -> None:
    keys = ["k0", "k1", "k2", "k3", "missing", None, "empty", "k1", "k2999"]
    df = spark.createDataFrame([(key,) for key in keys], "key string")
    lookup = kv_lookup_udf("ref", js_server.url)
    rows = df.select("key", lookup("key").alias("value")).collect()
    assert [(row.key, row.value) for row in rows] == [
        ("k0", b"v0"),
        ("k1", b"new"),
        ("k2", None),
        ("k3", None),
        ("missing", None),
        (None, None),
        ("empty", b""),
        ("k1", b"new"),
        ("k2999", b"v2999"),
    ]


@pytest.mark.usefixtures("bucket")
def test_decode_gives_a_string_column_and_none_keeps_bytes(
    spark: Any, js_server: NatsServer
) -> None:
    df = spark.createDataFrame([("k0",), ("k1",), ("missing",), (None,), ("empty",)], "key string")
    text = kv_lookup_udf("ref", js_server.url, decode="utf-8")
    raw = kv_lookup_udf("ref", js_server.url, decode=None)
    out = df.select("key", text("key").alias("text"), raw("key").alias("raw"))
    assert out.schema["text"].dataType == StringType()
    assert out.schema["raw"].dataType == BinaryType()
    assert [(row.key, row.text, row.raw) for row in out.collect()] == [
        ("k0", "v0", b"v0"),
        ("k1", "new", b"new"),
        ("missing", None, None),
        (None, None, None),
        ("empty", "", b""),
    ]


def _row_at_a_time(url: str, bucket: str) -> Any:
    """A plain UDF doing one blocking ``kv.get`` per row (the slow path to agree with)."""
    bound: dict[str, Any] = {}

    @F.udf("binary", useArrow=False)  # a plain row-at-a-time UDF, said so
    def get(key: str | None) -> bytes | None:
        from nats_sync import process_client
        from nats_sync.jetstream import KeyNotFoundError

        if key is None:
            return None
        if "kv" not in bound:
            bound["kv"] = process_client(url).jetstream().key_value(bucket)
        try:
            value: bytes = bound["kv"].get(key).value
        except KeyNotFoundError:
            return None
        return value

    return get


@pytest.mark.usefixtures("bucket")
def test_batches_of_more_keys_than_one_request_takes_agree_with_kv_get_per_row(
    spark: Any, js_server: NatsServer
) -> None:
    keys = [f"k{n}" for n in range(KEYS + 200)] * 2 + ["empty", None]
    random.Random(7).shuffle(keys)
    # Two partitions of ~3,100 keys: each Arrow batch needs several 1,024-key requests.
    assert len(keys) // 2 > 3 * MULTI_LAST_MAX_KEYS
    df = spark.createDataFrame([(key,) for key in keys], "key string").repartition(2)
    fast = kv_lookup_udf("ref", js_server.url)
    slow = _row_at_a_time(js_server.url, "ref")
    rows = df.select("key", fast("key").alias("fast"), slow("key").alias("slow")).collect()
    assert len(rows) == len(keys)
    assert [row for row in rows if row.fast != row.slow] == []
    assert [row for row in rows if row.fast != _expected(row.key)] == []


def test_bad_arguments_raise_when_the_udf_is_made() -> None:
    with pytest.raises(InvalidBucketNameError, match=r"ref\.x"):
        kv_lookup_udf("ref.x", "nats://127.0.0.1:4222")
    with pytest.raises(InvalidArgumentError, match="timeout"):
        kv_lookup_udf("ref", "nats://127.0.0.1:4222", timeout=0)
    with pytest.raises(InvalidArgumentError, match="domain"):
        kv_lookup_udf("ref", "nats://127.0.0.1:4222", domain="a.b")
    with pytest.raises(InvalidArgumentError, match="unknown encoding decode='utf-9'"):
        kv_lookup_udf("ref", "nats://127.0.0.1:4222", decode="utf-9")
    with pytest.raises(InvalidArgumentError, match="decode must be an encoding name"):
        kv_lookup_udf("ref", "nats://127.0.0.1:4222", decode=True)  # type: ignore[arg-type]


@pytest.mark.usefixtures("bucket")
@pytest.mark.parametrize(
    ("bucket_name", "key", "message"),
    [("ref", "bad key", "invalid key.*'bad key'"), ("nosuch", "k1", "no key-value bucket")],
)
def test_an_invalid_key_or_a_missing_bucket_fails_the_query(
    spark: Any, js_server: NatsServer, bucket_name: str, key: str, message: str
) -> None:
    df = spark.createDataFrame([("k0",), (key,)], "key string").coalesce(1)
    lookup = kv_lookup_udf(bucket_name, js_server.url, timeout=2.0)
    with pytest.raises(Exception, match=message):
        df.select(lookup("key")).collect()


# --- the mapping onto rows, in this process (no Spark) ----------------------------------


def _lookup(url: str, keys: list[Any], bucket: str = "ref") -> list[bytes | None]:
    return _kv_udf.lookup_values(keys, bucket, url, 5.0, None, {})


@pytest.mark.usefixtures("bucket")
def test_rows_get_their_key_s_value_and_null_keys_and_absent_keys_get_none(
    js_server: NatsServer,
) -> None:
    keys: list[Any] = ["k5", None, "missing", b"k1", "k2", "k5", "empty", "k3"]
    assert _lookup(js_server.url, keys) == [b"v5", None, None, b"new", None, b"v5", b"", None]
    assert _lookup(js_server.url, [None, None]) == [None, None]
    assert _lookup(js_server.url, []) == []


@pytest.mark.usefixtures("bucket")
def test_an_invalid_key_raises_naming_it_and_a_non_string_key_is_refused(
    js_server: NatsServer,
) -> None:
    with pytest.raises(InvalidKeyError, match=r"'a\.\.b'"):
        _lookup(js_server.url, ["k0", "a..b"])
    with pytest.raises(InvalidArgumentError, match=r"keys must be strings.*int 7"):
        _lookup(js_server.url, ["k0", 7])


def test_decode_values_decodes_with_the_encoding_and_names_the_key_of_bad_text() -> None:
    keys = ["a", "b", "c"]
    assert _kv_udf.decode_values(
        keys, [b"1.5", None, "\u00e9".encode("latin-1")], "latin-1", "ref"
    ) == ["1.5", None, "\u00e9"]
    with pytest.raises(
        InvalidArgumentError,
        match=r"value of key 'c' in bucket 'ref' is not valid utf-8.*at byte 0",
    ):
        _kv_udf.decode_values(keys, [b"1.5", None, b"\xe9"], "utf-8", "ref")

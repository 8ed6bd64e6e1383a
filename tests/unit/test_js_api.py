"""The JetStream wire helpers without a server: error mapping, units, names and the
lenient dataclass codec."""

from __future__ import annotations

import pickle
from datetime import datetime, timedelta, timezone

import pytest

from nats_sync import errors as core
from nats_sync.jetstream import errors as js_errors
from nats_sync.jetstream._streams.wire import (
    check_consumer_name,
    check_stream_name,
    decode_reply,
    format_time,
    from_ns,
    parse_time,
    time_from_ns,
    to_ns,
)
from nats_sync.jetstream.api import ConsumerConfig, ConsumerInfo, StreamConfig, StreamInfo


@pytest.mark.parametrize(
    ("err_code", "code", "cls"),
    [
        (10058, 400, js_errors.StreamNameAlreadyInUseError),
        (10071, 400, js_errors.WrongLastSequenceError),
        (10164, 400, js_errors.WrongLastSequenceError),
        (10070, 400, js_errors.WrongLastMsgIdError),
        (10060, 400, js_errors.StreamNotMatchError),
        (10148, 400, js_errors.ConsumerExistsError),
        (10149, 400, js_errors.ConsumerDoesNotExistError),
        (10013, 400, js_errors.ConsumerNameInUseError),
        (10026, 400, js_errors.MaximumConsumersLimitError),
        (10059, 404, js_errors.StreamNotFoundError),
        (10014, 404, js_errors.ConsumerNotFoundError),
        (10037, 404, js_errors.MessageNotFoundError),
        (10076, 503, js_errors.JetStreamNotEnabledError),
        (10039, 503, js_errors.JetStreamNotEnabledError),
        (10174, 400, js_errors.AtomicBatchNotEnabledError),
        (10175, 400, js_errors.BatchSequenceMissingError),
        (10176, 400, js_errors.BatchIncompleteError),
        (10177, 400, js_errors.BatchUnsupportedHeaderError),
        (10179, 400, js_errors.BatchIdInvalidError),
        (10199, 400, js_errors.BatchTooLargeError),
        (10200, 400, js_errors.BatchCommitInvalidError),
        (10201, 400, js_errors.BatchDuplicateMsgIdError),
        (10210, 429, js_errors.AtomicBatchTooManyInflightError),
        (10205, 400, js_errors.FastBatchNotEnabledError),
        (10206, 400, js_errors.FastBatchInvalidPatternError),
        (10207, 400, js_errors.BatchIdInvalidError),
        (10208, 400, js_errors.FastBatchUnknownError),
        (10211, 429, js_errors.FastBatchTooManyInflightError),
        (10165, 400, js_errors.MsgTTLInvalidError),
        (10166, 400, js_errors.MsgTTLDisabledError),
        (10168, 400, js_errors.CounterNotEnabledError),
        (10169, 400, js_errors.CounterIncrementMissingError),
        (10170, 400, js_errors.CounterPayloadError),
        (10171, 400, js_errors.CounterIncrementInvalidError),
        (10172, 400, js_errors.CounterBrokenError),
        (10173, 400, js_errors.MirrorWithCountersError),
        (99999, 400, js_errors.BadRequestError),
        (99999, 404, js_errors.NotFoundError),
        (99999, 500, js_errors.ServerError),
        (99999, 503, js_errors.ServiceUnavailableError),
        (99999, 418, js_errors.APIError),
    ],
)
def test_api_errors_map_by_err_code_then_by_code(
    err_code: int, code: int, cls: type[js_errors.APIError]
) -> None:
    error = js_errors.api_error({"code": code, "err_code": err_code, "description": "words"})
    assert type(error) is cls
    assert (error.code, error.err_code, error.description) == (code, err_code, "words")
    assert isinstance(error, js_errors.JetStreamError) and isinstance(error, core.Error)
    assert f"err_code={err_code}" in str(error) and "words" in str(error)
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is cls and (copy.code, copy.err_code, str(copy)) == (
        code,
        err_code,
        str(error),
    )


def test_a_malformed_error_object_is_still_an_api_error() -> None:
    assert type(js_errors.api_error("nonsense")) is js_errors.APIError
    assert type(js_errors.api_error({"code": "x"})) is js_errors.APIError


def test_decode_reply_raises_the_mapped_error_or_a_clear_one() -> None:
    assert decode_reply(b'{"stream":"S","seq":1}', "s") == {"stream": "S", "seq": 1}
    with pytest.raises(js_errors.StreamNotFoundError):
        decode_reply(b'{"error":{"code":404,"err_code":10059,"description":"x"}}', "s")
    with pytest.raises(js_errors.JetStreamError, match="not JSON"):
        decode_reply(b"<html>", "s")
    with pytest.raises(js_errors.JetStreamError, match="not a JSON object"):
        decode_reply(b"[1]", "s")


def test_batch_errors_keep_their_fields_through_pickle() -> None:
    gap = js_errors.BatchGapError(expected_seq=10, seq=15)
    assert "10..14" in str(gap) and (gap.expected_seq, gap.seq) == (10, 15)
    copy = pickle.loads(pickle.dumps(gap))
    assert (type(copy), copy.expected_seq, copy.seq, str(copy)) == (
        js_errors.BatchGapError,
        10,
        15,
        str(gap),
    )
    cause = js_errors.api_error({"code": 400, "err_code": 10071, "description": "wrong"})
    refused = js_errors.BatchMessageError(seq=7, error=cause)
    copy = pickle.loads(pickle.dumps(refused))
    assert copy.seq == 7 and isinstance(copy.error, js_errors.WrongLastSequenceError)
    assert isinstance(js_errors.BatchClosedError("ended"), js_errors.JetStreamError)


def test_client_side_errors_read_plainly_and_pickle() -> None:
    error = js_errors.KeyNotFoundError("key 'a' not found")
    assert str(error) == "nats: key not found: key 'a' not found"
    assert isinstance(error, js_errors.NotFoundError)
    assert isinstance(js_errors.KeyWrongLastSequenceError(), js_errors.WrongLastSequenceError)
    assert isinstance(js_errors.PublishAckTimeoutError(), core.TimeoutError)
    assert isinstance(js_errors.PublishAckTimeoutError(), TimeoutError)
    status = js_errors.StatusError(status=409, description="Exceeded MaxWaiting")
    copy = pickle.loads(pickle.dumps(status))
    assert (copy.status, copy.description) == (409, "Exceeded MaxWaiting")
    for cls in (
        js_errors.InvalidStreamNameError,
        js_errors.InvalidKeyError,
        js_errors.InvalidBucketNameError,
        js_errors.InvalidObjectNameError,
        js_errors.InvalidConsumerNameError,
    ):
        assert issubclass(cls, ValueError) and issubclass(cls, core.InvalidArgumentError)


def test_units_round_trip() -> None:
    assert to_ns(1.5) == 1_500_000_000 and from_ns(250_000_000) == 0.25
    moment = parse_time("2026-11-23T11:32:42.649191476Z")
    assert moment == datetime(2026, 11, 23, 11, 32, 42, 649191, tzinfo=timezone.utc)
    assert parse_time("2026-11-23T12:32:42+01:00") == datetime(
        2026, 11, 23, 11, 32, 42, tzinfo=timezone.utc
    )
    assert format_time(moment) == "2026-11-23T11:32:42.649191Z"
    assert format_time(datetime(2026, 1, 1, 2, tzinfo=timezone(timedelta(hours=2)))) == (
        "2026-01-01T00:00:00Z"
    )
    with pytest.raises(js_errors.JetStreamError):
        parse_time("yesterday")
    assert time_from_ns(1_795_433_562_649_191_476) == moment  # microseconds kept exactly


@pytest.mark.parametrize("name", ["", "a.b", "a b", "a\tb", "a*", "a>", "a/b", "a\\b", 5, None])
def test_bad_stream_and_consumer_names(name: object) -> None:
    with pytest.raises(js_errors.InvalidStreamNameError):
        check_stream_name(name)
    with pytest.raises(js_errors.InvalidConsumerNameError):
        check_consumer_name(name)


def test_good_names_pass() -> None:
    assert check_stream_name("ORDERS-2_x") == "ORDERS-2_x"
    assert check_consumer_name("c1") == "c1"


def test_configs_write_only_what_is_set_with_durations_in_nanoseconds() -> None:
    config = ConsumerConfig(
        durable_name="d",
        ack_policy="explicit",
        ack_wait=2.5,
        backoff=[1.0, 0.5],
        opt_start_time=datetime(2026, 1, 1, tzinfo=timezone.utc),
    )
    assert config.to_api() == {
        "durable_name": "d",
        "ack_policy": "explicit",
        "ack_wait": 2_500_000_000,
        "backoff": [1_000_000_000, 500_000_000],
        "opt_start_time": "2026-01-01T00:00:00Z",
    }
    assert ConsumerConfig.from_api(config.to_api()) == config


def test_infos_decode_leniently_and_keep_unknown_keys() -> None:
    info = StreamInfo.from_api(
        {
            "config": {"name": "S", "max_age": 60_000_000_000, "brand_new": {"x": 1}},
            "state": {
                "messages": 3,
                "first_ts": "0001-01-01T00:00:00Z",
                "last_ts": "2026-11-23T11:32:42.5Z",
            },
            "created": "2026-11-23T11:32:42.649191476Z",
            "unmodelled": True,
        }
    )
    assert info.config.name == "S" and info.config.max_age == 60.0
    assert info.config.extra == {"brand_new": {"x": 1}}
    assert info.config.to_api()["brand_new"] == {"x": 1}
    assert info.state.messages == 3 and info.state.first_ts is None
    assert info.state.last_ts == datetime(2026, 11, 23, 11, 32, 42, 500000, tzinfo=timezone.utc)
    assert info.extra == {"unmodelled": True}
    consumer = ConsumerInfo.from_api(
        {"name": "c", "delivered": {"stream_seq": 9}, "num_pending": 4}
    )
    assert consumer.delivered.stream_seq == 9 and consumer.num_pending == 4
    assert StreamConfig().to_api() == {}

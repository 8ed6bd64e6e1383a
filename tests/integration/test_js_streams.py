"""JetStream management against a real ``nats-server -js``: streams, consumers, stored
messages and the errors each call maps to."""

from __future__ import annotations

import json
import pickle
from collections.abc import Callable
from datetime import datetime, timezone

import pytest

import nats_sync
from nats_sync.jetstream import (
    APIError,
    BadRequestError,
    ConsumerConfig,
    ConsumerDoesNotExistError,
    ConsumerExistsError,
    ConsumerNotFoundError,
    InvalidConsumerNameError,
    InvalidStreamNameError,
    JetStream,
    JetStreamNotEnabledError,
    MessageNotFoundError,
    NotFoundError,
    StreamConfig,
    StreamNameAlreadyInUseError,
    StreamNotFoundError,
)
from nats_sync.testing import NatsServer

pytestmark = pytest.mark.timeout(30)

ClientFactory = Callable[..., nats_sync.Client]


@pytest.fixture
def js(jetstream_server: NatsServer, connect: ClientFactory) -> JetStream:
    return connect(servers=jetstream_server.url).jetstream()


def store(js: JetStream, subject: str, data: bytes, headers: dict[str, str] | None = None) -> int:
    """A core request to a stream subject: the stream acknowledges with its sequence."""
    reply = js.client.request(subject, data, timeout=5, headers=headers)
    return int(json.loads(reply.data)["seq"])


def test_account_info_has_the_api_level(js: JetStream) -> None:
    info = js.account_info()
    assert info.api_level >= 1  # nats-server 2.11 and later
    assert js.api_level() == info.api_level


def test_create_is_idempotent_and_a_different_config_is_refused(js: JetStream) -> None:
    stream = js.create_stream(
        name="ORDERS", subjects=["orders.>"], max_age=3600.0, duplicate_window=30.0
    )
    config = stream.cached_info.config
    assert (config.max_age, config.duplicate_window, config.storage) == (3600.0, 30.0, "file")
    assert isinstance(stream.cached_info.created, datetime)
    assert stream.cached_info.created.tzinfo is timezone.utc
    assert (
        js.create_stream(
            StreamConfig(
                name="ORDERS", subjects=["orders.>"], max_age=3600.0, duplicate_window=30.0
            )
        ).name
        == "ORDERS"
    )
    with pytest.raises(StreamNameAlreadyInUseError) as raised:
        js.create_stream(name="ORDERS", subjects=["other.>"])
    assert raised.value.err_code == 10058 and raised.value.code == 400
    assert isinstance(raised.value, BadRequestError)


def test_update_create_or_update_and_bind(js: JetStream) -> None:
    with pytest.raises(StreamNotFoundError):
        js.update_stream(name="S", subjects=["s.>"])
    made = js.create_or_update_stream(name="S", subjects=["s.>"])
    assert made.cached_info.config.subjects == ["s.>"]
    changed = js.create_or_update_stream(name="S", subjects=["s.>", "t.>"], max_msgs=10)
    assert changed.cached_info.config.max_msgs == 10
    bound = js.stream("S")
    assert bound.cached_info.config.subjects == ["s.>", "t.>"]
    updated = js.update_stream(bound.cached_info.config.replace(description="now"))
    assert updated.info().config.description == "now"


def test_names_list_by_subject_and_delete(js: JetStream) -> None:
    for name in ("A", "B"):
        js.create_stream(name=name, subjects=[f"{name.lower()}.>"])
    assert sorted(js.stream_names()) == ["A", "B"]
    assert [info.config.name for info in js.list_streams(subject="b.x")] == ["B"]
    assert js.stream_name_by_subject("a.one") == "A"
    assert js.find_stream_name_by_subject("b.one") == "B"
    with pytest.raises(StreamNotFoundError):
        js.stream_name_by_subject("nothing.here")
    js.delete_stream("A")
    assert list(js.stream_names()) == ["B"]
    with pytest.raises(StreamNotFoundError):
        js.delete_stream("A")
    with pytest.raises(StreamNotFoundError) as raised:
        js.stream("A")
    assert isinstance(raised.value, NotFoundError)


def test_many_streams_are_listed_across_pages(js: JetStream) -> None:
    for n in range(260):
        js.create_stream(name=f"P{n}", subjects=[f"p{n}"], storage="memory")
    assert len(set(js.stream_names())) == 260  # the server pages list calls at 256


def test_stored_messages_get_delete_and_purge(js: JetStream) -> None:
    stream = js.create_stream(name="M", subjects=["m.>"])
    for n in range(1, 11):
        store(js, f"m.{n % 2}", b"v%d" % n, headers={"Idx": str(n)})
    got = stream.get_msg(3)
    assert (got.stream, got.subject, got.seq, got.data) == ("M", "m.1", 3, b"v3")
    assert got.headers == {"Idx": "3"} and got.time is not None
    assert stream.get_last_msg("m.0").seq == 10
    stream.delete_msg(4)
    with pytest.raises(MessageNotFoundError) as raised:
        stream.get_msg(4)
    assert raised.value.err_code == 10037
    assert stream.info(deleted_details=True).state.deleted == [4]
    assert stream.purge(subject="m.1") == 5
    assert stream.purge(keep=2) == 2
    assert stream.info().state.messages == 2
    assert stream.purge() == 2
    state = stream.info().state
    assert (state.messages, state.first_seq) == (0, 11)


def test_legacy_stored_message_calls_take_the_stream_by_name(js: JetStream) -> None:
    js.create_stream(name="L", subjects=["l.>"])
    for n in range(1, 7):
        store(js, f"l.{n % 2}", b"%d" % n)
    assert js.get_msg("L", 2).data == b"2"
    assert js.get_msg("L", subject="l.1").seq == 5
    assert js.get_last_msg("L", "l.0").seq == 6
    js.delete_msg("L", 3)
    with pytest.raises(MessageNotFoundError):
        js.get_msg("L", 3)
    assert js.purge_stream("L", subject="l.0") == 3
    assert js.purge_stream("L") == 2
    with pytest.raises(nats_sync.InvalidArgumentError, match="seq or subject"):
        js.get_msg("L")
    for call in (
        lambda: js.get_msg("NOPE", 1),
        lambda: js.get_last_msg("NOPE", "l.0"),
        lambda: js.delete_msg("NOPE", 1),
        lambda: js.purge_stream("NOPE"),
    ):
        with pytest.raises(StreamNotFoundError):
            call()
    with pytest.raises(InvalidStreamNameError):
        js.get_msg("a.b", 1)


def test_get_msgs_reads_a_range_by_direct_get_skipping_gaps(js: JetStream) -> None:
    stream = js.create_stream(name="R", subjects=["r.>"], allow_direct=True)
    for n in range(1, 21):
        store(js, f"r.{'a' if n % 3 else 'b'}", b"%d" % n, headers={"N": str(n)})
    stream.purge(sequence=4)
    stream.delete_msg(7)
    seqs = [msg.seq for msg in stream.get_msgs(batch=4)]
    assert seqs == [n for n in range(4, 21) if n != 7]
    middle = list(stream.get_msgs(5, end_seq=9, batch=2))
    assert [m.seq for m in middle] == [5, 6, 8, 9]
    assert middle[0].headers == {"N": "5"} and middle[0].subject == "r.a"
    assert [m.seq for m in stream.get_msgs(subject="r.b")] == [6, 9, 12, 15, 18]
    assert list(stream.get_msgs(50)) == []
    assert list(stream.get_msgs(10, end_seq=9)) == []


def test_consumer_management_with_actions(js: JetStream) -> None:
    js.create_stream(name="C", subjects=["c.>"])
    made = js.create_consumer(
        "C",
        durable_name="d1",
        ack_policy="explicit",
        filter_subject="c.x",
        ack_wait=12.5,
        max_deliver=3,
    )
    assert made.name == "d1" and made.stream_name == "C"
    config = made.cached_info.config
    assert (config.ack_wait, config.filter_subject, config.max_deliver) == (12.5, "c.x", 3)
    assert (
        js.create_consumer(
            "C",
            durable_name="d1",
            ack_policy="explicit",
            filter_subject="c.x",
            ack_wait=12.5,
            max_deliver=3,
        ).name
        == "d1"
    )
    with pytest.raises(ConsumerExistsError):
        js.create_consumer("C", durable_name="d1", ack_policy="explicit", filter_subject="c.y")
    with pytest.raises(ConsumerDoesNotExistError):
        js.update_consumer("C", durable_name="nope", ack_policy="explicit")
    updated = js.update_consumer("C", config.replace(description="second"))
    assert updated.info().config.description == "second"
    upserted = js.create_or_update_consumer(
        "C", ConsumerConfig(name="d2", ack_policy="none", filter_subjects=["c.a", "c.b"])
    )
    assert upserted.cached_info.config.filter_subjects == ["c.a", "c.b"]
    ephemeral = js.create_consumer("C", ack_policy="none")
    assert ephemeral.name and ephemeral.cached_info.config.durable_name is None
    assert sorted(js.consumer_names("C")) == sorted(["d1", "d2", ephemeral.name])
    assert {info.name for info in js.list_consumers("C")} == {"d1", "d2", ephemeral.name}
    assert js.stream("C").consumer("d2").name == "d2"
    js.delete_consumer("C", "d2")
    with pytest.raises(ConsumerNotFoundError):
        js.consumer("C", "d2")
    with pytest.raises(StreamNotFoundError):
        js.create_consumer("NOPE", durable_name="x")


def test_bad_names_and_configs_are_refused_before_sending(js: JetStream) -> None:
    for bad in ("", "a.b", "a b", "a*", "a>", "a/b"):
        with pytest.raises(InvalidStreamNameError) as raised:
            js.create_stream(name=bad, subjects=["x"])
        assert isinstance(raised.value, ValueError)
    js.create_stream(name="OK", subjects=["ok.>"])
    with pytest.raises(InvalidConsumerNameError):
        js.create_consumer("OK", durable_name="bad.name")
    with pytest.raises(ValueError, match="push consumer"):
        js.create_consumer("OK", durable_name="p", deliver_subject="push.here")
    with pytest.raises(ValueError, match="differ"):
        js.create_consumer("OK", name="a", durable_name="b")
    with pytest.raises(ValueError, match="StreamConfig"):
        js.create_stream(ConsumerConfig(name="x"))  # type: ignore[arg-type]


def test_unknown_fields_from_the_server_survive_an_update(js: JetStream) -> None:
    stream = js.create_stream(name="X", subjects=["x.>"])
    config = stream.cached_info.config
    assert config.extra == {} or all(isinstance(key, str) for key in config.extra)
    # A field this client does not model is kept and sent back.
    sent = StreamConfig.from_api({**config.to_api(), "some_future_field": 7})
    assert sent.extra["some_future_field"] == 7
    assert sent.to_api()["some_future_field"] == 7


def test_errors_pickle_with_their_fields(js: JetStream) -> None:
    with pytest.raises(APIError) as raised:
        js.stream("MISSING")
    copy = pickle.loads(pickle.dumps(raised.value))
    assert type(copy) is StreamNotFoundError
    assert (copy.code, copy.err_code, str(copy)) == (404, 10059, str(raised.value))


def test_no_jetstream_is_a_clear_error(nats_server: NatsServer, connect: ClientFactory) -> None:
    js = connect(servers=nats_server.url).jetstream(timeout=1)
    with pytest.raises(JetStreamNotEnabledError, match="not enabled"):
        js.account_info()


def test_a_domain_changes_the_api_prefix(js: JetStream) -> None:
    assert js.client.jetstream(domain="hub").api.prefix == "$JS.hub.API"
    assert js.client.jetstream(api_prefix="$JS.other.API.").api.prefix == "$JS.other.API"
    with pytest.raises(ValueError, match="domain"):
        js.client.jetstream(domain="a.b")


def test_get_msgs_without_direct_get_reads_by_a_temporary_consumer(js: JetStream) -> None:
    stream = js.create_stream(name="T", subjects=["t.>"])  # no allow_direct
    for n in range(1, 31):
        store(js, f"t.{'a' if n % 2 else 'b'}", b"%d" % n)
    stream.delete_msg(5)
    assert [m.seq for m in stream.get_msgs(batch=7)] == [n for n in range(1, 31) if n != 5]
    window = list(stream.get_msgs(10, end_seq=14, batch=2))
    assert [m.seq for m in window] == [10, 11, 12, 13, 14]
    assert window[0].subject == "t.b" and window[0].data == b"10"
    assert window[0].time is not None
    assert [m.seq for m in stream.get_msgs(subject="t.b", end_seq=10)] == [2, 4, 6, 8, 10]
    assert list(stream.get_msgs(40)) == []
    assert list(js.consumer_names("T")) == []  # each reading consumer was removed

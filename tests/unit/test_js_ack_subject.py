"""The JetStream ack subject parser (layouts v1 and v2) and ``JsMsg``'s acknowledgements,
with hand-made messages and a recording client instead of a server."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

import pytest

from nats_sync import errors as core
from nats_sync.jetstream._consumers.msg import (
    JsMsg,
    MsgMetadata,
    SequencePair,
    ack_sequence_time_pending,
    parse_metadata,
)
from nats_sync.jetstream.errors import MsgAlreadyAckdError, NotJSMessageError
from nats_sync.msg import Msg

pytestmark = pytest.mark.timeout(10)

#: 2026-11-23T10:00:00.123456789Z in ns.
STAMP_NS = 1_795_428_000_123_456_789
STAMP = datetime(2026, 11, 23, 10, 0, 0, 123456, tzinfo=timezone.utc)
V1 = f"$JS.ACK.ORDERS.worker.2.17.41.{STAMP_NS}.5"


def test_v1_has_nine_tokens_and_no_domain() -> None:
    assert parse_metadata(V1) == MsgMetadata(
        stream="ORDERS",
        consumer="worker",
        domain=None,
        num_delivered=2,
        num_pending=5,
        timestamp=STAMP,
        sequence=SequencePair(stream=17, consumer=41),
    )


@pytest.mark.parametrize("tail", ["", ".Xa1b2c3"], ids=["11 tokens", "12 tokens"])
def test_v2_puts_domain_and_account_first_and_may_drop_the_last_token(tail: str) -> None:
    meta = parse_metadata(f"$JS.ACK.hub.ACCHASH.ORDERS.worker.1.3.4.{STAMP_NS}.0{tail}")
    assert (meta.domain, meta.stream, meta.consumer) == ("hub", "ORDERS", "worker")
    assert (meta.num_delivered, meta.num_pending) == (1, 0)
    assert meta.sequence == SequencePair(stream=3, consumer=4)
    assert meta.timestamp == STAMP and meta.timestamp.tzinfo is timezone.utc


def test_v2_domain_underscore_means_none() -> None:
    meta = parse_metadata(f"$JS.ACK._.ACCHASH.S.C.1.1.1.{STAMP_NS}.0.token")
    assert meta.domain is None and meta.stream == "S"


@pytest.mark.parametrize(
    "subject",
    [
        "",
        "orders.new",
        "_INBOX.abc.def",
        "$JS.ACK",
        "$JS.ACK.S.C.1.1.1.1",  # 8 tokens
        "$JS.ACK.S.C.1.1.1.1.1.1",  # 10 tokens
        "$JS.ACK.d.a.S.C.1.1.1.1.1.x.y",  # 13 tokens
        "$JS.NAK.S.C.1.1.1.1.1",  # not ACK
        "$JSX.ACK.S.C.1.1.1.1.1",
        "$JS.ACK.S.C.one.1.1.1.1",  # a count that is not a number
        "$JS.ACK.S.C.1.-1.1.1.1",
        "$JS.ACK.S.C.1.1.1.1.+1",
        "$JS.ACK..C.1.1.1.1.1",  # no stream
        "$JS.ACK.S..1.1.1.1.1",  # no consumer
        "$JS.ACK.d.a.S.C.1.1.1.1.x",  # v2 with a bad pending
    ],
)
def test_anything_else_is_not_a_jetstream_message(subject: str) -> None:
    with pytest.raises(NotJSMessageError):
        parse_metadata(subject)


class Recorder:
    """Stands in for the client: records publishes, answers requests."""

    def __init__(self, request: Callable[[str, bytes, float], Msg] | None = None) -> None:
        self.published: list[tuple[str, bytes]] = []
        self.requests: list[tuple[str, bytes, float]] = []
        self._request = request

    def publish(
        self, subject: str, payload: bytes = b"", reply: str = "", headers: Any = None
    ) -> None:
        self.published.append((subject, payload))

    def request(
        self, subject: str, payload: bytes = b"", timeout: float = 1.0, headers: Any = None
    ) -> Msg:
        self.requests.append((subject, payload, timeout))
        if self._request is not None:
            return self._request(subject, payload, timeout)
        return Msg("_INBOX.x", data=b"")


def js_msg(client: Any, reply: str = V1) -> JsMsg:
    return JsMsg(Msg("orders.new", reply, b"payload", {"K": "v"}, 7), client, 2.5)


def test_the_message_fields_and_metadata() -> None:
    msg = js_msg(Recorder())
    assert (msg.subject, msg.data, msg.headers, msg.reply) == (
        "orders.new",
        b"payload",
        {"K": "v"},
        V1,
    )
    assert msg.metadata.sequence.stream == 17
    assert msg.metadata is msg.metadata  # parsed once
    assert not msg.is_acked


@pytest.mark.parametrize(
    ("call", "body"),
    [
        (lambda m: m.ack(), b"+ACK"),
        (lambda m: m.nak(), b"-NAK"),
        (lambda m: m.nak(1.5), b'-NAK {"delay": 1500000000}'),
        (lambda m: m.nak_with_delay(0), b'-NAK {"delay": 0}'),
        (lambda m: m.term(), b"+TERM"),
        (lambda m: m.term("bad data"), b"+TERM bad data"),
        (lambda m: m.term_with_reason("why"), b"+TERM why"),
    ],
)
def test_each_ack_publishes_its_body_once(call: Callable[[JsMsg], None], body: bytes) -> None:
    client = Recorder()
    msg = js_msg(client)
    call(msg)
    assert client.published == [(V1, body)]
    assert msg.is_acked
    for again in (JsMsg.ack, JsMsg.nak, JsMsg.term, JsMsg.in_progress, JsMsg.double_ack):
        with pytest.raises(MsgAlreadyAckdError):
            again(msg)
    assert len(client.published) == 1 and not client.requests


def test_in_progress_repeats_until_the_final_ack() -> None:
    client = Recorder()
    msg = js_msg(client)
    msg.in_progress()
    msg.in_progress()
    assert not msg.is_acked
    msg.ack()
    assert client.published == [(V1, b"+WPI"), (V1, b"+WPI"), (V1, b"+ACK")]


def test_double_ack_is_a_request_with_the_default_or_given_timeout() -> None:
    client = Recorder()
    msg = js_msg(client)
    msg.double_ack()
    assert client.requests == [(V1, b"+ACK", 2.5)] and msg.is_acked
    other = js_msg(client)
    other.ack_sync(timeout=0.5)
    assert client.requests[-1] == (V1, b"+ACK", 0.5)


def test_a_double_ack_that_times_out_can_be_retried() -> None:
    def fail(subject: str, payload: bytes, timeout: float) -> Msg:
        raise core.TimeoutError("no reply")

    client = Recorder(fail)
    msg = js_msg(client)
    with pytest.raises(core.TimeoutError):
        msg.double_ack()
    assert not msg.is_acked
    msg.ack()
    assert client.published == [(V1, b"+ACK")]


def test_an_ack_the_client_refuses_is_not_counted() -> None:
    class Closed(Recorder):
        def publish(
            self, subject: str, payload: bytes = b"", reply: str = "", headers: Any = None
        ) -> None:
            raise core.ConnectionClosedError("closed")

    msg = js_msg(Closed())
    with pytest.raises(core.ConnectionClosedError):
        msg.ack()
    assert not msg.is_acked


@pytest.mark.parametrize("reply", ["", "_INBOX.abc", "orders.reply"])
def test_a_message_without_an_ack_subject_cannot_be_acked(reply: str) -> None:
    client = Recorder()
    msg = js_msg(client, reply)
    for call in (JsMsg.ack, JsMsg.double_ack, JsMsg.nak, JsMsg.in_progress, JsMsg.term):
        with pytest.raises(NotJSMessageError):
            call(msg)
    with pytest.raises(NotJSMessageError):
        _ = msg.metadata
    assert not client.published and not client.requests


def test_a_bad_nak_delay_is_refused() -> None:
    msg = js_msg(Recorder())
    for delay in (-1, float("nan"), "1s", True):
        with pytest.raises(core.InvalidArgumentError, match="delay"):
            msg.nak(delay)  # type: ignore[arg-type]
    assert not msg.is_acked


@pytest.mark.parametrize(
    "reply",
    [
        V1,
        f"$JS.ACK.hub.ACCHASH.ORDERS.worker.1.3.4.{STAMP_NS}.0",
        f"$JS.ACK.hub.ACCHASH.ORDERS.worker.1.3.4.{STAMP_NS}.0.Xa1b2c3",
        f"$JS.ACK._.ACCHASH.ORDERS.worker.9.123456789.4.{STAMP_NS}.77.r",
    ],
)
def test_the_bulk_reader_shortcut_agrees_with_the_full_parser(reply: str) -> None:
    # Stream.get_msg_columns reads only these three numbers, without the metadata objects.
    meta = parse_metadata(reply)
    seq, stamp_ns, pending = ack_sequence_time_pending(reply)
    assert (seq, pending) == (meta.sequence.stream, meta.num_pending)
    assert stamp_ns == STAMP_NS
    assert datetime.fromtimestamp(stamp_ns // 1000 / 1e6, tz=timezone.utc) == meta.timestamp


@pytest.mark.parametrize(
    "reply",
    [
        "$JS.ACK.ORDERS.worker.2.17.41",
        "$JS.NAK.ORDERS.worker.2.17.41.1.5",
        f"$JS.ACK.ORDERS.worker.2.x17.41.{STAMP_NS}.5",
        f"_INBOX.a.b.c.d.e.f.{STAMP_NS}.5",
    ],
)
def test_the_bulk_reader_shortcut_refuses_what_the_full_parser_refuses(reply: str) -> None:
    with pytest.raises(NotJSMessageError):
        parse_metadata(reply)
    with pytest.raises(NotJSMessageError):
        ack_sequence_time_pending(reply)

"""Stream.get_last_msgs_for against a real nats-server -js: more subjects than one request
takes, wildcards (also matching more than one request may), up_to_seq, up_to_time, batch
pages, stream order, bad arguments, and a stream without allow_direct."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

import nats_sync
from nats_sync import _defaults as d
from nats_sync.errors import InvalidArgumentError
from nats_sync.jetstream import JetStream, StoredMsg
from nats_sync.jetstream._streams.stream import Stream
from nats_sync.testing import NatsServer

pytestmark = pytest.mark.timeout(90)

ClientFactory = Callable[..., nats_sync.Client]


@pytest.fixture
def nc(jetstream_server: NatsServer, connect: ClientFactory) -> nats_sync.Client:
    return connect(servers=jetstream_server.url)


@pytest.fixture
def js(nc: nats_sync.Client) -> JetStream:
    return nc.jetstream()


def _fill(js: JetStream, subjects: list[str], rounds: int = 1) -> None:
    for n in range(rounds):
        for subject in subjects:
            js.publish_async(subject, f"{subject}#{n}".encode())
    js.publish_async_completed(30)


def _requests(
    nc: nats_sync.Client, stream: str, monkeypatch: pytest.MonkeyPatch
) -> list[dict[str, Any]]:
    """The direct get request bodies ``nc`` publishes from now on."""
    sent: list[dict[str, Any]] = []
    publish = nc.publish

    def spy(subject: str, payload: bytes = b"", reply: str = "", headers: Any = None) -> None:
        if subject == f"$JS.API.DIRECT.GET.{stream}":
            sent.append(json.loads(payload))
        publish(subject, payload, reply, headers)

    monkeypatch.setattr(nc, "publish", spy)
    return sent


def _check_order(found: list[StoredMsg]) -> None:
    seqs = [msg.seq for msg in found]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs), "not in stream order"


def test_more_subjects_than_one_request_all_latest_in_stream_order(
    nc: nats_sync.Client, js: JetStream, monkeypatch: pytest.MonkeyPatch
) -> None:
    stream = js.create_stream(name="LAST", subjects=["last.>"], allow_direct=True)
    subjects = [f"last.{i}" for i in range(2500)]
    _fill(js, subjects, rounds=2)
    js.publish("last.7", b"newest")
    sent = _requests(nc, "LAST", monkeypatch)

    found = list(stream.get_last_msgs_for([*subjects[::-1], "last.nothing"]))

    assert len(sent) >= 3, "2,501 subjects need three requests at least"
    assert all(len(body["multi_last"]) <= d.KV_MULTI_LAST_MAX_KEYS for body in sent)
    assert len({body.get("up_to_seq") for body in sent}) == 1, "one snapshot for all"
    assert len(found) == 2500
    _check_order(found)
    by_subject = {msg.subject: msg for msg in found}
    assert by_subject["last.7"].data == b"newest" and found[-1].subject == "last.7"
    assert by_subject["last.0"].data == b"last.0#1"
    assert by_subject["last.0"].stream == "LAST" and by_subject["last.0"].time is not None


def test_wildcards_also_past_the_per_request_limit(js: JetStream) -> None:
    stream = js.create_stream(name="WILD", subjects=["w.>"], allow_direct=True)
    _fill(js, [f"w.a.{i}" for i in range(1500)] + ["w.b.1", "w.b.2", "w.c"])

    few = list(stream.get_last_msgs_for(["w.b.*", "w.c", "w.b.1"]))
    assert [msg.subject for msg in few] == ["w.b.1", "w.b.2", "w.c"]

    # 1,500 subjects under one pattern: the server refuses it (413) in one request.
    many = list(stream.get_last_msgs_for(["w.a.*", "w.c"]))
    assert len(many) == 1501
    _check_order(many)
    assert {msg.subject for msg in many} == {f"w.a.{i}" for i in range(1500)} | {"w.c"}


def test_up_to_seq_and_batch_pages(
    nc: nats_sync.Client, js: JetStream, monkeypatch: pytest.MonkeyPatch
) -> None:
    stream = js.create_stream(name="UPTO", subjects=["u.>"], allow_direct=True)
    subjects = [f"u.{i}" for i in range(10)]
    _fill(js, subjects, rounds=3)  # sequences 1-10, 11-20, 21-30

    as_of = list(stream.get_last_msgs_for(["u.*"], up_to_seq=15))
    assert [msg.seq for msg in as_of] == list(range(6, 16))
    assert as_of[0].data == b"u.5#0" and as_of[-1].data == b"u.4#1"

    sent = _requests(nc, "UPTO", monkeypatch)
    paged = list(stream.get_last_msgs_for(subjects, batch=3))
    assert [msg.seq for msg in paged] == list(range(21, 31))
    assert len(sent) == 4 and all(body["batch"] == 3 for body in sent)
    assert all(body.get("up_to_seq") == 30 for body in sent[1:]), "later pages: one snapshot"


def test_up_to_time(js: JetStream) -> None:
    stream = js.create_stream(name="UPTIME", subjects=["t.>"], allow_direct=True)
    _fill(js, ["t.a", "t.b"])
    time.sleep(0.05)
    between = datetime.now(timezone.utc)
    time.sleep(0.05)
    _fill(js, ["t.a"], rounds=2)

    then = list(stream.get_last_msgs_for(["t.>"], up_to_time=between))
    assert [(msg.subject, msg.data) for msg in then] == [("t.a", b"t.a#0"), ("t.b", b"t.b#0")]
    now = list(stream.get_last_msgs_for(["t.>"]))
    assert [(msg.subject, msg.data) for msg in now] == [("t.b", b"t.b#0"), ("t.a", b"t.a#1")]
    # Another time zone, the same moment.
    east = between.astimezone(timezone(timedelta(hours=5)))
    assert [msg.seq for msg in stream.get_last_msgs_for(["t.>"], up_to_time=east)] == [1, 2]
    before = between - timedelta(days=1)
    assert list(stream.get_last_msgs_for(["t.>"], up_to_time=before)) == []


def test_stream_without_allow_direct_gets_a_clear_error(js: JetStream) -> None:
    stream = js.create_stream(name="NODIRECT", subjects=["nd.>"])
    js.publish("nd.1", b"x")
    with pytest.raises(InvalidArgumentError, match="allow_direct"):
        list(stream.get_last_msgs_for(["nd.1"]))


def test_bad_arguments_are_named(js: JetStream) -> None:
    stream: Stream = js.create_stream(name="ARGS", subjects=["args.>"], allow_direct=True)
    naive = datetime.now()
    for call, name in (
        (lambda: stream.get_last_msgs_for("args.1"), "single str"),
        (lambda: stream.get_last_msgs_for(["args.1"], up_to_seq=0), "up_to_seq"),
        (lambda: stream.get_last_msgs_for(["args.1"], up_to_time=naive), "aware"),
        (lambda: stream.get_last_msgs_for(["args.1"], up_to_time="now"), "up_to_time"),
        (lambda: stream.get_last_msgs_for(["args.1"], batch=0), "batch"),
        (
            lambda: stream.get_last_msgs_for(
                ["args.1"], up_to_seq=1, up_to_time=datetime.now(timezone.utc)
            ),
            "not both",
        ),
        (lambda: stream.get_last_msgs_for([""]), "subject"),
    ):
        with pytest.raises(InvalidArgumentError, match=name):
            list(call())  # type: ignore[no-untyped-call]
    assert list(stream.get_last_msgs_for([])) == []
    assert list(stream.get_last_msgs_for(["args.none"])) == []

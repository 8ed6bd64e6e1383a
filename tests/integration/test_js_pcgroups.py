"""Partitioned consumer groups (``nats_sync.jetstream.pcgroups``, as orbit.go's
``pcgroups``) against a real ``nats-server -js``: static groups (members, pinned
instances, step-down), elastic groups (members in and out while running), listing, the
stored JSON, and bad input."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable

import pytest

import nats_sync
from nats_sync.jetstream import ConsumerConfig, JetStream, JsMsg
from nats_sync.jetstream import pcgroups as pcg
from nats_sync.jetstream.pcgroups._config import partition_filters
from nats_sync.testing import NatsServer

pytestmark = pytest.mark.timeout(120)

ClientFactory = Callable[..., nats_sync.Client]
KEYS = 12


@pytest.fixture
def js(jetstream_server: NatsServer, connect: ClientFactory) -> JetStream:
    return connect(servers=jetstream_server.url).jetstream()


def partitioned_stream(js: JetStream, partitions: int) -> None:
    """Stream S on ``foo.*``, its subjects stored as ``<partition>.foo.<key>``."""
    js.create_stream(
        name="S",
        subjects=["foo.*"],
        subject_transform={
            "src": "foo.*",
            "dest": f"{{{{partition({partitions},1)}}}}.foo.{{{{wildcard(1)}}}}",
        },
    )


class Recorder:
    """What each member (or instance) handled: ``(name, subject, n)``, acked with a
    confirmed ack (a message whose ack failed is not counted: it comes again)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.got: list[tuple[str, str, int]] = []

    def cb(self, name: str, pause: float = 0.0) -> Callable[[JsMsg], None]:
        def handle(msg: JsMsg) -> None:
            if pause:
                time.sleep(pause)
            try:
                msg.double_ack(timeout=2)
            except nats_sync.Error:
                return
            with self.lock:
                self.got.append((name, msg.subject, int(msg.data)))

        return handle

    def count(self, name: str | None = None) -> int:
        with self.lock:
            return sum(1 for item in self.got if name is None or item[0] == name)

    def wait(self, total: int, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while self.count() < total:
            assert time.monotonic() < deadline, f"{self.count()} of {total} handled"
            time.sleep(0.05)

    def check(self, published: int, owner_of: Callable[[str], str] | None = None) -> None:
        """Every message once, each key in order, and (static) each key by one member."""
        with self.lock:
            got = list(self.got)
        assert sorted(n for _, _, n in got) == list(range(published))
        by_key: dict[str, list[int]] = {}
        members: dict[str, set[str]] = {}
        for name, subject, n in got:
            assert subject == f"foo.k{n % KEYS}"  # the partition number is stripped
            by_key.setdefault(subject, []).append(n)
            members.setdefault(subject, set()).add(name.split("/")[0])
        for subject, numbers in by_key.items():
            assert numbers == sorted(numbers), f"{subject} out of order"
            if owner_of is not None:
                assert members[subject] == {owner_of(subject)}


def publish(js: JetStream, start: int, count: int, prefix: str = "foo") -> int:
    for n in range(start, start + count):
        js.publish(f"{prefix}.k{n % KEYS}", str(n).encode())
    return start + count


def wait_for(check: Callable[[], bool], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def settled(js: JetStream, stream: str, group: str) -> None:
    """Waits until the elastic group's consumers are those of its current membership,
    each with its partitions' filters (the running members followed the change)."""
    config = pcg.get_elastic(js, stream, group)
    filters = [pf.filter for pf in config.partitioning_filters or ()]
    wanted = {
        member: partition_filters(
            config.members, config.max_members, config.member_mappings, member, filters
        )
        for member in config.member_names()
    }

    def check() -> bool:
        found = {
            info.name: info.config.filter_subjects
            for info in js.list_consumers(f"{stream}-{group}")
        }
        return found == {member: f for member, f in wanted.items() if f}

    wait_for(check, 20.0)


# --- static --------------------------------------------------------------------------------


def test_static_two_members_share_the_keys(js: JetStream) -> None:
    partitioned_stream(js, 4)
    pcg.create_static(js, "S", "cg", 4, "foo.*", ["m1", "m2"])
    rec = Recorder()
    contexts = [
        pcg.static_consume(js, "S", "cg", m, rec.cb(m), ConsumerConfig(max_ack_pending=1))
        for m in ("m1", "m2")
    ]
    publish(js, 0, 200)
    rec.wait(200)
    time.sleep(0.5)  # nothing more comes
    owners: dict[str, str] = {}
    for name, subject, _ in rec.got:
        owners.setdefault(subject, name)
    rec.check(200, owners.__getitem__)
    assert rec.count("m1") and rec.count("m2")
    assert js.consumer_info("S", "cg-m1").config.filter_subjects == ["0.foo.*", "1.foo.*"]
    for ctx in contexts:
        ctx.stop()
        assert ctx.join(5) and ctx.error is None


def test_static_instances_one_pinned_and_step_down(js: JetStream) -> None:
    partitioned_stream(js, 2)
    pcg.create_static(js, "S", "cg", 2, None, member_mappings={"m1": [0, 1]})
    rec = Recorder()
    config = ConsumerConfig(ack_wait=2.0)
    a = pcg.static_consume(js, "S", "cg", "m1", rec.cb("m1/a"), config)
    b = pcg.static_consume(js, "S", "cg", "m1", rec.cb("m1/b"), config)
    time.sleep(0.5)
    publish(js, 0, 20)
    rec.wait(20)
    first = "m1/a" if rec.count("m1/a") else "m1/b"
    assert rec.count(first) == 20  # one instance has it all, the other stands by
    pcg.static_member_step_down(js, "S", "cg", "m1")
    publish(js, 20, 20)
    rec.wait(40)
    other = "m1/b" if first == "m1/a" else "m1/a"
    assert rec.count(other) == 20 and rec.count(first) == 20
    rec.check(40)
    # The active instance leaves: the standby takes over after the ack wait.
    (a if other == "m1/a" else b).stop()
    publish(js, 40, 10)
    rec.wait(50)
    assert rec.count(first) == 30
    a.stop()
    b.stop()


def test_static_config_change_and_delete_end_the_members(js: JetStream) -> None:
    partitioned_stream(js, 2)
    pcg.create_static(js, "S", "cg", 2, None, ["m1"])
    errors: list[BaseException] = []
    ctx = pcg.static_consume(js, "S", "cg", "m1", lambda msg: msg.ack(), error_cb=errors.append)
    js.key_value("static-consumer-groups").put("S.cg", b'{"max_members":2,"members":["x"]}')
    assert ctx.join(10)
    assert isinstance(ctx.error, pcg.GroupConfigChangedError) and errors == [ctx.error]
    assert "cg-m1" not in list(js.consumer_names("S"))  # it deleted its consumer
    pcg.delete_static(js, "S", "cg")
    pcg.create_static(js, "S", "cg", 2, None, ["m1"])
    ctx = pcg.static_consume(js, "S", "cg", "m1", lambda msg: msg.ack())
    pcg.delete_static(js, "S", "cg")
    assert ctx.join(10) and ctx.error is None  # deleted: a clean end
    assert pcg.list_static(js, "S") == []


# --- elastic -------------------------------------------------------------------------------


def test_elastic_members_in_and_out_lose_and_repeat_nothing(js: JetStream) -> None:
    js.create_stream(name="E", subjects=["foo.*"])
    pcg.create_elastic(js, "E", "cg", 6, "foo.*", [1])
    rec = Recorder()
    config = ConsumerConfig(ack_wait=2.0, max_ack_pending=1)
    contexts = {
        m: pcg.elastic_consume(js, "E", "cg", m, rec.cb(m, pause=0.002), config)
        for m in ("a", "b", "c")
    }
    assert pcg.add_members(js, "E", "cg", ["a", "b"]) == ["a", "b"]
    settled(js, "E", "cg")
    sent = publish(js, 0, 150)
    wait_for(lambda: rec.count() >= 60)
    assert pcg.add_members(js, "E", "cg", "c") == ["a", "b", "c"]  # while a and b read
    settled(js, "E", "cg")
    sent = publish(js, sent, 150)
    wait_for(lambda: rec.count("c") > 0)
    assert pcg.delete_members(js, "E", "cg", ["a"]) == ["b", "c"]
    settled(js, "E", "cg")
    sent = publish(js, sent, 150)
    rec.wait(sent, timeout=40)
    time.sleep(1.0)
    rec.check(sent)  # no acked message lost or repeated, every key in order
    assert rec.count("a") and rec.count("b") and rec.count("c")
    a_before = rec.count("a")
    sent = publish(js, sent, 30)
    rec.wait(sent)
    assert rec.count("a") == a_before  # dropped: it reads nothing any more
    assert pcg.list_members(js, "E", "cg") == ["b", "c"]
    for ctx in contexts.values():
        ctx.stop()
        assert ctx.join(5)
    pcg.delete_elastic(js, "E", "cg")
    assert "E-cg" not in list(js.stream_names())


def test_elastic_mappings_and_step_down(js: JetStream) -> None:
    js.create_stream(name="E", subjects=["foo.*"])
    pcg.create_elastic(js, "E", "cg", 2)  # the whole subject is the key
    pcg.set_member_mappings(js, "E", "cg", [pcg.MemberMapping("m", (0, 1))])
    assert pcg.list_members(js, "E", "cg") == ["m"]
    with pytest.raises(pcg.ConsumerGroupConfigError, match="member mappings"):
        pcg.add_members(js, "E", "cg", ["x"])
    rec = Recorder()
    config = ConsumerConfig(ack_wait=2.0)
    x = pcg.elastic_consume(js, "E", "cg", "m", rec.cb("m/x"), config)
    y = pcg.elastic_consume(js, "E", "cg", "m", rec.cb("m/y"), config)
    time.sleep(0.5)
    publish(js, 0, 10)
    rec.wait(10)
    first = "m/x" if rec.count("m/x") else "m/y"
    assert rec.count(first) == 10
    pcg.elastic_member_step_down(js, "E", "cg", "m")
    publish(js, 10, 10)
    rec.wait(20)
    rec.check(20)
    assert rec.count(first) == 10
    pcg.delete_member_mappings(js, "E", "cg")
    assert pcg.list_members(js, "E", "cg") == []
    x.stop()
    y.stop()
    assert x.join(5) and y.join(5)


# --- listing, the stored JSON, bad input -----------------------------------------------------


def test_listing_and_the_stored_json_is_orbit_gos(js: JetStream) -> None:
    partitioned_stream(js, 4)
    js.create_stream(name="E", subjects=["bar.*.*"])
    assert pcg.list_static(js, "S") == [] and pcg.list_elastic(js, "E") == []
    pcg.create_static(js, "S", "one", 4, ["foo.*"], ["m2", "m1"])
    pcg.create_static(js, "S", "two", 4, None, member_mappings={"a": [0, 1], "b": [2, 3]})
    pcg.create_static(js, "S", "one", 4, ["foo.*"], ["m2", "m1"])  # the same again: fine
    pcg.create_elastic(js, "E", "el", 8, "bar.*.*", [2], max_buffered_msgs=1000)
    pcg.create_elastic(js, "E", "all", 3)
    pcg.add_members(js, "E", "el", ["y", "x"])
    assert pcg.list_static(js, "S") == ["one", "two"]
    assert pcg.list_elastic(js, "E") == ["all", "el"]
    assert pcg.list_members(js, "S", "two", static=True) == ["a", "b"]
    assert pcg.list_members(js, "E", "el") == ["x", "y"]
    static = js.key_value("static-consumer-groups")
    elastic = js.key_value("elastic-consumer-groups")
    # Byte for byte what orbit.go's encoding/json writes for these configs (its struct
    # tags: omitempty on filters, members, member_mappings, max_buffered_msg (sic) and
    # max_buffered_bytes; partitioning_filters always, null when nil).
    assert static.get("S.one").value == (
        b'{"max_members":4,"filters":["foo.*"],"members":["m2","m1"]}'
    )
    assert static.get("S.two").value == (
        b'{"max_members":4,"member_mappings":[{"member":"a","partitions":[0,1]},'
        b'{"member":"b","partitions":[2,3]}]}'
    )
    assert elastic.get("E.el").value == (
        b'{"max_members":8,"partitioning_filters":[{"filter":"bar.*.*",'
        b'"partitioning_wildcards":[2]}],"max_buffered_msg":1000,"members":["x","y"]}'
    )
    assert json.loads(elastic.get("E.all").value) == {
        "max_members": 3,
        "partitioning_filters": None,
    }
    source = js.stream_info("E-el").config
    assert source.retention == "workqueue" and source.discard == "new"
    assert source.sources is not None and source.sources[0]["name"] == "E"
    assert source.sources[0]["subject_transforms"] == [
        {"src": "bar.*.*", "dest": "{{Partition(8,2)}}.bar.{{Wildcard(1)}}.{{Wildcard(2)}}"}
    ]
    with pytest.raises(pcg.ConsumerGroupExistsError):
        pcg.create_static(js, "S", "one", 4, ["foo.*"], ["m1"])
    with pytest.raises(pcg.ConsumerGroupExistsError):
        pcg.create_elastic(js, "E", "el", 4, "bar.*.*", [2])


def test_bad_input_gets_a_clear_error(js: JetStream) -> None:
    partitioned_stream(js, 2)
    with pytest.raises(pcg.ConsumerGroupConfigError, match="max_members"):
        pcg.create_static(js, "S", "cg", 0, None, ["m"])
    with pytest.raises(pcg.ConsumerGroupConfigError, match="not both"):
        pcg.create_static(js, "S", "cg", 2, None, ["m"], {"m": [0, 1]})
    with pytest.raises(pcg.ConsumerGroupConfigError, match=r"partitions \[1\]"):
        pcg.create_static(js, "S", "cg", 2, None, member_mappings={"m": [0]})
    with pytest.raises(pcg.ConsumerGroupConfigError, match="group name"):
        pcg.create_static(js, "S", "a.b", 2, None, ["m"])
    with pytest.raises(pcg.ConsumerGroupConfigError, match=r"within 1\.\.1"):
        pcg.create_elastic(js, "S", "cg", 2, "foo.*", [2])
    with pytest.raises(pcg.ConsumerGroupConfigError, match="needs a \\* wildcard"):
        pcg.create_elastic(js, "S", "cg", 2, "foo.bar", [])
    with pytest.raises(pcg.ConsumerGroupNotFoundError):
        pcg.static_consume(js, "S", "nope", "m", lambda msg: None)
    pcg.create_static(js, "S", "cg", 2, None, ["m"])
    with pytest.raises(pcg.MemberNotInGroupError, match="'z' is not a member"):
        pcg.static_consume(js, "S", "cg", "z", lambda msg: None)
    with pytest.raises(nats_sync.errors.InvalidArgumentError, match="cb must be callable"):
        pcg.static_consume(js, "S", "cg", "m", "not a callable")  # type: ignore[arg-type]
    js.create_stream(name="E", subjects=["e.*"])
    pcg.create_elastic(js, "E", "cg", 2, "e.*", [1])
    with pytest.raises(pcg.ConsumerGroupConfigError, match="explicitly"):
        pcg.elastic_consume(js, "E", "cg", "m", lambda msg: None, ConsumerConfig(ack_policy="none"))
    with pytest.raises(pcg.ConsumerGroupNotFoundError):
        pcg.add_members(js, "E", "nope", ["m"])


@pytest.mark.slow
def test_elastic_churn_with_standby_instances(js: JetStream) -> None:
    """Two instances of each member while members come and go, seven times over."""
    js.create_stream(name="E", subjects=["foo.*"])
    pcg.create_elastic(js, "E", "cg", 6, "foo.*", [1])
    rec = Recorder()
    config = ConsumerConfig(ack_wait=2.0, max_ack_pending=1)
    contexts = [
        pcg.elastic_consume(js, "E", "cg", m, rec.cb(f"{m}/{i}", pause=0.002), config)
        for m in "abc"
        for i in range(2)
    ]
    pcg.add_members(js, "E", "cg", ["a"])
    sent = 0
    for change, member in [
        (pcg.add_members, "b"),
        (pcg.add_members, "c"),
        (pcg.delete_members, "a"),
        (pcg.add_members, "a"),
        (pcg.delete_members, "b"),
        (pcg.delete_members, "c"),
        (pcg.add_members, "b"),
    ]:
        sent = publish(js, sent, 80)
        time.sleep(0.5)
        change(js, "E", "cg", [member])
    sent = publish(js, sent, 80)
    rec.wait(sent, timeout=60)
    time.sleep(1.0)
    rec.check(sent)
    for ctx in contexts:
        ctx.stop()
        assert ctx.join(5)

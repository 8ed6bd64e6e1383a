"""Partitioned consumer groups shared with natsio-pcgroups (an asyncio Python
port of orbit.go's pcgroups): one member runs in this library, the other in natsio, in a
child process of pyenv's Python 3.13 (natsio needs 3.13+). Static: every message is
handled once, each key by one member, in order. Elastic: the same while the natsio member
is added and ours dropped.

Skipped, with the reason, where that Python or natsio-pcgroups in it is missing
(``make test`` installs it where a Python 3.13 is found: tests/integration/natsio_peer.py)."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from natsio_peer import natsio_python, why_not
from test_js_pcgroups import Recorder, partitioned_stream, publish, settled

import nats_sync
from nats_sync.jetstream import ConsumerConfig
from nats_sync.jetstream import pcgroups as pcg
from nats_sync.testing import NatsServer

pytestmark = pytest.mark.timeout(120)

ClientFactory = Callable[..., nats_sync.Client]
NATSIO_PYTHON = natsio_python()
CHILD = Path(__file__).with_name("pcg_natsio_child.py")


@pytest.fixture(scope="module")
def natsio_ready() -> None:
    reason = why_not("natsio.pcgroups", "natsio-pcgroups")
    if reason:
        pytest.skip(reason)


def start_child(
    url: str, stream: str, kind: str, rec: Recorder
) -> tuple[subprocess.Popen[str], threading.Thread]:
    """The natsio member (``natsio``) of group ``cg``, its confirmed messages recorded."""
    child = subprocess.Popen(
        [str(NATSIO_PYTHON), str(CHILD), url, stream, "cg", "natsio", kind],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "ready"

    def read_child() -> None:
        assert child.stdout is not None
        for line in child.stdout:
            subject, n = line.split()
            with rec.lock:
                rec.got.append(("natsio", subject, int(n)))

    reader = threading.Thread(target=read_child, name="test-natsio-reader")
    reader.start()
    return child, reader


def end_child(child: subprocess.Popen[str], reader: threading.Thread) -> None:
    if child.stdin:
        child.stdin.close()
    child.wait(30)
    reader.join(10)


def test_a_static_group_shared_with_natsio(
    natsio_ready: None, jetstream_server: NatsServer, connect: ClientFactory
) -> None:
    js = connect(servers=jetstream_server.url).jetstream()
    partitioned_stream(js, 6)
    pcg.create_static(js, "S", "cg", 6, "foo.*", ["natsio", "ours"])
    rec = Recorder()
    child, reader = start_child(jetstream_server.url, "S", "static", rec)
    try:
        ours = pcg.static_consume(
            js, "S", "cg", "ours", rec.cb("ours"), ConsumerConfig(max_ack_pending=1)
        )
        publish(js, 0, 300)
        rec.wait(300, timeout=40)
        ours.stop()
        assert ours.join(5)
    finally:
        end_child(child, reader)
    owners = {subject: name for name, subject, _ in rec.got}
    rec.check(300, owners.__getitem__)
    assert rec.count("natsio") and rec.count("ours")
    assert {name for name, _, _ in rec.got} == {"natsio", "ours"}
    # natsio made its consumer from our config: the partitions orbit.go gives it.
    assert js.consumer_info("S", "cg-natsio").config.filter_subjects == [
        "0.foo.*",
        "1.foo.*",
        "2.foo.*",
    ]


def test_an_elastic_group_shared_with_natsio(
    natsio_ready: None, jetstream_server: NatsServer, connect: ClientFactory
) -> None:
    js = connect(servers=jetstream_server.url).jetstream()
    js.create_stream(name="E", subjects=["foo.*"])
    pcg.create_elastic(js, "E", "cg", 6, "foo.*", [1])
    pcg.add_members(js, "E", "cg", ["ours"])
    rec = Recorder()
    ours = pcg.elastic_consume(
        js, "E", "cg", "ours", rec.cb("ours"), ConsumerConfig(ack_wait=2.0, max_ack_pending=1)
    )
    child, reader = start_child(jetstream_server.url, "E", "elastic", rec)
    try:
        sent = publish(js, 0, 100)
        rec.wait(50)
        pcg.add_members(js, "E", "cg", ["natsio"])  # while ours reads
        settled(js, "E", "cg")  # natsio has half the partitions
        sent = publish(js, sent, 100)
        rec.wait(sent, timeout=40)
        natsio_before = rec.count("natsio")
        pcg.delete_members(js, "E", "cg", ["ours"])
        settled(js, "E", "cg")  # natsio has them all
        sent = publish(js, sent, 100)
        rec.wait(sent, timeout=40)
        ours.stop()
        assert ours.join(5)
    finally:
        end_child(child, reader)
    rec.check(sent)  # nothing lost or repeated, each key in order across the moves
    assert natsio_before and rec.count("natsio") - natsio_before == 100

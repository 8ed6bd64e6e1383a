"""``stream.info(subjects_filter=...)`` past the server's first page of 100,000 subjects
(a real ``nats-server -js``): every matching subject is counted, as nats.go's
``Stream.Info`` with a subject filter gives them."""

from __future__ import annotations

import time

import pytest

import nats_sync
from nats_sync.testing import NatsServer

pytestmark = pytest.mark.timeout(120)

#: More subjects than one page of the server's answer holds (100,000).
SUBJECTS = 100_250


def test_every_page_of_subjects_is_read(jetstream_server: NatsServer) -> None:
    with nats_sync.connect(jetstream_server.url, pending_size=64 * 1024 * 1024) as nc:
        js = nc.jetstream(timeout=20)
        js.create_stream(name="MANY", subjects=["many.>"], storage="memory")
        for n in range(SUBJECTS):  # plain publishes: the stream stores them, no acks
            nc.publish(f"many.{n}", b"")
        nc.publish("many.0", b"")  # one subject twice
        nc.flush(timeout=30)
        deadline = time.monotonic() + 30
        while js.stream_info("MANY").state.messages < SUBJECTS + 1:
            assert time.monotonic() < deadline, "the stream did not store them all"
            time.sleep(0.1)
        subjects = js.stream("MANY").info(subjects_filter="many.>").state.subjects
        assert subjects is not None
        assert len(subjects) == SUBJECTS
        assert subjects["many.0"] == 2 and subjects[f"many.{SUBJECTS - 1}"] == 1
        # A filter matching less than a page is one answer, as before.
        few = js.stream_info("MANY", subjects_filter="many.1").state.subjects
        assert few == {"many.1": 1}

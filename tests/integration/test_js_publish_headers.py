"""The three ways of publishing to a stream store the same headers for the same keywords
(a real ``nats-server -js``): ``publish`` (the full merge, ``js_headers``),
``publish_async`` and ``FastPublisher.add``/``commit`` (the builder ``publish_headers``,
its block for a lone ``msg_id``, and its call skipped when no keyword is given). Their unit-level
agreement is tests/unit/test_publish_options.py; this is the wire's."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import nats_sync
from nats_sync.jetstream import JetStream
from nats_sync.jetstream._streams.wire import js_headers
from nats_sync.testing import NatsServer

pytestmark = pytest.mark.timeout(60)

#: (user headers, keywords) that all three paths take (fast ingest takes msg_id, ttl
#: and expected_last_subject_seq of the publish keywords). Each case publishes to a
#: subject of its own, so expected_last_subject_seq=0 holds for every path's first.
CASES: list[tuple[dict[str, str] | None, dict[str, Any]]] = [
    (None, {}),
    ({"K": "v"}, {}),
    (None, {"msg_id": "ID"}),
    ({"K": "v", "Nats-Msg-Id": "replaced"}, {"msg_id": "ID"}),
    (None, {"ttl": 60}),
    (None, {"ttl": "never"}),
    (None, {"expected_last_subject_seq": 0}),
    ({"K": "v"}, {"msg_id": "ID", "ttl": 60, "expected_last_subject_seq": 0}),
]


@pytest.fixture
def js(jetstream_server: NatsServer) -> Iterator[JetStream]:
    nc = nats_sync.connect(jetstream_server.url)
    context = nc.jetstream()
    context.create_stream(name="HDRS", subjects=["hdrs.>"], allow_batched=True, allow_msg_ttl=True)
    yield context
    nc.close()


def test_publish_publish_async_and_fast_ingest_store_the_same_headers(js: JetStream) -> None:
    sent: list[tuple[str, dict[str, Any] | None]] = []  # (subject, the headers expected)
    for path in ("publish", "async", "fast"):
        fast = js.fast_publisher() if path == "fast" else None
        for index, (headers, keywords) in enumerate(CASES):
            subject = f"hdrs.{path}.{index}"
            # Ids are per path: the stream's duplicate window would drop a repeated one.
            given = {**keywords, "msg_id": f"{path}-{index}"} if "msg_id" in keywords else keywords
            if path == "publish":
                js.publish(subject, b"x", headers=headers, **given)
            elif path == "async":
                js.publish_async(subject, b"x", headers=headers, **given).result(10)
            elif index < len(CASES) - 1:
                assert fast is not None
                fast.add(subject, b"x", headers=headers, **given)
            else:  # the batch's last message: commit builds its headers the same way
                assert fast is not None
                assert fast.commit(subject, b"x", headers=headers, **given).count == len(CASES)
            sent.append((subject, js_headers(headers, **given)))
    stream = js.stream("HDRS")
    for seq, (subject, expected) in enumerate(sent, start=1):
        stored = stream.get_msg(seq)
        assert stored.subject == subject
        # The server may add headers of its own; every header sent is stored as sent.
        assert {
            name: value
            for name, value in (stored.headers or {}).items()
            if name in (expected or {})
        } == (expected or {}), subject

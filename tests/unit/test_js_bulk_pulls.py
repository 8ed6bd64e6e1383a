"""A bulk read's pulls (``jetstream._streams.ranges``) without a server: a consumer that is not
ready yet (its first pulls answered "no responders", as on a just-made R3 stream's
replica) is asked again after a pause, a few times; a 503 after messages came, or past
those tries, is the error it says."""

from __future__ import annotations

from typing import Any

import pytest

from nats_sync import _defaults as d
from nats_sync.jetstream._streams.ranges import _Pulls, _take
from nats_sync.jetstream.api import StoredColumns
from nats_sync.jetstream.errors import ConsumerNotFoundError
from nats_sync.msg import Msg

pytestmark = pytest.mark.timeout(20)

NEXT = "$JS.API.CONSUMER.MSG.NEXT.S.R"


class Publishes:
    """Stands in for the client: records the pulls published."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes, str | None]] = []

    def publish(
        self, subject: str, payload: bytes = b"", reply: str | None = None, **_: Any
    ) -> None:
        self.sent.append((subject, payload, reply))


def no_responders() -> Msg:
    return Msg("_INBOX.r", "", b"", None, 1, 503, "")


def message(seq: int, pending: int) -> Msg:
    return Msg("s.a", f"$JS.ACK.S.R.1.{seq}.{seq}.1795428000000000000.{pending}", b"x", None, 1)


@pytest.fixture(autouse=True)
def no_pause(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(d, "JS_BULK_NOT_READY_PAUSE", 0.0)


def two_pulls() -> tuple[Publishes, _Pulls]:
    client = Publishes()
    pulls = _Pulls(client, NEXT, "_INBOX.r", b"{}", 10)  # type: ignore[arg-type]
    pulls.send()
    pulls.send()
    return client, pulls


def test_refused_first_pulls_are_sent_again_and_the_read_goes_on() -> None:
    client, pulls = two_pulls()
    columns = StoredColumns()
    assert _take([no_responders(), no_responders()], pulls, None, columns) is False
    pulls.send_refused()
    assert len(client.sent) == 4  # both sent again
    pulls.send_refused()
    assert len(client.sent) == 4  # nothing more was refused
    assert _take([message(1, 1), message(2, 0)], pulls, None, columns) is True
    assert columns.seqs == [1, 2]


def test_a_refusal_after_messages_came_is_the_error() -> None:
    _client, pulls = two_pulls()
    columns = StoredColumns()
    assert _take([message(1, 5)], pulls, None, columns) is False
    with pytest.raises(ConsumerNotFoundError):
        _take([no_responders()], pulls, None, columns)


def test_refusals_past_the_tries_are_the_error() -> None:
    client, pulls = two_pulls()
    columns = StoredColumns()
    for _ in range(d.JS_BULK_NOT_READY_PAUSES):
        assert _take([no_responders()], pulls, None, columns) is False
        pulls.send_refused()
    assert len(client.sent) == 2 + d.JS_BULK_NOT_READY_PAUSES
    with pytest.raises(ConsumerNotFoundError):
        _take([no_responders()], pulls, None, columns)

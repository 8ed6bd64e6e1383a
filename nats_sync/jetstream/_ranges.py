"""Reading a range of a stream's sequences without a durable consumer (``get_msgs``).

(Being written: see the JetStream issue.)
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from nats_sync.jetstream.api import StoredMsg

if TYPE_CHECKING:
    from nats_sync.jetstream.context import JetStream
    from nats_sync.jetstream.stream import Stream


def read_range(js: JetStream, stream: Stream, start_seq: int, *, subject: str | None,
               end_seq: int | None, batch: int, max_bytes: int | None,
               timeout: float | None) -> Iterator[StoredMsg]:
    """See ``Stream.get_msgs``."""
    raise NotImplementedError

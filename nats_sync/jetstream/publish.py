"""JetStream publishing: publish with an acknowledgement, publish_async, publish_batch.

(Being written: see the JetStream issue.)
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from nats_sync.jetstream._api import Headers
from nats_sync.jetstream.api import PubAck

if TYPE_CHECKING:
    from nats_sync.jetstream.context import JetStream


class JsPublisher:
    """Publishes for one context and owns its ``publish_async`` window."""

    def __init__(self, js: JetStream, max_pending_acks: int, stall_wait: float) -> None:
        self._js = js
        self._max_pending_acks = max_pending_acks
        self._stall_wait = stall_wait

    def publish(self, subject: str, payload: bytes = b"", **options: Any) -> PubAck:
        """See ``JetStream.publish``."""
        raise NotImplementedError

    def publish_async(self, subject: str, payload: bytes = b"", **options: Any
                      ) -> Future[PubAck]:
        """See ``JetStream.publish_async``."""
        raise NotImplementedError

    def pending(self) -> int:
        """See ``JetStream.publish_async_pending``."""
        raise NotImplementedError

    def completed(self, timeout: float | None) -> None:
        """See ``JetStream.publish_async_completed``."""
        raise NotImplementedError

    def publish_batch(self, subject: str, payloads: Sequence[bytes], *,
                      headers: Headers = None, timeout: float | None = None
                      ) -> list[PubAck | Exception]:
        """See ``JetStream.publish_batch``."""
        raise NotImplementedError

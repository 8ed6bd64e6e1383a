"""Pull consumers: fetch, fetch_bytes, fetch_nowait, next, messages() and consume().

(Being written: see the JetStream issue.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nats_sync.jetstream.api import ConsumerInfo

if TYPE_CHECKING:
    from nats_sync.jetstream.context import JetStream


class PullConsumer:
    """A pull consumer bound by stream and name."""

    def __init__(self, js: JetStream, stream: str, info: ConsumerInfo) -> None:
        self._js = js
        self._stream = stream
        self._name = info.name
        self._info = info

    @property
    def name(self) -> str:
        """The consumer's name."""
        return self._name

    @property
    def stream_name(self) -> str:
        """The stream it reads."""
        return self._stream

    @property
    def cached_info(self) -> ConsumerInfo:
        """The info as of the last call that returned it (no request)."""
        return self._info

    def info(self, timeout: float | None = None) -> ConsumerInfo:
        """The consumer's config and position now."""
        self._info = self._js.consumer_info(self._stream, self._name, timeout=timeout)
        return self._info

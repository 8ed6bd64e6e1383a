"""The ordered consumer: every stream message once, in order, recreated after a gap.

(Being written: see the JetStream issue.)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nats_sync.jetstream.context import JetStream


class OrderedConsumer:
    """An ordered consumer of one stream."""

    def __init__(self, js: JetStream, stream: str, *,
                 filter_subjects: Sequence[str] | None = None, deliver_policy: str = "all",
                 opt_start_seq: int | None = None, opt_start_time: Any = None,
                 headers_only: bool = False) -> None:
        self._js = js
        self._stream = stream
        raise NotImplementedError

"""Watching an object store bucket: its current object infos, then every change.

How it works: an :class:`ObjectWatcher` reads the bucket's meta subjects
(``$O.<b>.M.>``) through an :class:`~nats_sync.jetstream._consumers.ordered.Watch` (an ordered
consumer: ``last_per_subject`` for the current infos, ``all`` with history, the
stream's next sequence for updates only), so it survives reconnects and server
restarts without losing or repeating an info. The end of the current infos is the
message after which the consumer had nothing pending (or, for a bucket with no infos
at all, the start), and ``updates`` reports it once as None, as nats-py does.

Threads: ``updates`` and iteration run on the caller's thread, one read at a time (the
ordered consumer's rule); ``stop`` may come from any thread and wakes a read in
progress at once; the client's close ends it too. The watcher's own state is set once,
when it is made.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from nats_sync import errors as core_errors
from nats_sync.jetstream._consumers.ordered import Watch
from nats_sync.jetstream.api import StoredMsg

if TYPE_CHECKING:
    from nats_sync.jetstream._object_store.config import ObjectInfo
    from nats_sync.jetstream._streams.context_protocol import JsContext
    from nats_sync.jetstream._streams.stream import Stream


class ObjectWatcher:
    """The infos of a bucket's objects as they change; made by ``ObjectStore.watch``.

    ``for info in watcher`` yields infos (never None) until ``stop()`` or the client's
    close; ``updates(timeout)`` returns one info, or None once at the end of the current
    ones. A context manager: leaving it stops the watcher.
    """

    def __init__(
        self,
        js: JsContext,
        stream: Stream,
        subject: str,
        *,
        decode: Callable[[StoredMsg], ObjectInfo],
        include_history: bool,
        ignore_deletes: bool,
        updates_only: bool,
    ) -> None:
        self._stream_name = stream.name
        self._decode = decode
        self._ignore_deletes = ignore_deletes
        self._watch = Watch(
            js, stream.name, [subject], include_history=include_history, updates_only=updates_only
        )

    def __repr__(self) -> str:
        return f"<nats_sync.jetstream.ObjectWatcher on {self._stream_name!r}>"

    def updates(self, timeout: float | None = 5.0) -> ObjectInfo | None:
        """The next info; None once, right after the infos current when the watch began.

        Args:
            timeout: seconds to wait (None: until something comes or it stops).

        Raises:
            TimeoutError: nothing new within ``timeout`` seconds.
            ConnectionClosedError: the watcher was stopped or the client closed.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            remaining = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            msg = self._watch.next(remaining)
            if msg is None:
                return None
            meta = msg.metadata
            info = self._decode(
                StoredMsg(
                    stream=self._stream_name,
                    subject=msg.subject,
                    seq=meta.sequence.stream,
                    data=msg.data,
                    headers=None,
                    time=meta.timestamp,
                )
            )
            if info.deleted and self._ignore_deletes:
                continue
            return info

    def __iter__(self) -> Iterator[ObjectInfo]:
        while True:
            try:
                info = self.updates(timeout=None)
            except core_errors.ConnectionClosedError:
                return
            if info is not None:
                yield info

    def stop(self) -> None:
        """Ends the watch at once (a reader blocked in ``updates`` wakes up) and removes
        its server-side consumer."""
        self._watch.stop()

    def __enter__(self) -> ObjectWatcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

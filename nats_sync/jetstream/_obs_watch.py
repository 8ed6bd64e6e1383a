"""Watching an object store bucket: its current object infos, then every change.

How it works: an :class:`ObjectWatcher` reads the bucket's meta subjects
(``$O.<b>.M.>``) through an ordered consumer (``last_per_subject`` for the current
infos, ``all`` with history, ``new`` for updates only), so it survives reconnects and
server restarts without losing or repeating an info. The end of the current infos is
the message after which the consumer had nothing pending (or, for a bucket with no
infos at all, the start), and ``updates`` reports it once as None, as nats-py does.

Threads: ``updates`` and iteration run on the caller's thread, one read at a time (the
ordered consumer's rule); ``stop`` may come from any thread and ends a read in progress
within a second. State: ``_marker_due``/``_initial`` are written by the reading thread
only; ``_stopped`` is an Event.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from nats_sync import errors as core_errors
from nats_sync.errors import InvalidArgumentError
from nats_sync.jetstream.api import StoredMsg

if TYPE_CHECKING:
    from nats_sync.jetstream.context import JetStream
    from nats_sync.jetstream.object_store import ObjectInfo
    from nats_sync.jetstream.stream import Stream

#: Seconds one read waits inside iteration before it looks at ``stop`` again.
_POLL = 1.0


class ObjectWatcher:
    """The infos of a bucket's objects as they change; made by ``ObjectStore.watch``.

    ``for info in watcher`` yields infos (never None) until ``stop()``;
    ``updates(timeout)`` returns one info, or None once at the end of the current ones.
    A context manager: leaving it stops the watcher.
    """

    def __init__(self, js: JetStream, stream: Stream, subject: str, *,
                 decode: Callable[[StoredMsg], ObjectInfo], include_history: bool,
                 ignore_deletes: bool, updates_only: bool) -> None:
        if include_history and updates_only:
            raise InvalidArgumentError("include_history and updates_only exclude each other")
        policy = "new" if updates_only else ("all" if include_history else "last_per_subject")
        self._stream_name = stream.name
        self._decode = decode
        self._ignore_deletes = ignore_deletes
        self._stopped = threading.Event()
        self._initial = not updates_only
        self._marker_due = False
        if self._initial:
            # With no info stored the current ones end at once; no message would say so.
            first = stream.get_msgs(subject=subject, batch=1)
            try:
                self._marker_due = next(first, None) is None
            finally:
                close = getattr(first, "close", None)
                if callable(close):
                    close()  # ends the direct get's subscription now, not at collection
        self._ordered = js.ordered_consumer(stream.name, filter_subjects=[subject],
                                            deliver_policy=policy)

    def __repr__(self) -> str:
        return f"<nats_sync.jetstream.ObjectWatcher on {self._stream_name!r}>"

    def updates(self, timeout: float = 5.0) -> ObjectInfo | None:
        """The next info; None once, right after the infos current when the watch began.

        Raises:
            TimeoutError: nothing new within ``timeout`` seconds (or the watcher was
                stopped).
        """
        deadline = time.monotonic() + timeout
        while True:
            if self._marker_due:
                self._marker_due = False
                self._initial = False
                return None
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise core_errors.TimeoutError(f"no object change within {timeout}s")
            msg = self._ordered.next(max_wait=remaining)
            meta = msg.metadata
            if self._initial and meta.num_pending == 0:
                self._marker_due = True
            info = self._decode(StoredMsg(stream=self._stream_name, subject=msg.subject,
                                          seq=meta.sequence.stream, data=msg.data,
                                          headers=None, time=meta.timestamp))
            if info.deleted and self._ignore_deletes:
                continue
            return info

    def __iter__(self) -> Iterator[ObjectInfo]:
        while not self._stopped.is_set():
            try:
                info = self.updates(_POLL)
            except core_errors.TimeoutError:
                continue
            except core_errors.Error:
                if self._stopped.is_set():
                    return
                raise
            if info is not None:
                yield info

    def stop(self) -> None:
        """Ends the watch and removes its server-side consumer."""
        self._stopped.set()
        self._ordered.stop()

    def __enter__(self) -> ObjectWatcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop_quietly()

    def _stop_quietly(self) -> None:
        try:
            self.stop()
        except core_errors.Error:
            pass  # the client closed first: the server drops the consumer by itself

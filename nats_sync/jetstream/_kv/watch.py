"""Watching key-value keys: :class:`KeyWatcher`, on the ordered consumer.

How it works: a watcher reads an :class:`~nats_sync.jetstream._consumers.ordered.Watch` (an
ordered consumer on the bucket's stream) filtered on the watched subjects by the
server, starting with the last entry of each key, every kept entry
(``include_history``), the stream's next sequence (``updates_only``) or a given
revision (``resume_from_revision``, nats.go's ``ResumeFromRevision``). The consumer is
made when the watcher is, so nothing stored after ``watch()`` returns is missed, and it
remakes itself after a reconnect, a server restart or a gap from the stream sequence
after the last entry it handed over: nothing is lost or repeated.

The end of the initial values is the first message with no pending messages after it
(its ``num_pending`` is 0), or the moment the watch starts when the consumer had
nothing to deliver; ``updates()`` then returns ``None`` exactly once (the ``Watch``
tells it). Iteration skips that ``None``.

Threads: none of its own. ``updates()`` and iteration run on the caller's thread, one
reader at a time (the ordered consumer's lock); ``stop()`` may come from any thread and
wakes the reader at once; the client's close ends it too (the ordered consumer's
status listener, on a client thread, only sets its flag). The watcher's own state is
set once, when it is made.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from nats_sync import errors as core_errors
from nats_sync.jetstream._consumers.ordered import Watch
from nats_sync.jetstream._streams.wire import header_value

if TYPE_CHECKING:
    from nats_sync.jetstream._consumers.msg import JsMsg
    from nats_sync.jetstream._streams.context_protocol import JsContext


_OPERATION = "KV-Operation"
_MARKER_REASON = "Nats-Marker-Reason"
#: A server-made marker (limit markers, 2.11+) as the operation it stands for.
_MARKER_OPERATIONS = {"MaxAge": "PURGE", "Purge": "PURGE", "Remove": "DEL"}
_OPERATIONS = ("PUT", "DEL", "PURGE")


@dataclass(frozen=True)
class Entry:
    """One stored value (or delete/purge marker) of a key.

    Attributes:
        bucket: the bucket.
        key: the key.
        value: the value (empty for markers and for ``meta_only`` watches).
        revision: the stream sequence it was stored at.
        delta: how many newer entries the read had still to deliver (0 for ``get``).
        created: when it was stored (aware UTC), or None when unknown.
        operation: ``"PUT"``, ``"DEL"`` or ``"PURGE"``.
    """

    bucket: str
    key: str
    value: bytes
    revision: int
    delta: int
    created: datetime | None
    operation: str = "PUT"


def operation_of(headers: dict[str, Any] | None) -> str:
    """The operation an entry's headers say (``PUT`` when they say none)."""
    if not headers:
        return "PUT"
    operation = header_value(headers, _OPERATION)
    if operation in _OPERATIONS:
        return operation
    reason = header_value(headers, _MARKER_REASON)
    return _MARKER_OPERATIONS.get(reason or "", "PUT")


class KeyWatcher:
    """The entries of watched keys: first the current ones, then every change.

    Made by ``kv.watch(...)``/``kv.watch_all(...)``. ``for entry in watcher`` yields
    entries until ``stop()`` or the client's close (never ``None``); ``updates()`` gives
    one at a time, with ``None`` once at the end of the initial values. A context
    manager (``stop()`` on exit).
    """

    def __init__(
        self,
        js: JsContext,
        bucket: str,
        key_prefix: str,
        stream: str,
        subjects: list[str],
        *,
        include_history: bool,
        ignore_deletes: bool,
        meta_only: bool,
        updates_only: bool,
        resume_from_revision: int | None = None,
    ) -> None:
        self._bucket = bucket
        self._prefix_length = len(key_prefix)
        self._ignore_deletes = ignore_deletes
        self._watch = Watch(
            js,
            stream,
            subjects,
            include_history=include_history,
            updates_only=updates_only,
            headers_only=meta_only,
            start_seq=resume_from_revision,
        )

    def __repr__(self) -> str:
        return f"<nats_sync.jetstream.KeyWatcher on {self._bucket!r}>"

    def __enter__(self) -> KeyWatcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __iter__(self) -> Iterator[Entry]:
        while True:
            try:
                entry = self.updates(timeout=None)
            except core_errors.ConnectionClosedError:
                return
            if entry is not None:
                yield entry

    @property
    def init_done(self) -> bool:
        """Whether the end of the initial values was handed over."""
        return self._watch.init_done

    def updates(self, timeout: float | None = 5.0) -> Entry | None:
        """The next entry; ``None`` once, at the end of the initial values.

        Args:
            timeout: seconds to wait (None: until something comes or it stops).

        Raises:
            TimeoutError: nothing new within ``timeout``.
            ConnectionClosedError: the watcher was stopped or the client closed.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            remaining = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            msg = self._watch.next(remaining)
            if msg is None:
                return None
            entry = self._entry(msg)
            if self._ignore_deletes and entry.operation != "PUT":
                continue
            return entry

    def _entry(self, msg: JsMsg) -> Entry:
        meta = msg.metadata
        return Entry(
            bucket=self._bucket,
            key=msg.subject[self._prefix_length :],
            value=msg.data,
            revision=meta.sequence.stream,
            delta=meta.num_pending,
            created=meta.timestamp,
            operation=operation_of(msg.headers),
        )

    def stop(self) -> None:
        """Ends the watch at once (a reader blocked in ``updates`` wakes up) and removes
        its server-side consumer."""
        self._watch.stop()

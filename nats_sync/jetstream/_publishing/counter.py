"""Counters (ADR-49, nats-server 2.12+): ``js.counter(stream)`` and its ``Counter``.

How it works: a stream made with ``allow_msg_counter`` treats every subject as a
counter (it stores nothing else). An increment is a publish with an empty payload and
the header ``Nats-Incr: +5`` (or ``-3``, any size: the server adds with big integers);
the stream's leader loads the subject's last message, adds, stores
``{"val":"<decimal>"}`` with the increment kept in the headers, and acknowledges with
the new value in the PubAck's ``"val"``. So:

- ``add`` is one ``js.publish`` (the public API, retries and errors as there) and
  returns ``int(ack.val)``: Python ints are exact at any size, like the server's.
- ``get`` reads the subject's last message from the leader (``STREAM.MSG.GET``
  ``last_by_subj``), so it sees every ``add`` that has returned; nothing stored is
  ``CounterNotFoundError``. ``get_entry`` reads the same message, and its headers too:
  the increment (``Nats-Incr``) and, on a stream that sources counters, each source's
  last value (``Nats-Counter-Sources``).
- ``get_many`` takes subjects with wildcards. Where the server has batched direct gets
  (API level >= 1) and the stream ``allow_direct``, it asks ``multi_last`` with the
  patterns themselves (``_kv.many.latest_by_subject``: 1,024 to a request, pipelined).
  If the patterns match too many subjects for one request (413), or there are no
  direct gets, the stream info lists the matching subjects (``subjects_filter``) and
  they are read in batches of exact subjects, or one by one from the leader.

Threads and state: nothing here starts a thread or keeps state beyond the bound
stream's name and info, so a ``Counter`` is safe from any thread; every call runs on
the caller's thread.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING

from nats_sync import _defaults as d
from nats_sync._core.validate import check_text
from nats_sync.errors import InvalidArgumentError
from nats_sync.jetstream._kv.many import (
    NoBatchedGetsError,
    latest_by_subject,
    matching_subjects,
)
from nats_sync.jetstream.api import CounterEntry
from nats_sync.jetstream.errors import (
    CounterError,
    CounterNotEnabledError,
    CounterNotFoundError,
    MessageNotFoundError,
    StatusError,
)

if TYPE_CHECKING:
    from nats_sync.jetstream._streams.context_protocol import JsContext
    from nats_sync.jetstream._streams.stream import Stream

__all__ = ["INCREMENT_HEADER", "SOURCES_HEADER", "Counter", "counter_value"]

#: The header carrying an increment (ADR-49).
INCREMENT_HEADER = "Nats-Incr"
#: The header a sourcing stream keeps each source's last value in (ADR-49 rev 6):
#: ``{"<source>": {"<subject>": "<decimal>"}}``.
SOURCES_HEADER = "Nats-Counter-Sources"


def _one(value: object) -> str | None:
    """A header's value (the first, where it was repeated)."""
    if isinstance(value, list):
        return str(value[0]) if value else None
    return None if value is None else str(value)


def _sources(text: str | None, subject: str) -> dict[str, dict[str, int]]:
    if not text:
        return {}
    try:
        decoded = json.loads(text)
        return {
            str(source): {str(name): int(value) for name, value in values.items()}
            for source, values in decoded.items()
        }
    except (ValueError, TypeError, AttributeError):
        raise CounterError(
            f"the {SOURCES_HEADER} header of counter {subject!r} is malformed: {text[:80]!r}"
        ) from None


def _increment(text: str | None, subject: str) -> int | None:
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        raise CounterError(
            f"the {INCREMENT_HEADER} header of counter {subject!r} is not an integer: {text!r}"
        ) from None


def counter_value(data: bytes, subject: str) -> int:
    """The value a counter message stores (``{"val":"<decimal>"}``) as an int.

    Raises:
        CounterError: the payload is not a counter value.
    """
    try:
        decoded = json.loads(data)
        return int(decoded["val"])
    except (ValueError, TypeError, KeyError):
        raise CounterError(
            f"the message on {subject!r} is not a counter value: {data[:80]!r}"
        ) from None


def _check_subject(subject: object) -> str:
    text = check_text(subject, "subject")
    if any(token in ("*", ">") for token in text.split(".")):
        raise InvalidArgumentError(
            f"a counter subject has no wildcards, got {text!r} (use get_many for patterns)"
        )
    return text


class Counter:
    """The counters of one stream (``allow_msg_counter``); made by ``js.counter(name)``.

    Every subject of the stream is a counter; values are Python ints of any size:

    ```python
    hits = js.counter("HITS")
    hits.add("hits.page1", 5)        # -> 5
    hits.add("hits.page1", -2)       # -> 3
    hits.get("hits.page1")           # -> 3
    hits.get_many(["hits.*"])        # -> {"hits.page1": 3, ...}
    ```
    """

    def __init__(self, js: JsContext, stream: Stream) -> None:
        config = stream.cached_info.config
        if not config.allow_msg_counter:
            raise CounterNotEnabledError(
                f"stream {stream.name!r} is not a counter stream (allow_msg_counter is off)"
            )
        self._js = js
        self._stream = stream

    def __repr__(self) -> str:
        return f"<nats_sync.jetstream.Counter {self._stream.name!r}>"

    @property
    def stream_name(self) -> str:
        """The counter stream's name."""
        return self._stream.name

    def add(self, subject: str, value: int, *, timeout: float | None = None) -> int:
        """Adds ``value`` (negative subtracts; 0 reads and stores the same value) to the
        counter ``subject``; returns its new value.

        Raises:
            InvalidArgumentError: ``value`` is not an int, or ``subject`` has wildcards.
            NoStreamResponseError: no stream stores ``subject``.
            CounterNotEnabledError: the stream storing ``subject`` does not count.
            APIError: another refusal (``CounterBrokenError``, ...).
        """
        subject = _check_subject(subject)
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidArgumentError(f"a counter adds an int, got {value!r}")
        ack = self._js.publish(
            subject, b"", headers={INCREMENT_HEADER: f"{value:+d}"}, timeout=timeout
        )
        if ack.val is None:
            raise CounterError(
                f"the stream {ack.stream!r} acknowledged the increment of "
                f"{subject!r} without a value: is it a counter stream?"
            )
        try:
            return int(ack.val)
        except ValueError:
            raise CounterError(
                f"the counter value of {subject!r} in the ack is not an integer: {ack.val!r}"
            ) from None

    def get(self, subject: str, *, timeout: float | None = None) -> int:
        """The value of the counter ``subject`` (read from the stream's leader, so every
        ``add`` that returned is counted).

        Raises:
            CounterNotFoundError: nothing was ever added to ``subject`` (or it was purged).
            InvalidArgumentError: ``subject`` has wildcards.
        """
        subject = _check_subject(subject)
        try:
            stored = self._stream.get_last_msg(subject, timeout=timeout)
        except MessageNotFoundError:
            raise CounterNotFoundError(
                f"no counter {subject!r} in stream {self._stream.name!r}"
            ) from None
        return counter_value(stored.data, subject)

    def get_entry(self, subject: str, *, timeout: float | None = None) -> CounterEntry:
        """The counter ``subject``'s last stored state: its value, where a sourcing
        stream got it from, and the increment that made it (ADR-49, as orbit.go's
        ``counters.Get``); read from the stream's leader as `get`.

        Raises:
            CounterNotFoundError: nothing was ever added to ``subject`` (or it was purged).
            CounterError: the stored message is not a counter value, or its
                ``Nats-Counter-Sources`` / ``Nats-Incr`` header is malformed.
            InvalidArgumentError: ``subject`` has wildcards.
        """
        subject = _check_subject(subject)
        try:
            stored = self._stream.get_last_msg(subject, timeout=timeout)
        except MessageNotFoundError:
            raise CounterNotFoundError(
                f"no counter {subject!r} in stream {self._stream.name!r}"
            ) from None
        headers = stored.headers or {}
        return CounterEntry(
            subject=subject,
            value=counter_value(stored.data, subject),
            sources=_sources(_one(headers.get(SOURCES_HEADER)), subject),
            increment=_increment(_one(headers.get(INCREMENT_HEADER)), subject),
            seq=stored.seq,
        )

    def get_many(self, subjects: Iterable[str], *, timeout: float | None = None) -> dict[str, int]:
        """The value of every counter matching ``subjects`` (wildcards allowed), by
        subject; subjects never set are left out.

        Uses batched direct gets where the server (2.11+) and the stream
        (``allow_direct``) allow, else reads the matching subjects one by one.

        Raises:
            InvalidArgumentError: ``subjects`` is a single str, or holds something not
                a subject.
            TimeoutError: the server did not answer in time.
        """
        if isinstance(subjects, (str, bytes)):
            raise InvalidArgumentError(
                f"subjects must be an iterable of subjects, not a single {type(subjects).__name__}"
            )
        patterns = list(dict.fromkeys(check_text(s, "subject") for s in subjects))
        if not patterns:
            return {}
        wait = float(timeout or self._js.timeout)
        batched = bool(self._stream.cached_info.config.allow_direct) and (
            self._js.api_level(wait) >= 1
        )
        if batched:
            try:
                return self._values(latest_by_subject(self._js, self._stream.name, patterns, wait))
            except NoBatchedGetsError:
                batched = False
            except StatusError as err:
                if err.status != d.STATUS_TOO_MANY_RESULTS:
                    raise
        exact = self._matching(patterns, wait)
        if batched:  # exact subjects: each request matches at most its 1,024
            return self._values(latest_by_subject(self._js, self._stream.name, exact, wait))
        values: dict[str, int] = {}
        for subject in exact:
            try:
                values[subject] = self.get(subject, timeout=wait)
            except CounterNotFoundError:  # purged since the listing
                continue
        return values

    def _matching(self, patterns: list[str], timeout: float) -> list[str]:
        """The stream's subjects that match ``patterns`` (from the stream info)."""
        return matching_subjects(self._js, self._stream.name, patterns, timeout)[0]

    @staticmethod
    def _values(stored: dict[str, bytes]) -> dict[str, int]:
        return {subject: counter_value(data, subject) for subject, data in stored.items()}

"""The last message of many subjects at once (``multi_last`` batched direct gets), the
one implementation behind ``KeyValue.get_many``, counters' ``get_many`` and
``Stream.get_last_msgs_for``.

How it works: the subjects (a KV bucket's ``$KV.<bucket>.<key>``, or patterns with
wildcards) are cut into requests of at most 1,024 subjects (the server's cap on the
subjects one request may match: "413 Too Many Results") and under a quarter of the
server's ``max_payload``. Each request is ``{"multi_last": [subjects], "max_bytes": ...}``
(with ``batch``, ``up_to_seq`` or ``up_to_time`` when asked) published to
``$JS.API.DIRECT.GET.<stream>`` (nats-server 2.11+, JetStream API level >= 1) with
``<inbox>.<n>`` as its reply subject, on one subscription of ``<inbox>.*``: up to four
requests are on the wire at once, and the last token of a reply's subject tells whose it
is. The stream answers a request with the latest message of each of its subjects that
has one (``Nats-Subject`` says which), in stream order, then a ``204 EOB`` status
(``404`` when none of them has any). An EOB with messages still pending means the
request's ``batch`` or ``max_bytes`` was reached: the same request is sent again from the
sequence after the last one received, up to the same last sequence
(``Nats-UpTo-Sequence``), so every subject of a request is read from one snapshot of the
stream. Patterns that match more than 1,024 subjects in one request are answered 413:
:func:`matching_subjects` lists the stream's subjects they match (stream info), which
are then asked for as exact subjects, 1,024 to a request. For KV values, a delete or
purge marker (or a server-made marker) as a key's latest message means no value.

When the first answer says batched direct gets are not there (no responders: the stream
takes no direct gets; or a status of a server that does not know ``multi_last``),
`NoBatchedGetsError` tells the caller (KV and counters then read one by one).

Threads and state: everything runs on the calling thread and starts none. One lookup's
state (its inbox subscription, the requests awaiting their EOB by token, what was found
so far) lives in a `_Lookup` made for that call and dropped when it returns; the
subscription is removed on the way out, whatever happens. Nothing is shared between
calls, so any number of threads may look up at once, each on its own inbox.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from nats_sync import _defaults as d
from nats_sync.errors import TimeoutError
from nats_sync.jetstream._kv.watch import operation_of
from nats_sync.jetstream._streams.wire import format_time, header_int, header_value
from nats_sync.jetstream.errors import StatusError

if TYPE_CHECKING:
    from nats_sync.jetstream._streams.context_protocol import JsContext
    from nats_sync.jetstream._streams.wire import CoreClient
    from nats_sync.msg import Msg

#: The headers that make a stored message a delete or purge marker (see operation_of).
_MARKER_HEADERS = frozenset({"KV-Operation", "Nats-Marker-Reason"})
#: Statuses of a server that does not know multi_last requests (bad or empty request,
#: request timeout, required API level).
_UNSUPPORTED = frozenset({400, 408, 412})


class NoBatchedGetsError(Exception):
    """The server or the bucket takes no batched direct gets: read the keys one by one."""


def latest_values(
    js: JsContext, bucket: str, prefix: str, stream: str, keys: Sequence[str], timeout: float
) -> dict[str, bytes]:
    """The current value of each of ``keys`` (valid, distinct) that has one; ``prefix``
    is the subject prefix the bucket's keys are stored under (``$KV.<bucket>.``, or for a
    mirror the origin's).

    Raises:
        NoBatchedGetsError: the first answer says batched direct gets are not available.
        StatusError: the server answered a request with another error status.
        TimeoutError: no answer came within ``timeout`` seconds of the last one.
    """
    try:
        return latest_by_subject(js, stream, [prefix + key for key in keys], timeout, strip=prefix)
    except TimeoutError:
        raise TimeoutError(
            f"bucket {bucket!r} did not answer a lookup of {len(keys)} keys within {timeout}s"
        ) from None


def latest_by_subject(
    js: JsContext, stream: str, subjects: Sequence[str], timeout: float, *, strip: str = ""
) -> dict[str, bytes]:
    """The latest message's data of every subject of ``stream`` matching ``subjects``
    (wildcards allowed), by the subject without its ``strip`` prefix; subjects whose
    latest message is a delete or purge marker are left out. Also what counters'
    ``get_many`` reads with.

    Raises:
        NoBatchedGetsError: the first answer says batched direct gets are not available.
        StatusError: the server answered a request with another error status (413 when
            one request's patterns match more than 1,024 subjects).
        TimeoutError: no answer came within ``timeout`` seconds of the last one.
    """
    values: dict[str, bytes] = {}

    def take(reply: Msg) -> None:  # a marker is no value
        headers = reply.headers
        subject = header_value(headers, "Nats-Subject")
        if subject is None or not subject.startswith(strip):
            return
        key = subject[len(strip) :]
        # A value has neither marker header; only a marker needs operation_of's look.
        if not _MARKER_HEADERS.intersection(headers or ()) or operation_of(headers) == "PUT":
            values[key] = reply.data
        else:
            values.pop(key, None)

    read_last(js, stream, subjects, timeout, take)
    return values


def read_last(
    js: JsContext,
    stream: str,
    subjects: Sequence[str],
    timeout: float,
    take: Callable[[Msg], None],
    *,
    up_to_seq: int | None = None,
    up_to_time: datetime | None = None,
    batch: int | None = None,
) -> None:
    """Hands ``take`` the latest stored message (a direct get reply) of every subject of
    ``stream`` matching ``subjects``, each request's in stream order.

    Raises:
        NoBatchedGetsError: the first answer says batched direct gets are not available.
        StatusError: the server answered a request with another error status (413 when
            one request's patterns match more than 1,024 subjects).
        TimeoutError: no answer came within ``timeout`` seconds of the last one.
    """
    extra: dict[str, Any] = {}
    if up_to_seq is not None:
        extra["up_to_seq"] = up_to_seq
    if up_to_time is not None:
        extra["up_to_time"] = format_time(up_to_time)
    if batch is not None:
        extra["batch"] = batch
    call = js.api.subject(f"DIRECT.GET.{stream}")
    requests = chunk_subjects(subjects, js.client.max_payload)
    _Lookup(js.client, call, take, timeout, extra).run(requests)


def matching_subjects(
    js: JsContext, stream: str, patterns: Sequence[str], timeout: float
) -> tuple[list[str], int]:
    """The stream's subjects matching ``patterns`` (stream info, every page), sorted
    per pattern, and the stream's last sequence as of the first answer."""
    found: dict[str, None] = {}
    last_seq = -1
    for pattern in patterns:
        state = js.stream_info(stream, pattern, timeout=timeout).state
        if last_seq < 0:
            last_seq = state.last_seq
        found.update(dict.fromkeys(sorted(state.subjects or {})))
    return list(found), max(last_seq, 0)


def chunk_subjects(subjects: Sequence[str], max_payload: int) -> list[list[str]]:
    """``subjects`` cut into requests of at most 1,024 and under max_payload / 4 bytes."""
    limit = max(max_payload // 4, 1024)
    requests: list[list[str]] = []
    current: list[str] = []
    size = 0
    for subject in subjects:
        cost = len(subject.encode()) + 3  # its quotes and comma in the JSON list
        if current and (len(current) >= d.KV_MULTI_LAST_MAX_KEYS or size + cost > limit):
            requests.append(current)
            current, size = [], 0
        current.append(subject)
        size += cost
    if current:
        requests.append(current)
    return requests


class _Lookup:
    """One pipelined lookup: its requests in flight and the values found so far."""

    def __init__(
        self,
        client: CoreClient,
        call: str,
        take: Callable[[Msg], None],
        timeout: float,
        extra: dict[str, Any],
    ) -> None:
        self._client = client
        self._call = call
        self._take = take
        self._timeout = timeout
        self._extra = extra
        self._inbox = ""
        self._awaiting: dict[str, list[str]] = {}  # reply token -> its subjects
        self._answered = False  # a reply came: no longer a question of support

    def run(self, requests: list[list[str]]) -> None:
        """Sends ``requests`` four at a time and reads every answer."""
        client = self._client
        self._inbox = client.new_inbox()
        sub = client.subscribe(self._inbox + ".*", pending_msgs_limit=0)
        try:
            upcoming: Iterator[tuple[int, list[str]]] = enumerate(requests)
            for index, subjects in upcoming:
                self._send(str(index), subjects, {})
                if len(self._awaiting) >= d.KV_MULTI_LAST_IN_FLIGHT:
                    break
            while self._awaiting:
                for reply in sub.next_msgs(d.KV_MULTI_LAST_REPLIES_PER_TAKE, self._timeout):
                    if self._handle(reply):
                        following = next(upcoming, None)
                        if following is not None:
                            self._send(str(following[0]), following[1], {})
        finally:
            sub.unsubscribe()

    def _send(self, token: str, subjects: list[str], resume: dict[str, int]) -> None:
        body: dict[str, Any] = {
            "multi_last": subjects,
            "max_bytes": d.KV_MULTI_LAST_MAX_BYTES,
            **self._extra,
            **resume,
        }
        if "up_to_seq" in resume:
            body.pop("up_to_time", None)  # the snapshot's sequence says it exactly now
        self._client.publish(
            self._call,
            json.dumps(body, separators=(",", ":")).encode(),
            reply=f"{self._inbox}.{token}",
        )
        self._awaiting[token] = subjects

    def _handle(self, reply: Msg) -> bool:
        """One reply; True when it ended a request (a slot for the next one).

        Raises:
            NoBatchedGetsError: the first answer says there are no batched direct gets.
            StatusError: another error status.
        """
        status = reply.status
        if status is None:
            self._answered = True
            self._take(reply)
            return False
        token = reply.subject[len(self._inbox) + 1 :]
        subjects = self._awaiting.pop(token, None)
        if subjects is None:
            return False  # not a request of ours (never expected on a fresh inbox)
        if status == d.STATUS_END_OF_BATCH:
            self._answered = True
            resume = _resume(reply)
            if resume is not None:
                self._send(token, subjects, resume)
                return False
            return True
        if status == d.STATUS_NOT_FOUND:
            self._answered = True
            return True
        if not self._answered and (reply.is_no_responders or status in _UNSUPPORTED):
            raise NoBatchedGetsError
        raise StatusError(status=status, description=reply.description)


def _resume(eob: Msg) -> dict[str, int] | None:
    """What continues a request its byte limit paused; None when it is complete."""
    headers = eob.headers
    pending, last, up_to = (
        header_int(headers, name)
        for name in ("Nats-Num-Pending", "Nats-Last-Sequence", "Nats-UpTo-Sequence")
    )
    if not pending or last is None:
        return None
    resume = {"seq": last + 1}
    if up_to:
        resume["up_to_seq"] = up_to
    return resume


def last_msgs_for(
    js: JsContext,
    stream: str,
    patterns: Sequence[str],
    timeout: float,
    *,
    up_to_seq: int | None,
    up_to_time: datetime | None,
    batch: int | None,
) -> list[Msg]:
    """The latest message (a direct get reply) of every subject of ``stream`` matching
    ``patterns``, as of ``up_to_seq``/``up_to_time``, in stream order (see
    ``Stream.get_last_msgs_for``). More than one request without either bound reads
    up to the stream's last sequence as of the start, so all share one snapshot.

    Raises:
        NoBatchedGetsError: the stream or server takes no batched direct gets.
        StatusError: the server answered with another error status.
        TimeoutError: no answer came within ``timeout`` seconds of the last one.
    """
    found: dict[int, Msg] = {}

    def take(reply: Msg) -> None:
        seq = header_int(reply.headers, "Nats-Sequence")
        if seq is not None:
            found[seq] = reply  # a subject matched by two requests' patterns comes twice

    unbounded = up_to_seq is None and up_to_time is None
    if unbounded and len(chunk_subjects(patterns, js.client.max_payload)) > 1:
        up_to_seq = js.stream_info(stream, timeout=timeout).state.last_seq
        if not up_to_seq:
            return []
    try:
        read_last(
            js,
            stream,
            patterns,
            timeout,
            take,
            up_to_seq=up_to_seq,
            up_to_time=up_to_time,
            batch=batch,
        )
    except StatusError as err:
        if err.status != d.STATUS_TOO_MANY_RESULTS:
            raise
        # Patterns matching more than one request may: asked again as exact subjects.
        exact, last_seq = matching_subjects(js, stream, patterns, timeout)
        found.clear()
        if unbounded:
            if not last_seq:
                return []
            up_to_seq = last_seq
        read_last(
            js,
            stream,
            exact,
            timeout,
            take,
            up_to_seq=up_to_seq,
            up_to_time=up_to_time,
            batch=batch,
        )
    return [found[seq] for seq in sorted(found)]

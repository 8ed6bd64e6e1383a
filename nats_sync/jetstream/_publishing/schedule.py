"""Message schedules (ADR-51, nats-server 2.12+; ``time_zone`` 2.14+):
``js.publish_scheduled``.

How it works: a schedule is one message stored on a subject of its own in a stream made
with ``allow_msg_schedules``; its ``Nats-Schedule`` header says when, and the server
itself publishes the message's body (and its other headers) to ``Nats-Schedule-Target``,
a subject of the same stream: once for ``@at <RFC 3339>``, on every tick for ``@every``,
the predefined ``@hourly``... and a 6-field cron. The last message on the schedule's
subject is the schedule: publishing there again replaces it, and removing it stops it
(``stream.purge(subject=...)``, or ``stream.delete_msg(seq)``). The server applies
``Nats-Rollup: sub`` to it.

This module checks the schedule before anything is sent, with the server's own rules
(``scheduler.go``/``cron.go``): an aware ``datetime``, a well-formed ``@at``, an
``@every`` duration in Go's syntax of at least one second, six cron fields within their
ranges, a target and a source without wildcards and not the schedule's own subject, a
``time_zone`` only with a cron schedule. Then it builds the headers and publishes with
``JsContext.publish``, on the caller's thread. No thread, no state.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from nats_sync._core.validate import check_text
from nats_sync.errors import InvalidArgumentError
from nats_sync.jetstream._streams.wire import Headers, format_time, ttl_header
from nats_sync.jetstream.api import PubAck

if TYPE_CHECKING:
    from nats_sync.jetstream._streams.context_protocol import JsContext

__all__ = ["check_schedule", "publish_scheduled", "schedule_headers"]

SCHEDULE = "Nats-Schedule"
SCHEDULE_TARGET = "Nats-Schedule-Target"
SCHEDULE_SOURCE = "Nats-Schedule-Source"
SCHEDULE_TTL = "Nats-Schedule-TTL"
SCHEDULE_TIME_ZONE = "Nats-Schedule-Time-Zone"

#: The predefined schedules and the cron they stand for (ADR-51).
PREDEFINED = {
    "@yearly": "0 0 0 1 1 *",
    "@annually": "0 0 0 1 1 *",
    "@monthly": "0 0 0 1 * *",
    "@weekly": "0 0 0 * * 0",
    "@daily": "0 0 0 * * *",
    "@midnight": "0 0 0 * * *",
    "@hourly": "0 0 * * * *",
}

_MONTHS = {
    name: n
    for n, name in enumerate(
        ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"),
        start=1,
    )
}
_DAYS = {name: n for n, name in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))}
#: The six cron fields: name, lowest, highest, names allowed.
_FIELDS: tuple[tuple[str, int, int, Mapping[str, int]], ...] = (
    ("seconds", 0, 59, {}),
    ("minutes", 0, 59, {}),
    ("hours", 0, 23, {}),
    ("day of month", 1, 31, {}),
    ("month", 1, 12, _MONTHS),
    ("day of week", 0, 6, _DAYS),
)
#: Go's ``time.RFC3339`` as ``time.Parse`` reads it (fractional seconds allowed).
_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})", re.ASCII)
#: Go's ``time.ParseDuration``: an optional sign, then number-unit pairs.
_DURATION = re.compile(r"[-+]?(?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:ns|us|µs|μs|ms|s|m|h))+")
_DURATION_PART = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h)")
_UNIT_SECONDS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}


def check_schedule(schedule: datetime | str) -> tuple[str, bool]:
    """The ``Nats-Schedule`` value for ``schedule``, and whether it is a cron schedule.

    Args:
        schedule: an aware ``datetime`` (sent as ``@at`` in UTC), ``"@at <RFC 3339>"``,
            ``"@every <Go duration>"`` (at least ``1s``), a predefined schedule
            (``@yearly``, ``@annually``, ``@monthly``, ``@weekly``, ``@daily``,
            ``@midnight``, ``@hourly``) or a 6-field cron (seconds, minutes, hours, day
            of month, month, day of week).

    Returns:
        The header value and True for a cron schedule (predefined or 6 fields).

    Raises:
        InvalidArgumentError: a naive ``datetime``, or a string the server would refuse
            (the message says which part).
    """
    if isinstance(schedule, datetime):
        if schedule.tzinfo is None or schedule.utcoffset() is None:
            raise InvalidArgumentError(
                f"schedule must be a timezone-aware datetime, got a naive one: {schedule!r}"
            )
        return "@at " + format_time(schedule), False
    if not isinstance(schedule, str):
        raise InvalidArgumentError(
            f"schedule must be a datetime or a str, got {type(schedule).__name__}"
        )
    if schedule.startswith("@at "):
        _check_at(schedule[4:])
        return schedule, False
    if schedule.startswith("@every "):
        _check_every(schedule[7:])
        return schedule, False
    if schedule in PREDEFINED:
        return schedule, True
    if schedule.startswith("@"):
        raise InvalidArgumentError(
            f"schedule {schedule!r} is none of @at, @every, {', '.join(PREDEFINED)}"
        )
    _check_cron(schedule)
    return schedule, True


def _check_at(text: str) -> None:
    if _RFC3339.fullmatch(text):
        try:
            datetime.fromisoformat(text.replace("Z", "+00:00"))
            return
        except ValueError:
            pass
    raise InvalidArgumentError(
        f"@at needs an RFC 3339 time with its offset (2030-01-02T15:04:05Z), got {text!r}"
    )


def _check_every(text: str) -> None:
    if not _DURATION.fullmatch(text):
        raise InvalidArgumentError(
            f"@every needs a Go duration such as 30s, 5m or 1h30m, got {text!r}"
        )
    seconds = sum(
        float(number) * _UNIT_SECONDS[unit] for number, unit in _DURATION_PART.findall(text)
    )
    if text.startswith("-") or seconds < 1:
        raise InvalidArgumentError(f"@every must be at least 1s, got {text!r}")


def _check_cron(text: str) -> None:
    fields = text.split()
    if len(fields) != 6:
        raise InvalidArgumentError(
            f"a cron schedule has 6 fields (seconds minutes hours day-of-month month "
            f"day-of-week), got {len(fields)}: {text!r}"
        )
    for field, (name, low, high, names) in zip(fields, _FIELDS, strict=True):
        for expr in field.split(","):
            _check_range(expr, name, low, high, names, text)


def _check_range(
    expr: str, name: str, low: int, high: int, names: Mapping[str, int], text: str
) -> None:
    """One ``*``, ``N``, ``N-M``, each with an optional ``/step`` (cron.go's getRange)."""

    def bad(why: str) -> InvalidArgumentError:
        return InvalidArgumentError(f"cron {name} field {expr!r} {why}: {text!r}")

    def number(token: str) -> int:
        if token.lower() in names:
            return names[token.lower()]
        if not token.isascii() or not token.isdigit():
            raise bad(f"has {token!r}, not a number" + (" or a name" if names else ""))
        return int(token)

    range_part, slash, step_part = expr.partition("/")
    if "/" in step_part:
        raise bad("has more than one '/'")
    if range_part in ("*", "?"):
        start, end = low, high
    else:
        first, dash, last = range_part.partition("-")
        start = number(first)
        end = number(last) if dash else start
        if slash and not dash:
            end = high  # "N/step" is "N-high/step"
    if slash and number(step_part) == 0:
        raise bad("has a step of 0")
    if start < low or end > high:
        raise bad(f"is outside {low}-{high}")
    if start > end:
        raise bad("starts after it ends")


def _check_subject(value: object, what: str) -> str:
    text = check_text(value, what)
    if any(c.isspace() for c in text) or any(t in ("", "*", ">") for t in text.split(".")):
        raise InvalidArgumentError(
            f"{what} must be a subject without wildcards or empty tokens, got {text!r}"
        )
    return text


def schedule_headers(
    subject: str,
    *,
    schedule: datetime | str,
    target: str,
    ttl: float | str | None = None,
    source: str | None = None,
    time_zone: str | None = None,
    headers: Headers = None,
) -> Mapping[str, str | Sequence[str]]:
    """The user's headers with the ``Nats-Schedule*`` ones (those win), all checked.

    Args:
        subject: the schedule's own subject (one schedule per subject).
        schedule: as :func:`check_schedule` takes it.
        target: the subject the server publishes to (same stream; not ``subject``).
        ttl: the produced messages' TTL (``Nats-Schedule-TTL``; seconds >= 1 or
            ``"never"``, as ``js.publish``'s ``ttl``).
        source: publish the last message on this subject instead of the body
            (``Nats-Schedule-Source``; the body is the fallback when it has none).
        time_zone: an IANA zone name for a cron schedule (``Nats-Schedule-Time-Zone``).
        headers: the user's headers, carried to the produced messages.

    Raises:
        InvalidArgumentError: any of them is one the server would refuse.
    """
    value, cron = check_schedule(schedule)
    subject = _check_subject(subject, "subject")
    extra: dict[str, str] = {SCHEDULE: value, SCHEDULE_TARGET: _check_subject(target, "target")}
    if target == subject:
        raise InvalidArgumentError(f"target must differ from the schedule's subject {subject!r}")
    if source is not None:
        extra[SCHEDULE_SOURCE] = _check_subject(source, "source")
        if source in (subject, target):
            raise InvalidArgumentError(
                f"source {source!r} must differ from the subject and the target"
            )
    if ttl is not None:
        extra[SCHEDULE_TTL] = ttl_header(ttl)
    if time_zone is not None:
        if not cron:
            raise InvalidArgumentError(
                f"time_zone goes only with a cron schedule, not {value!r} (@at and "
                f"@every are in UTC)"
            )
        zone = check_text(time_zone, "time_zone")
        if any(c.isspace() for c in zone) or zone[0] in "+-" or zone[0].isdigit():
            raise InvalidArgumentError(
                f"time_zone must be a zone name such as Europe/Amsterdam, got {zone!r}"
            )
        extra[SCHEDULE_TIME_ZONE] = zone
    if headers is None:
        return extra
    if not isinstance(headers, Mapping):
        raise InvalidArgumentError(
            f"headers must be a mapping of name -> value, got {type(headers).__name__}"
        )
    return {**headers, **extra}


def publish_scheduled(
    js: JsContext,
    subject: str,
    data: bytes = b"",
    *,
    schedule: datetime | str,
    target: str,
    ttl: float | str | None = None,
    source: str | None = None,
    time_zone: str | None = None,
    headers: Headers = None,
    timeout: float | None = None,
) -> PubAck:
    """``JetStream.publish_scheduled``: checks, builds the headers, publishes."""
    merged = schedule_headers(
        subject,
        schedule=schedule,
        target=target,
        ttl=ttl,
        source=source,
        time_zone=time_zone,
        headers=headers,
    )
    return js.publish(subject, data, headers=merged, timeout=timeout)

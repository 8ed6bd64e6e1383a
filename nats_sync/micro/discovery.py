"""Finding services: :func:`ping`, :func:`info` and :func:`stats` gather the answers of
every instance to ``$SRV.PING|INFO|STATS[.<name>[.<id>]]``.

How it works: one call subscribes to a fresh inbox (a pull subscription), publishes
the question with that inbox as its reply subject and reads answers on the calling
thread until ``timeout`` has passed, or until ``quiet`` seconds pass without a new
one once the first arrived (or at once on the server's "no responders" status). The
subscription is ended before returning. No threads, no shared state.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, TypeVar

from nats_sync._core.validate import check_timeout
from nats_sync.errors import InvalidArgumentError, TimeoutError
from nats_sync.micro import _defaults as md
from nats_sync.micro._api import (
    ServiceInfo,
    ServicePing,
    ServiceStats,
    check_name,
    control_subject,
)

if TYPE_CHECKING:
    from nats_sync.client import Client


_Record = TypeVar("_Record", ServicePing, ServiceInfo, ServiceStats)


def ping(
    nc: Client,
    name: str | None = None,
    id: str | None = None,
    *,
    timeout: float = md.MICRO_DISCOVERY_TIMEOUT,
    quiet: float = md.MICRO_DISCOVERY_QUIET,
) -> list[ServicePing]:
    """Every instance that answers ``$SRV.PING[.<name>[.<id>]]``, sorted by name and id.

    Args:
        nc: a connected client.
        name: only services of this name.
        id: only this instance (needs ``name``).
        timeout: seconds to wait for answers in all.
        quiet: seconds without a new answer that end the wait early.

    Raises:
        InvalidArgumentError: a bad name, id or time.
    """
    return _gather(nc, "PING", name, id, timeout, quiet, ServicePing)


def info(
    nc: Client,
    name: str | None = None,
    id: str | None = None,
    *,
    timeout: float = md.MICRO_DISCOVERY_TIMEOUT,
    quiet: float = md.MICRO_DISCOVERY_QUIET,
) -> list[ServiceInfo]:
    """Every instance's answer to ``$SRV.INFO[.<name>[.<id>]]``; see :func:`ping`."""
    return _gather(nc, "INFO", name, id, timeout, quiet, ServiceInfo)


def stats(
    nc: Client,
    name: str | None = None,
    id: str | None = None,
    *,
    timeout: float = md.MICRO_DISCOVERY_TIMEOUT,
    quiet: float = md.MICRO_DISCOVERY_QUIET,
) -> list[ServiceStats]:
    """Every instance's answer to ``$SRV.STATS[.<name>[.<id>]]``; see :func:`ping`."""
    return _gather(nc, "STATS", name, id, timeout, quiet, ServiceStats)


def _gather(
    nc: Client,
    verb: str,
    name: str | None,
    id: str | None,
    timeout: float,
    quiet: float,
    kind: type[_Record],
) -> list[_Record]:
    if name is not None:
        check_name(name, "service name")
    if id is not None:
        if name is None:
            raise InvalidArgumentError("an id needs the service name too")
        check_name(id, "service id")
    check_timeout(timeout)
    check_timeout(quiet, "quiet")
    inbox = nc.new_inbox()
    sub = nc.subscribe(inbox)
    found: list[_Record] = []
    try:
        nc.publish(control_subject(verb, name, id), b"", reply=inbox)
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if found:
                left = min(left, quiet)
            if left <= 0:
                break
            try:
                msg = sub.next_msg(timeout=left)
            except TimeoutError:
                break
            if msg.is_no_responders:
                break
            try:
                found.append(kind.from_dict(json.loads(msg.data)))
            except (ValueError, TypeError, AttributeError):
                continue  # not a service's answer: someone else's reply, ignored
    finally:
        sub.unsubscribe()
    return sorted(found, key=lambda record: (record.name, record.id))

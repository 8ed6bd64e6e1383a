"""Argument checks shared by every public call, so the same mistake gets the same error.

How it works: each check raises :class:`~nats_sync.errors.InvalidArgumentError` (an
``Error`` and a ``ValueError``) naming the argument and the value it got, or returns.
"""

from __future__ import annotations

import math

from nats_sync.errors import InvalidArgumentError


def check_timeout(value: object, name: str = "timeout", *, zero_ok: bool = False) -> None:
    """Checks a number of seconds: finite and > 0 (>= 0 with ``zero_ok``).

    ``bool`` is refused although it is an ``int`` (``timeout=True`` is a mistake), and so
    are NaN and infinity, which the waits below would turn into OverflowError or hangs.

    Args:
        value: what the caller passed.
        name: the argument's name, for the message.
        zero_ok: whether 0 is allowed (a delay, not a deadline).

    Raises:
        InvalidArgumentError: ``value`` is not such a number.
    """
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value < 0
        or (value == 0 and not zero_ok)
    ):
        raise InvalidArgumentError(
            f"{name} must be a finite number of seconds {'>= 0' if zero_ok else '> 0'}, "
            f"got {value!r}"
        )


def check_int(value: object, name: str, minimum: int) -> None:
    """Checks a count: an ``int`` (not a ``bool``) >= ``minimum``.

    Args:
        value: what the caller passed.
        name: the argument's name, for the message.
        minimum: the smallest value allowed.

    Raises:
        InvalidArgumentError: ``value`` is not such an int.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidArgumentError(f"{name} must be an int >= {minimum}, got {value!r}")


def check_text(value: object, name: str) -> str:
    """Returns ``value`` if it is a non-empty ``str``.

    Raises:
        InvalidArgumentError: it is not.
    """
    if not isinstance(value, str) or not value:
        raise InvalidArgumentError(f"{name} must be a non-empty str, got {value!r}")
    return value


def int_or_zero(value: object) -> int:
    """``value`` where it is an int (not a bool), else 0: for numbers in the server's
    JSON, where a missing or odd field counts as none."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0

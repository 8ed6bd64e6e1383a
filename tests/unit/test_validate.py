"""The shared argument checks: what they accept, what they refuse, and with which error."""

from __future__ import annotations

import math

import pytest

import nats_sync
from nats_sync._core.validate import check_int, check_timeout


@pytest.mark.parametrize("value", [0.001, 1, 2.5, 10**6])
def test_timeout_accepts_positive_numbers(value: float) -> None:
    check_timeout(value)


@pytest.mark.parametrize(
    "value", [0, 0.0, -1, -0.5, math.nan, math.inf, -math.inf, True, False, None, "1", b"1"]
)
def test_timeout_refuses_anything_else(value: object) -> None:
    expected = r"^nats: invalid argument: timeout must be"
    with pytest.raises(nats_sync.InvalidArgumentError, match=expected) as caught:
        check_timeout(value)
    # Both old ways of catching it keep working.
    assert isinstance(caught.value, ValueError)
    assert isinstance(caught.value, nats_sync.Error)
    assert repr(value) in str(caught.value)


def test_timeout_names_the_argument() -> None:
    with pytest.raises(nats_sync.InvalidArgumentError, match="connect_timeout must be"):
        check_timeout(-1, "connect_timeout")


def test_timeout_zero_ok_allows_zero_only() -> None:
    check_timeout(0, "reconnect_time_wait", zero_ok=True)
    with pytest.raises(nats_sync.InvalidArgumentError, match=">= 0"):
        check_timeout(-0.1, "reconnect_time_wait", zero_ok=True)


@pytest.mark.parametrize(("value", "minimum"), [(0, 0), (5, 1), (-1, -1)])
def test_int_accepts_ints_at_or_above_the_minimum(value: int, minimum: int) -> None:
    check_int(value, "limit", minimum)


@pytest.mark.parametrize("value", [-1, 1.0, True, None, "3"])
def test_int_refuses_anything_else(value: object) -> None:
    expected = r"^nats: invalid argument: limit must be an int >= 0"
    with pytest.raises(nats_sync.InvalidArgumentError, match=expected):
        check_int(value, "limit", 0)

"""Unique ids for inboxes, NUID style: a random prefix and a sequence, in base62.

How it works: 12 random characters from the OS generator, then a 10-character
sequence that advances by a random step; when the sequence runs out the prefix is
drawn again. ``next()`` holds a lock for a few microseconds, so one instance may be
shared by every thread of a client. A forked child must make its own instance.
"""

from __future__ import annotations

import random
import threading

_DIGITS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_BASE = len(_DIGITS)
PREFIX_LENGTH = 12
SEQUENCE_LENGTH = 10
_MAX_SEQUENCE = _BASE**SEQUENCE_LENGTH
_MIN_INCREMENT = 33
_MAX_INCREMENT = 333


class Nuid:
    """A fast, thread-safe generator of 22-character unique ids."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._system = random.SystemRandom()
        self._fast = random.Random(self._system.getrandbits(64))
        self._prefix = ""
        self._sequence = 0
        self._increment = 0
        self._reset()

    def _reset(self) -> None:
        self._prefix = "".join(self._system.choice(_DIGITS) for _ in range(PREFIX_LENGTH))
        self._sequence = self._fast.randrange(_MAX_SEQUENCE)
        self._increment = self._fast.randrange(_MIN_INCREMENT, _MAX_INCREMENT)

    def next(self) -> str:
        """Returns the next unique id."""
        with self._lock:
            self._sequence += self._increment
            if self._sequence >= _MAX_SEQUENCE:
                self._reset()
            value = self._sequence
            prefix = self._prefix
        digits = []
        for _ in range(SEQUENCE_LENGTH):
            value, digit = divmod(value, _BASE)
            digits.append(_DIGITS[digit])
        return prefix + "".join(reversed(digits))

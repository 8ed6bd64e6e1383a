"""How the client tells a gevent-patched process (its threads are greenlets) from a
plain one: only gevent's own ``is_module_patched`` says so, and nothing imports gevent.
The patched behaviour itself runs in the gevent suite (``make test-gevent``)."""

from __future__ import annotations

import sys
import types

import pytest

from nats_sync._core.transport.greenlets import threads_are_greenlets


def _monkey(answer: object) -> types.ModuleType:
    module = types.ModuleType("gevent.monkey")

    def is_module_patched(name: str) -> object:
        assert name == "threading"
        if isinstance(answer, BaseException):
            raise answer
        return answer

    module.is_module_patched = is_module_patched  # type: ignore[attr-defined]
    return module


def test_a_process_that_never_imported_gevent_is_not_patched(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delitem(sys.modules, "gevent.monkey", raising=False)
    assert threads_are_greenlets() is False
    assert "gevent.monkey" not in sys.modules  # it did not import it to ask


@pytest.mark.parametrize(
    ("answer", "expected"), [(True, True), (False, False), (RuntimeError("odd"), False)]
)
def test_gevents_own_word_decides(
    monkeypatch: pytest.MonkeyPatch, answer: object, expected: bool
) -> None:
    monkeypatch.setitem(sys.modules, "gevent.monkey", _monkey(answer))
    assert threads_are_greenlets() is expected

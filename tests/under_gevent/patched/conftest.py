"""The tests here run only in a process that gevent monkey-patched before anything else
(``tests/under_gevent/test_patched_runs.py`` starts one): anywhere else they would test
plain threads, so collecting them fails."""

from __future__ import annotations

import sys

import pytest

_monkey = sys.modules.get("gevent.monkey")
if _monkey is None or not _monkey.is_module_patched("threading"):
    raise pytest.UsageError(
        "tests/under_gevent/patched runs only in a gevent-patched process: "
        "make test-gevent (or `pytest tests/under_gevent`)"
    )

"""Tests of the client under gevent (``make test-gevent``).

The plain pytest process collects this folder's ``test_*.py`` files, which start
gevent-patched children (``gevent_runs``); ``patched/`` holds tests that only such a child
runs (its conftest refuses an unpatched process), so it is left out here unless gevent
patched this process. ``tests/conftest.py`` collects this folder only when asked for by
path, so ``make test`` (whose venv has no gevent) does not.
"""

from __future__ import annotations

import sys

_monkey = sys.modules.get("gevent.monkey")
collect_ignore = (
    [] if _monkey is not None and _monkey.is_module_patched("threading") else ["patched"]
)

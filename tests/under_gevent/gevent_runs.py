"""Running pytest, or a script, in a child process that gevent monkey-patched first.

The tests of this folder run in the plain pytest process and start such children: a
process is patched once, before anything imports ``socket`` or ``threading``, so a test
cannot patch the process it runs in. ``run_patched_pytest`` runs
``python -c "from gevent import monkey; monkey.patch_all(); import pytest; ..."`` over
the files given; ``check_patched_run`` fails unless the child's header says gevent
patched it (``tests/conftest.py`` writes that line) and its summary counts passed tests
and no failure. A missing gevent fails the child, and so the test: nothing skips.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
#: The header line of a child pytest that gevent patched (``tests/conftest.py``).
PATCHED_HEADER = "gevent: monkey-patched socket, ssl, select, threading, time, queue"
#: The code a patched child runs: patch first, then pytest over the arguments.
PATCH_THEN_PYTEST = (
    "from gevent import monkey; monkey.patch_all(); "
    "import pytest; raise SystemExit(pytest.main({args!r}))"
)


def child_env() -> dict[str, str]:
    """This process's environment with the repository first on ``PYTHONPATH``."""
    path = os.environ.get("PYTHONPATH", "")
    return dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{path}" if path else str(ROOT))


def run_patched_pytest(args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    """pytest over ``args`` in a gevent-patched child, from the repository's root; killed
    (and the test failed with its output so far) after ``timeout`` seconds."""
    code = PATCH_THEN_PYTEST.format(args=["-p", "no:cacheprovider", "-rfEX", *args])
    try:
        return subprocess.run(
            [sys.executable, "-c", code],
            cwd=ROOT,
            env=child_env(),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as err:
        out = err.stdout.decode() if isinstance(err.stdout, bytes) else err.stdout or ""
        raise AssertionError(f"the patched pytest ran past {timeout}s:\n{out[-6000:]}") from err


def check_patched_run(done: subprocess.CompletedProcess[str]) -> dict[str, int]:
    """Fails unless the child was patched and passed; returns its summary's counts."""
    out = done.stdout + done.stderr
    assert PATCHED_HEADER in out, f"the child was not patched by gevent:\n{out[-6000:]}"
    summary = out.strip().splitlines()[-1]
    counts = {word: int(n) for n, word in re.findall(r"(\d+) (\w+)", summary)}
    assert done.returncode == 0, f"rc {done.returncode}:\n{out[-12000:]}"
    assert counts.get("passed", 0) > 0, summary
    assert not counts.get("failed") and not counts.get("error"), summary
    return counts

"""Fixtures and hooks shared by every test folder.

Fixtures:
    default_port: the docs' port 4222 on 127.0.0.1, held for the test alone. Every other
        test runs its servers on free ports (the kernel's ephemeral range, far above
        4222), so only the tests asking for this fixture bind 4222, one at a time even
        across processes (a lock file), and a test finding 4222 taken by something
        else on the machine is skipped, saying so.

Tests under gevent (``tests/under_gevent/``): collected only when a path given to pytest
is that folder or inside it (``make test-gevent`` does), never by ``make test``, whose
venv has no gevent; a run in a process that gevent monkey-patched names that in its
header (``gevent: monkey-patched ...``), which ``tests/under_gevent`` checks.

Free-threaded runs (``make test-ft`` sets ``NATS_SYNC_TEST_FREE_THREADED=1``): the run
fails at once, and again at its end, unless the GIL is off (``sys._is_gil_enabled()``);
a test file importing one of ``FREE_THREADED_OPTIONAL`` that does not import on that
interpreter (no free-threaded wheel) is left out, named with the reason in the header
and the summary. Without that variable a missing module fails as it always did.
"""

from __future__ import annotations

import fcntl
import importlib
import os
import re
import socket
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from nats_sync._defaults import DEFAULT_PORT

#: How long a test waits for another one (in another pytest process) to free 4222.
DEFAULT_PORT_LOCK_WAIT = 60.0

#: Set by ``make test-ft``: this run must have the GIL off (see the module docstring).
FREE_THREADED_RUN = os.environ.get("NATS_SYNC_TEST_FREE_THREADED") == "1"
#: Test dependencies with native code that may have no free-threaded wheel.
FREE_THREADED_OPTIONAL = ("hypothesis", "nkeys", "trustme")
TESTS_DIR = Path(__file__).parent
#: Run only when asked for by path (make test-gevent): they need gevent (and Locust).
GEVENT_TESTS = TESTS_DIR / "under_gevent"
#: What a gevent-patched process must have patched for its tests to mean anything.
GEVENT_PATCHED = ("socket", "ssl", "select", "threading", "time", "queue")


def gil_is_enabled() -> bool:
    """Whether this interpreter runs with the GIL (always, before 3.13)."""
    is_enabled = getattr(sys, "_is_gil_enabled", None)
    return True if is_enabled is None else bool(is_enabled())


def unimportable(modules: tuple[str, ...]) -> dict[str, str]:
    """Those of ``modules`` that do not import here, each with its ImportError."""
    missing: dict[str, str] = {}
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as err:
            missing[module] = f"{type(err).__name__}: {err}"
    return missing


def files_importing(modules: dict[str, str]) -> dict[Path, str]:
    """Test files importing one of ``modules`` at their top level -> the module."""
    pattern = re.compile(
        r"^(?:import|from) (" + "|".join(map(re.escape, modules)) + r")\b", re.MULTILINE
    )
    found: dict[Path, str] = {}
    for path in sorted(TESTS_DIR.rglob("*.py")):
        match = pattern.search(path.read_text(encoding="utf-8"))
        if match:
            found[path] = match.group(1)
    return found


_left_out: dict[Path, str] = {}
_missing: dict[str, str] = {}
_ignored: list[Path] = []


#: Whether gevent had patched this process when the run began.
_patched_at_start: list[bool] = []


def pytest_configure(config: pytest.Config) -> None:
    """Notes whether gevent patched the process; a free-threaded run: checks the GIL is
    off and finds the test files to leave out."""
    _patched_at_start.append(bool(gevent_patched()))
    if not FREE_THREADED_RUN:
        return
    if gil_is_enabled():
        raise pytest.UsageError(
            "NATS_SYNC_TEST_FREE_THREADED=1 (make test-ft) but the GIL is enabled: "
            f"{sys.executable} ({sys.version.split()[0]}) must be a free-threaded build run "
            "with PYTHON_GIL=0"
        )
    _missing.update(unimportable(FREE_THREADED_OPTIONAL))
    if _missing:
        _left_out.update(files_importing(_missing))


def _asked_for(config: pytest.Config) -> list[Path]:
    """The paths given to pytest, resolved."""
    return [Path(arg.split("::")[0]).resolve() for arg in config.args]


def gevent_patched() -> list[str]:
    """The modules of ``GEVENT_PATCHED`` that gevent monkey-patched in this process
    (none without gevent, which is never imported here)."""
    monkey = sys.modules.get("gevent.monkey")
    if monkey is None:
        return []
    return [name for name in GEVENT_PATCHED if monkey.is_module_patched(name)]


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Leaves out ``tests/under_gevent`` unless asked for by path, and the test files
    whose module has no free-threaded wheel (named in the header and summary)."""
    if collection_path == GEVENT_TESTS:
        asked = _asked_for(config)
        return not any(path == GEVENT_TESTS or GEVENT_TESTS in path.parents for path in asked)
    if collection_path not in _left_out:
        return None
    # Named in the summary only when asked for (pytest also looks at a file's siblings).
    asked = _asked_for(config)
    if any(path == collection_path or path in collection_path.parents for path in asked):
        _ignored.append(collection_path)
    return True


def pytest_report_header(config: pytest.Config) -> list[str]:
    """In a gevent-patched process, says what is patched; in a free-threaded run, says
    so, and what is left out and why."""
    patched = gevent_patched()
    gevent_lines = [f"gevent: monkey-patched {', '.join(patched)}"] if patched else []
    if not FREE_THREADED_RUN:
        return gevent_lines
    lines = [*gevent_lines, f"free-threaded run: GIL {'on' if gil_is_enabled() else 'off'}"]
    lines += [f"  not importable: {module} ({reason})" for module, reason in _missing.items()]
    lines += [
        f"  left out wherever collected: {path.relative_to(TESTS_DIR.parent)} (needs {module})"
        for path, module in _left_out.items()
    ]
    return lines


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A run fails if gevent patched its process part-way (an import of Locust, which
    patches on import: the rest of the run tested greenlets, not threads), and a
    free-threaded run if something turned the GIL back on meanwhile."""
    if gevent_patched() and not _patched_at_start[0]:
        session.config.get_terminal_writer().line(
            "FAILED: gevent monkey-patched this process during the run (an import of "
            "locust or nats_sync.locust without LOCUST_SKIP_MONKEY_PATCH=1?)",
            red=True,
        )
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    if FREE_THREADED_RUN and gil_is_enabled():
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """In a free-threaded run, repeats what was left out, and whether the GIL stayed off."""
    if not FREE_THREADED_RUN:
        return
    write = terminalreporter.write_line
    for path in _ignored:
        module = _left_out[path]
        write(
            f"free-threaded run: left out {path.relative_to(TESTS_DIR.parent)}: needs "
            f"{module}, which does not import here ({_missing[module]})"
        )
    if gil_is_enabled():
        write(
            "free-threaded run: FAILED: the GIL was enabled during the run (an extension "
            "module not marked free-threading safe was imported without PYTHON_GIL=0?)",
            red=True,
        )
    else:
        write("free-threaded run: the GIL stayed off for the whole run", green=True)


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    """Whether a server could listen on ``host:port`` now (as nats-server binds it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as Go's listener
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


@pytest.fixture
def default_port() -> Iterator[int]:
    """Port 4222, free and held for this test (skipped, with the reason, when taken)."""
    lock_path = Path(tempfile.gettempdir()) / f"nats-sync-tests-port-{DEFAULT_PORT}.lock"
    with open(lock_path, "w") as lock:
        deadline = time.monotonic() + DEFAULT_PORT_LOCK_WAIT
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    pytest.fail(
                        f"another test held port {DEFAULT_PORT} for more than "
                        f"{DEFAULT_PORT_LOCK_WAIT:.0f}s ({lock_path})"
                    )
                time.sleep(0.1)
        try:
            if not port_is_free(DEFAULT_PORT):
                pytest.skip(
                    f"port {DEFAULT_PORT} on 127.0.0.1 is taken on this machine "
                    "(a nats-server running?), and this test is about that port"
                )
            yield DEFAULT_PORT
            released = time.monotonic() + 5.0  # a server stopped at the test's end
            while not port_is_free(DEFAULT_PORT) and time.monotonic() < released:
                time.sleep(0.05)
            assert port_is_free(DEFAULT_PORT), f"the test left port {DEFAULT_PORT} in use"
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)

"""Checks of the release files, run by `make dist` (and the sdist one by the test suite).

``python tools/dist_check.py sdist DIST.tar.gz``: the sdist holds LICENSE, README.md,
CHANGELOG.md, nats_sync/py.typed and the two ``pyspark_nats_sync_*`` modules, and no caches
(``__pycache__``, ``*.pyc``, ``.pytest_cache``, ``.hypothesis``, ``.mypy_cache``,
``.ruff_cache``).

``python tools/dist_check.py wheel DIST.whl``: the wheel holds nats_sync/py.typed and, at
its top level, the two ``pyspark_nats_sync_*`` modules Spark's lookup of installed Python
data sources imports (it lists top-level modules only), and no caches.

``python tools/dist_check.py quickstart README.md``: run with the Python of a fresh venv
where the wheel is installed with the ``server`` extra; follows the README's quick start:
runs its ``nats-sync server`` line with the venv's ``nats-sync`` script (the wheel's
entry point), then the first Python block under "## Quick start" as written, and stops
the server with Ctrl-C (SIGINT), which must end it with 0. Where port 4222 is taken (a
developer's own server), the server gets ``--port 0`` and the block the URL it prints.
Fails if the installed nats_sync is not the wheel's (imported from this checkout instead).
"""

from __future__ import annotations

import re
import shlex
import signal
import socket
import subprocess
import sys
import sysconfig
import tarfile
import threading
import zipfile
from pathlib import Path

#: The top-level modules through which Spark finds format("jetstream") and format("nats").
SPARK_LOOKUP_MODULES = ("pyspark_nats_sync_jetstream.py", "pyspark_nats_sync_nats.py")
REQUIRED = ("LICENSE", "README.md", "CHANGELOG.md", "nats_sync/py.typed", *SPARK_LOOKUP_MODULES)
IN_WHEEL = ("nats_sync/py.typed", *SPARK_LOOKUP_MODULES)
FORBIDDEN = ("__pycache__", ".pyc", ".pytest_cache", ".hypothesis", ".mypy_cache", ".ruff_cache")
DOC_URL = "nats://127.0.0.1:4222"
#: Seconds for ``nats-sync server`` to print its URL, and to stop after Ctrl-C.
SERVER_TIMEOUT = 30.0


def sdist_problems(sdist: Path) -> list[str]:
    """What is wrong with an sdist's contents (empty: nothing)."""
    with tarfile.open(sdist) as tar:
        names = [name.split("/", 1)[1] for name in tar.getnames() if "/" in name]
    problems = [f"missing {need}" for need in REQUIRED if need not in names]
    problems += [f"should not be there: {n}" for n in names if any(bad in n for bad in FORBIDDEN)]
    return problems


def wheel_problems(wheel: Path) -> list[str]:
    """What is wrong with a wheel's contents (empty: nothing)."""
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    problems = [f"missing {need}" for need in IN_WHEEL if need not in names]
    problems += [f"should not be there: {n}" for n in names if any(bad in n for bad in FORBIDDEN)]
    return problems


def _quickstart_section(readme: Path) -> str:
    text = readme.read_text(encoding="utf-8")
    return text.split("\n## Quick start", 1)[1].split("\n## ", 1)[0]


def quickstart_server_command(readme: Path) -> list[str]:
    """The ``nats-sync server`` line of the README's quick start, as its words."""
    for line in _quickstart_section(readme).splitlines():
        words = shlex.split(line, comments=True)
        if words[:2] == ["nats-sync", "server"]:
            return words
    raise LookupError("no `nats-sync server` line under '## Quick start'")


def quickstart_code(readme: Path) -> str:
    """The first Python block under the README's "## Quick start" heading."""
    section = _quickstart_section(readme)
    match = re.search(r"```python\n(.*?)\n```", section, re.S)
    if match is None:
        raise LookupError("no Python block under '## Quick start'")
    return match.group(1)


def _port_is_free(port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as nats-server's
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def run_quickstart(readme: Path) -> None:
    # Imported here: the sdist check runs where nats_sync may not be installed.
    import nats_sync  # noqa: PLC0415

    source_tree = Path(__file__).resolve().parents[1] / "nats_sync"
    if Path(nats_sync.__file__).resolve().is_relative_to(source_tree):
        raise SystemExit(f"nats_sync came from the checkout ({nats_sync.__file__}), not the wheel")
    code = quickstart_code(readme)
    name, *args = quickstart_server_command(readme)
    script = Path(sysconfig.get_path("scripts")) / name  # the wheel's entry point
    if not _port_is_free(4222):
        print("port 4222 is taken here: the quick start's server gets --port 0")
        args += ["--port", "0"]
    server = subprocess.Popen([str(script), *args], stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None
    watchdog = threading.Timer(SERVER_TIMEOUT, server.kill)  # a hung start ends readline
    watchdog.start()
    try:
        first = server.stdout.readline()
        watchdog.cancel()
        if not first.startswith("nats-server running at nats://"):
            raise SystemExit(f"`{name} {' '.join(args)}` printed {first!r}, not its URL")
        url = first.split(" at ", 1)[1].split(" ", 1)[0]
        print(f"`{name} {' '.join(args)}` serves {url}")
        exec(compile(code.replace(DOC_URL, url), "README quick start", "exec"), {})
    finally:
        watchdog.cancel()
        if server.poll() is None:
            server.send_signal(signal.SIGINT)
        try:
            server.communicate(timeout=SERVER_TIMEOUT)
        except subprocess.TimeoutExpired:
            server.kill()
            server.communicate()
    if server.returncode != 0:
        raise SystemExit(f"`{name} server` exited with {server.returncode} at Ctrl-C")
    print(f"quick start ran with nats_sync {nats_sync.__version__} from {nats_sync.__file__}")


def main(argv: list[str]) -> int:
    if argv[:1] in (["sdist"], ["wheel"]) and len(argv) == 2:
        check = sdist_problems if argv[0] == "sdist" else wheel_problems
        problems = check(Path(argv[1]))
        for problem in problems:
            print(f"{argv[1]}: {problem}", file=sys.stderr)
        if not problems:
            print(f"{argv[1]}: contents as expected")
        return 1 if problems else 0
    if argv[:1] == ["quickstart"] and len(argv) == 2:
        run_quickstart(Path(argv[1]).resolve())
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

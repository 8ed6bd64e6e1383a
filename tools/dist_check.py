"""Checks of the release files, run by `make dist` (and the sdist one by the test suite).

``python tools/dist_check.py sdist DIST.tar.gz``: the sdist holds LICENSE, README.md,
CHANGELOG.md and nats_sync/py.typed, and no caches (``__pycache__``, ``*.pyc``,
``.pytest_cache``, ``.hypothesis``, ``.mypy_cache``, ``.ruff_cache``).

``python tools/dist_check.py quickstart README.md``: run with the Python of a fresh venv
where the wheel is installed with the ``server`` extra; starts an embedded nats-server and
runs the README's quick start against it (the first Python block under "## Quick start",
its URL replaced by the server's). Fails if the installed nats_sync is not the wheel's
(imported from this checkout instead).
"""

from __future__ import annotations

import re
import sys
import tarfile
from pathlib import Path

REQUIRED = ("LICENSE", "README.md", "CHANGELOG.md", "nats_sync/py.typed")
FORBIDDEN = ("__pycache__", ".pyc", ".pytest_cache", ".hypothesis", ".mypy_cache", ".ruff_cache")
DOC_URL = "nats://127.0.0.1:4222"


def sdist_problems(sdist: Path) -> list[str]:
    """What is wrong with an sdist's contents (empty: nothing)."""
    with tarfile.open(sdist) as tar:
        names = [name.split("/", 1)[1] for name in tar.getnames() if "/" in name]
    problems = [f"missing {need}" for need in REQUIRED if need not in names]
    problems += [f"should not be there: {n}" for n in names if any(bad in n for bad in FORBIDDEN)]
    return problems


def quickstart_code(readme: Path) -> str:
    """The first Python block under the README's "## Quick start" heading."""
    text = readme.read_text(encoding="utf-8")
    section = text.split("\n## Quick start", 1)[1]
    match = re.search(r"```python\n(.*?)\n```", section, re.S)
    if match is None:
        raise LookupError("no Python block under '## Quick start'")
    return match.group(1)


def run_quickstart(readme: Path) -> None:
    # Imported here: the sdist check runs where nats_sync may not be installed.
    import nats_sync  # noqa: PLC0415
    from nats_sync.testing import NatsServer  # noqa: PLC0415

    source_tree = Path(__file__).resolve().parents[1] / "nats_sync"
    if Path(nats_sync.__file__).resolve().is_relative_to(source_tree):
        raise SystemExit(f"nats_sync came from the checkout ({nats_sync.__file__}), not the wheel")
    code = quickstart_code(readme)
    with NatsServer(jetstream=True) as server:
        exec(compile(code.replace(DOC_URL, server.url), "README quick start", "exec"), {})
    print(f"quick start ran with nats_sync {nats_sync.__version__} from {nats_sync.__file__}")


def main(argv: list[str]) -> int:
    if argv[:1] == ["sdist"] and len(argv) == 2:
        problems = sdist_problems(Path(argv[1]))
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

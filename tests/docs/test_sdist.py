"""The sdist a release uploads holds LICENSE, README, CHANGELOG, py.typed and the
pyspark_nats_sync_* modules, and no caches."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
from dist_check import sdist_problems  # noqa: E402


@pytest.mark.timeout(120)
def test_sdist_contents(tmp_path: Path) -> None:
    pytest.importorskip("setuptools")
    # Leave caches where they would sneak in, to check that MANIFEST.in keeps them out.
    for cache in (ROOT / "tests" / "__pycache__", ROOT / "tests" / "docs" / "__pycache__"):
        cache.mkdir(exist_ok=True)
        (cache / "stale.cpython-311.pyc").write_bytes(b"")
    build = (
        "import sys; from setuptools import build_meta; print(build_meta.build_sdist(sys.argv[1]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", build, str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    sdist = tmp_path / done.stdout.strip().splitlines()[-1]
    assert sdist_problems(sdist) == []

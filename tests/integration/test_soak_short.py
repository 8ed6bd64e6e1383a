"""A short version of `make soak` in CI: restarts under traffic, no loss from the buffer,
no leaked threads or file descriptors, RSS within bounds."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # make test-fast leaves it out

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(90)
def test_short_soak_holds_its_bounds(tmp_path: Path) -> None:
    page = tmp_path / "RELIABILITY.md"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tools.soak",
            "--seconds",
            "25",
            "--restart-every",
            "8",
            "--output",
            str(page),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=80,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    text = page.read_text()
    assert "**lost from the buffer** | **0**" in text
    assert "all bounds held" in text

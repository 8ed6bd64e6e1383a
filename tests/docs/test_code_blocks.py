"""Every runnable Python block of the README and the guides runs against a real server.

A renamed call or a changed signature breaks this test, not a reader. How blocks are
marked and run: doc_blocks.py. Each page runs in a child process, bounded in time
(120 s; 300 s for a page with its Spark blocks, under the ``spark`` marker).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from doc_blocks import ROOT, blocks, doc_pages

RUN_PAGE = Path(__file__).with_name("run_page.py")
PAGE_TIMEOUT = 120.0
SPARK_PAGE_TIMEOUT = 300.0


def _runnable(page: Path) -> bool:
    return any(b.mode in ("run", "pytest") for b in blocks(page))


def _spark(page: Path) -> bool:
    return any(b.mode == "spark" for b in blocks(page))


def _run(page: Path, *flags: str, timeout: float) -> None:
    done = subprocess.run(
        [sys.executable, str(RUN_PAGE), str(page), *flags],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]


@pytest.mark.timeout(PAGE_TIMEOUT + 30)
@pytest.mark.parametrize(
    "page", [p for p in doc_pages() if _runnable(p)], ids=lambda p: str(p.relative_to(ROOT))
)
def test_page_blocks_run(page: Path) -> None:
    _run(page, timeout=PAGE_TIMEOUT)


@pytest.mark.spark
@pytest.mark.timeout(SPARK_PAGE_TIMEOUT + 30)
@pytest.mark.parametrize(
    "page", [p for p in doc_pages() if _spark(p)], ids=lambda p: str(p.relative_to(ROOT))
)
def test_page_blocks_run_with_spark(page: Path) -> None:
    """The whole page, its Spark blocks included, with a local SparkSession."""
    _run(page, "--spark", timeout=SPARK_PAGE_TIMEOUT)


def test_skipped_blocks_say_why() -> None:
    """Every page parses; each block left out carries its reason (printed with -rA)."""
    skipped = [b for page in doc_pages() for b in blocks(page) if b.mode == "norun"]
    for block in skipped:
        assert block.reason.strip(), f"{block.path.name}:{block.line}"
        print(f"not run: {block.path.relative_to(ROOT)}:{block.line}: {block.reason}")
    runnable = [b for page in doc_pages() for b in blocks(page) if b.mode != "norun"]
    assert len(runnable) >= 20

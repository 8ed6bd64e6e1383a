"""Spark Connect: connect_cases.py, run in a pytest process of its own.

pyspark's local Connect server (``SparkSession.builder.remote("local[2]")``) runs a
classic SparkContext in the process that asks for it, and pyspark refuses to start one
beside the classic session the other Spark tests share (``SESSION_ALREADY_EXIST``);
after it, ``SPARK_CONNECT_MODE_ENABLED`` would turn that process's classic builders into
Connect ones. A child pytest keeps the two apart. Its output (each case's result) is
shown when it fails; ``pytest tests/spark/connect_cases.py`` runs the cases directly.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

CASES = Path(__file__).with_name("connect_cases.py")
CHILD_TIMEOUT = 540.0


def _case_count() -> int:
    tree = ast.parse(CASES.read_text(encoding="utf-8"))
    return sum(
        isinstance(node, ast.FunctionDef) and node.name.startswith("test_") for node in tree.body
    )


@pytest.mark.slow
@pytest.mark.timeout(CHILD_TIMEOUT + 30)
def test_the_guide_s_calls_work_under_spark_connect() -> None:
    """register, a batch read, an availableNow read, both sinks, request_udf/request_df
    and kv_lookup_udf (bytes and decoded) on one Connect session; writes started on
    another thread, after register ran again from two threads at once."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            str(CASES),
            "-q",
            "-p",
            "no:cacheprovider",
            "-o",
            "addopts=-ra --strict-markers",
        ],
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT,
        cwd=CASES.parents[2],
        check=False,
    )
    output = done.stdout[-6000:] + done.stderr[-3000:]
    assert done.returncode == 0, output
    summary = re.search(r"(\d+) passed", done.stdout)
    assert summary is not None and int(summary.group(1)) == _case_count(), output
    assert not re.search(r"\d+ (skipped|xfailed|xpassed|failed|errors?)\b", done.stdout), output

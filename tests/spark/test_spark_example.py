"""examples/spark_lookup.py (the job behind make demo) runs end to end on a small dataset."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "spark_lookup.py"


@pytest.mark.timeout(240)
def test_spark_lookup_enriches_writes_and_publishes_a_summary(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(EXAMPLE),
            "--rows",
            "3000",
            "--products",
            "500",
            "--partitions",
            "2",
            "--master",
            "local[2]",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=220,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "rows enriched      3,000" in done.stdout
    assert "failed lookups     30 " in done.stdout  # 1 in 100 SKUs is unknown by design
    assert "summary on NATS    8 messages" in done.stdout
    assert any((tmp_path / "enriched").glob("*.parquet"))
    assert "  category   orders       revenue" in done.stdout  # the summary has headings
    # Nothing a user would take for a problem: no JVM, log4j, Spark start-up or pandas
    # warnings (examples/spark_session.py, examples/log4j2.properties, setup.cfg's pandas cap).
    noise = [
        line
        for line in done.stderr.splitlines()
        if any(word in line for word in ("WARN", "Warning", "log4j", "log level"))
    ]
    assert noise == [], noise
    assert re.search(r"\s0 / [\d,]+ lookups served", done.stdout) is None  # no line of zeros

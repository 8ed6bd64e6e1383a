"""examples/spark_jetstream_pipeline.py (the durable half of make demo) lands every order
exactly once across its stop and restart, stops quietly, and its count would see a
missing or doubled order."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from nats_sync.spark._jetstream import source

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
EXAMPLE = EXAMPLES / "spark_jetstream_pipeline.py"


def _example() -> ModuleType:
    if str(EXAMPLES) not in sys.path:  # as when run as a script: it imports spark_session
        sys.path.insert(0, str(EXAMPLES))
    spec = importlib.util.spec_from_file_location("spark_jetstream_pipeline", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# The example reads with maxOffsetsPerTrigger (admission control, new in pyspark 4.2).
@pytest.mark.skipif(
    source.ReadMaxRows is None, reason="the example's maxOffsetsPerTrigger needs pyspark >= 4.2"
)
@pytest.mark.timeout(240)
def test_every_order_lands_once_across_a_stop_and_a_restart(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(EXAMPLE),
            "--orders",
            "3000",
            "--products",
            "300",
            "--per-trigger",
            "400",
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
    assert done.returncode == 0, f"{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    out = done.stdout
    assert "stored 1,800 orders in stream ORDERS" in out
    stopped = re.search(r"query stopped between micro-batches: ([\d,]+) orders read, "
                        r"next to read seq (\d+)", out)  # fmt: skip
    assert stopped, out
    # Stopped between two batches of 400 sequences (whole ones), after one at least.
    read = int(stopped[1].replace(",", ""))
    assert read in (400, 800, 1200, 1600, 1800)
    assert int(stopped[2]) == read + 1  # the stream has no gaps: sequences 1 .. read
    # Where its last committed batch ended, not the start.
    assert f"restarted from its checkpoint at seq {read + 1}," in out
    assert "3,000 orders published, 3,000 rows landed, 0 missing, 0 duplicated" in out
    assert "unknown SKUs       30 " in out  # 1 in 100 has no price in the bucket
    assert re.search(r"\(([\d,]+) rows/s\)", out)
    assert any((tmp_path / "orders").glob("*.parquet"))
    assert (tmp_path / "checkpoint" / "offsets").is_dir()
    # Stopped between micro-batches, the query cut nothing off: no aborted task's Java
    # stack, no traceback of pyspark's source runner (test_spark_example checks the rest).
    noise = [
        line
        for line in done.stderr.splitlines()
        if any(word in line for word in ("Traceback", "ERROR", "\tat ", "Exception"))
    ]
    assert noise == [], "\n".join(noise[:40])


@pytest.mark.timeout(120)
def test_the_count_sees_missing_and_duplicated_orders(spark: Any, tmp_path: Path) -> None:
    example = _example()
    rows = [
        ("ORDERS", 1, 0, 2.0, 2.0),
        ("ORDERS", 2, 1, None, None),
        ("ORDERS", 2, 1, None, None),
        ("ORDERS", 4, 3, 1.5, 3.0),
    ]
    spark.createDataFrame(
        rows, "stream string, seq long, order_id long, price double, amount double"
    ).write.parquet(str(tmp_path / "orders"))
    landed = example.count_landed(spark, tmp_path / "orders", 4)
    assert landed == {"rows": 4, "missing": 1, "duplicated": 1, "unpriced": 2, "revenue": 5.0}
    assert example.count_landed(spark, tmp_path / "orders", 5)["missing"] == 2

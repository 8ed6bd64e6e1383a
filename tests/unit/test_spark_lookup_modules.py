"""The pyspark_nats_sync_* modules fail nothing where the spark extra is missing.

Spark's lookup of installed Python data sources imports every top-level ``pyspark_*``
module in one worker, and an import error in any of them makes it skip every package's
sources. So, where nats_sync.spark cannot import (here: no pyarrow), the two modules must
import cleanly and offer no ``DefaultSource``. That they give Spark the two formats where
the extra is there is tested end to end in tests/spark/test_any_thread.py.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

BLOCKED_PYARROW = """
import sys
sys.modules["pyarrow"] = None  # as if the spark extra's pyarrow were not installed
import pyspark_nats_sync_jetstream, pyspark_nats_sync_nats
for module in (pyspark_nats_sync_jetstream, pyspark_nats_sync_nats):
    assert not hasattr(module, "DefaultSource"), module
"""


@pytest.mark.timeout(60)
def test_without_the_spark_extra_the_modules_import_and_offer_no_source() -> None:
    done = subprocess.run(
        [sys.executable, "-c", BLOCKED_PYARROW],
        capture_output=True,
        text=True,
        timeout=50,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]

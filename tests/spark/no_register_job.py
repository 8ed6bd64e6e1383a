"""A Spark job using format("jetstream") and format("nats") with no ``register`` call.

Run by ``test_any_thread.py`` and ``test_spark_connect.py`` in a process of its own:
Spark looks the installed Python data sources up once per JVM, and the shared test
session's JVM did so long ago. The driver never imports nats_sync: Spark finds the two
formats through the ``pyspark_nats_sync_*`` modules, imported by its lookup worker.

``python no_register_job.py MODE NATS_URL`` (MODE ``classic`` or ``connect``): counts
stream ``NOREG_<MODE>`` (made by the test), writes five rows to ``noreg.<mode>.copy``
(format "jetstream") and five to ``noreg.<mode>.core`` (format "nats") on the main thread,
then five to ``noreg.<mode>.thread`` (format "jetstream") from another thread; prints one
JSON line of what each step gave ("ok" or the error's class) and of whether nats_sync
was imported.
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F


def _session(mode: str) -> Any:
    builder = SparkSession.builder.config("spark.sql.shuffle.partitions", "1")
    if mode == "connect":
        os.environ["SPARK_TESTING"] = "1"  # a free port, as connect_cases.py's session
        return builder.remote("local[1]").getOrCreate()
    return (
        builder.master("local[1]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )


def _outcome(step: Any) -> str:
    try:
        step()
    except Exception as error:
        found = re.search(r"\[([A-Z_]+)\]", str(error))
        return found.group(1) if found else type(error).__name__
    return "ok"


def main(mode: str, url: str) -> None:
    spark = _session(mode)
    report: dict[str, Any] = {}
    try:
        stream = f"NOREG_{mode.upper()}"
        rows = spark.read.format("jetstream").option("servers", url).option("stream", stream)
        report["read"] = rows.load().count()
        five = spark.range(5).select(F.col("id").cast("string").alias("data"))

        def write(fmt: str, subject: str) -> None:
            writer = five.write.format(fmt).mode("append").option("servers", url)
            writer.option("subject", f"noreg.{mode}.{subject}").save()

        report["jetstream write"] = _outcome(lambda: write("jetstream", "copy"))
        report["nats write"] = _outcome(lambda: write("nats", "core"))
        outcome: list[str] = []
        thread = threading.Thread(
            target=lambda: outcome.append(_outcome(lambda: write("jetstream", "thread")))
        )
        thread.start()
        thread.join(120)
        report["thread write"] = outcome[0] if outcome else "did not finish"
        report["nats_sync imported"] = "nats_sync" in sys.modules
    finally:
        spark.stop()
    print(json.dumps(report))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])

"""The SparkSession the Spark examples and ``make demo`` run on: local, quiet and ready for
nats_sync.

Three things make a local session usable for these jobs, each worth copying into your own:

* ``PYSPARK_PYTHON`` names this interpreter, so Spark's Python workers import the same
  packages (nats_sync among them) as the driver. Unset, they run the system ``python3``.
* Spark's console logging goes through ``examples/log4j2.properties`` (errors only): its
  start-up notes are not problems, but read like them.
* The JVM's one unconditional start-up line, ``WARNING: Using incubator modules:
  jdk.incubator.vector`` (Spark 4's launcher always adds that module), is dropped from the
  driver JVM's standard error; every other line it writes is passed on unchanged.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Any

from pyspark import SparkConf, SparkContext
from pyspark.java_gateway import launch_gateway
from pyspark.sql import SparkSession

LOG4J_CONFIG = Path(__file__).resolve().with_name("log4j2.properties")

# Lines the JVM writes whatever the logging configuration says (not log4j's).
_JVM_NOISE = (b"WARNING: Using incubator modules:",)


def build_session(master: str, app_name: str = "nats-sync-example") -> SparkSession:
    """A SparkSession on ``master`` whose Python workers use this interpreter, quiet.

    Args:
        master: the Spark master URL (``local[2]``, ``local[*]``, ``spark://host:7077``).
        app_name: the application name Spark shows.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    # The hostname here may resolve to a loopback address; saying so is Spark's only reason
    # to pick another interface, and these jobs talk to 127.0.0.1 anyway.
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    log4j = f"-Dlog4j.configurationFile={LOG4J_CONFIG.as_uri()}"
    conf = (
        SparkConf()
        .setMaster(master)
        .setAppName(app_name)
        .set("spark.driver.extraJavaOptions", log4j)
        .set("spark.executor.extraJavaOptions", log4j)
        .set("spark.ui.enabled", "false")
        .set("spark.ui.showConsoleProgress", "false")
        .set("spark.sql.shuffle.partitions", "4")
    )
    if SparkContext._active_spark_context is None:
        gateway = launch_gateway(conf, popen_kwargs={"stderr": subprocess.PIPE})
        _forward_jvm_stderr(gateway.proc.stderr)
        SparkContext(conf=conf, gateway=gateway)
    spark = SparkSession.builder.config(conf=conf).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _forward_jvm_stderr(stream: IO[bytes] | None) -> None:
    """Copies the driver JVM's standard error to ours, less the lines in ``_JVM_NOISE``,
    on a daemon thread for as long as the JVM lives (a full pipe would stall it)."""
    if stream is None:
        return

    def forward(stream: Any = stream) -> None:
        for line in iter(stream.readline, b""):
            if not line.startswith(_JVM_NOISE):
                sys.stderr.buffer.write(line)
                sys.stderr.buffer.flush()

    threading.Thread(target=forward, name="spark-jvm-stderr", daemon=True).start()

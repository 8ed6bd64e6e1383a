"""One local[2] SparkSession for the whole Spark test run (it takes ~10 s to start)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import nats_sync
from nats_sync.jetstream import JetStream
from nats_sync.testing import NatsServer

# Spark's Python workers run PYSPARK_PYTHON; without this they would lack the venv.
os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from pyspark.sql import SparkSession

    from nats_sync.spark import register

    session = (
        SparkSession.builder.master("local[2]")
        .appName("nats-sync-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    yield session
    session.stop()


@pytest.fixture(scope="module")
def server() -> Iterator[NatsServer]:
    """One nats-server per test module, with monitoring (to count connections)."""
    with NatsServer(monitoring=True) as nats:
        yield nats


@pytest.fixture(scope="module")
def js_server() -> Iterator[NatsServer]:
    """One JetStream-enabled nats-server per test module (store in a temp folder)."""
    with NatsServer(jetstream=True) as nats:
        yield nats


@pytest.fixture
def js(js_server: NatsServer) -> Iterator[JetStream]:
    """A JetStream context on a fresh driver-side connection to ``js_server``."""
    with nats_sync.connect(js_server.url, name="spark-js-test") as nc:
        yield nc.jetstream()


@pytest.fixture
def client(server: NatsServer) -> Iterator[nats_sync.Client]:
    with nats_sync.connect(server.url, name="spark-test-driver") as nc:
        yield nc


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test under tests/spark is marked ``spark`` (make test-fast leaves them out)."""
    spark_dir = Path(__file__).parent
    for item in items:
        if spark_dir in item.path.parents:
            item.add_marker(pytest.mark.spark)

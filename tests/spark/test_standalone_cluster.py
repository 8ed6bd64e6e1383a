"""Jobs run unchanged on a Spark standalone cluster (nats_sync.spark.testing).

A master and a worker from pyspark's own jars on loopback; each job is a driver in a
subprocess (one SparkSession per process: the session-scoped local one of conftest.py
stays untouched), as spark-submit would run it. The cluster tests are slow (~1-2 min).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import nats_sync
from nats_sync.spark.testing import (
    SparkClusterError,
    SparkStandaloneCluster,
    find_java,
    find_spark_home,
)
from nats_sync.testing import NatsServer

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

#: A driver on the cluster: stream IN -> format("jetstream") -> upper-cased -> stream OUT
#: (format("jetstream") with msg_id "<stream>:<seq>"), checkpointed; run, more input,
#: the last batch's commit removed (as if the driver died after publishing it), run again.
JS_JOB = """
import json, sys
from pathlib import Path
from pyspark.sql import SparkSession, functions as sf
import nats_sync
from nats_sync.spark import register

master, url, checkpoint, late = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
spark = (SparkSession.builder.master(master).appName("nats-sync-jetstream-on-cluster")
         .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
         .getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
register(spark)

def run():
    source = (spark.readStream.format("jetstream").option("servers", url)
              .option("stream", "IN").option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", "700").load())
    moved = source.select(
        sf.regexp_replace("subject", "^in[.]", "out.").alias("subject"),
        sf.upper(sf.col("data").cast("string")).cast("binary").alias("data"),
        sf.format_string("%s:%d", "stream", "seq").alias("msg_id"))
    query = (moved.writeStream.format("jetstream").option("servers", url)
             .option("checkpointLocation", checkpoint).start())
    query.processAllAvailable()
    query.stop()
    return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]

first = run()
commits = sorted(Path(checkpoint, "commits").glob("[0-9]*"), key=lambda p: int(p.name))
commits[-1].unlink()  # the last batch was published but never committed: it replays
Path(checkpoint, "commits", f".{commits[-1].name}.crc").unlink(missing_ok=True)
with nats_sync.connect(url) as nc:
    js = nc.jetstream()
    for n in range(late):
        js.publish_async(f"in.{n % 3}", f"late {n}".encode())
    js.publish_async_completed(timeout=30)
second = run()
print(json.dumps({"first": first, "second": second, "replayed": int(commits[-1].name)}))
spark.stop()
"""


def _lingering(groups: list[int], workdir: Path) -> list[str]:
    """Processes still in the cluster's process groups, or working inside its folder."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            pgrp = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[2])
            cwd = os.readlink(entry / "cwd")
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ")[:120]
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile, or not ours to read
        if pgrp in groups or cwd.startswith(str(workdir)):
            found.append(f"{entry.name} {command.decode(errors='replace')}")
    return found


@pytest.fixture(scope="module")
def cluster() -> Iterator[SparkStandaloneCluster]:
    """One master and one 2-core worker for the module; afterwards, nothing of it runs."""
    started = SparkStandaloneCluster(cores=2, memory="2g", startup_timeout=90)
    started.start()  # no Java or no Spark jars: SparkClusterError, a failure (never a skip)
    groups = list(started.pids)
    try:
        yield started
    finally:
        started.stop()
        deadline = time.monotonic() + 15
        while (left := _lingering(groups, started.workdir)) and time.monotonic() < deadline:
            time.sleep(0.25)  # a Python daemon ends once its executor's pipe closes
        started.cleanup()
        assert left == [], f"left running after stop(): {left}"


def _run_driver(
    cluster: SparkStandaloneCluster, args: list[str], timeout: float
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, *args],
        env=cluster.driver_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, f"stdout:\n{done.stdout[-2000:]}\nstderr:\n{done.stderr[-4000:]}"
    return done


def _finished_apps(cluster: SparkStandaloneCluster, name: str) -> list[dict[str, object]]:
    return [app for app in cluster.master_state()["completedapps"] if app["name"] == name]


@pytest.mark.slow
@pytest.mark.timeout(200)
def test_worker_registers_and_the_demo_runs_on_it_unchanged(
    cluster: SparkStandaloneCluster, tmp_path: Path
) -> None:
    state = cluster.master_state()
    assert state["status"] == "ALIVE"
    assert [(w["state"], w["cores"]) for w in state["workers"]] == [("ALIVE", 2)]

    # make demo's two jobs: request_udf against a micro service and the "nats" sink, then
    # format("jetstream") -> kv_lookup_udf -> Parquet, stopped between batches and restarted.
    done = _run_driver(
        cluster,
        [
            str(EXAMPLES / "demo.py"),
            "--rows",
            "3000",
            "--orders",
            "3000",
            "--master",
            cluster.master_url,
            "--out",
            str(tmp_path),
        ],
        timeout=170,
    )
    assert "rows enriched      3,000" in done.stdout
    assert "failed lookups     30 " in done.stdout  # 1 in 100 SKUs is unknown by design
    assert "service answered   3,000 requests (30 unknown)" in done.stdout
    assert "summary on NATS    8 messages" in done.stdout  # the "nats" sink, from executors
    assert "query stopped between micro-batches" in done.stdout
    assert "3,000 orders published, 3,000 rows landed, 0 missing, 0 duplicated" in done.stdout
    # It ran on the cluster, not in a local master of the driver's own.
    apps = _finished_apps(cluster, "nats-sync-demo")
    assert len(apps) == 1 and apps[0]["cores"] == 2


@pytest.mark.slow
@pytest.mark.timeout(200)
def test_jetstream_source_to_jetstream_sink_on_the_cluster_exactly_once(
    cluster: SparkStandaloneCluster, tmp_path: Path
) -> None:
    early, late = 2000, 500
    job = tmp_path / "js_job.py"
    job.write_text(JS_JOB)
    with NatsServer(jetstream=True) as server, nats_sync.connect(server.url) as nc:
        js = nc.jetstream()
        js.create_stream(name="IN", subjects=["in.>"], allow_direct=True)
        js.create_stream(name="OUT", subjects=["out.>"], allow_direct=True, duplicate_window=120.0)
        for n in range(early):
            js.publish_async(f"in.{n % 3}", f"order {n}".encode())
        js.publish_async_completed(timeout=30)

        done = _run_driver(
            cluster,
            [str(job), cluster.master_url, server.url, str(tmp_path / "checkpoint"), str(late)],
            timeout=170,
        )
        runs = json.loads(done.stdout.strip().splitlines()[-1])
        assert sum(runs["first"]) == early and max(runs["first"]) <= 700
        # The second run replays the uncommitted batch, then reads the late messages.
        assert runs["second"][0] == runs["first"][-1]
        assert sum(runs["second"]) == runs["first"][-1] + late

        stored = list(js.stream("OUT").get_msgs(1))
        ids = [str((m.headers or {}).get("Nats-Msg-Id")) for m in stored]
        assert len(stored) == early + late  # the replayed batch's publishes were dropped
        assert sorted(ids) == sorted(f"IN:{seq}" for seq in range(1, early + late + 1))
        texts = {m.data.decode() for m in stored}
        assert texts == ({f"ORDER {n}" for n in range(early)} | {f"LATE {n}" for n in range(late)})
        assert {m.subject for m in stored} == {"out.0", "out.1", "out.2"}
    assert len(_finished_apps(cluster, "nats-sync-jetstream-on-cluster")) == 1


def test_no_java_fails_with_a_clear_message(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SparkClusterError, match="no java on PATH and no JAVA_HOME"):
        find_java()
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    with pytest.raises(SparkClusterError, match="has no executable bin/java"):
        SparkStandaloneCluster(workdir=tmp_path / "cluster").start()
    assert not (tmp_path / "cluster" / "master.log").exists()  # nothing was launched


def test_no_spark_jars_fails_with_a_clear_message(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "spark-class").write_text("#!/bin/sh\nexit 1\n")
    (tmp_path / "bin" / "spark-class").chmod(0o755)
    monkeypatch.setenv("SPARK_HOME", str(tmp_path))
    with pytest.raises(SparkClusterError, match=r"has no Spark jars \(jars/spark-core_"):
        find_spark_home()
    monkeypatch.setenv("SPARK_HOME", str(tmp_path / "nothing"))
    cluster = SparkStandaloneCluster()
    with pytest.raises(SparkClusterError, match="has no executable bin/spark-class"):
        cluster.start()
    with pytest.raises(RuntimeError, match="has not started"):
        _ = cluster.workdir  # no temp folder was made for a start that could not be


def test_the_installed_pyspark_is_a_launchable_spark(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPARK_HOME", raising=False)
    home = find_spark_home()
    assert (home / "bin" / "spark-class").is_file()
    assert Path(find_java()).is_file()


@pytest.mark.timeout(30)
def test_a_master_that_dies_fails_the_start_with_its_log(tmp_path: Path) -> None:
    fake = tmp_path / "spark"
    (fake / "bin").mkdir(parents=True)
    (fake / "jars").mkdir()
    (fake / "jars" / "spark-core_2.13-0.jar").write_bytes(b"")
    (fake / "bin" / "spark-class").write_text("#!/bin/sh\necho 'cannot bind: no luck'\nexit 3\n")
    (fake / "bin" / "spark-class").chmod(0o755)
    began = time.monotonic()
    with pytest.raises(SparkClusterError, match=r"(?s)master exited with code 3.*no luck"):
        SparkStandaloneCluster(spark_home=fake, workdir=tmp_path / "c", startup_timeout=20).start()
    assert time.monotonic() - began < 10


def test_driver_env_names_the_executors_python_and_loopback() -> None:
    cluster = SparkStandaloneCluster(python="/opt/py/bin/python3")
    env = cluster.driver_env({"KEEP": "1"})
    assert env == {
        "KEEP": "1",
        "PYSPARK_PYTHON": "/opt/py/bin/python3",
        "PYSPARK_DRIVER_PYTHON": "/opt/py/bin/python3",
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    with pytest.raises(RuntimeError, match="has not started"):
        _ = cluster.master_url
    cluster.cleanup()

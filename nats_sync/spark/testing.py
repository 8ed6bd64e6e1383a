"""A Spark standalone cluster on this machine: run a job as it would run on a real one.

How it works: `SparkStandaloneCluster` runs the launcher of the installed pyspark
(``bin/spark-class`` with the wheel's own jars, or ``SPARK_HOME``) twice as child
processes: a Master and one Worker, both bound to loopback (``SPARK_LOCAL_IP``) on free
ports, each the leader of a process group of its own. Their logs and the worker's work
folder live in a temp folder. `start` waits, within ``startup_timeout``, until the
master's web UI (``/json/``) lists the worker as ALIVE; `stop` signals each process
group (the worker's executors are in the worker's), SIGTERM then SIGKILL. Nothing here
starts a thread; clusters still running at interpreter exit are killed.

Driver programs point at `SparkStandaloneCluster.master_url` and run with
`SparkStandaloneCluster.driver_env` (the Python of the executors, loopback): in a
subprocess, as ``spark-submit`` would run them, or in this process when it has no
SparkSession yet. ``python -m nats_sync.spark.testing`` keeps one running until Ctrl-C.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import weakref
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from nats_sync.testing import _free_port

__all__ = [
    "SparkClusterError",
    "SparkStandaloneCluster",
    "find_java",
    "find_spark_home",
]

_MASTER_CLASS = "org.apache.spark.deploy.master.Master"
_WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
_POLL_INTERVAL = 0.25
_RUNNING: weakref.WeakSet[SparkStandaloneCluster] = weakref.WeakSet()


class SparkClusterError(RuntimeError):
    """The cluster could not start: no Java, no Spark jars, or a process failed.

    The message says what is missing, or carries the end of the failing process's log.
    """


def find_spark_home() -> Path:
    """The Spark installation to launch: ``SPARK_HOME``, else the installed pyspark.

    Returns:
        A folder with ``bin/spark-class`` and the Spark jars in ``jars/``.

    Raises:
        SparkClusterError: neither is a usable Spark (the message says which was tried).
    """
    given = os.environ.get("SPARK_HOME")
    if given:
        home = Path(given)
        where = f"SPARK_HOME={given!r}"
    else:
        spec = importlib.util.find_spec("pyspark")
        if spec is None or spec.origin is None:
            raise SparkClusterError(
                "no Spark found: install pyspark (pip install 'nats-sync[spark]') or set SPARK_HOME"
            )
        home = Path(spec.origin).parent
        where = f"the pyspark package at {home}"
    launcher = home / "bin" / "spark-class"
    if not (launcher.is_file() and os.access(launcher, os.X_OK)):
        raise SparkClusterError(f"{where} has no executable bin/spark-class")
    if not any((home / "jars").glob("spark-core_*.jar")):
        raise SparkClusterError(
            f"{where} has no Spark jars (jars/spark-core_*.jar): reinstall pyspark "
            "from its full wheel, or set SPARK_HOME to a Spark distribution"
        )
    return home


def find_java() -> str:
    """The ``java`` that ``spark-class`` will run: ``$JAVA_HOME/bin/java``, else ``PATH``.

    Returns:
        The path of the executable.

    Raises:
        SparkClusterError: there is none (Spark 4 needs Java 17 or 21).
    """
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        java = Path(java_home) / "bin" / "java"
        if java.is_file() and os.access(java, os.X_OK):
            return str(java)
        raise SparkClusterError(f"JAVA_HOME={java_home!r} has no executable bin/java")
    found = shutil.which("java")
    if found is None:
        raise SparkClusterError(
            "no java on PATH and no JAVA_HOME: Spark needs a Java runtime "
            "(17 or 21), e.g. apt-get install openjdk-17-jre-headless"
        )
    return found


class SparkStandaloneCluster:
    """A Spark standalone master and one worker on loopback, as child processes.

    Use it as a context manager (``with SparkStandaloneCluster() as cluster:``) or call
    `start` and `stop` yourself; `stop` always leaves no process behind.

    Args:
        cores: cores the worker offers (``--cores``).
        memory: memory the worker offers (``--memory``, e.g. ``"2g"``).
        host: address the master, the worker and the drivers bind to.
        python: the interpreter of the executors' Python workers (``PYSPARK_PYTHON``);
            it must be able to import what the jobs use. Default: this interpreter.
        spark_home: the Spark to launch; default `find_spark_home`.
        startup_timeout: seconds `start` waits for the worker to register.
        workdir: where the logs and the worker's work folder go; default a new temp
            folder, made by `start` once Java and Spark are found (removed by `cleanup`).
    """

    def __init__(
        self,
        *,
        cores: int = 2,
        memory: str = "2g",
        host: str = "127.0.0.1",
        python: str | None = None,
        spark_home: str | Path | None = None,
        startup_timeout: float = 90.0,
        workdir: str | Path | None = None,
    ) -> None:
        if cores < 1:
            raise ValueError(f"the worker needs at least one core, got cores={cores}")
        self.cores = cores
        self.memory = memory
        self.host = host
        self.python = python or sys.executable
        self.spark_home = Path(spark_home) if spark_home is not None else None
        self.startup_timeout = startup_timeout
        self._own_workdir = workdir is None
        self._workdir = Path(workdir) if workdir is not None else None
        self._master_port: int | None = None
        self._master_ui_port: int | None = None
        self._master: subprocess.Popen[bytes] | None = None
        self._worker: subprocess.Popen[bytes] | None = None

    # -- lifecycle -------------------------------------------------------------------

    def start(self) -> SparkStandaloneCluster:
        """Starts the master, then the worker, and waits until the worker is registered.

        Returns:
            ``self``, for chaining.

        Raises:
            SparkClusterError: Java or Spark is missing, a process exited, or the worker
                was not registered within ``startup_timeout`` (with the logs' ends).
        """
        if self._master is not None:
            return self
        home = self.spark_home or find_spark_home()
        find_java()
        if self._workdir is None:
            self._workdir = Path(tempfile.mkdtemp(prefix="nats-sync-spark-cluster-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.workdir / "work").mkdir(exist_ok=True)
        launcher = str(home / "bin" / "spark-class")
        env = self._daemon_env(home)
        deadline = time.monotonic() + self.startup_timeout
        _RUNNING.add(self)
        try:
            self._master_port = _free_port(self.host)
            self._master_ui_port = _free_port(self.host)
            self._master = self._launch(
                [
                    launcher,
                    _MASTER_CLASS,
                    "--host",
                    self.host,
                    "--port",
                    str(self._master_port),
                    "--webui-port",
                    str(self._master_ui_port),
                ],
                self.master_log,
                env,
            )
            self._wait_for(
                lambda state: state.get("status") == "ALIVE", deadline, "the master did not come up"
            )
            self._worker = self._launch(
                [
                    launcher,
                    _WORKER_CLASS,
                    self.master_url,
                    "--cores",
                    str(self.cores),
                    "--memory",
                    self.memory,
                    "--host",
                    self.host,
                    "--webui-port",
                    str(_free_port(self.host)),
                    "--work-dir",
                    str(self.workdir / "work"),
                ],
                self.worker_log,
                env,
            )
            self._wait_for(
                lambda state: _alive_workers(state) >= 1,
                deadline,
                "the worker did not register with the master",
            )
        except BaseException:
            self.stop()
            raise
        return self

    def _daemon_env(self, home: Path) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            {
                "SPARK_HOME": str(home),
                "SPARK_LOCAL_IP": self.host,
                "PYSPARK_PYTHON": self.python,
                # No REST submission server: its fixed port (6066) is not ours to take.
                "SPARK_MASTER_OPTS": " ".join(
                    filter(
                        None, [env.get("SPARK_MASTER_OPTS"), "-Dspark.master.rest.enabled=false"]
                    )
                ),
            }
        )
        return env

    @staticmethod
    def _launch(
        command: list[str], log_path: Path, env: Mapping[str, str]
    ) -> subprocess.Popen[bytes]:
        with open(log_path, "ab") as log:
            return subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=dict(env),
                start_new_session=True,
            )

    def _wait_for(self, ready: Any, deadline: float, what: str) -> None:
        while True:
            for name, process, log in (
                ("master", self._master, self.master_log),
                ("worker", self._worker, self.worker_log),
            ):
                if process is not None and process.poll() is not None:
                    raise SparkClusterError(
                        f"the Spark {name} exited with code {process.returncode} at "
                        f"start:\n{_tail(log)}"
                    )
            state = self._try_state()
            if state is not None and ready(state):
                return
            if time.monotonic() > deadline:
                raise SparkClusterError(
                    f"{what} within {self.startup_timeout}s (logs in {self.workdir})"
                    f":\n--- master log\n"
                    f"{_tail(self.master_log)}\n--- worker log\n{_tail(self.worker_log)}"
                )
            time.sleep(_POLL_INTERVAL)

    def _try_state(self) -> dict[str, Any] | None:
        try:
            return self.master_state(timeout=2.0)
        except (OSError, ValueError):
            return None  # not listening yet, or an answer cut short

    def stop(self, timeout: float = 10.0) -> None:
        """Stops the worker (and its executors), then the master.

        Each process group gets SIGTERM, then SIGKILL after ``timeout`` seconds or once
        its leader has exited (for what is left of the group). Safe to call twice.
        """
        for process in (self._worker, self._master):
            if process is not None:
                _end_group(process, timeout)
        self._worker = None
        self._master = None
        _RUNNING.discard(self)

    def cleanup(self) -> None:
        """`stop`, and remove the work folder (logs included) when it was made here."""
        self.stop()
        if self._own_workdir and self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None

    def __enter__(self) -> SparkStandaloneCluster:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.cleanup()

    # -- facts -----------------------------------------------------------------------

    @property
    def is_running(self) -> bool:
        """Whether both the master and the worker processes are alive."""
        return all(
            process is not None and process.poll() is None
            for process in (self._master, self._worker)
        )

    @property
    def master_url(self) -> str:
        """``spark://host:port``, the ``--master`` of the drivers."""
        if self._master_port is None:
            raise RuntimeError("the cluster has not started yet, so it has no master URL")
        return f"spark://{self.host}:{self._master_port}"

    @property
    def web_ui_url(self) -> str:
        """``http://host:port`` of the master's web UI."""
        if self._master_ui_port is None:
            raise RuntimeError("the cluster has not started yet, so it has no web UI")
        return f"http://{self.host}:{self._master_ui_port}"

    @property
    def workdir(self) -> Path:
        """The folder of the logs (``master.log``, ``worker.log``) and of ``work/``."""
        if self._workdir is None:
            raise RuntimeError("the cluster has not started yet, so it has no folder")
        return self._workdir

    @property
    def master_log(self) -> Path:
        """The master's stdout and stderr."""
        return self.workdir / "master.log"

    @property
    def worker_log(self) -> Path:
        """The worker's stdout and stderr (executors log under ``work/<app>/<id>/``)."""
        return self.workdir / "worker.log"

    @property
    def pids(self) -> list[int]:
        """Process ids (and process group ids) of the master and the worker."""
        return [process.pid for process in (self._master, self._worker) if process is not None]

    def master_state(self, timeout: float = 5.0) -> dict[str, Any]:
        """The master's state as its web UI gives it (``/json/``: workers, applications).

        Raises:
            OSError: the master does not answer.
        """
        with urllib.request.urlopen(f"{self.web_ui_url}/json/", timeout=timeout) as answer:
            state: dict[str, Any] = json.load(answer)
        return state

    def driver_env(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """An environment for a driver program of this cluster.

        Args:
            base: the environment to add to; default ``os.environ``.

        Returns:
            ``base`` plus ``PYSPARK_PYTHON`` and ``PYSPARK_DRIVER_PYTHON`` (the
            executors' interpreter) and ``SPARK_LOCAL_IP`` (the driver on loopback).
        """
        env = dict(os.environ if base is None else base)
        env.update(
            {
                "PYSPARK_PYTHON": self.python,
                "PYSPARK_DRIVER_PYTHON": self.python,
                "SPARK_LOCAL_IP": self.host,
            }
        )
        return env

    def __repr__(self) -> str:
        state = "running" if self.is_running else "stopped"
        where = self.master_url if self._master_port else "?"
        return f"<SparkStandaloneCluster {where} {self.cores} cores {state}>"


def _alive_workers(state: Mapping[str, Any]) -> int:
    return sum(1 for worker in state.get("workers") or [] if worker.get("state") == "ALIVE")


def _end_group(process: subprocess.Popen[bytes], timeout: float) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        pass
    # Whatever is left of the group (an executor slow to stop) goes now.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def _tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])


@atexit.register
def _kill_leftover_clusters() -> None:
    for cluster in list(_RUNNING):
        with contextlib.suppress(Exception):
            cluster.stop(timeout=2.0)


def main(argv: list[str] | None = None) -> int:
    """``python -m nats_sync.spark.testing``: a local cluster until Ctrl-C."""
    parser = argparse.ArgumentParser(
        description="Runs a Spark standalone master and worker on loopback until Ctrl-C."
    )
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--memory", default="2g")
    args = parser.parse_args(argv)
    try:
        cluster = SparkStandaloneCluster(cores=args.cores, memory=args.memory).start()
    except SparkClusterError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    try:
        print(f"master {cluster.master_url}  web UI {cluster.web_ui_url}  logs {cluster.workdir}")
        print(f"drivers: PYSPARK_PYTHON={cluster.python} SPARK_LOCAL_IP={cluster.host}", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            while cluster.is_running:
                time.sleep(1.0)
    finally:
        cluster.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())

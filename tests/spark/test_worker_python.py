"""The driver-side check that Spark's Python workers can import nats_sync.

Most tests call the check with an interpreter and an environment, as a local master's
workers would get them: no JVM is started. The last one points the running session's
SparkContext at a missing interpreter and sees `register` and the UDF factories refuse.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nats_sync.spark import _worker_python, kv_lookup_udf, register, request_df, request_udf
from nats_sync.spark._worker_python import check_worker_python
from nats_sync.spark.errors import SparkWorkerPythonError

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(autouse=True)
def _fresh_answers() -> Iterator[None]:
    """Each test asks its interpreters again (the check caches answers per process)."""
    _worker_python._import_problem.cache_clear()
    yield
    _worker_python._import_problem.cache_clear()


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A real interpreter without nats_sync: a new virtualenv with nothing installed."""
    venv = tmp_path_factory.mktemp("bare") / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60
    )
    return str(venv / "bin" / "python")


def _env_without(*names: str) -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in names}


def test_an_interpreter_without_nats_sync_fails_in_one_line_naming_it_and_the_fix(
    bare_python: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # a worker started here finds no source tree in its folder
    env = _env_without("PYTHONPATH", "PYSPARK_PYTHON")
    with pytest.raises(SparkWorkerPythonError) as raised:
        check_worker_python("local[2]", bare_python, env=env)
    message = str(raised.value)
    assert "\n" not in message
    assert f"they would run {bare_python} (PYSPARK_PYTHON is unset)" in message
    assert "No module named 'nats_sync'" in message
    assert f"os.environ['PYSPARK_PYTHON'] = {sys.executable!r}" in message


def test_a_missing_interpreter_fails_naming_it() -> None:
    missing = "/nonexistent/bin/python3"
    env = {**_env_without("PYSPARK_PYTHON"), "PYSPARK_PYTHON": missing}
    with pytest.raises(
        SparkWorkerPythonError,
        match=r"would run /nonexistent/bin/python3 \(from PYSPARK_PYTHON\).*"
        r"no such interpreter",
    ):
        check_worker_python("local[*]", missing, env=env)


def test_pyspark_python_set_after_the_session_started_is_named() -> None:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    with pytest.raises(
        SparkWorkerPythonError,
        match=rf"PYSPARK_PYTHON={sys.executable} came after the SparkSession",
    ):
        check_worker_python("local", "/nonexistent/python3", env=env)


def test_an_interpreter_that_has_nats_sync_passes_quietly() -> None:
    check_worker_python("local[2]", sys.executable)  # this environment has nats_sync


def test_py_files_on_the_workers_path_count(
    bare_python: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A package shipped with --py-files/addPyFile is on the workers' path."""
    monkeypatch.chdir(tmp_path)
    shipped = tmp_path / "shipped" / "nats_sync"
    shipped.mkdir(parents=True)
    (shipped / "__init__.py").write_text("", encoding="utf-8")
    env = _env_without("PYTHONPATH")
    with pytest.raises(SparkWorkerPythonError):
        check_worker_python("local[2]", bare_python, env=env)
    _worker_python._import_problem.cache_clear()
    check_worker_python("local[2]", bare_python, includes=[str(shipped.parent)], env=env)


@pytest.mark.parametrize("master", ["spark://10.0.0.5:7077", "yarn", "k8s://https://k:443"])
def test_other_masters_are_not_checked(master: str) -> None:
    """Their workers run on other machines, with interpreters this one cannot ask."""
    check_worker_python(master, "/nonexistent/python3")


def test_register_and_the_udf_factories_refuse_a_session_whose_workers_lack_nats_sync(
    spark: Any,
) -> None:
    context = spark.sparkContext
    before = context.pythonExec
    context.pythonExec = "/nonexistent/python3"  # what PYSPARK_PYTHON would have made it
    try:
        with pytest.raises(SparkWorkerPythonError, match="/nonexistent/python3"):
            register(spark)
        with pytest.raises(SparkWorkerPythonError, match="/nonexistent/python3"):
            kv_lookup_udf("ref", "nats://127.0.0.1:4222")
        with pytest.raises(SparkWorkerPythonError, match="/nonexistent/python3"):
            request_udf("svc", "nats://127.0.0.1:4222")
        df = spark.createDataFrame([("a",)], "sku string")
        with pytest.raises(SparkWorkerPythonError, match="/nonexistent/python3"):
            request_df(df, "svc", "nats://127.0.0.1:4222", "sku")
    finally:
        context.pythonExec = before
    register(spark)  # the real interpreter again: quiet

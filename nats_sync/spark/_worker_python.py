"""Checks, on the driver, that Spark's Python workers can import nats_sync.

Why: Spark runs data sources and UDFs in worker processes started with ``PYSPARK_PYTHON``
(``python3`` when unset), not with the driver's interpreter. A job started from a
virtualenv without ``PYSPARK_PYTHON`` fails in every task with a page of
``PYTHON_DATA_SOURCE_ERROR ... No module named 'nats_sync'``. On a local master the
workers are processes of this machine, with this environment, so the driver can ask
the very interpreter they will run (a child process, once per interpreter and path
list, ~0.1 s) and fail with one line naming it and the fix.

How it works: the interpreter is the one the SparkContext hands Spark with every
function it ships (``sc.pythonExec``, read from ``PYSPARK_PYTHON`` when the context
started). The child runs with this process's environment and working directory, as a
local worker does, plus the files added with ``addPyFile``/``--py-files``. Other
masters (a cluster, a Spark Connect server) run their workers elsewhere: nothing is
checked there, and the Spark guide says what must be installed where.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from nats_sync.spark import _defaults as sd
from nats_sync.spark.errors import SparkWorkerPythonError

__all__ = ["check_session_workers", "check_worker_python"]

_PROBE = "import nats_sync"


def check_session_workers(spark: Any = None) -> None:
    """Raises `SparkWorkerPythonError` if ``spark``'s local workers cannot import nats_sync.

    Args:
        spark: a SparkSession; None for this process's active SparkContext, if any.
            A Spark Connect session is checked through the local Connect server that
            pyspark runs in this process (``remote("local[...]")``), else not at all.
    """
    context = _spark_context(spark)
    if context is None:
        return
    shipped = getattr(context, "_python_includes", None) or []
    includes = [_py_file(context, name) for name in shipped]
    check_worker_python(str(context.master), str(context.pythonExec), includes)


def check_worker_python(
    master: str, python: str, includes: Sequence[str] = (), env: Mapping[str, str] | None = None
) -> None:
    """Raises `SparkWorkerPythonError` if a local master's workers cannot import nats_sync.

    Args:
        master: the Spark master URL; only ``local...`` masters are checked.
        python: the interpreter Spark starts its Python workers with.
        includes: paths Spark puts on the workers' ``sys.path`` (py-files).
        env: the workers' environment; this process's when None.
    """
    if not master.startswith("local"):
        return
    environment = dict(os.environ if env is None else env)
    problem = _import_problem(python, tuple(includes), tuple(sorted(environment.items())))
    if problem is not None:
        raise SparkWorkerPythonError(_message(python, problem, environment))


def _spark_context(spark: Any) -> Any:
    """The classic SparkContext whose workers the check is about, or None."""
    if spark is not None and not type(spark).__module__.startswith("pyspark.sql.connect"):
        return spark.sparkContext
    try:
        from pyspark import SparkContext  # noqa: PLC0415 - pyspark is loaded already
    except ImportError:  # a Spark Connect client without the classic half (pyspark-client)
        return None
    # Set for a classic session, and for the one behind remote("local[...]").
    return SparkContext._active_spark_context


def _py_file(context: Any, name: str) -> str:
    from pyspark import SparkFiles  # noqa: PLC0415 - pyspark is loaded already

    return name if os.path.isabs(name) else os.path.join(SparkFiles.getRootDirectory(), name)


@functools.lru_cache(maxsize=8)
def _import_problem(
    python: str, includes: tuple[str, ...], environment: tuple[tuple[str, str], ...]
) -> str | None:
    """Why ``python`` cannot import nats_sync (its last line of error), or None if it can."""
    env = dict(environment)
    if includes:
        env["PYTHONPATH"] = os.pathsep.join([*includes, env.get("PYTHONPATH", "")]).rstrip(
            os.pathsep
        )
    try:
        done = subprocess.run(
            [python, "-c", _PROBE],
            env=env,
            capture_output=True,
            text=True,
            timeout=sd.SPARK_WORKER_PYTHON_CHECK_TIMEOUT,
            check=False,
        )
    except FileNotFoundError:
        return "no such interpreter"
    except PermissionError:
        return "not executable"
    except (OSError, subprocess.TimeoutExpired):
        return None  # cannot tell: Spark will say what happens
    if done.returncode == 0:
        return None
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    return lines[-1].strip() if lines else f"exit status {done.returncode}"


def _message(python: str, problem: str, environment: Mapping[str, str]) -> str:
    found = shutil.which(python, path=environment.get("PATH")) or python
    which = python if found == python else f"{python}, found at {found}"
    wanted = environment.get("PYSPARK_PYTHON")
    if wanted is None:
        source = "PYSPARK_PYTHON is unset"
    elif wanted == python:
        source = "from PYSPARK_PYTHON"
    else:
        source = f"PYSPARK_PYTHON={wanted} came after the SparkSession started"
    return (
        f"they would run {which} ({source}), which cannot import nats_sync: {problem}. "
        f"Set PYSPARK_PYTHON to a Python that has nats-sync, such as this one "
        f"(os.environ['PYSPARK_PYTHON'] = {sys.executable!r}), before the SparkSession "
        "is made"
    )

"""Runs the Python blocks of one docs page against an embedded nats-server (a child process).

Usage: ``python run_page.py PAGE.md [--spark]``; with ``--spark`` the blocks marked
``<!-- spark -->`` run too. A page makes its own session, as a reader does (the Spark
guide's first Spark block); a Spark block reached while none is named ``spark`` gets a
local[2] one. Exits non-zero with the failing block's traceback, which names the page
and its line numbers.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from doc_blocks import DOC_URL, blocks

from nats_sync.testing import NatsServer


def local_spark() -> object:
    """A local SparkSession, as tests/spark/conftest.py makes, for a page that makes none."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("nats-sync-docs")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    return session


def main(page: Path, with_spark: bool) -> int:
    skip = {"norun"} if with_spark else {"norun", "spark"}
    todo = [b for b in blocks(page) if b.mode not in skip]
    with NatsServer(jetstream=True) as server, tempfile.TemporaryDirectory() as work:
        os.environ["NATS_URL"] = server.url
        os.chdir(work)  # blocks may write files
        namespace: dict[str, object] = {"__name__": "__docs__"}
        for block in todo:
            if (
                block.mode == "spark"
                and "spark" not in namespace
                and ("SparkSession.builder" not in block.code)
            ):
                namespace["spark"] = local_spark()
            code = block.code.replace(DOC_URL, server.url)
            print(f"--- {page.name}:{block.line} ({block.mode})", flush=True)
            if block.mode == "pytest":
                test_file = Path(work) / f"test_block_{block.line}.py"
                test_file.write_text(code, encoding="utf-8")
                pytest_cmd = ["-m", "pytest", "-q", "-p", "no:cacheprovider", str(test_file)]
                done = subprocess.run([sys.executable, *pytest_cmd], cwd=work, check=False)
                if done.returncode != 0:
                    print(f"{page}:{block.line}: the pytest block failed", file=sys.stderr)
                    return 1
                continue
            source = "\n" * (block.line - 1) + code  # tracebacks show the page's line numbers
            exec(compile(source, str(page), "exec"), namespace)
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), "--spark" in sys.argv[2:]))

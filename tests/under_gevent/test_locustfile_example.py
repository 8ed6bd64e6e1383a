"""``examples/locustfile.py`` runs headless under Locust's own command line against a
real nats-server, and Locust records its requests with no failure."""

from __future__ import annotations

import csv
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from gevent_runs import ROOT, child_env

from nats_sync.testing import NatsServer

LOCUSTFILE = ROOT / "examples" / "locustfile.py"
#: Locust's run: 20 users started 10 a second, for 5 seconds; the process's whole life.
RUN_TIME = "5s"
PROCESS_TIMEOUT = 90.0

pytestmark = pytest.mark.timeout(PROCESS_TIMEOUT + 30)


@pytest.fixture
def server() -> Iterator[NatsServer]:
    with NatsServer(jetstream=True) as srv:
        yield srv


def test_the_example_locustfile_runs_headless_without_failures(
    server: NatsServer, tmp_path: Path
) -> None:
    prefix = tmp_path / "run"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "locust",
            "-f",
            str(LOCUSTFILE),
            "--headless",
            "-u",
            "20",
            "-r",
            "10",
            "-t",
            RUN_TIME,
            "--host",
            server.url,
            "--csv",
            str(prefix),
            "--only-summary",
        ],
        cwd=tmp_path,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=PROCESS_TIMEOUT,
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-6000:]  # Locust exits 1 when a request failed
    with open(f"{prefix}_stats.csv", newline="") as stats:
        rows = {(row["Type"], row["Name"]): row for row in csv.DictReader(stats)}
    assert set(rows) == {("NATS", "lookup.price"), ("JS", "orders.new"), ("", "Aggregated")}
    for key, row in rows.items():
        assert int(row["Request Count"]) > 0, (key, row)
        assert int(row["Failure Count"]) == 0, (key, row, output[-3000:])
    assert int(rows["NATS", "lookup.price"]["Request Count"]) > int(
        rows["JS", "orders.new"]["Request Count"]
    )  # five lookups to an order
    with open(f"{prefix}_failures.csv", newline="") as failures:
        assert list(csv.DictReader(failures)) == []

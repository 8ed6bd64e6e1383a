"""The README and the first guides work as a new user runs them: from a shell, as written.

`walk_pages.py` (a child process) starts ``nats-sync server`` where the README says to,
runs the pages' ``nats-sync`` lines and their Python blocks with the URL the reader sees
(``nats://127.0.0.1:4222``), page after page against that one server, as in the
acceptance of issue 31: one terminal with the server, another pasting the pages into
``python``. Port 4222 is held for this test (the ``default_port`` fixture); a machine
where something else has it skips the test, saying so. test_code_blocks.py runs the same
Python blocks (and the ``<!-- pytest -->`` ones) against an embedded server on a free port.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from doc_blocks import READER_PAGES, ROOT, steps

WALK = Path(__file__).with_name("walk_pages.py")
WALK_TIMEOUT = 150.0


@pytest.mark.timeout(WALK_TIMEOUT + 30)
def test_reader_pages_work_as_written_from_a_shell(default_port: int) -> None:
    # A session of its own: a walk past its time is killed with the `nats-sync server`
    # it started (and that one's nats-server), so nothing keeps port 4222.
    walk = subprocess.Popen(
        [sys.executable, str(WALK), *map(str, READER_PAGES)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        start_new_session=True,
    )
    try:
        out, err = walk.communicate(timeout=WALK_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(walk.pid, signal.SIGKILL)
        out, err = walk.communicate()
        pytest.fail(f"the walk took more than {WALK_TIMEOUT}s:\n{out[-4000:]}{err[-4000:]}")
    assert walk.returncode == 0, out[-4000:] + err[-6000:]
    assert f"nats-server running at nats://127.0.0.1:{default_port} " in out


def test_reader_pages_start_the_server_before_their_python() -> None:
    """Each page says to start `nats-sync server` before its first Python block runs."""
    for page in READER_PAGES:
        found = steps(page)
        first_python = next(b for b in found if b.mode == "run")
        starts = [
            b
            for b in found
            if b.mode == "shell"
            and b.line < first_python.line
            and any(
                line.split("#")[0].split() == ["nats-sync", "server"]
                for line in b.code.splitlines()
            )
        ]
        assert starts, (
            f"{page.relative_to(ROOT)}: no `nats-sync server` before line {first_python.line}"
        )

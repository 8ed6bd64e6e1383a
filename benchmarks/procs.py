"""Child processes with a deadline: every wait in the suite goes through here."""

from __future__ import annotations

import os
import selectors
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Outcome:
    """What a finished (or killed) child left behind."""

    returncode: int | None
    lines: list[str]
    stderr: str
    timed_out: bool


def python_command(module: str, *args: str, python: str = sys.executable) -> list[str]:
    """``python -m module args...`` with this interpreter (or ``python``)."""
    return [python, "-m", module, *args]


def natsio_python() -> Path:
    """natsio's interpreter: ``$NATSIO_PYTHON``, else ``.venv-natsio`` (made by ``make test``)."""
    given = os.environ.get("NATSIO_PYTHON")
    return Path(given) if given else ROOT / ".venv-natsio" / "bin" / "python"


def why_no_natsio() -> str | None:
    """Why natsio cannot be measured here, or None if it can."""
    python = natsio_python()
    if not python.exists():
        return (
            f"no natsio interpreter at {python}: `make test` makes .venv-natsio where a "
            "Python 3.13 is found (natsio needs 3.13+), or set $NATSIO_PYTHON"
        )
    try:
        probe = subprocess.run(
            [str(python), "-c", "import natsio"], capture_output=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"{python} does not run: {error}"
    if probe.returncode:
        return f"natsio is not installed in {python}"
    return None


def python_for(client: str) -> str:
    """The interpreter a worker of ``client`` runs on."""
    return str(natsio_python()) if client == "natsio" else sys.executable


def child_env() -> dict[str, str]:
    """The environment for children: the repo root importable, unbuffered output."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def run_streaming(
    command: Sequence[str], timeout: float, on_line: Callable[[str], None] | None = None
) -> Outcome:
    """Runs ``command``, hands each stdout line to ``on_line``, kills it past ``timeout``.

    Stderr goes to a temporary file (a chatty child such as the JVM cannot block on a
    full pipe); its tail comes back in the outcome.
    """
    lines: list[str] = []
    with tempfile.TemporaryFile() as err:
        process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=err,
            stdin=subprocess.DEVNULL,
            cwd=ROOT,
            env=child_env(),
        )
        assert process.stdout is not None
        deadline = time.monotonic() + timeout
        timed_out = False
        pending = b""
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ)
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    timed_out = True
                    break
                if not selector.select(min(left, 1.0)):
                    continue
                chunk = os.read(process.stdout.fileno(), 65536)
                if not chunk:
                    break
                pending += chunk
                *complete, pending = pending.split(b"\n")
                for raw in complete:
                    line = raw.decode(errors="replace")
                    lines.append(line)
                    if on_line is not None:
                        on_line(line)
        if timed_out:
            process.kill()
        try:
            returncode: int | None = process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            returncode = None
        process.stdout.close()
        err.seek(0)
        stderr = err.read().decode(errors="replace")
    return Outcome(returncode, lines, stderr[-4000:], timed_out)


class Responder:
    """The raw echo responder (``benchmarks.responder``) as a child process."""

    def __init__(self, url: str, timeout: float = 10.0, subject: str = "bench.echo") -> None:
        self.url = url
        self.timeout = timeout
        self.subject = subject
        self.process = self._start()

    def _start(self) -> subprocess.Popen[bytes]:
        """Starts the responder and waits (bounded) for its ``ready`` line."""
        url, timeout = self.url, self.timeout
        self.process = subprocess.Popen(
            python_command("benchmarks.responder", url, self.subject),
            stdout=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            cwd=ROOT,
            env=child_env(),
        )
        assert self.process.stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(self.process.stdout, selectors.EVENT_READ)
            if not selector.select(timeout):
                self.stop()
                raise RuntimeError(f"responder not ready after {timeout}s")
        line = self.process.stdout.readline().strip()
        if line != b"ready":
            self.stop()
            raise RuntimeError(f"responder failed to start: {line!r}")
        return self.process

    def restart_if_dead(self) -> bool:
        """Starts a new responder if this one has exited; says whether it did."""
        if self.process.poll() is None:
            return False
        self.stop()
        self.process = self._start()
        return True

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        if self.process.stdout is not None:
            self.process.stdout.close()

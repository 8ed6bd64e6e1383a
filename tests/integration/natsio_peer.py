"""Where the interop tests find natsio (the zero-dependency asyncio client, Python >= 3.13)
and its extensions, to run the other side of a test in a child process.

``make test`` installs them into ``.venv-natsio/`` at the top of the repository when a
Python 3.13 is found (the Makefile's ``NATSIO_STAMP``); ``$NATSIO_PYTHON`` names another
interpreter that has them. Where neither has the module a test needs, the test skips and
says why: never silently.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
VENV_PYTHON = REPO / ".venv-natsio" / "bin" / "python"


def natsio_python() -> Path:
    """The interpreter the natsio side runs on: ``$NATSIO_PYTHON``, else .venv-natsio's."""
    given = os.environ.get("NATSIO_PYTHON")
    return Path(given) if given else VENV_PYTHON


def why_not(module: str, package: str) -> str | None:
    """Why ``module`` (from ``package``) cannot run on the natsio side, or None if it can."""
    python = natsio_python()
    if not python.exists():
        return (
            f"no natsio interpreter at {python}: `make test` makes .venv-natsio where a "
            f"Python 3.13 is found (natsio needs 3.13+), or set $NATSIO_PYTHON"
        )
    probe = subprocess.run(
        [str(python), "-c", f"import {module}"], capture_output=True, timeout=30, check=False
    )
    if probe.returncode:
        return f"{package} is not installed in {python} ({python} -m pip install {package})"
    return None

"""docs/RELIABILITY.md is shared by three tools; each owns one marked section of it.

``make reliability`` writes section ``faults``, ``make fuzz`` section ``fuzz`` and
``make soak`` section ``soak``. A section is the text between ``<!-- section:NAME -->``
and ``<!-- /section:NAME -->``; `write_section` replaces that text and leaves every other
byte of the page alone, so one tool's run never touches another tool's figures.
"""

from __future__ import annotations

import datetime
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_PAGE = ROOT / "docs" / "RELIABILITY.md"


def run_date() -> str:
    """When a run happened, as the page states it."""
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def markers(name: str) -> tuple[str, str]:
    """The opening and closing comment lines of section ``name``."""
    return f"<!-- section:{name} -->", f"<!-- /section:{name} -->"


def write_section(name: str, markdown: str, path: Path = DEFAULT_PAGE) -> None:
    """Makes ``markdown`` the content of section ``name`` of the page at ``path``.

    The section is replaced where it is, appended at the end when the page does not
    have it yet, and the page is created when it does not exist. Everything outside
    the section's markers stays as it was. The file is replaced atomically.

    Raises:
        ValueError: the page has the section's opening marker but not its closing one
            after it (a hand-edited page; nothing is written rather than guessing).
    """
    begin, end = markers(name)
    block = f"{begin}\n{markdown.strip(chr(10))}\n{end}"
    path = Path(path)
    text = path.read_text() if path.exists() else ""
    start = text.find(begin)
    if start >= 0:
        stop = text.find(end, start + len(begin))
        if stop < 0:
            raise ValueError(f"{path}: {begin} has no {end} after it")
        text = text[:start] + block + text[stop + len(end) :]
    else:
        if not text or text.endswith("\n\n"):
            separator = ""
        else:
            separator = "\n" if text.endswith("\n") else "\n\n"
        text = f"{text}{separator}{block}\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    scratch.write_text(text)
    os.replace(scratch, path)

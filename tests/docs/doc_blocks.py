"""The Python blocks of the docs (README.md, docs/index.md, docs/guides/*.md) and how to run them.

A fenced ```` ```python ```` block runs unless the line before it is an HTML comment
``<!-- norun: <reason> -->`` (the reason is required, and shown in the test's output).
``<!-- pytest -->`` before a block runs it as a test file under pytest (the plugin's
fixtures), the way a reader would. ``<!-- spark -->`` marks a block that needs a
SparkSession: it runs only in the Spark run (``pytest -m spark``), with the session the
page made (named ``spark``), or a local one if the page makes none. The blocks of one
page run in order in one namespace, in a child process (`run_page.py`) with an embedded
nats-server with JetStream: every ``nats://127.0.0.1:4222`` in them is replaced with
that server's URL, and ``NATS_URL`` is set to it.

The pages a new user follows first (`READER_PAGES`) are also walked as that user does
(`walk_pages.py`): their shell blocks (```` ```sh ````, ``bash``, ``console``) run too,
``nats-sync server`` included, and their Python blocks run as written, URL and all. A
shell block marked ``<!-- norun: <reason> -->`` is left out of that walk.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: The URL the docs write; the runner replaces it with the embedded server's.
DOC_URL = "nats://127.0.0.1:4222"
#: The pages walked as a reader would, in the order the README leads through them.
READER_PAGES = tuple(
    ROOT / page
    for page in (
        "README.md",
        "docs/guides/getting-started.md",
        "docs/guides/jetstream.md",
        "docs/guides/kv-object-store.md",
    )
)
_SHELL_LANGS = ("sh", "bash", "shell", "console")

_FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>[\w+-]*)\s*$")
_MARK = re.compile(r"^\s*<!--\s*(?P<kind>norun|pytest|spark)\s*(?::\s*(?P<reason>.*?))?\s*-->\s*$")


@dataclass(frozen=True)
class Block:
    """One fenced Python block of a page."""

    path: Path
    line: int  # 1-based line of the block's first code line
    code: str
    mode: str  # "run", "pytest", "spark" or "norun"; "shell" for a shell block that runs
    reason: str = ""
    lang: str = "python"


def doc_pages() -> list[Path]:
    """The pages whose Python blocks are checked."""
    guides = sorted((ROOT / "docs" / "guides").glob("*.md"))
    return [ROOT / "README.md", ROOT / "docs" / "index.md", *guides]


def blocks(path: Path) -> list[Block]:
    """The Python blocks of one Markdown page, with how each is to be run."""
    return [block for block in steps(path) if block.lang == "python"]


def steps(path: Path) -> list[Block]:
    """The Python and shell blocks of one Markdown page, in the page's order."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m or not m.group("lang"):
            i += 1
            continue
        indent, lang = len(m.group("indent")), m.group("lang")
        end = i + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        if lang in ("python", "py", *_SHELL_LANGS):
            shell = lang in _SHELL_LANGS
            mark = _MARK.match(lines[i - 1]) if i > 0 else None
            mode, reason = ("shell" if shell else "run"), ""
            if mark:
                mode, reason = mark.group("kind"), (mark.group("reason") or "")
                if mode == "norun" and not reason:
                    raise ValueError(f"{path.name}:{i}: <!-- norun --> needs a reason")
                if shell and mode != "norun":
                    raise ValueError(f"{path.name}:{i}: a shell block takes only norun")
            code = "\n".join(line[indent:] for line in lines[i + 1 : end])
            found.append(Block(path, i + 2, code, mode, reason, "shell" if shell else "python"))
        i = end + 1
    return found

"""docs/RELIABILITY.md is shared by three tools; each owns one marked section of it.

``make reliability`` writes sections ``faults`` (core NATS) and ``jetstream``, ``make
fuzz`` section ``fuzz`` and ``make soak`` section ``soak``. A section is the text between
``<!-- section:NAME -->`` and ``<!-- /section:NAME -->``; `write_section` replaces that
text and leaves every other byte of the page alone, so one tool's run never touches
another tool's figures.

Within a section, a run of some of its rows (``make reliability`` with ``--only``) keeps
the rows it did not run: `merge_rows` takes them from the page as they were written,
with the date and outcome of the run that made them (kept in a ``<!-- rows: {...} -->``
comment in the section).
"""

from __future__ import annotations

import datetime
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_PAGE = ROOT / "docs" / "RELIABILITY.md"


def fmt_ms(seconds: float | None) -> str:
    """A duration as the page's tables show it (``-`` for none)."""
    return "-" if seconds is None else f"{1000 * seconds:.0f} ms"


def row_notes(fault: str, items: Sequence[str], error: str | None) -> str | None:
    """A row's line under its table: its notes, then why the row failed; None if neither."""
    lines = list(items)
    if error:
        lines.append(f"**row failed**: {error}")
    return f"- {fault}: " + "; ".join(lines) + "." if lines else None


def run_date() -> str:
    """When a run happened, as the page states it."""
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def markers(name: str) -> tuple[str, str]:
    """The opening and closing comment lines of section ``name``."""
    return f"<!-- section:{name} -->", f"<!-- /section:{name} -->"


def read_section(name: str, path: Path = DEFAULT_PAGE) -> str | None:
    """The content of section ``name`` of the page at ``path``; None when it has none."""
    path = Path(path)
    if not path.exists():
        return None
    begin, end = markers(name)
    text = path.read_text()
    start = text.find(begin)
    stop = text.find(end, start + len(begin)) if start >= 0 else -1
    return None if stop < 0 else text[start + len(begin) : stop]


def write_section(
    name: str, markdown: str, path: Path = DEFAULT_PAGE, after: str | None = None
) -> None:
    """Makes ``markdown`` the content of section ``name`` of the page at ``path``.

    The section is replaced where it is; when the page does not have it yet, it is
    inserted right after section ``after`` (when given and present), else appended at
    the end; the page is created when it does not exist. Everything outside the
    section's markers stays as it was. The file is replaced atomically.

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
    elif after is not None and (anchor := _end_of(text, after)) >= 0:
        text = f"{text[:anchor]}\n\n{block}{text[anchor:]}"
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


def _end_of(text: str, name: str) -> int:
    """Where section ``name``'s closing marker ends in ``text``; -1 when it has none."""
    begin, end = markers(name)
    start = text.find(begin)
    stop = text.find(end, start + len(begin)) if start >= 0 else -1
    return -1 if stop < 0 else stop + len(end)


# --- rows kept across partial runs ----------------------------------------------------------

_ROWS_COMMENT = re.compile(r"^<!-- rows: (\{.*\}) -->$", re.MULTILINE)
_DATE_LINE = re.compile(r"^- Date: (.+)$", re.MULTILINE)


@dataclass
class TableRow:
    """One row of a section's table: its key, its line, its note line, its run."""

    key: str
    line: str
    note: str | None
    ok: bool
    date: str


@dataclass
class MergedRows:
    """A section's table rows after a run, fresh and kept, in the section's order."""

    lines: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    kept: list[TableRow] = field(default_factory=list)
    comment: str = ""

    @property
    def ok(self) -> bool:
        return all(row.ok for row in self.kept)


def earlier_rows(
    name: str,
    titles: Mapping[str, str],
    path: Path = DEFAULT_PAGE,
    ok_text: str = "all guarantees held",
) -> dict[str, TableRow]:
    """The rows of section ``name``'s table as written, by key.

    ``titles`` maps each key to the title in its row's first cell (and at the start of
    its note line, ``- <title>: ...``). A page written before the rows comment existed
    gives each row the section's ``- Date:`` and whether the section says ``ok_text``.
    """
    text = read_section(name, path)
    if not text:
        return {}
    found = _ROWS_COMMENT.search(text)
    runs: dict[str, dict[str, object]] = json.loads(found.group(1)) if found else {}
    date_line = _DATE_LINE.search(text)
    date = date_line.group(1).strip() if date_line else "an earlier run"
    lines = text.splitlines()
    rows: dict[str, TableRow] = {}
    for key, title in titles.items():
        line = next((x for x in lines if x.startswith(f"| {title} |")), None)
        if line is None:
            continue
        note = next((x for x in lines if x.startswith(f"- {title}: ")), None)
        run = runs.get(key, {})
        rows[key] = TableRow(
            key, line, note, bool(run.get("ok", ok_text in text)), str(run.get("date", date))
        )
    return rows


def merge_rows(
    order: Sequence[str], fresh: Sequence[TableRow], earlier: Mapping[str, TableRow]
) -> MergedRows:
    """This run's rows, and the earlier ones it did not run, in the order of ``order``."""
    new = {row.key: row for row in fresh}
    merged = MergedRows()
    runs: dict[str, dict[str, object]] = {}
    for key in order:
        row = new.get(key)
        if row is None:
            row = earlier.get(key)
            if row is None:
                continue
            merged.kept.append(row)
        merged.lines.append(row.line)
        if row.note:
            merged.notes.append(row.note)
        runs[key] = {"date": row.date, "ok": row.ok}
    merged.comment = f"<!-- rows: {json.dumps(runs, sort_keys=True)} -->"
    return merged


def kept_sentence(merged: MergedRows, titles: Mapping[str, str]) -> list[str]:
    """A paragraph naming the rows that come from earlier runs (none: no lines)."""
    if not merged.kept:
        return []
    rows = "; ".join(f"{titles[row.key]} ({row.date})" for row in merged.kept)
    return [f"Rows not run this time, kept from earlier runs: {rows}.", ""]

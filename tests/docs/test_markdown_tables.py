"""No table of the README or the docs is cut in two by a blank line (Markdown then ends
the table there and shows the rest as raw pipes, as a blank line once did to the
architecture page's thread table)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def cut_tables(text: str) -> list[int]:
    """Line numbers of table rows that follow a blank line that follows a table row."""
    lines = text.splitlines()
    cut: list[int] = []
    fenced = False
    for index, line in enumerate(lines):
        if line.startswith("```"):
            fenced = not fenced
        if fenced or index < 2:
            continue
        if (
            line.startswith("|")
            and not lines[index - 1].strip()
            and lines[index - 2].startswith("|")
        ):
            cut.append(index + 1)
    return cut


def test_no_table_is_cut_by_a_blank_line() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    cut = {
        str(page.relative_to(ROOT)): found
        for page in pages
        if (found := cut_tables(page.read_text()))
    }
    assert cut == {}


def test_the_check_finds_a_cut_table() -> None:
    assert cut_tables("| a | b |\n|---|---|\n| 1 | 2 |\n\n| 3 | 4 |\n") == [5]
    assert cut_tables("| a | b |\n|---|---|\n| 1 | 2 |\n\nText.\n\n| c |\n|---|\n") == []
    assert cut_tables("```\n| a |\n\n| b |\n```\n") == []

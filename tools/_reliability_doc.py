"""Shared by the reliability tools: each writes its own marked section of one page.

``write_section(path, name, markdown)`` replaces the text between
``<!-- section:NAME -->`` and ``<!-- /section:NAME -->`` (appending the section when it
is missing) and leaves the other sections alone; a page without any marker is an old
single-tool page and is replaced.
"""

from __future__ import annotations

import re
from pathlib import Path

ORDER = ("faults", "fuzz", "soak")


def write_section(path: Path, name: str, markdown: str) -> None:
    """Writes ``markdown`` as section ``name`` of the page at ``path``."""
    begin, end = f"<!-- section:{name} -->", f"<!-- /section:{name} -->"
    block = f"{begin}\n{markdown.rstrip()}\n{end}\n"
    text = path.read_text() if path.exists() else ""
    if "<!-- section:" not in text:
        text = ""
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end) + r"\n?", re.S)
    if pattern.search(text):
        text = pattern.sub(lambda _match: block, text)
    else:
        text = (text.rstrip() + "\n\n" if text.strip() else "") + block
    sections = {match.group(1): match.group(0) for match in re.finditer(
        r"<!-- section:(\w+) -->.*?<!-- /section:\1 -->\n?", text, re.S)}
    ordered = [sections[key] for key in ORDER if key in sections]
    ordered += [value for key, value in sections.items() if key not in ORDER]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(part.rstrip() + "\n" for part in ordered))

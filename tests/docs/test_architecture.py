"""docs/ARCHITECTURE.md says what tools/layers.py says (the table the import-layer test
enforces), and its pictures are those tools/arch_diagram.py draws from it now.

The page's layer table names every module of ``LAYERS`` in the row of its layer and
nowhere else; its thread table has a row for every thread of the picture; every thread
of the picture is still started where ``THREADS`` says; the page embeds both pictures.
Also the page's claims about the optional OpenTelemetry extra: ``otel`` is the only
module importing ``opentelemetry``, and only ``client`` (``connect(tracing=True)``)
and ``spark.udf`` import ``otel``. No server and no docs build: it reads files (well
under a second).
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import arch_diagram  # noqa: E402
from layers import COMPONENTS, LAYER_NAMES, LAYERS, THREADS  # noqa: E402

PAGE = ROOT / "docs" / "ARCHITECTURE.md"
PACKAGE_DIR = ROOT / "nats_sync"


def _section_table(heading: str) -> list[list[str]]:
    """The cells of the first Markdown table after ``## <heading>``, header row left out."""
    text = PAGE.read_text(encoding="utf-8")
    start = text.index(f"\n## {heading}\n") + 1
    rows: list[list[str]] = []
    for line in text[start:].splitlines()[1:]:
        if line.startswith("## "):
            break
        if line.startswith("|"):
            rows.append([cell.strip() for cell in line.strip().strip("|").split(" | ")])
        elif rows:
            break  # the table ended
    assert len(rows) > 2, f"no table under '## {heading}' in {PAGE.name}"
    return rows[2:]  # the header and the |---| line


def _page_module(name: str) -> str:
    """A module as the page names it, as ``LAYERS`` does (``__init__`` is the package)."""
    return "" if name == "__init__" else name


def test_the_layer_table_names_every_module_in_its_layer() -> None:
    rows = _section_table("Layers")
    assert [row[0] for row in rows] == [
        f"{layer} {name}" for layer, name in enumerate(LAYER_NAMES)
    ], "the table's rows are the layers of tools/layers.py, bottom up, with their names"
    named: dict[str, int] = {}
    problems: list[str] = []
    for layer, row in enumerate(rows):
        for name in re.findall(r"`([^`]+)`", row[1]):
            module = _page_module(name)
            if module in named:
                problems.append(f"`{name}` named twice (layers {named[module]} and {layer})")
            named[module] = layer
            if module not in LAYERS:
                problems.append(f"`{name}` (layer {layer}) is in no layer of tools/layers.py")
            elif LAYERS[module] != layer:
                problems.append(
                    f"`{name}` is in layer {layer} on the page, {LAYERS[module]} in tools/layers.py"
                )
    problems += [
        f"`{module or '__init__'}` (layer {layer}) is missing from the page"
        for module, layer in LAYERS.items()
        if module not in named
    ]
    assert problems == []


def test_the_thread_table_has_every_thread_of_the_picture() -> None:
    rows = [row[0] for row in _section_table("Threads")]
    missing = [
        thread.name
        for thread in THREADS
        if not any(re.match(rf"{re.escape(thread.name)}\b", row) for row in rows)
    ]
    assert missing == [], f"add a row to the page's thread table for: {missing}"


def test_the_threads_are_started_where_the_picture_says() -> None:
    moved: list[str] = []
    for thread in THREADS:
        if not thread.started_in:
            continue  # the users' own threads
        path = PACKAGE_DIR / Path(*thread.started_in.split("."))
        source = (path / "__init__.py" if path.is_dir() else path.with_suffix(".py")).read_text()
        if thread.named_by not in source:
            moved.append(f"{thread.name}: {thread.named_by!r} not in {thread.started_in}")
    assert moved == [], f"update THREADS in tools/layers.py: {moved}"


def test_the_picture_names_only_known_components_and_modules() -> None:
    names = {component.name for component in COMPONENTS}
    unknown = sorted({name for thread in THREADS for name in thread.touches} - names)
    assert unknown == []
    assert [c.module for c in COMPONENTS if c.module not in LAYERS] == []


def test_the_pictures_are_drawn_from_the_table_as_it_is() -> None:
    stale = [str(path.relative_to(ROOT)) for path in arch_diagram.stale()]
    assert stale == [], f"redraw with `python tools/arch_diagram.py`: {stale}"


def test_the_page_shows_both_pictures() -> None:
    text = PAGE.read_text(encoding="utf-8")
    for path in arch_diagram.PICTURES:
        assert f"](images/{path.name})" in text


def _imported_by_module() -> dict[str, set[str]]:
    """Every module of the package (dotted, relative) and the absolute names it imports
    (``from a import b`` gives ``a`` and ``a.b``); the package uses absolute imports."""
    found: dict[str, set[str]] = {}
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        parts = path.relative_to(PACKAGE_DIR).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.add(node.module)
                names.update(f"{node.module}.{alias.name}" for alias in node.names)
        found[module] = names
    return found


def test_only_otel_imports_opentelemetry_and_few_import_otel() -> None:
    imports = _imported_by_module()
    assert sorted(
        m for m, names in imports.items() if any(n.split(".")[0] == "opentelemetry" for n in names)
    ) == ["otel"]
    assert sorted(m for m, names in imports.items() if "nats_sync.otel" in names) == [
        "client",
        "spark.udf",
    ]

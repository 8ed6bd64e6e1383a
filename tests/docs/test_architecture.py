"""docs/ARCHITECTURE.md is what tools/arch_diagram.py writes from tools/layers.py: its
tree, its layer table, its thread table and its two pictures.

Also: every part of ``PARTS`` names a module or package of nats_sync, once; the picture
names only known components; and the page's claims about the optional OpenTelemetry
extra: ``otel`` is the only module importing ``opentelemetry``, and only ``client``
(``connect(tracing=True)``) and ``spark.udf`` import ``otel``. Where each thread starts
is checked by running them (``tests/integration/test_thread_names.py``). No server and
no docs build: it reads files (well under a second).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import arch_diagram  # noqa: E402
from layers import COMPONENTS, LAYERS, PARTS, THREADS, module_name  # noqa: E402

PAGE = ROOT / "docs" / "ARCHITECTURE.md"
PACKAGE_DIR = ROOT / "nats_sync"


def test_the_page_and_its_pictures_are_written_from_the_layers_as_they_are() -> None:
    stale = [str(path.relative_to(ROOT)) for path in arch_diagram.stale()]
    assert stale == [], f"rewrite with `python tools/arch_diagram.py`: {stale}"


def test_a_changed_declaration_makes_the_page_stale() -> None:
    page = PAGE.read_text(encoding="utf-8")
    assert arch_diagram.page_with_blocks(page) == page
    edited = page.replace("| 4 handler | `_core.handler` |", "| 4 handler | `_core.hander` |")
    assert edited != page, "the layer table lost its handler row"
    assert arch_diagram.page_with_blocks(edited) == page  # written back as declared


def test_every_part_is_a_module_or_package_named_once() -> None:
    names = [part.name for part in PARTS]
    assert len(names) == len(set(names))
    missing = [name for name in names if name not in LAYERS]
    assert missing == [], f"parts naming no module of nats_sync: {missing}"


def test_the_page_shows_both_pictures() -> None:
    text = PAGE.read_text(encoding="utf-8")
    for path in arch_diagram.PICTURES:
        assert f"](images/{path.name})" in text


def test_the_picture_names_only_known_components_and_modules() -> None:
    names = {component.name for component in COMPONENTS}
    unknown = sorted({name for thread in THREADS for name in thread.touches} - names)
    assert unknown == []
    assert [c.module for c in COMPONENTS if c.module not in LAYERS] == []
    assert [s.module for t in THREADS for s in t.started if s.module not in LAYERS] == []


def _imported_by_module() -> dict[str, set[str]]:
    """Every module of the package (dotted, relative) and the absolute names it imports
    (``from a import b`` gives ``a`` and ``a.b``); the package uses absolute imports."""
    found: dict[str, set[str]] = {}
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        module = module_name(path, PACKAGE_DIR)
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

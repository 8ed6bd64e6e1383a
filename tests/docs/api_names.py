"""Which public names the API reference must show, and whether it shows them.

The public names are the ``__all__`` of each documented module (read from the source
with ``ast``, so nothing is imported: pyspark is not needed) plus the pytest plugin's
fixtures. Two checks use them:

- the Markdown sources (docs/reference/*.md) have a ``::: module.name`` directive for
  each (tests/docs/test_api_reference.py, in the ordinary test run);
- the built site has an element with the id ``module.name`` for each (the same test
  when site/ exists, and ``make docs`` after building: ``python tests/docs/api_names.py site``).
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MODULES = {
    "nats_sync": "nats_sync/__init__.py",
    "nats_sync.jetstream": "nats_sync/jetstream/__init__.py",
    "nats_sync.micro": "nats_sync/micro/__init__.py",
    "nats_sync.otel": "nats_sync/otel.py",
    "nats_sync.spark": "nats_sync/spark/__init__.py",
    "nats_sync.testing": "nats_sync/testing.py",
}
PLUGIN = "nats_sync/pytest_plugin.py"


def _all_of(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            value = ast.literal_eval(node.value)  # type: ignore[union-attr]
            return [str(name) for name in value]
    raise LookupError(f"{path}: no __all__")


def _fixtures(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and any(
            "fixture" in ast.unparse(d) for d in node.decorator_list
        ):
            names.append(node.name)
    return names


def public_names() -> list[str]:
    """Every name the reference must document, as ``module.name``."""
    names = [f"{mod}.{n}" for mod, src in MODULES.items() for n in _all_of(ROOT / src)]
    names += [f"nats_sync.pytest_plugin.{n}" for n in _fixtures(ROOT / PLUGIN)]
    return names


def names_in_sources() -> set[str]:
    """The names the reference pages' ``:::`` directives document."""
    found = set()
    for page in (ROOT / "docs" / "reference").glob("*.md"):
        found.update(re.findall(r"^::: *([\w.]+)\s*$", page.read_text(encoding="utf-8"), re.M))
    return found


def names_in_site(site: Path) -> set[str]:
    """The ids of the built reference pages."""
    found = set()
    for page in (site / "reference").glob("*.html"):
        text = page.read_text(encoding="utf-8")
        found.update(re.findall(r'id="(nats_sync[\w.]*)"', text))
    return found


def main(site: Path) -> int:
    names = public_names()
    missing = sorted(set(names) - names_in_site(site))
    for name in missing:
        print(f"not in the API reference of {site}: {name}", file=sys.stderr)
    print(f"API reference: {len(names) - len(missing)} of {len(names)} public names")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "site")))

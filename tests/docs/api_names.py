"""Which public names the API reference must show, and whether it shows them.

The public names are the ``__all__`` of each documented module (read from the source
with ``ast``, so nothing is imported: pyspark is not needed) plus the pytest plugin's
fixtures. Two checks use them:

- the Markdown sources (docs/reference/*.md) have a ``::: module.name`` directive for
  each (tests/docs/test_api_reference.py, in the ordinary test run);
- the built site has an element with the id ``module.name`` for each (the same test
  when site/ exists, and ``make docs`` after building: ``python tests/docs/api_names.py site``).

``make docs`` also checks how the built reference reads (`reading_faults`): no
reStructuredText ``::`` left in a paragraph (a docstring example must be a Markdown code
block), no default shown as a constant's name (``= DEFAULT_TIMEOUT`` where the reader
wants ``2.0``; tools/griffe_site.py substitutes them) and no private class named as a
base. `rest_literal_blocks` finds the ``::`` in the docstrings themselves, for the
ordinary test run.
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
    "nats_sync.jetstream.kvcodec": "nats_sync/jetstream/kvcodec/__init__.py",
    "nats_sync.jetstream.pcgroups": "nats_sync/jetstream/pcgroups/__init__.py",
    "nats_sync.locust": "nats_sync/locust.py",
    "nats_sync.micro": "nats_sync/micro/__init__.py",
    "nats_sync.otel": "nats_sync/otel.py",
    "nats_sync.spark": "nats_sync/spark/__init__.py",
    "nats_sync.sys": "nats_sync/sys.py",
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


# A paragraph ending in reST's "::" (its literal block then shows as plain text).
_REST_PARAGRAPH = re.compile(r"::\s*</p>")
# A default naming a constant, in a signature ("= DEFAULT_TIMEOUT") or a table cell.
_CONSTANT = r"_?[A-Z][A-Z0-9]*_[A-Z0-9_]+"
_CONSTANT_DEFAULT = re.compile(rf"=\s*{_CONSTANT}\b")
_CONSTANT_CELL = re.compile(rf"^\s*{_CONSTANT}\s*$")
_SIGNATURE = re.compile(r'<div class="doc-signature[^"]*">(.*?)</div>', re.S)
_CELL = re.compile(r"<td>(.*?)</td>", re.S)
_BASES = re.compile(r"Bases: (.*?)</p>", re.S)
_PRIVATE_PATH = re.compile(r"nats_sync(?:\.\w+)*\._\w+")


def _text(html: str) -> str:
    return re.sub(r"<[^>]+>", "", html)


def reading_faults(site: Path) -> list[str]:
    """What reads wrong in the built reference pages, one line each (see the docstring)."""
    faults = []
    for page in sorted((site / "reference").glob("*.html")):
        html = page.read_text(encoding="utf-8")
        for match in _REST_PARAGRAPH.finditer(html):
            start = html.rfind("<p>", 0, match.start())
            faults.append(f"{page.name}: reST '::' in {_text(html[start : match.end()])!r}")
        for signature in _SIGNATURE.findall(html):
            for default in _CONSTANT_DEFAULT.findall(_text(signature)):
                faults.append(f"{page.name}: a default shown as a name: {default!r}")
        for cell in _CELL.findall(html):
            if _CONSTANT_CELL.match(_text(cell)):
                faults.append(f"{page.name}: a default shown as a name: {_text(cell).strip()!r}")
        for bases in _BASES.findall(html):
            for private in _PRIVATE_PATH.findall(bases):
                faults.append(f"{page.name}: a private base shown: {private}")
    return faults


def rest_literal_blocks() -> list[str]:
    """``file:line`` of each docstring line of nats_sync ending in reST's ``::``."""
    found = []
    for path in sorted((ROOT / "nats_sync").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            body = getattr(node, "body", None)
            if not (isinstance(body, list) and body and isinstance(body[0], ast.Expr)):
                continue
            doc = body[0].value
            if isinstance(doc, ast.Constant) and isinstance(doc.value, str):
                for offset, line in enumerate(doc.value.splitlines()):
                    if line.rstrip().endswith("::") and not line.rstrip().endswith(":::"):
                        found.append(f"{path.relative_to(ROOT)}:{doc.lineno + offset}")
    return found


def main(site: Path) -> int:
    names = public_names()
    missing = sorted(set(names) - names_in_site(site))
    for name in missing:
        print(f"not in the API reference of {site}: {name}", file=sys.stderr)
    print(f"API reference: {len(names) - len(missing)} of {len(names)} public names")
    faults = reading_faults(site)
    for fault in faults:
        print(f"API reference: {fault}", file=sys.stderr)
    return 1 if missing or faults else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "site")))

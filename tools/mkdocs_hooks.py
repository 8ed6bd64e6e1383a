"""MkDocs hooks for the docs site (mkdocs.yml `hooks:`), run by `make docs`.

Some docstrings name objects with Sphinx roles (``:meth:`Client.jetstream` ``), which
Markdown renders as the role's text followed by the name in code; the role text is
dropped from the pages (the name stays, in code), so the docstrings need no edit.

Every name in the `__all__` of a documented module must have a docstring: a missing one
is logged as a warning, which `mkdocs build --strict` turns into a failed build. Griffe
(mkdocstrings' loader) reads the sources without importing them, so the check needs no
pyspark or nats-server in the docs venv.
"""

from __future__ import annotations

import logging
import re
from typing import Any

import griffe

log = logging.getLogger("mkdocs.hooks.nats_sync")

# The modules whose public names the API reference covers (tests/docs checks the pages).
DOCUMENTED = (
    "nats_sync",
    "nats_sync.jetstream",
    "nats_sync.micro",
    "nats_sync.spark",
    "nats_sync.testing",
)
# Public names that are not classes or functions carry no docstring of their own.
NO_DOCSTRING_NEEDED = {"nats_sync.__version__"}


def missing_docstrings() -> list[str]:
    """The public names of the documented modules that have no docstring."""
    package = griffe.load("nats_sync", search_paths=["."], resolve_aliases=True)
    missing: list[str] = []
    for path in DOCUMENTED:
        module = package if path == "nats_sync" else package[path.removeprefix("nats_sync.")]
        for export in module.exports or ():
            name = export if isinstance(export, str) else export.name
            full = f"{path}.{name}"
            if full in NO_DOCSTRING_NEEDED:
                continue
            obj = module[name]
            target = obj.final_target if obj.is_alias else obj
            if target.is_attribute:
                continue  # constants: documented on the page in prose
            if not (target.docstring and target.docstring.value.strip()):
                missing.append(full)
    plugin = package["pytest_plugin"]
    for name, obj in plugin.members.items():
        if obj.is_alias or name.startswith("_"):
            continue
        if obj.is_function and not obj.docstring:
            missing.append(f"nats_sync.pytest_plugin.{name}")
    return missing


_SPHINX_ROLE = re.compile(r":(?:meth|func|class|mod|attr|exc|data|obj):(<code>)~?")


def on_page_content(html: str, **kwargs: Any) -> str:
    """Drops the Sphinx role text before a name in code (see the module docstring)."""
    return _SPHINX_ROLE.sub(r"\1", html)


def on_pre_build(config: Any, **kwargs: Any) -> None:
    for name in missing_docstrings():
        log.warning("public name without a docstring: %s", name)

"""MkDocs hooks for the docs site (mkdocs.yml `hooks:`), run by `make docs`.

Some docstrings name objects with Sphinx roles (``:meth:`Client.jetstream` ``), which
Markdown renders as the role's text followed by the name in code; the role text is
dropped from the pages (the name stays, in code), so the docstrings need no edit.

NATS architecture decision records named in the pages and the docstrings (``ADR-50``)
link to the record on GitHub, its title shown on hover, so that a reader who meets the
number can see what it stands for; the text stays as written (no link inside code or
an existing link).

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

ADR_URL = "https://github.com/nats-io/nats-architecture-and-design/blob/main/adr/ADR-{}.md"
# The titles of the records the docs name (from the nats-architecture-and-design repo).
ADR_TITLES = {
    1: "JetStream JSON API Design",
    6: "Naming Rules",
    8: "JetStream based Key-Value Stores",
    17: "Ordered Consumer",
    20: "JetStream based Object Stores",
    21: "NATS Configuration Contexts",
    32: "Service API",
    37: "JetStream Simplification",
    41: "NATS Message Path Tracing",
    42: "Pull Consumer Priority Groups",
    43: "JetStream Per-Message TTL",
    48: "TTL Support for Key-Value Buckets",
    49: "JetStream Distributed Counter CRDT",
    50: "JetStream Batch Publishing",
    51: "JetStream Message Scheduler",
    60: "JetStream reliable stream sourcing/mirroring on WQ/Interest streams",
}
_ADR = re.compile(r"\bADR-(\d+)\b")
# Tags and the text between them; the elements whose text gets no link.
_TAG = re.compile(r"(<[^>]*>)")
_NO_LINK_IN = {"a", "code", "pre", "script", "style", "title", "textarea"}


def _adr_link(match: re.Match[str]) -> str:
    number = int(match.group(1))
    title = ADR_TITLES.get(number, "NATS architecture decision record")
    return f'<a href="{ADR_URL.format(number)}" title="ADR-{number}: {title}">ADR-{number}</a>'


def link_adrs(html: str) -> str:
    """Links each ``ADR-N`` of the text of ``html`` to the record (see the module docstring)."""
    parts = _TAG.split(html)
    closed_over = 0  # how many elements that take no link enclose the current text
    for i, part in enumerate(parts):
        if part.startswith("<"):
            name = re.match(r"</?\s*([a-zA-Z0-9]+)", part)
            if name and name.group(1).lower() in _NO_LINK_IN and not part.endswith("/>"):
                closed_over += -1 if part.startswith("</") else 1
                closed_over = max(closed_over, 0)
        elif closed_over == 0 and "ADR-" in part:
            parts[i] = _ADR.sub(_adr_link, part)
    return "".join(parts)


def on_page_content(html: str, **kwargs: Any) -> str:
    """Drops the Sphinx role text before a name in code and links the ADRs named."""
    return link_adrs(_SPHINX_ROLE.sub(r"\1", html))


def on_pre_build(config: Any, **kwargs: Any) -> None:
    for name in missing_docstrings():
        log.warning("public name without a docstring: %s", name)

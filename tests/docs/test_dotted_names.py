"""Every dotted name the docstrings and the docs give in backticks resolves.

A module moved or renamed leaves its old name behind in prose (``_pull_wire.PinTracker``
after the layout put it in ``_consumers/pull_wire.py``); this test reads the names and
finds them. What counts as a name of ours: a backticked ``a.b[.c...]`` whose first part is
``nats_sync``, a module or package of the tree whose name starts with ``_`` (the private
ones, named by their last part), or a name the docstring's own module defines. Such a name
resolves when its first part is found (in the docstring's package first) and each later
part is a module or an attribute of the one before. Anything else (``msg.respond``,
``time.monotonic``) is a name of the reader's code, not ours, and is not checked.
"""

from __future__ import annotations

import ast
import importlib
import os
import pkgutil
import re
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import nats_sync

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "nats_sync"
#: A backticked dotted name (single or double backticks), optionally called: `a.b()`.
DOTTED = re.compile(r"`{1,2}~?([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+)(?:\(\))?`{1,2}")
#: Modules whose import needs an extra that may be missing (checked where installed).
OPTIONAL = {"nats_sync.otel", "nats_sync.spark", "nats_sync.pytest_plugin", "nats_sync.locust"}
#: Those of OPTIONAL that did not import here: names under them are not checked.
MISSING: set[str] = set()


def _import(name: str) -> ModuleType:
    if name != "nats_sync.locust":
        return importlib.import_module(name)
    # Importing Locust monkey-patches the process with gevent unless told not to: this
    # test process must stay a plain threaded one (tests/under_gevent patch children).
    before = os.environ.get("LOCUST_SKIP_MONKEY_PATCH")
    os.environ["LOCUST_SKIP_MONKEY_PATCH"] = "1"
    try:
        return importlib.import_module(name)
    finally:
        if before is None:
            del os.environ["LOCUST_SKIP_MONKEY_PATCH"]
        else:
            os.environ["LOCUST_SKIP_MONKEY_PATCH"] = before


def _modules() -> dict[str, ModuleType]:
    found: dict[str, ModuleType] = {"nats_sync": nats_sync}
    for info in pkgutil.walk_packages(nats_sync.__path__, "nats_sync."):
        if info.name == "nats_sync.__main__":
            continue  # running it is what importing it does
        try:
            found[info.name] = _import(info.name)
        except ImportError:
            if not any(info.name.startswith(name) for name in OPTIONAL):
                raise
            MISSING.add(info.name)
    return found


MODULES = _modules()
#: Last part of a module's dotted path -> the modules so named.
BY_LAST: dict[str, list[str]] = {}
for _name in MODULES:
    BY_LAST.setdefault(_name.rpartition(".")[2], []).append(_name)


def _follow(start: Any, parts: list[str], module_name: str | None) -> bool:
    """Whether each of ``parts`` is an attribute (or a submodule) of the one before."""
    current = start
    for part in parts:
        child = f"{module_name}.{part}" if module_name else None
        if hasattr(current, part):
            current = getattr(current, part)
            module_name = current.__name__ if isinstance(current, ModuleType) else None
        elif child is not None and child in MODULES:
            current, module_name = MODULES[child], child
        else:
            # A name set in __init__ or __slots__: present on instances only (and what
            # follows it is the instance's, not checked).
            return isinstance(current, type) and part in _instance_names(current)
    return True


def _instance_names(cls: type) -> set[str]:
    names: set[str] = set()
    for klass in cls.__mro__:
        names.update(getattr(klass, "__slots__", ()) or ())
        names.update(getattr(klass, "__annotations__", {}) or {})
        init = klass.__dict__.get("__init__")
        code = getattr(init, "__code__", None)
        if code is not None:
            names.update(code.co_names)
    return names


def _candidates(first: str, home: str) -> list[str]:
    """Modules named ``first``, those nearest ``home`` (the docstring's module) first."""
    named = BY_LAST.get(first, [])
    return sorted(named, key=lambda name: -len(_common(name, home)))


def _common(a: str, b: str) -> list[str]:
    common = []
    for x, y in zip(a.split("."), b.split("."), strict=False):
        if x != y:
            break
        common.append(x)
    return common


def resolves(name: str, home: str | None) -> bool | None:
    """True or False for a name of ours; None for a name that is not (not checked).

    ``home`` is the module whose docstring gives the name (None for the docs' pages):
    its own names and its sibling modules count as ours there.
    """
    first, *rest = name.split(".")
    if rest[-1] in ("py", "md", "json", "toml"):
        return None  # a file's name
    if first == "nats_sync":
        if any(name == m or name.startswith(f"{m}.") for m in MISSING):
            return None  # an optional extra's module, not importable here
        for cut in range(len(rest), -1, -1):
            module = ".".join(["nats_sync", *rest[:cut]])
            if module in MODULES:
                return _follow(MODULES[module], rest[cut:], module)
        return False
    if home is None:
        if first.startswith("_") and len(first) > 1:
            candidates = BY_LAST.get(first, [])
            return any(_follow(MODULES[n], rest, n) for n in candidates) if candidates else None
        return None
    package = home.rpartition(".")[0]
    sibling = f"{package}.{first}"
    # Inside a private package modules name each other plainly (``pull_wire.classify``);
    # at the top, ``msg``, ``errors`` or ``sys`` are as likely a reader's variables.
    if "._" in f"{package}." and sibling in MODULES and sibling != home:
        return _follow(MODULES[sibling], rest, sibling)
    home_module = MODULES.get(home)
    if home_module is not None and hasattr(home_module, first):
        value = getattr(home_module, first)
        if isinstance(value, ModuleType):
            if not value.__name__.startswith("nats_sync"):
                return None  # another library's module, as another library names it
            return _follow(value, rest, value.__name__)
        return _follow(value, rest, None)
    if first.startswith("_") and len(first) > 1:
        candidates = _candidates(first, home)
        if not candidates:
            return False
        return any(_follow(MODULES[name], rest, name) for name in candidates)
    return None


def _docstrings(path: Path) -> Iterator[tuple[int, str]]:
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            text = ast.get_docstring(node, clean=False)
            if text:
                line = node.body[0].lineno if node.body else 1
                yield line, text


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _unresolved_in_code() -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        home = _module_name(path)
        if home not in MODULES:
            continue  # an optional extra's module, not importable here
        for line, text in _docstrings(path):
            for name in DOTTED.findall(text):
                if resolves(name, home) is False:
                    found.append(f"{path.relative_to(ROOT)}:{line}: {name}")
    return found


def _unresolved_in_docs() -> list[str]:
    found = []
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    for page in pages:
        for number, line in enumerate(page.read_text().splitlines(), 1):
            for name in DOTTED.findall(line):
                if resolves(name, None) is False:
                    found.append(f"{page.relative_to(ROOT)}:{number}: {name}")
    return found


def test_the_docstrings_dotted_names_resolve() -> None:
    assert _unresolved_in_code() == []


def test_the_docs_dotted_names_resolve() -> None:
    assert _unresolved_in_docs() == []


@pytest.mark.parametrize(
    ("name", "home", "expected"),
    [
        ("_pull_wire.PinTracker", "nats_sync.jetstream._consumers.pull", False),
        ("pull_wire.classify", "nats_sync.jetstream._consumers.pull", True),
        ("_core.components.port.port_of", "nats_sync.client", True),
        ("nats_sync.jetstream.JetStream.publish", "nats_sync", True),
        ("nats_sync.jetstream.NoSuchThing", "nats_sync", False),
        ("_defaults.DEFAULT_CONNECT_TIMEOUT", "nats_sync.client", True),
        ("pull_wire.no_such_name", "nats_sync.jetstream._consumers.pull", False),
        ("msg.respond", "nats_sync.client", None),
        ("sys.getallocatedblocks", None, None),
        ("handshake.py", "nats_sync._core.transport.streams", None),
    ],
)
def test_the_check_tells_a_stale_name_from_a_good_one(
    name: str, home: str, expected: bool | None
) -> None:
    assert resolves(name, home) is expected

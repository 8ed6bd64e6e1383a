"""Griffe extensions for the docs site (mkdocs.yml), changing only what the site shows.

`DefaultValues`: the code names its defaults after constants (``reconnect_time_wait: float =
d.DEFAULT_RECONNECT_TIME_WAIT``, the constants in ``nats_sync/_defaults.py`` and a few
modules' own), which is right for the code (one place for each default) and useless to
a reader of the API reference, who wants ``2.0``. Griffe reads the sources without
running them, so it shows the name; this extension replaces, in the loaded tree only,
a parameter's or a class attribute's default that names a module constant with that
constant's value as written in its module (``2.0``, ``'$JS.API'``, ``2 * 1024 * 1024``).

A constant whose value names something else (an expression of other constants) is left
as it is; tests/docs/api_names.py fails the build if a ``DEFAULT_`` name still shows.

`SourceOrder`: the members of each class in the order of their definitions. The pages
document classes through their public names (``nats_sync.jetstream.JetStream``, an
alias of ``nats_sync.jetstream._streams.context.JetStream``), whose members mkdocstrings shows in
the order of the class's member table, where an ``__init__`` assigning
``self.publish_async`` puts that method before all the others.

`NoMaintainerNotes`: a module docstring's "How it works:" paragraphs map the code for
its maintainers (threads, private modules, hooks); the reference page of a module shows
the rest of its docstring, the part written for the library's users.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import griffe


def _names_something(value: str | griffe.Expr) -> bool:
    """Whether a value refers to other objects (then it is not a plain value)."""
    if isinstance(value, str):
        return False
    return any(
        isinstance(part, (griffe.ExprName, griffe.ExprAttribute))
        for part in value.iterate(flat=True)
    )


class DefaultValues(griffe.Extension):
    """Replaces defaults that name module constants with the constants' values."""

    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        """Runs once the package's tree is complete (aliases can be followed)."""
        for obj in _walk(pkg):
            if isinstance(obj, griffe.Function):
                for parameter in obj.parameters:
                    value = self._value_of(parameter.default, loader)
                    if value is not None:
                        parameter.default = value
            elif (
                isinstance(obj, griffe.Attribute) and obj.parent is not None and obj.parent.is_class
            ):
                value = self._value_of(obj.value, loader)
                if value is not None:
                    obj.value = value

    @staticmethod
    def _value_of(
        default: str | griffe.Expr | None, loader: griffe.GriffeLoader
    ) -> str | griffe.Expr | None:
        """The value of the module constant ``default`` names, else None."""
        if not isinstance(default, (griffe.ExprName, griffe.ExprAttribute)):
            return None
        try:
            target = loader.modules_collection.get_member(default.canonical_path)
            if target.is_alias:
                target = target.final_target
        except (KeyError, griffe.AliasResolutionError, griffe.CyclicAliasError):
            return None
        if (
            not isinstance(target, griffe.Attribute)
            or target.parent is None
            or not target.parent.is_module
            or target.value is None
        ):
            return None
        return None if _names_something(target.value) else target.value


class SourceOrder(griffe.Extension):
    """Reorders each class's member table by the line each member is defined on."""

    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        """Runs once the package's tree is complete."""
        for obj in _walk(pkg):
            if obj.is_class:
                ordered = sorted(obj.members.items(), key=_definition_line)
                obj.members.clear()
                obj.members.update(ordered)


def _definition_line(item: tuple[str, griffe.Object | griffe.Alias]) -> float:
    """Where a member is defined (members of unknown place last)."""
    member = item[1]
    line = member.alias_lineno if member.is_alias else member.lineno
    return float("inf") if line is None else float(line)


# A paragraph of a docstring that starts "How it works:", up to a blank line or the end.
_MAINTAINER_NOTE = re.compile(r"^How it works:.*?(?:\n[ \t]*\n|\Z)", re.M | re.S)


class NoMaintainerNotes(griffe.Extension):
    """Leaves the "How it works:" paragraphs out of the module docstrings shown."""

    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        """Runs once the package's tree is complete."""
        for obj in _walk(pkg):
            if obj.is_module and obj.docstring is not None:
                obj.docstring.value = _MAINTAINER_NOTE.sub("", obj.docstring.value).rstrip()


def _walk(obj: griffe.Object) -> Iterator[griffe.Object]:
    """The object and every member defined under it (aliases skipped)."""
    yield obj
    for member in obj.members.values():
        if not member.is_alias and isinstance(member, griffe.Object):
            yield from _walk(member)

"""Draws the pictures of docs/ARCHITECTURE.md from tools/layers.py, as plain SVG, and
writes the page's tree, layer table and thread table from it.

``docs/images/layers.svg``: a band per layer, bottom up, listing its modules grouped by
package. ``docs/images/threads.svg``: which components each of the client's threads
touches, a row per component (tinted by its layer) and a column per thread. On the page,
each written block sits between ``<!-- BEGIN drawn by tools/arch_diagram.py: <block> -->``
and the matching ``END`` line; the prose around them is the page's own.

No diagram service, no JavaScript, no font files: text is placed with a fixed advance
per character, so the output is the same on every machine, and
``tests/docs/test_architecture.py`` fails when a committed picture differs from what this
draws, or a block of the page differs from what this writes. Run
``python tools/arch_diagram.py`` after changing tools/layers.py (``--check`` only says
what is stale).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from pathlib import Path
from xml.sax.saxutils import escape

sys.path.insert(0, str(Path(__file__).resolve().parent))
from layers import COMPONENTS, LAYER_NAMES, LAYER_WHAT, LAYERS, PACKAGE_DIR, PARTS, THREADS

ROOT = Path(__file__).resolve().parents[1]
LAYERS_SVG = ROOT / "docs" / "images" / "layers.svg"
THREADS_SVG = ROOT / "docs" / "images" / "threads.svg"
PAGE = ROOT / "docs" / "ARCHITECTURE.md"

#: A pale fill per layer, bottom up.
LAYER_COLORS = (
    "#e8eaf6",
    "#e3f2fd",
    "#e0f2f1",
    "#f1f8e9",
    "#fffde7",
    "#fff3e0",
    "#fce4ec",
    "#f3e5f5",
)
STROKE = "#5c6bc0"
INK = "#212121"
MUTED = "#616161"
SANS = "DejaVu Sans, Helvetica, Arial, sans-serif"
MONO = "DejaVu Sans Mono, Menlo, Consolas, monospace"
#: Advance of a monospace character at font size 12 (0.6 em, with a little slack).
MONO_ADVANCE = 7.4


def _svg(width: int, height: int, body: Iterable[str], title: str) -> str:
    return "\n".join(
        [
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}">',
            f"<title>{escape(title)}</title>",
            f'<rect width="{width}" height="{height}" fill="#ffffff"/>',
            *body,
            "</svg>",
            "",
        ]
    )


def _text(
    x: float,
    y: float,
    text: str,
    *,
    size: int = 12,
    family: str = SANS,
    fill: str = INK,
    weight: str = "normal",
    anchor: str = "start",
    transform: str = "",
) -> str:
    extra = f' font-weight="{weight}"' if weight != "normal" else ""
    extra += f' text-anchor="{anchor}"' if anchor != "start" else ""
    extra += f' transform="{transform}"' if transform else ""
    return (
        f'<text x="{x:g}" y="{y:g}" font-family="{family}" font-size="{size}" '
        f'fill="{fill}"{extra}>{escape(text)}</text>'
    )


def _package_groups(modules: Iterable[str]) -> list[tuple[str, list[str]]]:
    """The modules by package, in table order: ``("jetstream/", ["__init__", "errors"])``;
    top-level modules under ``""``, a package's own module as ``__init__``."""
    groups: dict[str, list[str]] = {}
    for module in modules:
        if module == "" or any(m.startswith(module + ".") for m in LAYERS):
            package, name = module, "__init__"
        else:
            package, _, name = module.rpartition(".")
        label = package.replace(".", "/") + "/" if package else ""
        groups.setdefault(label, []).append(name)
    return list(groups.items())


def _wrap(words: list[str], width_chars: int) -> list[str]:
    lines: list[str] = []
    line = ""
    for word in words:
        candidate = f"{line}  {word}" if line else word
        if line and len(candidate) > width_chars:
            lines.append(line)
            line = word
        else:
            line = candidate
    return [*lines, line]


def render_layers() -> str:
    """The layers picture: a band per layer, the top layer first."""
    width, margin, label_width = 790, 12, 195
    text_x = margin + label_width
    chars = int((width - text_x - 2 * margin) / MONO_ADVANCE)
    line_height, pad = 17, 10
    body: list[str] = []
    y = 40
    body.append(
        _text(
            margin,
            24,
            "nats_sync layers: a module imports only its own layer or those below",
            size=15,
            weight="bold",
        )
    )
    for layer in reversed(range(len(LAYER_NAMES))):
        lines: list[tuple[str, int, str]] = []
        modules = [module for module, its_layer in LAYERS.items() if its_layer == layer]
        for package, names in _package_groups(modules):
            indent = len(package) + 1 if package else 0
            for index, line in enumerate(_wrap(names, chars - indent)):
                lines.append((package if index == 0 else "", indent, line))
        height = pad * 2 + line_height * len(lines)
        body.append(
            f'<rect x="{margin}" y="{y}" width="{width - 2 * margin}" '
            f'height="{height}" rx="6" fill="{LAYER_COLORS[layer]}" '
            f'stroke="{STROKE}" stroke-width="1"/>'
        )
        body.append(
            _text(
                margin + 12, y + pad + 14, f"{layer}  {LAYER_NAMES[layer]}", size=14, weight="bold"
            )
        )
        for row, (package, indent, line) in enumerate(lines):
            baseline = y + pad + 13 + row * line_height
            if package:
                body.append(
                    _text(text_x, baseline, package, family=MONO, fill=STROKE, weight="bold")
                )
            body.append(_text(text_x + indent * MONO_ADVANCE, baseline, line, family=MONO))
        y += height + 8
    return _svg(width, y + 4, body, "The layers of nats_sync and their modules")


def render_threads() -> str:
    """The threads picture: a row per component, a column per thread, a dot where the
    thread touches the component."""
    drawn = [thread for thread in THREADS if thread.drawn]
    names_width, column, header = 280, 40, 140
    margin = 12
    row_height = 34
    width = margin * 2 + names_width + column * len(drawn) + 110
    top = header + 30
    body: list[str] = [
        _text(
            margin, 24, "The client's threads and the components they touch", size=15, weight="bold"
        )
    ]
    for index, thread in enumerate(drawn):
        x = margin + names_width + column * index + column / 2
        body.append(
            _text(
                x,
                top - 8,
                thread.name,
                size=12,
                weight="bold",
                transform=f"rotate(-40 {x:g} {top - 8:g})",
            )
        )
    for row, component in enumerate(COMPONENTS):
        y = top + row * row_height
        layer = LAYERS[component.module]
        body.append(
            f'<rect x="{margin}" y="{y}" '
            f'width="{names_width + column * len(drawn)}" '
            f'height="{row_height}" fill="{LAYER_COLORS[layer]}" '
            f'stroke="#ffffff" stroke-width="1"/>'
        )
        body.append(_text(margin + 8, y + 15, str(layer), size=12, fill=STROKE, weight="bold"))
        body.append(_text(margin + 26, y + 15, component.name, size=13))
        body.append(_text(margin + 26, y + 28, component.module, size=10, family=MONO, fill=MUTED))
        for index, thread in enumerate(drawn):
            if component.name in thread.touches:
                x = margin + names_width + column * index + column / 2
                body.append(
                    f'<circle cx="{x:g}" cy="{y + row_height / 2:g}" r="6" fill="{STROKE}"/>'
                )
    for index in range(len(drawn) + 1):
        x = margin + names_width + column * index
        body.append(
            f'<line x1="{x:g}" y1="{top}" x2="{x:g}" '
            f'y2="{top + row_height * len(COMPONENTS)}" stroke="#bdbdbd" '
            f'stroke-width="1"/>'
        )
    bottom = top + row_height * len(COMPONENTS) + 22
    body.append(
        _text(
            margin,
            bottom,
            "A dot: the thread calls into the component or changes its state.",
            size=12,
            fill=MUTED,
        )
    )
    body.append(
        _text(
            margin,
            bottom + 16,
            "The number and the tint: the component's layer (as in the layers' picture).",
            size=12,
            fill=MUTED,
        )
    )
    return _svg(width, bottom + 28, body, "The threads of nats_sync and what they touch")


def _is_package(name: str) -> bool:
    return (PACKAGE_DIR / Path(*name.split("."))).is_dir() if name else True


def render_tree() -> str:
    """The page's tree: every part of ``PARTS``, nested as its folders, with its layer."""
    lines = ["```text", "nats_sync/"]
    for part in PARTS:
        if not part.name:
            label, depth = "__init__.py", 1
        else:
            *outer, last = part.name.split(".")
            label = last + ("/" if _is_package(part.name) else ".py")
            depth = len(outer) + 1
        lines.append(f"{'  ' * depth + label:<28}{part.layer}  {part.what}")
    lines.append("```")
    return "\n".join(lines)


def _page_name(name: str) -> str:
    return f"`{name or 'nats_sync'}`"


def render_layer_table() -> str:
    """The page's layer table: a row per layer, bottom up, naming its parts."""
    lines = ["| layer | parts | what it is |", "|---|---|---|"]
    for layer, (name, what) in enumerate(zip(LAYER_NAMES, LAYER_WHAT, strict=True)):
        parts = ", ".join(_page_name(part.name) for part in PARTS if part.layer == layer)
        lines.append(f"| {layer} {name} | {parts} | {what} |")
    return "\n".join(lines)


def render_thread_table() -> str:
    """The page's thread table: a row per kind of thread, with its names and what it runs."""
    lines = ["| thread | runs |", "|---|---|"]
    for thread in THREADS:
        names = ", ".join(f"`{started.name}`" for started in thread.started)
        about = "; ".join(text for text in (thread.count, names) if text)
        lines.append(f"| {thread.name} ({about}) | {thread.runs} |")
    return "\n".join(lines)


#: Each picture's file and what draws it.
PICTURES = {LAYERS_SVG: render_layers, THREADS_SVG: render_threads}
#: Each block of the page and what writes it.
BLOCKS = {"tree": render_tree, "layers": render_layer_table, "threads": render_thread_table}


def _marks(block: str) -> tuple[str, str]:
    return (
        f"<!-- BEGIN drawn by tools/arch_diagram.py: {block} -->",
        f"<!-- END drawn by tools/arch_diagram.py: {block} -->",
    )


def page_with_blocks(page: str) -> str:
    """``page`` with every block between its marks written anew."""
    for block, render in BLOCKS.items():
        begin, end = _marks(block)
        head, found, rest = page.partition(begin + "\n")
        if not found:
            raise SystemExit(f"{PAGE.name} has no line {begin!r}")
        _, found, tail = rest.partition(end)
        if not found:
            raise SystemExit(f"{PAGE.name} has no line {end!r}")
        page = f"{head}{begin}\n{render()}\n{end}{tail}"
    return page


def stale() -> list[Path]:
    """The committed pictures, and the page, that differ from what this draws now."""
    found = [
        path
        for path, render in PICTURES.items()
        if not path.exists() or path.read_text(encoding="utf-8") != render()
    ]
    page = PAGE.read_text(encoding="utf-8")
    if page_with_blocks(page) != page:
        found.append(PAGE)
    return found


def main(argv: list[str] | None = None) -> int:
    """Writes the pictures and the page's blocks, or with ``--check`` names the stale
    ones (exit 1)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only say what is stale")
    args = parser.parse_args(argv)
    if args.check:
        for path in stale():
            print(f"stale: {path.relative_to(ROOT)} (run python tools/arch_diagram.py)")
        return 1 if stale() else 0
    for path, render in PICTURES.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render(), encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT)}")
    PAGE.write_text(page_with_blocks(PAGE.read_text(encoding="utf-8")), encoding="utf-8")
    print(f"wrote the blocks of {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The API reference documents every public name (see api_names.py for how)."""

from __future__ import annotations

from pathlib import Path

import pytest
from api_names import (
    ROOT,
    names_in_site,
    names_in_sources,
    public_names,
    reading_faults,
    rest_literal_blocks,
)


def _current_site() -> Path:
    """site/, if built from the sources as they are now; else the test skips, saying why."""
    site = ROOT / "site"
    if not (site / "reference").is_dir():
        pytest.skip("no site/ here: make docs builds it (and runs this check itself)")
    built = (site / "index.html").stat().st_mtime
    sources = [*(ROOT / "nats_sync").rglob("*.py"), *(ROOT / "docs").rglob("*.md")]
    if any(source.stat().st_mtime > built for source in sources):
        pytest.skip(
            "site/ is older than the sources: make docs rebuilds it (and runs this check itself)"
        )
    return site


def test_every_public_name_has_a_reference_directive() -> None:
    names = public_names()
    assert len(names) > 150  # the five __all__ lists and the fixtures were read
    missing = sorted(set(names) - names_in_sources())
    assert not missing, f"add a '::: name' line to docs/reference/ for: {missing}"


def test_the_built_site_shows_every_public_name() -> None:
    site = _current_site()
    missing = sorted(set(public_names()) - names_in_site(site))
    assert not missing


def test_docstrings_have_no_rest_literal_blocks() -> None:
    # The site renders docstrings as Markdown: an example after "Example::" would show
    # the "::" and the code as plain text. Markdown code blocks (```python) instead.
    found = rest_literal_blocks()
    assert not found, f"reST '::' blocks (use a ```python block): {found}"


def test_the_built_reference_reads_right() -> None:
    site = _current_site()
    assert not reading_faults(site)


def test_the_site_shows_defaults_as_values_and_members_in_source_order() -> None:
    griffe = pytest.importorskip("griffe", reason="griffe comes with the docs extra")
    import sys

    sys.path.insert(0, str(ROOT / "tools"))
    try:
        from griffe_site import DefaultValues, SourceOrder
    finally:
        sys.path.remove(str(ROOT / "tools"))
    package = griffe.load(
        "nats_sync",
        search_paths=[str(ROOT)],
        extensions=griffe.load_extensions(DefaultValues, SourceOrder),
    )
    connect = package["client.connect"]
    assert str(connect.parameters["reconnect_time_wait"].default) == "2.0"
    assert str(connect.parameters["pending_size"].default) == "2 * 1024 * 1024"
    assert str(connect.parameters["inbox_prefix"].default) == "'_INBOX'"
    members = list(package["jetstream._streams.context.JetStream"].members)
    # publish_async is also assigned in __init__: still shown where it is defined
    assert members.index("publish_async") > members.index("publish")

